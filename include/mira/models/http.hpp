// The model layer's HTTP/1.1 client (Boost.Beast over OpenSSL): what the provider clients send
// their requests through. One pool of keep-alive connections per host, a deadline per request,
// cancellation that closes the request at once, bounded responses, gzip, and proxies as the
// environment names them. docs/study-models.md says what it promises.
#pragma once

#include <mira/models/error.hpp>
#include <mira/version.hpp>

#include <boost/asio/awaitable.hpp>
#include <tl/expected.hpp>

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mira::models {

/// One header field.
struct http_header {
  std::string name;
  std::string value;
  /// A key or a token: never logged, never put in an error message.
  bool secret = false;
};

/// One request.
struct http_request {
  std::string method = "POST";
  /// `http://` or `https://`, host (a name, an IPv4 address or a bracketed IPv6 one), an optional
  /// port, then the path and query. A fragment is dropped; user information is refused.
  std::string url;
  /// Sent as given after Host, User-Agent and Accept-Encoding, each of which a header of the same
  /// name here replaces. Content-Length is set from the body.
  std::vector<http_header> headers;
  std::string body;
  /// The whole exchange: resolving, connecting (and the proxy's CONNECT), the TLS handshake,
  /// writing the request and reading the response.
  std::chrono::milliseconds timeout{120000};
};

/// One response: any status, 1xx interim responses skipped.
struct http_response {
  int status = 0;
  /// As the server sent them, but for Content-Encoding and Content-Length, left out when the
  /// body was inflated.
  std::vector<http_header> headers;
  /// The body, gzip already inflated.
  std::string body;
  /// The value of the first header of this name (ASCII case-insensitive), if any.
  std::optional<std::string_view> header(std::string_view name) const;
};

/// How a client connects, and the bounds it keeps to.
struct client_options {
  /// The largest body taken (after inflation too); a larger one is errc::body_too_large and its
  /// connection is closed. Checked while reading: no more than this is ever held.
  std::size_t max_response_bytes = std::size_t{64} << 20;
  /// The largest response header taken (status line and fields); larger is errc::body_too_large.
  std::size_t max_header_bytes = std::size_t{64} << 10;
  /// Idle keep-alive connections kept per host; 0 closes every connection after its response.
  std::size_t max_idle_per_host = 16;
  /// An idle connection unused this long is closed instead of reused.
  std::chrono::seconds idle_timeout{60};
  /// The certificates trusted: this file and this directory (as OpenSSL's CAfile and CApath)
  /// when either is set; otherwise the system store, or SSL_CERT_FILE / SSL_CERT_DIR when set
  /// (as OpenSSL reads them).
  std::optional<std::string> ca_file, ca_dir;
  /// The proxy (`http://[user:password@]host[:port]`; a URL without a scheme is taken as
  /// http://). Unset: HTTPS_PROXY for https:// URLs and HTTP_PROXY for http:// ones (the
  /// lower-case name first, as curl reads them). An empty string: no proxy.
  std::optional<std::string> proxy;
  /// Hosts reached without the proxy: a comma-separated list of host names (each matching
  /// itself and its subdomains; a leading dot is ignored), IP addresses, CIDR blocks, each with
  /// an optional `:port`, or `*` for all. Unset: NO_PROXY (lower-case first).
  std::optional<std::string> no_proxy;
  /// Sent as User-Agent unless the request names one.
  std::string user_agent = "mira-cpp/" + std::string(mira::version);
};

/// An HTTP/1.1 client. A handle: copies share one state (options, TLS context, connection
/// pools), and any copy may be used from any thread.
///
/// Connections are pooled per execution context (the io_context a request's coroutine runs on),
/// per client and per (scheme, host, port, proxy), and closed with that context: a client may
/// outlive the io_contexts it was used on. An idle connection the server has closed is noticed
/// when taken; one that fails before the first byte of its response is replaced once by a
/// fresh connection, the request sent again.
class client {
 public:
  /// Reads the environment (proxies, SSL_CERT_FILE / SSL_CERT_DIR) now, once.
  explicit client(client_options options = {});

  /// Sends a request and reads its response.
  ///
  /// Non-2xx statuses are not errors here: they come back as responses. Errors are transport
  /// failures (errc::bad_url ... errc::cancelled, errc::bad_request), each with a message that
  /// names the scheme, host and port, and no path, query or header value.
  ///
  /// Executor: the calling coroutine's; the connection's I/O runs there.
  ///
  /// Cancellation: terminal (the coroutine's default filter). A cancellation closes the
  /// connection at once (it is never pooled) and completes with errc::cancelled, in any state:
  /// while resolving, connecting, in the handshake, writing or reading. One that comes after
  /// the response was read still closes that connection and gives errc::cancelled.
  boost::asio::awaitable<tl::expected<http_response, error>> request(http_request request);

 private:
  struct state;
  std::shared_ptr<state> state_;
};

/// Parses a Retry-After value: delta-seconds, or an HTTP-date (IMF-fixdate, RFC 850 or asctime)
/// taken relative to `now` (a date in the past is 0). Nullopt when it is neither.
std::optional<std::chrono::milliseconds> parse_retry_after(
    std::string_view value, std::chrono::system_clock::time_point now);

}  // namespace mira::models
