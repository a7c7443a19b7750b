// The server's connection limits, which the command line does not expose small enough to test
// through `mira serve`: the connection cap (503 with Retry-After, then closed), the header
// timeout against a client that never finishes its header, and the idle timeout of a
// kept-alive connection, the body cap (413 whether the body announces its length or grows past
// the cap in chunks). The server runs on the test's own io_context; plain Asio sockets are
// the clients. Every wait is on the socket (its answer or its end), with a watchdog.
#define BOOST_TEST_MODULE serve_limits
#include <mira/serve/server.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>

namespace asio = boost::asio;
using asio::ip::tcp;

namespace {

mira::serve::server_config small_config() {
  mira::serve::server_config c;
  c.port = 0;
  c.studies.push_back({"demo", {"/bin/true"}});
  char tmpl[] = "/tmp/mira-serve-limits-XXXXXX";
  c.results_dir = ::mkdtemp(tmpl);
  c.max_connections = 1;
  c.header_timeout = std::chrono::milliseconds(300);
  c.idle_timeout = std::chrono::milliseconds(300);
  c.max_body_bytes = 1024;
  return c;
}

// Everything the server sends until it closes the connection.
asio::awaitable<std::string> read_to_end(tcp::socket& s) {
  std::string out;
  char buf[4096];
  for (;;) {
    auto [ec, n] =
        co_await s.async_read_some(asio::buffer(buf), asio::as_tuple(asio::use_awaitable));
    out.append(buf, n);
    if (ec) co_return out;
  }
}

// One request on a kept-alive connection: the response's header and body (Content-Length).
asio::awaitable<std::string> ask(tcp::socket& s, std::string request) {
  co_await asio::async_write(s, asio::buffer(request), asio::use_awaitable);
  std::string in;
  char buf[4096];
  for (;;) {
    auto end = in.find("\r\n\r\n");
    if (end != std::string::npos) {
      auto cl = in.find("Content-Length: ");
      auto length = std::stoul(in.substr(cl + 16));
      if (in.size() >= end + 4 + length) co_return in;
    }
    auto n = co_await s.async_read_some(asio::buffer(buf), asio::use_awaitable);
    in.append(buf, n);
  }
}

template <class F>
void run_with_server(F body) {
  asio::io_context ctx{1};
  mira::serve::server srv(ctx.get_executor(), small_config());
  auto ep = srv.start();
  BOOST_REQUIRE(ep);
  bool done = false;
  asio::co_spawn(
      ctx,
      [&]() -> asio::awaitable<void> {
        co_await body(*ep);
        co_await srv.stop();
      },
      [&](std::exception_ptr e) {
        done = true;
        if (e) std::rethrow_exception(e);
      });
  ctx.run_for(std::chrono::seconds(60));  // a watchdog: the body ends long before
  BOOST_TEST(done);
}

// Sends `request` and reads until the server closes: a refused body is answered 413 and the
// connection is closed.
void refused_as_too_large(std::string request) {
  run_with_server([request](tcp::endpoint ep) -> asio::awaitable<void> {
    auto ex = co_await asio::this_coro::executor;
    tcp::socket s(ex);
    co_await s.async_connect(ep, asio::use_awaitable);
    co_await asio::async_write(s, asio::buffer(request), asio::use_awaitable);
    auto answer = co_await read_to_end(s);
    BOOST_TEST(answer.rfind("HTTP/1.1 413", 0) == 0u, answer);
    BOOST_TEST(answer.find("\"code\":\"body_too_large\"") != std::string::npos, answer);
    BOOST_TEST(answer.find("larger than 1024 bytes") != std::string::npos, answer);
  });
}

const std::string post_runs =
    "POST /v1/runs HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n";

}  // namespace

BOOST_AUTO_TEST_CASE(one_connection_too_many_is_answered_503_and_closed) {
  run_with_server([](tcp::endpoint ep) -> asio::awaitable<void> {
    auto ex = co_await asio::this_coro::executor;
    tcp::socket a(ex), b(ex);
    co_await a.async_connect(ep, asio::use_awaitable);
    // A answered: it holds the one connection the server allows.
    auto first = co_await ask(a, "GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n");
    BOOST_TEST(first.rfind("HTTP/1.1 200 OK", 0) == 0u);
    co_await b.async_connect(ep, asio::use_awaitable);
    auto refused = co_await read_to_end(b);
    BOOST_TEST(refused.rfind("HTTP/1.1 503", 0) == 0u, refused);
    BOOST_TEST(refused.find("Retry-After: 1") != std::string::npos);
    BOOST_TEST(refused.find("\"code\":\"too_many_connections\"") != std::string::npos);
  });
}

BOOST_AUTO_TEST_CASE(a_header_that_never_ends_is_cut_off) {
  run_with_server([](tcp::endpoint ep) -> asio::awaitable<void> {
    auto ex = co_await asio::this_coro::executor;
    tcp::socket s(ex);
    co_await s.async_connect(ep, asio::use_awaitable);
    std::string partial = "GET /healthz HTTP/1.1\r\nHost: t\r\n";  // and nothing more
    co_await asio::async_write(s, asio::buffer(partial), asio::use_awaitable);
    auto t0 = std::chrono::steady_clock::now();
    auto rest = co_await read_to_end(s);  // the server closes it
    BOOST_TEST(rest.empty());
    BOOST_TEST((std::chrono::steady_clock::now() - t0 < std::chrono::seconds(30)));
  });
}

BOOST_AUTO_TEST_CASE(a_quiet_kept_alive_connection_is_closed) {
  run_with_server([](tcp::endpoint ep) -> asio::awaitable<void> {
    auto ex = co_await asio::this_coro::executor;
    tcp::socket s(ex);
    co_await s.async_connect(ep, asio::use_awaitable);
    auto answer = co_await ask(s, "GET /v1/version HTTP/1.1\r\nHost: t\r\n\r\n");
    BOOST_TEST(answer.find("Connection: close") == std::string::npos);  // kept alive
    auto rest = co_await read_to_end(s);  // until the idle timeout closes it
    BOOST_TEST(rest.empty());
  });
}

BOOST_AUTO_TEST_CASE(a_body_announced_over_the_cap_is_refused_before_it_is_read) {
  refused_as_too_large(post_runs + "Content-Length: 2048\r\n\r\n");
}

BOOST_AUTO_TEST_CASE(a_chunked_body_that_grows_past_the_cap_is_refused) {
  refused_as_too_large(post_runs + "Transfer-Encoding: chunked\r\n\r\n800\r\n" +
                       std::string(2048, 'x') + "\r\n");
}
