// One HTTP connection of the client (plain TCP or TLS over it, through a proxy or not), how one
// is opened, and the per-execution-context cache of idle ones. Private to src/models/.
#pragma once

#include <mira/models/error.hpp>
#include "models/idle_pool.hpp"
#include "models/url.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/asio/execution_context.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <tl/expected.hpp>

#include <chrono>
#include <cstddef>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

namespace mira::models::detail {

using tls_stream = boost::beast::ssl_stream<boost::beast::tcp_stream>;

/// A connection: `plain` until a TLS handshake moves it into `tls`. `buffer` holds what was read
/// past a message (an HTTP/1.1 server without pipelining sends nothing there).
struct connection {
  connection(const boost::asio::any_io_executor& ex, std::size_t max_buffer)
      : plain(std::in_place, ex), buffer(max_buffer) {}
  std::optional<boost::beast::tcp_stream> plain;
  std::optional<tls_stream> tls;
  boost::beast::flat_buffer buffer;

  boost::beast::tcp_stream& tcp() { return tls ? boost::beast::get_lowest_layer(*tls) : *plain; }
  /// Whether an idle connection can carry a request: nothing unread, and the socket neither
  /// readable nor hung up (a server that closed it, or sent what it should not have).
  bool idle_and_open();
};

/// What opening a connection needs besides its route.
struct connect_params {
  boost::asio::ssl::context* tls = nullptr;
  std::chrono::steady_clock::time_point deadline;
  std::size_t max_header_bytes = 0;
  std::string user_agent;
};

/// Resolves, connects (to the proxy when the route has one, tunnelling with CONNECT to an
/// https:// target), then makes the TLS handshake for an https:// target, verifying the
/// certificate against the host name (SNI set for a name, not for an address). Every step
/// within the deadline; a cancellation of the calling coroutine gives errc::cancelled.
boost::asio::awaitable<tl::expected<std::unique_ptr<connection>, error>> open_connection(
    route r, connect_params params);

/// An error of a step: `ec` mapped to timed_out (the deadline), cancelled (`cancelled` says
/// whether the coroutine was) or `otherwise`, with a message naming the origin and the step.
error step_error(boost::system::error_code ec, bool cancelled, errc otherwise,
                 const std::string& what);

/// The idle connections of every client on one execution context, closed with it: a service, so
/// a client may outlive the io_contexts it ran on. Thread-safe.
class connection_cache final : public boost::asio::execution_context::service {
 public:
  static boost::asio::execution_context::id id;
  explicit connection_cache(boost::asio::execution_context& ctx) : service(ctx) {}

  /// An idle connection of `pool_key` still open, if any (expired or closed ones are dropped).
  std::unique_ptr<connection> take(const std::string& pool_key);
  /// Keeps `c` idle for up to `idle` (at most `max_per_key` of its pool key).
  void put(const std::string& pool_key, std::unique_ptr<connection> c, std::chrono::seconds idle,
           std::size_t max_per_key);

 private:
  void shutdown() override;

  std::mutex mutex_;
  idle_pool<std::unique_ptr<connection>> pool_;
};

}  // namespace mira::models::detail
