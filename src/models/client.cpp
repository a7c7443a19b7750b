// The HTTP client's shell (see http.hpp): a request's route and message, a pooled or a new
// connection, the exchange, and the response, gzip inflated. The plain parts (URLs, proxies,
// Retry-After, gzip, the pool's bookkeeping) are in url.cpp, http.cpp, gzip.cpp, idle_pool.hpp.
#include <mira/models/http.hpp>
#include "models/connection.hpp"
#include "models/gzip.hpp"
#include "models/url.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/execution/context.hpp>
#include <boost/asio/query.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>

#include <openssl/ssl.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdlib>
#include <limits>

namespace mira::models {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using boost::system::error_code;
using detail::connection;

struct client::state {
  explicit state(client_options o);

  client_options options;
  detail::proxy_settings proxies;
  asio::ssl::context tls{asio::ssl::context::tls_client};
  /// Why the trusted certificates could not be loaded (every https:// request fails with it).
  std::string tls_error;
  /// Keeps this client's idle connections apart from other clients' in a context's cache.
  std::uint64_t id;
};

namespace {

std::atomic<std::uint64_t> next_client_id{1};

std::optional<std::string> env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::optional<std::string>(v) : std::nullopt;
}

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

// RFC 9110's token: a method or a field name.
bool is_token(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) ||
           std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
  });
}

error bad_request(std::string message) {
  return {make_error_code(errc::bad_request), std::move(message), std::nullopt, 0};
}

using request_message = http::request<http::string_body>;
using response_message = http::response<http::string_body>;

// The message on the wire: the request's own headers after Host, User-Agent and
// Accept-Encoding (which they replace), the body's Content-Length. Names are checked, never
// the values' text beyond CR, LF and NUL, and no value is ever echoed.
tl::expected<request_message, error> build_request(const http_request& r,
                                                   const detail::route& route,
                                                   const client_options& o) {
  if (!is_token(r.method)) return tl::make_unexpected(bad_request("the method is not a token"));
  request_message m;
  m.method_string(r.method);
  m.version(11);
  // Through an http:// proxy the request line names the whole URL (absolute form).
  const bool absolute = route.proxy && !route.target.tls;
  m.target(absolute ? detail::origin(route.target) + route.target.target : route.target.target);
  m.set(http::field::host, detail::host_header(route.target));
  m.set(http::field::user_agent, o.user_agent);
  m.set(http::field::accept_encoding, "gzip");
  if (absolute && !route.proxy->userinfo.empty())
    m.set(http::field::proxy_authorization, "Basic " + detail::base64(route.proxy->userinfo));
  for (const auto& h : r.headers) {
    if (!is_token(h.name)) return tl::make_unexpected(bad_request("a header name is not a token"));
    if (h.value.find_first_of(std::string_view("\r\n\0", 3)) != std::string::npos)
      return tl::make_unexpected(
          bad_request("the value of header " + h.name + " holds CR, LF or NUL"));
    if (iequals(h.name, "content-length") || iequals(h.name, "transfer-encoding"))
      return tl::make_unexpected(bad_request(h.name + " is the client's to set"));
    if (iequals(h.name, "host") || iequals(h.name, "user-agent") ||
        iequals(h.name, "accept-encoding"))
      m.set(h.name, h.value);
    else
      m.insert(h.name, h.value);
  }
  m.body() = r.body;
  m.prepare_payload();
  return m;
}

struct exchange_result {
  error_code ec;
  bool response_started = false;  // a byte of the response arrived (a retry would not be safe)
  bool keep_alive = false;
  response_message message;
};

