// Opening a client connection: resolve, connect, the proxy's CONNECT, the TLS handshake (see
// connection.hpp), and the cache of idle connections.
#include "models/connection.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/host_name_verification.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>

#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <poll.h>

namespace mira::models::detail {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using asio::ip::tcp;
using boost::system::error_code;
constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);

namespace {

asio::awaitable<bool> cancelled() {
  auto cs = co_await asio::this_coro::cancellation_state;
  co_return cs.cancelled() != asio::cancellation_type::none;
}

// A lookup in flight. getaddrinfo runs on Asio's resolver thread and cannot be interrupted, so
// the deadline and a cancellation end the wait for it, not the lookup: one left behind finishes
// on its own, into this state, which it keeps alive.
struct lookup {
  explicit lookup(const asio::any_io_executor& ex) : resolver(ex), wake(ex) {}
  tcp::resolver resolver;
  asio::steady_timer wake;
  bool done = false;
  error_code ec;
  tcp::resolver::results_type results;
};

asio::awaitable<tl::expected<tcp::resolver::results_type, error>> resolve(
    const url& u, std::chrono::steady_clock::time_point deadline, errc failed) {
  auto ex = co_await asio::this_coro::executor;
  auto l = std::make_shared<lookup>(ex);
  l->wake.expires_at(deadline);
  l->resolver.async_resolve(u.host, std::to_string(u.port),
                            [l](error_code ec, tcp::resolver::results_type results) {
                              l->done = true;
                              l->ec = ec;
                              l->results = std::move(results);
                              l->wake.cancel();
                            });
  auto [wait_ec] = co_await l->wake.async_wait(use_tuple);
  if (l->done && !l->ec) co_return std::move(l->results);
  const std::string what = "resolving " + u.host;
  if (l->done) co_return tl::make_unexpected(step_error(l->ec, false, failed, what));
  l->resolver.cancel();
  const bool was_cancelled = co_await cancelled();
  if (wait_ec != asio::error::operation_aborted) wait_ec = beast::error::timeout;
  co_return tl::make_unexpected(step_error(wait_ec, was_cancelled, failed, what));
}

// CONNECT host:port through the proxy the connection is open to; the answer's header is read
// and the tunnel is then the connection.
asio::awaitable<std::optional<error>> tunnel(connection& c, const route& r,
                                             const connect_params& p) {
  const std::string where = "the proxy " + host_port(*r.proxy);
  http::request<http::empty_body> req{http::verb::connect, host_port(r.target), 11};
  req.set(http::field::host, host_port(r.target));
  req.set(http::field::user_agent, p.user_agent);
  if (!r.proxy->userinfo.empty())
    req.set(http::field::proxy_authorization, "Basic " + detail::base64(r.proxy->userinfo));
  auto [wec, wn] = co_await http::async_write(*c.plain, req, use_tuple);
  // g++ 12: a co_await among a call's arguments can destroy them twice (toolchain-notes.md).
  if (wec) {
    const bool was_cancelled = co_await cancelled();
    co_return step_error(wec, was_cancelled, errc::proxy_failed, where);
  }
  http::response_parser<http::empty_body> parser;
  parser.skip(true);  // a 2xx to CONNECT has no body: the tunnel follows the header
  parser.header_limit(static_cast<std::uint32_t>(p.max_header_bytes));
  auto [rec, rn] = co_await http::async_read(*c.plain, c.buffer, parser, use_tuple);
  if (rec) {
    const bool was_cancelled = co_await cancelled();
    co_return step_error(rec, was_cancelled, errc::proxy_failed, where);
  }
  const int status = static_cast<int>(parser.get().result_int());
  if (status / 100 != 2)
    co_return error{
        make_error_code(errc::proxy_failed),
        where + " answered " + std::to_string(status) + " to CONNECT " + host_port(r.target),
        std::nullopt, status};
  if (c.buffer.size() != 0)
    co_return error{make_error_code(errc::proxy_failed),
                    where + " sent data before the TLS handshake", std::nullopt, 0};
  co_return std::nullopt;
}

asio::awaitable<std::optional<error>> handshake(connection& c, const url& target,
                                                asio::ssl::context& ctx) {
  c.tls.emplace(std::move(*c.plain), ctx);
  c.plain.reset();
  SSL* ssl = c.tls->native_handle();
  error_code ec;
  asio::ip::make_address(target.host, ec);
  // SNI names a host, never an address (RFC 6066).
  if (ec && !SSL_set_tlsext_host_name(ssl, target.host.c_str()))
    co_return error{make_error_code(errc::tls_failed),
                    origin(target) + ": the host name cannot be sent as SNI", std::nullopt, 0};
  c.tls->set_verify_mode(asio::ssl::verify_peer);
  c.tls->set_verify_callback(asio::ssl::host_name_verification(target.host));
  auto [hec] = co_await c.tls->async_handshake(asio::ssl::stream_base::client, use_tuple);
  if (!hec) co_return std::nullopt;
  const bool was_cancelled = co_await cancelled();
  auto e = step_error(hec, was_cancelled, errc::tls_failed, origin(target) + ": TLS");
  if (auto verify = SSL_get_verify_result(ssl); verify != X509_V_OK && e.code == errc::tls_failed)
    e.message += std::string(" (") + X509_verify_cert_error_string(verify) + ")";
  co_return e;
}

}  // namespace

