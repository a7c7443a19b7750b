// URLs as the HTTP client reaches them, and the route a request takes (straight to the host or
// through a proxy, with NO_PROXY): plain functions the client's shell calls and tests drive.
#pragma once

#include <tl/expected.hpp>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace mira::models::detail {

/// An http:// or https:// URL, split.
struct url {
  bool tls = false;  // https
  std::string host;  // lower case; an IPv6 address without its brackets
  std::uint16_t port = 0;
  std::string target;    // the path and query: "/" at least
  std::string userinfo;  // proxy URLs only: "user:password", percent-decoded
  bool ipv6 = false;
};

/// A request URL. The error says why it is refused, without repeating it (its query may hold a
/// key).
tl::expected<url, std::string> parse_url(std::string_view text);
/// A proxy URL: http:// (the scheme may be left out) with optional user information.
tl::expected<url, std::string> parse_proxy_url(std::string_view text);

/// "host" or "host:port" (the port left out when it is the scheme's), IPv6 in brackets: a Host
/// header's value.
std::string host_header(const url& u);
/// "host:port", IPv6 in brackets: CONNECT's target.
std::string host_port(const url& u);
/// "https://host:port": what error messages name (never the path or query).
std::string origin(const url& u);

/// RFC 4648 base64, for Basic proxy credentials.
std::string base64(std::string_view in);

/// Whether a NO_PROXY list names this host (and port): see client_options::no_proxy.
bool no_proxy_matches(std::string_view list, std::string_view host, std::uint16_t port);

/// Where the proxies come from: client_options::proxy and no_proxy, else the environment.
struct proxy_settings {
  std::optional<std::string> https, http;  // the proxy URL for each scheme, unparsed
  std::string https_source, http_source;   // what named it, for messages ("HTTPS_PROXY")
  std::string no_proxy;
};
/// `getenv` is the environment (a parameter so tests pass their own).
proxy_settings read_proxy_settings(
    const std::optional<std::string>& proxy, const std::optional<std::string>& no_proxy,
    const std::function<std::optional<std::string>(const char*)>& getenv);

/// The way one request goes.
struct route {
  url target;
  std::optional<url> proxy;
  /// The connection pool's key: scheme, host, port and the proxy with its credentials, so no
  /// connection is shared across proxy users. In memory only: never printed.
  std::string pool_key;
};
/// The route of a request URL: an error message for a bad URL or a bad proxy URL.
tl::expected<route, std::string> make_route(std::string_view url, const proxy_settings& proxies);

}  // namespace mira::models::detail