// Writes the request and reads its response (skipping 1xx interim ones), within the bounds.
template <class Stream>
asio::awaitable<exchange_result> exchange_on(Stream& s, beast::flat_buffer& buffer,
                                             const request_message& req, const client_options& o) {
  exchange_result out;
  auto [wec, wn] = co_await http::async_write(s, req, asio::as_tuple(asio::use_awaitable));
  if (wec) {
    out.ec = wec;
    co_return out;
  }
  for (;;) {
    http::response_parser<http::string_body> parser;
    parser.header_limit(static_cast<std::uint32_t>(
        std::min<std::size_t>(o.max_header_bytes, std::numeric_limits<std::uint32_t>::max())));
    parser.body_limit(o.max_response_bytes);
    parser.skip(req.method() == http::verb::head);
    auto [rec, rn] =
        co_await http::async_read(s, buffer, parser, asio::as_tuple(asio::use_awaitable));
    out.response_started = parser.got_some() || buffer.size() != 0;
    if (rec) {
      out.ec = rec;
      co_return out;
    }
    const auto status = parser.get().result_int();
    if (status / 100 == 1 && status != 101) continue;
    out.keep_alive = parser.keep_alive();
    out.message = parser.release();
    co_return out;
  }
}

asio::awaitable<exchange_result> exchange(connection& c, const request_message& req,
                                          const client_options& o) {
  // Not one ?: of two co_awaits: g++ 12 mis-builds its result (docs/toolchain-notes.md).
  if (c.tls) {
    auto over_tls = co_await exchange_on(*c.tls, c.buffer, req, o);
    co_return over_tls;
  }
  auto plain = co_await exchange_on(*c.plain, c.buffer, req, o);
  co_return plain;
}

// What a failed exchange is, by the Beast or Asio code.
error exchange_error(const exchange_result& r, bool cancelled, const std::string& where,
                     const client_options& o) {
  const error_code ec = r.ec;
  auto make = [&](errc e, std::string what) {
    return error{make_error_code(e), where + ": " + std::move(what), std::nullopt, 0};
  };
  if (cancelled || ec == beast::error::timeout)
    return detail::step_error(ec, cancelled, errc::connection_closed, where);
  if (ec == http::error::body_limit)
    return make(errc::body_too_large, "the response body is larger than " +
                                          std::to_string(o.max_response_bytes) + " bytes");
  if (ec == http::error::header_limit || ec == http::error::buffer_overflow)
    return make(errc::body_too_large, "the response header is larger than " +
                                          std::to_string(o.max_header_bytes) + " bytes");
  if (ec == http::error::end_of_stream || ec == http::error::partial_message)
    return make(errc::connection_closed, r.response_started
                                             ? "the connection closed within the response"
                                             : "the connection closed before the response");
  if (ec.category() == http::make_error_code(http::error::bad_target).category())
    return make(errc::malformed_response, "not an HTTP/1.1 response: " + ec.message());
  return make(errc::connection_closed, ec.message());
}

// The response as given back: the body inflated when the server gzipped it.
tl::expected<http_response, error> to_response(response_message&& m, const std::string& where,
                                               const client_options& o) {
  http_response out;
  out.status = static_cast<int>(m.result_int());
  const std::string_view encoding = m[http::field::content_encoding];
  const bool gzipped = iequals(encoding, "gzip") || iequals(encoding, "x-gzip");
  if (!encoding.empty() && !gzipped && !iequals(encoding, "identity"))
    return tl::make_unexpected(error{
        make_error_code(errc::malformed_response),
        where + ": the body is encoded as " + std::string(encoding) + ", which was not asked for",
        std::nullopt, out.status});
  for (const auto& f : m) {
    if (gzipped &&
        (f.name() == http::field::content_encoding || f.name() == http::field::content_length))
      continue;
    out.headers.push_back({std::string(f.name_string()), std::string(f.value()), false});
  }
  if (!gzipped || m.body().empty()) {
    out.body = std::move(m.body());
    return out;
  }
  auto inflated = detail::gunzip(m.body(), o.max_response_bytes);
  if (!inflated)
    return tl::make_unexpected(
        error{make_error_code(inflated.error()),
              where + (inflated.error() == errc::body_too_large
                           ? ": the inflated body is larger than " +
                                 std::to_string(o.max_response_bytes) + " bytes"
                           : ": the gzip body does not inflate"),
              std::nullopt, out.status});
  out.body = std::move(*inflated);
  return out;
}

