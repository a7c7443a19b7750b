// URL parsing, NO_PROXY matching and the route of a request (see url.hpp).
#include "models/url.hpp"

#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/network_v4.hpp>
#include <boost/asio/ip/network_v6.hpp>

#include <algorithm>
#include <cctype>
#include <charconv>

namespace mira::models::detail {

namespace {

namespace ip = boost::asio::ip;

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool starts_with_nocase(std::string_view s, std::string_view prefix) {
  return s.size() >= prefix.size() && lower(s.substr(0, prefix.size())) == prefix;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::optional<std::uint16_t> parse_port(std::string_view s) {
  unsigned value = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size() || value == 0 || value > 65535)
    return std::nullopt;
  return static_cast<std::uint16_t>(value);
}

// A registered name as DNS has them (letters, digits, '-', '.', '_', '~'): what a URL's host may
// hold here, so nothing else reaches a request line or a Host header.
bool is_host_name(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == '_' ||
           c == '~';
  });
}

std::string percent_decode(std::string_view s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    unsigned v = 0;
    if (s[i] == '%' && i + 2 < s.size() &&
        std::from_chars(s.data() + i + 1, s.data() + i + 3, v, 16).ptr == s.data() + i + 3) {
      out.push_back(static_cast<char>(v));
      i += 2;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

// host[:port] of an authority (user information already split off) into `u`.
std::optional<std::string> parse_authority(std::string_view a, url& u) {
  std::string_view host = a;
  std::optional<std::string_view> port;
  if (a.starts_with('[')) {
    auto close = a.find(']');
    if (close == std::string_view::npos) return "an IPv6 host has no closing ']'";
    host = a.substr(1, close - 1);
    auto rest = a.substr(close + 1);
    if (!rest.empty() && !rest.starts_with(':')) return "junk after the IPv6 host";
    if (!rest.empty()) port = rest.substr(1);
    boost::system::error_code ec;
    ip::make_address_v6(host, ec);
    if (ec) return "the host is not an IPv6 address";
    u.ipv6 = true;
  } else if (auto colon = a.rfind(':'); colon != std::string_view::npos) {
    host = a.substr(0, colon);
    port = a.substr(colon + 1);
  }
  if (!u.ipv6 && !is_host_name(host)) return "the host is empty or holds a character not allowed";
  u.host = lower(host);
  u.port = u.tls ? 443 : 80;
  if (port) {
    auto p = parse_port(*port);
    if (!p) return "the port is not a number from 1 to 65535";
    u.port = *p;
  }
  return std::nullopt;
}

tl::expected<url, std::string> parse(std::string_view text, bool proxy) {
  url u;
  if (starts_with_nocase(text, "https://")) {
    u.tls = true;
    text.remove_prefix(8);
  } else if (starts_with_nocase(text, "http://")) {
    text.remove_prefix(7);
  } else if (!proxy || text.find("://") != std::string_view::npos) {
    return tl::make_unexpected(proxy ? std::string("a proxy URL must be http://")
                                     : std::string("the URL is not http:// or https://"));
  }
  if (proxy && u.tls) return tl::make_unexpected(std::string("a proxy URL must be http://"));
  auto end = text.find_first_of("/?#");
  auto authority = text.substr(0, end);
  auto rest = end == std::string_view::npos ? std::string_view() : text.substr(end);
  if (auto at = authority.rfind('@'); at != std::string_view::npos) {
    if (!proxy) return tl::make_unexpected(std::string("the URL holds user information"));
    u.userinfo = percent_decode(authority.substr(0, at));
    authority = authority.substr(at + 1);
  }
  if (auto bad = parse_authority(authority, u)) return tl::make_unexpected(*bad);
  rest = rest.substr(0, rest.find('#'));
  for (char c : rest)
    if (static_cast<unsigned char>(c) <= 0x20 || static_cast<unsigned char>(c) >= 0x7f)
      return tl::make_unexpected(
          std::string("the path or query holds a space, a control or a non-ASCII character "
                      "(percent-encode it)"));
  u.target = rest.starts_with('/') ? std::string(rest) : "/" + std::string(rest);
  return u;
}

// One NO_PROXY entry (trimmed, not empty) against a host.
bool entry_matches(std::string_view entry, std::string_view host, std::uint16_t port) {
  if (entry == "*") return true;
  std::string_view name = entry;
  if (entry.starts_with('[')) {  // [v6] or [v6]:port
    auto close = entry.find(']');
    if (close == std::string_view::npos) return false;
    name = entry.substr(1, close - 1);
    if (close + 1 < entry.size()) {
      if (entry[close + 1] != ':' || parse_port(entry.substr(close + 2)) != port) return false;
    }
  } else if (std::count(entry.begin(), entry.end(), ':') == 1) {  // name:port or v4:port
    auto colon = entry.find(':');
    if (parse_port(entry.substr(colon + 1)) != port) return false;
    name = entry.substr(0, colon);
  }
  boost::system::error_code ec;
  auto host_ip = ip::make_address(host, ec);
  bool host_is_ip = !ec;
  if (name.find('/') != std::string_view::npos) {  // a CIDR block
    if (!host_is_ip) return false;
    if (host_ip.is_v4()) {
      auto net = ip::make_network_v4(name, ec);
      return !ec &&
             ip::make_network_v4(host_ip.to_v4(), net.prefix_length()).network() == net.network();
    }
    auto net = ip::make_network_v6(name, ec);
    return !ec &&
           ip::make_network_v6(host_ip.to_v6(), net.prefix_length()).network() == net.network();
  }
  auto entry_ip = ip::make_address(name, ec);
  if (!ec) return host_is_ip && entry_ip == host_ip;
  if (host_is_ip) return false;  // a name never matches an address: nothing is resolved here
  while (name.starts_with('*')) name.remove_prefix(1);
  while (name.starts_with('.')) name.remove_prefix(1);
  if (name.empty()) return false;
  auto want = lower(name);
  return host == want || (host.size() > want.size() && host.ends_with(want) &&
                          host[host.size() - want.size() - 1] == '.');
}

}  // namespace

std::string base64(std::string_view in) {
  static constexpr char table[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  std::size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    unsigned v = (static_cast<unsigned char>(in[i]) << 16) |
                 (static_cast<unsigned char>(in[i + 1]) << 8) |
                 static_cast<unsigned char>(in[i + 2]);
    for (int s = 18; s >= 0; s -= 6) out.push_back(table[(v >> s) & 63]);
  }
  if (i < in.size()) {
    unsigned v = static_cast<unsigned char>(in[i]) << 16;
    if (i + 1 < in.size()) v |= static_cast<unsigned char>(in[i + 1]) << 8;
    out.push_back(table[(v >> 18) & 63]);
    out.push_back(table[(v >> 12) & 63]);
    out.push_back(i + 1 < in.size() ? table[(v >> 6) & 63] : '=');
    out.push_back('=');
  }
  return out;
}

tl::expected<url, std::string> parse_url(std::string_view text) {
  return parse(text, false);
}
tl::expected<url, std::string> parse_proxy_url(std::string_view text) {
  return parse(text, true);
}

std::string host_header(const url& u) {
  std::string h = u.ipv6 ? "[" + u.host + "]" : u.host;
  if (u.port != (u.tls ? 443 : 80)) h += ":" + std::to_string(u.port);
  return h;
}

std::string host_port(const url& u) {
  return (u.ipv6 ? "[" + u.host + "]" : u.host) + ":" + std::to_string(u.port);
}

std::string origin(const url& u) {
  return (u.tls ? "https://" : "http://") + host_port(u);
}

bool no_proxy_matches(std::string_view list, std::string_view host, std::uint16_t port) {
  auto h = lower(host);
  while (!list.empty()) {
    auto comma = list.find(',');
    auto entry = trim(list.substr(0, comma));
    list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
    if (!entry.empty() && entry_matches(entry, h, port)) return true;
  }
  return false;
}

proxy_settings read_proxy_settings(
    const std::optional<std::string>& proxy, const std::optional<std::string>& no_proxy,
    const std::function<std::optional<std::string>(const char*)>& getenv) {
  proxy_settings s;
  // The lower-case name first, as curl and Python read them.
  auto first_of = [&](const char* a, const char* b, std::string& source) {
    for (const char* name : {a, b})
      if (auto v = getenv(name); v && !v->empty()) {
        source = name;
        return v;
      }
    return std::optional<std::string>();
  };
  if (proxy) {
    if (!proxy->empty()) s.https = s.http = *proxy;
    s.https_source = s.http_source = "client_options::proxy";
  } else {
    s.https = first_of("https_proxy", "HTTPS_PROXY", s.https_source);
    s.http = first_of("http_proxy", "HTTP_PROXY", s.http_source);
  }
  std::string ignored;
  s.no_proxy = no_proxy ? *no_proxy : first_of("no_proxy", "NO_PROXY", ignored).value_or("");
  return s;
}

tl::expected<route, std::string> make_route(std::string_view text, const proxy_settings& proxies) {
  auto target = parse_url(text);
  if (!target) return tl::make_unexpected(target.error());
  route r{*target, std::nullopt, origin(*target)};
  const auto& proxy = target->tls ? proxies.https : proxies.http;
  if (proxy && !no_proxy_matches(proxies.no_proxy, target->host, target->port)) {
    auto p = parse_proxy_url(*proxy);
    if (!p)
      return tl::make_unexpected((target->tls ? proxies.https_source : proxies.http_source) +
                                 " is not a proxy URL this client can use: " + p.error());
    r.pool_key += " via " + p->userinfo + "@" + host_port(*p);
    r.proxy = std::move(*p);
  }
  return r;
}

}  // namespace mira::models::detail