error step_error(error_code ec, bool cancelled, errc otherwise, const std::string& what) {
  if (cancelled) return {make_error_code(errc::cancelled), what + ": cancelled", std::nullopt, 0};
  if (ec == beast::error::timeout)
    return {make_error_code(errc::timed_out), what + ": the request's deadline passed",
            std::nullopt, 0};
  return {make_error_code(otherwise), what + ": " + ec.message(), std::nullopt, 0};
}

asio::awaitable<tl::expected<std::unique_ptr<connection>, error>> open_connection(
    route r, connect_params p) {
  const url& hop = r.proxy ? *r.proxy : r.target;
  const errc hop_failed = r.proxy ? errc::proxy_failed : errc::connect_failed;
  auto endpoints =
      co_await resolve(hop, p.deadline, r.proxy ? errc::proxy_failed : errc::resolve_failed);
  if (!endpoints) co_return tl::make_unexpected(endpoints.error());
  auto ex = co_await asio::this_coro::executor;
  auto c = std::make_unique<connection>(ex, p.max_header_bytes + (std::size_t{64} << 10));
  c->plain->expires_at(p.deadline);
  auto [cec, ep] = co_await c->plain->async_connect(*endpoints, use_tuple);
  if (cec) {
    const bool was_cancelled = co_await cancelled();
    co_return tl::make_unexpected(
        step_error(cec, was_cancelled, hop_failed, (r.proxy ? "the proxy " : "") + origin(hop)));
  }
  c->plain->socket().set_option(tcp::no_delay(true), cec);
  if (r.proxy && r.target.tls)
    if (auto e = co_await tunnel(*c, r, p)) co_return tl::make_unexpected(std::move(*e));
  if (r.target.tls)
    if (auto e = co_await handshake(*c, r.target, *p.tls))
      co_return tl::make_unexpected(std::move(*e));
  co_return c;
}

bool connection::idle_and_open() {
  if (buffer.size() != 0) return false;
  pollfd p{tcp().socket().native_handle(), POLLIN | POLLRDHUP, 0};
  return ::poll(&p, 1, 0) == 0;
}

boost::asio::execution_context::id connection_cache::id;

std::unique_ptr<connection> connection_cache::take(const std::string& pool_key) {
  std::vector<std::unique_ptr<connection>> dropped;  // closed after the lock is released
  std::lock_guard lock(mutex_);
  const auto now = std::chrono::steady_clock::now();
  dropped = pool_.sweep(now);
  while (auto c = pool_.take(pool_key, now)) {
    if ((*c)->idle_and_open()) return std::move(*c);
    dropped.push_back(std::move(*c));
  }
  return nullptr;
}

void connection_cache::put(const std::string& pool_key, std::unique_ptr<connection> c,
                           std::chrono::seconds idle, std::size_t max_per_key) {
  std::vector<std::unique_ptr<connection>> dropped;
  std::lock_guard lock(mutex_);
  dropped = pool_.put(pool_key, std::move(c), std::chrono::steady_clock::now() + idle, max_per_key);
}

void connection_cache::shutdown() {
  std::vector<std::unique_ptr<connection>> dropped;
  std::lock_guard lock(mutex_);
  dropped = pool_.clear();
}

}  // namespace mira::models::detail