asio::awaitable<bool> was_cancelled() {
  auto cs = co_await asio::this_coro::cancellation_state;
  co_return cs.cancelled() != asio::cancellation_type::none;
}

}  // namespace

client::state::state(client_options o)
    : options(std::move(o)),
      proxies(detail::read_proxy_settings(options.proxy, options.no_proxy, env)),
      id(next_client_id++) {
  error_code ec;
  tls.set_verify_mode(asio::ssl::verify_peer);
  SSL_CTX_set_min_proto_version(tls.native_handle(), TLS1_2_VERSION);
  if (options.ca_file) {
    tls.load_verify_file(*options.ca_file, ec);
    if (ec) tls_error = "the CA file " + *options.ca_file + " cannot be used: " + ec.message();
  }
  if (options.ca_dir && !ec) {
    tls.add_verify_path(*options.ca_dir, ec);
    if (ec) tls_error = "the CA folder " + *options.ca_dir + " cannot be used: " + ec.message();
  }
  // OpenSSL's own default: SSL_CERT_FILE / SSL_CERT_DIR when set, else the system store.
  if (!options.ca_file && !options.ca_dir) {
    tls.set_default_verify_paths(ec);
    if (ec) tls_error = "the system's certificates cannot be used: " + ec.message();
  }
}

client::client(client_options options) : state_(std::make_shared<state>(std::move(options))) {}

asio::awaitable<tl::expected<http_response, error>> client::request(http_request r) {
  auto st = state_;  // the state outlives this request even if every handle goes first
  auto route = detail::make_route(r.url, st->proxies);
  if (!route)
    co_return tl::make_unexpected(
        error{make_error_code(errc::bad_url), route.error(), std::nullopt, 0});
  const std::string where = detail::origin(route->target);
  if (route->target.tls && !st->tls_error.empty())
    co_return tl::make_unexpected(
        error{make_error_code(errc::tls_failed), where + ": " + st->tls_error, std::nullopt, 0});
  auto message = build_request(r, *route, st->options);
  if (!message) co_return tl::make_unexpected(message.error());
  const auto deadline = std::chrono::steady_clock::now() + r.timeout;
  auto ex = co_await asio::this_coro::executor;
  auto& cache =
      asio::use_service<detail::connection_cache>(asio::query(ex, asio::execution::context));
  const std::string key = std::to_string(st->id) + " " + route->pool_key;
  try {
    for (int attempt = 0;; ++attempt) {
      auto c = cache.take(key);
      const bool reused = c != nullptr;
      if (!c) {
        detail::connect_params params{&st->tls, deadline, st->options.max_header_bytes,
                                      st->options.user_agent};
        auto opened = co_await detail::open_connection(*route, std::move(params));
        if (!opened) co_return tl::make_unexpected(std::move(opened.error()));
        c = std::move(*opened);
      }
      c->tcp().expires_at(deadline);
      exchange_result res = co_await exchange(*c, *message, st->options);
      const bool cancelled = co_await was_cancelled();
      // A pooled connection the server closed while we were taking it: once more, on a new one.
      if (res.ec && reused && attempt == 0 && !res.response_started && !cancelled &&
          res.ec != beast::error::timeout)
        continue;
      if (res.ec) co_return tl::make_unexpected(exchange_error(res, cancelled, where, st->options));
      if (cancelled)  // the response came, but the caller has moved on: decided as cancelled
        co_return tl::make_unexpected(detail::step_error({}, true, errc::cancelled, where));
      auto response = to_response(std::move(res.message), where, st->options);
      if (response && res.keep_alive && c->buffer.size() == 0) {
        c->tcp().expires_never();
        cache.put(key, std::move(c), st->options.idle_timeout, st->options.max_idle_per_host);
      }
      co_return response;
    }
  } catch (const boost::system::system_error& e) {
    // A cancellation that came between two operations: Asio throws it at the next co_await
    // (throw_if_cancelled). The connection, a local, is closed on the way out.
    if (e.code() != asio::error::operation_aborted) throw;
  }
  co_return tl::make_unexpected(detail::step_error({}, true, errc::cancelled, where));
}

}  // namespace mira::models
