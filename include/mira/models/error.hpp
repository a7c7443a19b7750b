// The model layer's errors: what an HTTP exchange or a provider call failed with, as an
// error_code in the layer's own category (which callers and the retry rule decide on) and a
// message for people.
#pragma once

#include <boost/system/error_code.hpp>

#include <chrono>
#include <optional>
#include <string>
#include <type_traits>

namespace mira::models {

/// Why an HTTP exchange (the first group) or a provider call (the second) failed.
enum class errc {
  bad_url = 1,     ///< not an http:// or https:// URL this client can reach (or a bad proxy URL)
  resolve_failed,  ///< the host name did not resolve
  connect_failed,  ///< no address of the host accepted a TCP connection
  tls_failed,      ///< the TLS handshake failed: an untrusted or mismatched certificate, ...
  proxy_failed,    ///< the proxy could not be reached or refused the CONNECT
  timed_out,       ///< the request's deadline passed before the response was read
  body_too_large,  ///< the response (its header, its body, or the body inflated) is over the bound
  malformed_response,  ///< not an HTTP/1.1 response, or a gzip body that does not inflate
  connection_closed,   ///< the server closed or reset the connection before the response ended
  cancelled,           ///< the awaiting coroutine was cancelled
  // Provider level (the provider clients):
  no_api_key,             ///< no API key is set for the provider
  rate_limited,           ///< the provider answered 429
  server_error,           ///< the provider answered 5xx
  client_error,           ///< the provider answered 4xx other than 429
  bad_provider_response,  ///< a 2xx whose body is not what the provider's API promises
  // HTTP exchange, continued:
  bad_request,  ///< a request this client will not send: a header with CR/LF, an empty method
};

/// The category of errc, named "mira.models".
const boost::system::error_category& category() noexcept;
/// An errc as an error_code of category().
boost::system::error_code make_error_code(errc e) noexcept;

/// A failure: the code to decide on, and a message for people.
struct error {
  boost::system::error_code code;
  /// For people: what failed and where (scheme, host and port; never a path, a query, a header
  /// value or a key).
  std::string message;
  /// How long the server asked to wait before trying again (a 429's or 503's Retry-After).
  std::optional<std::chrono::milliseconds> retry_after;
  /// The HTTP status the error came from (provider errors), or 0.
  int http_status = 0;
};

/// Errors worth retrying: resolve, connect, TLS and proxy failures, timed_out,
/// connection_closed, rate_limited and server_error.
bool is_transient(const boost::system::error_code& ec) noexcept;

}  // namespace mira::models

/// @cond
template <>
struct boost::system::is_error_code_enum<mira::models::errc> : std::true_type {};
/// @endcond
