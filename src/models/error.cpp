// The model layer's error category (see error.hpp).
#include <mira/models/error.hpp>

namespace mira::models {

namespace {

class models_category final : public boost::system::error_category {
 public:
  const char* name() const noexcept override { return "mira.models"; }
  std::string message(int e) const override {
    switch (static_cast<errc>(e)) {
      case errc::bad_url:
        return "bad URL";
      case errc::resolve_failed:
        return "the host name did not resolve";
      case errc::connect_failed:
        return "the connection failed";
      case errc::tls_failed:
        return "the TLS handshake failed";
      case errc::proxy_failed:
        return "the proxy failed";
      case errc::timed_out:
        return "timed out";
      case errc::body_too_large:
        return "the response is too large";
      case errc::malformed_response:
        return "malformed response";
      case errc::connection_closed:
        return "the connection was closed";
      case errc::cancelled:
        return "cancelled";
      case errc::no_api_key:
        return "no API key";
      case errc::rate_limited:
        return "rate limited";
      case errc::server_error:
        return "server error";
      case errc::client_error:
        return "client error";
      case errc::bad_provider_response:
        return "unexpected provider response";
      case errc::bad_request:
        return "bad request";
    }
    return "unknown models error";
  }
};

}  // namespace

const boost::system::error_category& category() noexcept {
  static const models_category c;
  return c;
}

boost::system::error_code make_error_code(errc e) noexcept {
  return {static_cast<int>(e), category()};
}

bool is_transient(const boost::system::error_code& ec) noexcept {
  if (ec.category() != category()) return false;
  switch (static_cast<errc>(ec.value())) {
    case errc::resolve_failed:
    case errc::connect_failed:
    case errc::tls_failed:
    case errc::proxy_failed:
    case errc::timed_out:
    case errc::connection_closed:
    case errc::rate_limited:
    case errc::server_error:
      return true;
    default:
      return false;
  }
}

}  // namespace mira::models
