// The server's connection limits, which the command line does not expose small enough to test
// through `mira serve`: the connection caps (room made by closing the oldest connection that never
// sent the token, else 503 with Retry-After, then closed), the header timeout against a client that
// never finishes its header, and the idle timeout of a kept-alive connection, the body cap (413
// whether the body announces its length or grows past the cap in chunks), and hostile clients:
// oversized trailers and chunk extensions, foreign Host and Origin, non-JSON bodies, 401s and
// refused headers that would hold a connection, and stop() with a client in the middle of a body.
// The server runs on the test's own io_context; plain Asio sockets are the clients. Every wait is
// on the socket (its answer or its end), with a watchdog. Then the run manager's limits: big
// plans and reports off the server's executor, --max-cases, one catalog load per study, an
// interrupted run's counts.
#define BOOST_TEST_MODULE serve_limits
#include <mira/plan/plan.hpp>
#include <mira/serve/server.hpp>
#include <mira/store/records.hpp>
#include <mira/store/run_store.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include <sys/resource.h>
#include <utility>
#include <vector>

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
void run_with_server(F body, mira::serve::server_config config = small_config()) {
  asio::io_context ctx{1};
  mira::serve::server srv(ctx.get_executor(), std::move(config));
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

// Sends `request` (errors ignored: the server may stop reading) and returns all it answers.
asio::awaitable<std::string> send_and_read(tcp::endpoint ep, std::string request) {
  auto ex = co_await asio::this_coro::executor;
  tcp::socket s(ex);
  co_await s.async_connect(ep, asio::use_awaitable);
  co_await asio::async_write(s, asio::buffer(request), asio::as_tuple(asio::use_awaitable));
  co_return co_await read_to_end(s);
}

// The server still answers a new client.
asio::awaitable<void> still_serving(tcp::endpoint ep) {
  auto answer = co_await send_and_read(
      ep, "GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
  BOOST_TEST(answer.rfind("HTTP/1.1 200 OK", 0) == 0u, answer);
}

// Sends `request` and expects `status` with the error `code`, then that the server still serves.
void refused(std::string request, std::string status, std::string code,
             mira::serve::server_config config = small_config()) {
  run_with_server(
      [request, status, code](tcp::endpoint ep) -> asio::awaitable<void> {
        auto answer = co_await send_and_read(ep, request);
        BOOST_TEST(answer.rfind("HTTP/1.1 " + status, 0) == 0u, answer);
        BOOST_TEST(answer.find("\"code\":\"" + code + "\"") != std::string::npos, answer);
        co_await still_serving(ep);
      },
      std::move(config));
}

const std::string post_runs =
    "POST /v1/runs HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n";

}  // namespace

BOOST_AUTO_TEST_CASE(one_connection_too_many_is_answered_503_and_closed) {
  auto c = small_config();
  c.token = "0123456789abcdef0123";
  run_with_server(
      [](tcp::endpoint ep) -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        tcp::socket a(ex), b(ex);
        co_await a.async_connect(ep, asio::use_awaitable);
        // A answered with the token: it holds the one connection the server allows.
        auto first = co_await ask(a,
                                  "GET /v1/version HTTP/1.1\r\nHost: localhost\r\n"
                                  "Authorization: Bearer 0123456789abcdef0123\r\n\r\n");
        BOOST_TEST(first.rfind("HTTP/1.1 200 OK", 0) == 0u);
        co_await b.async_connect(ep, asio::use_awaitable);
        auto refused = co_await read_to_end(b);
        BOOST_TEST(refused.rfind("HTTP/1.1 503", 0) == 0u, refused);
        BOOST_TEST(refused.find("Retry-After: 1") != std::string::npos);
        BOOST_TEST(refused.find("\"code\":\"too_many_connections\"") != std::string::npos);
      },
      c);
}

BOOST_AUTO_TEST_CASE(a_header_that_never_ends_is_cut_off) {
  run_with_server([](tcp::endpoint ep) -> asio::awaitable<void> {
    auto ex = co_await asio::this_coro::executor;
    tcp::socket s(ex);
    co_await s.async_connect(ep, asio::use_awaitable);
    std::string partial = "GET /healthz HTTP/1.1\r\nHost: localhost\r\n";  // and nothing more
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
    auto answer = co_await ask(s, "GET /v1/version HTTP/1.1\r\nHost: localhost\r\n\r\n");
    BOOST_TEST(answer.find("Connection: close") == std::string::npos);  // kept alive
    auto rest = co_await read_to_end(s);  // until the idle timeout closes it
    BOOST_TEST(rest.empty());
  });
}

BOOST_AUTO_TEST_CASE(a_refused_header_is_answered_and_closed_at_once) {
  // One connection allowed and timeouts far beyond the bound: a refused header that lingered
  // would hold the server's only place for idle_timeout.
  auto c = small_config();
  c.header_timeout = c.idle_timeout = std::chrono::seconds(60);
  run_with_server(
      [](tcp::endpoint ep) -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        tcp::socket bad(ex);
        co_await bad.async_connect(ep, asio::use_awaitable);
        auto t0 = std::chrono::steady_clock::now();
        std::string request = "GET /healthz HTTP/1.1\r\nHost: localhost\r\nNo colon\r\n\r\n";
        co_await asio::async_write(bad, asio::buffer(request), asio::use_awaitable);
        auto answer = co_await read_to_end(bad);
        BOOST_TEST(answer.rfind("HTTP/1.1 400", 0) == 0u, answer);
        BOOST_TEST(answer.find("\"code\":\"bad_request\"") != std::string::npos, answer);
        BOOST_TEST((std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5)));
        // `bad` is still open on this side; its place is free all the same.
        co_await still_serving(ep);
      },
      c);
}

BOOST_AUTO_TEST_CASE(a_body_announced_over_the_cap_is_refused_before_it_is_read) {
  refused_as_too_large(post_runs + "Content-Length: 2048\r\n\r\n");
}

BOOST_AUTO_TEST_CASE(a_chunked_body_that_grows_past_the_cap_is_refused) {
  refused_as_too_large(post_runs + "Transfer-Encoding: chunked\r\n\r\n800\r\n" +
                       std::string(2048, 'x') + "\r\n");
}

BOOST_AUTO_TEST_CASE(trailers_beyond_the_buffer_are_refused_without_a_crash) {
  // One trailer longer than Beast's fields can hold made it throw out of the read (SIGABRT).
  auto c = small_config();
  c.max_body_bytes = std::size_t{1} << 20;  // the refusal's linger drains what is left
  refused(post_runs + "Transfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\nX-Pad: " +
              std::string(70000, 'a') + "\r\n\r\n",
          "400", "chunk_header_too_large", c);
}

BOOST_AUTO_TEST_CASE(a_chunk_extension_that_never_ends_is_refused_at_the_buffer_cap) {
  // Exactly the read buffer's cap (max_header_bytes) after the header, and no line end: before,
  // the buffer grew with whatever came.
  auto line = "2;e=" + std::string((std::size_t{16} << 10) - 4, 'a');
  refused(post_runs + "Transfer-Encoding: chunked\r\n\r\n" + line, "400", "chunk_header_too_large");
}

BOOST_AUTO_TEST_CASE(chunk_extensions_are_bounded_per_chunk_and_per_request) {
  refused(
      post_runs + "Transfer-Encoding: chunked\r\n\r\n1;e=" + std::string(5000, 'a') + "\r\nx\r\n",
      "400", "chunk_extensions_too_large");
  // 3503 bytes a chunk: the 19th passes 64 KiB.
  std::string chunks;
  for (int i = 0; i < 19; ++i) chunks += "1;e=" + std::string(3500, 'a') + "\r\nx\r\n";
  refused(post_runs + "Transfer-Encoding: chunked\r\n\r\n" + chunks, "400",
          "chunk_extensions_too_large");
}

// Built outside the coroutines: g++ 12 mishandles a braced list inside one.
std::vector<std::string> allowed_hosts(const std::string& port) {
  return {"localhost", "127.0.0.1", "127.0.0.1:" + port, "mira.test:" + port};
}

BOOST_AUTO_TEST_CASE(a_foreign_or_missing_host_is_refused) {
  auto c = small_config();
  c.allowed_hosts = {"mira.test"};
  run_with_server(
      [](tcp::endpoint ep) -> asio::awaitable<void> {
        auto port = std::to_string(ep.port());
        auto get = [](std::string host) {
          return "GET /healthz HTTP/1.1\r\n" + host + "Connection: close\r\n\r\n";
        };
        auto rebound = co_await send_and_read(ep, get("Host: evil.example:" + port + "\r\n"));
        BOOST_TEST(rebound.rfind("HTTP/1.1 421", 0) == 0u, rebound);
        BOOST_TEST(rebound.find("\"host\":\"evil.example:" + port + "\"") != std::string::npos);
        auto missing = co_await send_and_read(ep, get(""));
        BOOST_TEST(missing.rfind("HTTP/1.1 400", 0) == 0u, missing);
        BOOST_TEST(missing.find("\"code\":\"missing_host\"") != std::string::npos);
        // HTTP/1.0 too: without a Host, a rebound name would pass unseen.
        auto old = co_await send_and_read(ep, "GET /healthz HTTP/1.0\r\n\r\n");
        BOOST_TEST(old.rfind("HTTP/1.1 400", 0) == 0u, old);
        BOOST_TEST(old.find("\"code\":\"missing_host\"") != std::string::npos);
        auto twice = co_await send_and_read(ep, get("Host: localhost\r\nHost: evil.example\r\n"));
        BOOST_TEST(twice.rfind("HTTP/1.1 400", 0) == 0u, twice);
        for (auto& host : allowed_hosts(port)) {
          auto ok = co_await send_and_read(ep, get("Host: " + host + "\r\n"));
          BOOST_TEST(ok.rfind("HTTP/1.1 200", 0) == 0u, host + ": " + ok);
        }
      },
      c);
}

BOOST_AUTO_TEST_CASE(a_change_from_another_origin_or_with_a_non_json_body_is_refused) {
  run_with_server([](tcp::endpoint ep) -> asio::awaitable<void> {
    auto port = std::to_string(ep.port());
    const std::string cancel =
        "POST /v1/runs/20990101T000000Z-0000/cancel HTTP/1.1\r\nHost: localhost:" + port +
        "\r\nConnection: close\r\n";
    auto foreign = co_await send_and_read(
        ep, cancel + "Origin: http://evil.example\r\nContent-Length: 0\r\n\r\n");
    BOOST_TEST(foreign.rfind("HTTP/1.1 403", 0) == 0u, foreign);
    BOOST_TEST(foreign.find("\"code\":\"foreign_origin\"") != std::string::npos);
    auto other_port = co_await send_and_read(
        ep, cancel + "Origin: http://localhost:1\r\nContent-Length: 0\r\n\r\n");
    BOOST_TEST(other_port.rfind("HTTP/1.1 403", 0) == 0u, other_port);
    auto text = co_await send_and_read(
        ep, cancel + "Content-Type: text/plain\r\nContent-Length: 2\r\n\r\n{}");
    BOOST_TEST(text.rfind("HTTP/1.1 415", 0) == 0u, text);
    // Its own pages, and a client with no Origin and no body, reach the route (no such run).
    auto own = co_await send_and_read(
        ep, cancel + "Origin: http://localhost:" + port + "\r\nContent-Length: 0\r\n\r\n");
    BOOST_TEST(own.rfind("HTTP/1.1 404", 0) == 0u, own);
    auto bare = co_await send_and_read(ep, cancel + "Content-Length: 0\r\n\r\n");
    BOOST_TEST(bare.rfind("HTTP/1.1 404", 0) == 0u, bare);
  });
}

BOOST_AUTO_TEST_CASE(a_401_closes_its_connection) {
  auto c = small_config();
  c.token = "0123456789abcdef0123";
  run_with_server(
      [](tcp::endpoint ep) -> asio::awaitable<void> {
        auto answer =
            co_await send_and_read(ep, "GET /v1/version HTTP/1.1\r\nHost: localhost\r\n\r\n");
        BOOST_TEST(answer.rfind("HTTP/1.1 401", 0) == 0u, answer);
        BOOST_TEST(answer.find("Connection: close") != std::string::npos, answer);
      },
      c);
}

BOOST_AUTO_TEST_CASE(trailers_never_reach_the_header) {
  auto c = small_config();
  c.token = "0123456789abcdef0123";
  refused(
      "POST /v1/runs/20990101T000000Z-0000/cancel HTTP/1.1\r\nHost: localhost\r\n"
      "Transfer-Encoding: chunked\r\n\r\n0\r\nAuthorization: Bearer " +
          c.token + "\r\n\r\n",
      "401", "unauthorized", c);
}

BOOST_AUTO_TEST_CASE(one_address_cannot_fill_the_connection_table) {
  auto c = small_config();
  c.token = "0123456789abcdef0123";
  c.max_connections = 10;
  c.max_connections_per_client = 2;
  c.header_timeout = c.idle_timeout = std::chrono::seconds(30);  // a failure ends, not hangs
  run_with_server(
      [](tcp::endpoint ep) -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        std::vector<tcp::socket> held;
        for (int i = 0; i < 2; ++i) {
          held.emplace_back(ex);
          co_await held.back().async_connect(ep, asio::use_awaitable);
          auto ok = co_await ask(held.back(),
                                 "GET /v1/version HTTP/1.1\r\nHost: localhost\r\n"
                                 "Authorization: Bearer 0123456789abcdef0123\r\n\r\n");
          BOOST_TEST(ok.rfind("HTTP/1.1 200 OK", 0) == 0u);
        }
        auto third = co_await send_and_read(ep, "");
        BOOST_TEST(third.rfind("HTTP/1.1 503", 0) == 0u, third);
        BOOST_TEST(third.find("from one address") != std::string::npos, third);
      },
      c);
}

BOOST_AUTO_TEST_CASE(without_a_token_kept_alive_connections_make_room_for_a_newcomer) {
  // No token: nothing proves a connection, so keep-alives that each sent a request cannot lock
  // other clients out (they shared 127.0.0.1's 32 places until the newcomer got 503).
  auto c = small_config();
  c.max_connections = 10;
  c.max_connections_per_client = 2;
  c.header_timeout = c.idle_timeout = std::chrono::seconds(30);
  run_with_server(
      [](tcp::endpoint ep) -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        std::vector<tcp::socket> held;
        for (int i = 0; i < 2; ++i) {
          held.emplace_back(ex);
          co_await held.back().async_connect(ep, asio::use_awaitable);
          auto ok = co_await ask(held.back(), "GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n");
          BOOST_TEST(ok.rfind("HTTP/1.1 200 OK", 0) == 0u);
        }
        co_await still_serving(ep);
        BOOST_TEST((co_await read_to_end(held[0])).empty());  // the oldest made room
        auto again = co_await ask(held[1], "GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n");
        BOOST_TEST(again.rfind("HTTP/1.1 200 OK", 0) == 0u, again);
      },
      c);
}

// A full table (`max_connections`, or `max_connections_per_client`: every client here is
// 127.0.0.1) of three, held by a client with the token and two silent connections: a newcomer takes
// the place of the older silent one, and the one with the token keeps its own.
void a_full_table_makes_room(std::size_t max_connections, std::size_t per_client) {
  auto c = small_config();
  c.token = "0123456789abcdef0123";
  c.max_connections = max_connections;
  c.max_connections_per_client = per_client;
  c.header_timeout = c.idle_timeout = std::chrono::seconds(30);  // a failure ends, not hangs
  run_with_server(
      [](tcp::endpoint ep) -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        const std::string with_token =
            "GET /v1/version HTTP/1.1\r\nHost: localhost\r\n"
            "Authorization: Bearer 0123456789abcdef0123\r\n";
        tcp::socket proven(ex), older(ex), newer(ex), newcomer(ex);
        co_await proven.async_connect(ep, asio::use_awaitable);
        auto ok = co_await ask(proven, with_token + "\r\n");  // now waiting, with the token
        BOOST_TEST(ok.rfind("HTTP/1.1 200", 0) == 0u, ok);
        // The accept queue is in order: both are the server's before the newcomer is.
        co_await older.async_connect(ep, asio::use_awaitable);
        co_await newer.async_connect(ep, asio::use_awaitable);
        co_await newcomer.async_connect(ep, asio::use_awaitable);
        auto answer = co_await ask(newcomer, with_token + "\r\n");
        BOOST_TEST(answer.rfind("HTTP/1.1 200", 0) == 0u, answer);
        if (answer.rfind("HTTP/1.1 200", 0) != 0) co_return;
        BOOST_TEST((co_await read_to_end(older)).empty());  // closed by the server
        // The newer silent one and the one with the token are still served.
        auto still = co_await ask(newer, with_token + "\r\n");
        BOOST_TEST(still.rfind("HTTP/1.1 200", 0) == 0u, still);
        auto again = co_await ask(proven, with_token + "\r\n");
        BOOST_TEST(again.rfind("HTTP/1.1 200", 0) == 0u, again);
      },
      c);
}

BOOST_AUTO_TEST_CASE(a_full_table_closes_its_oldest_silent_connection_for_a_newcomer) {
  a_full_table_makes_room(3, 32);
}

BOOST_AUTO_TEST_CASE(an_address_at_its_cap_closes_its_oldest_silent_connection_for_a_newcomer) {
  a_full_table_makes_room(10, 3);
}

BOOST_AUTO_TEST_CASE(stop_closes_connections_in_the_middle_of_a_request) {
  // Timeouts far beyond the bound: stop() must not wait for them.
  auto c = small_config();
  c.max_connections = 4;
  c.header_timeout = c.idle_timeout = std::chrono::seconds(60);
  asio::io_context ctx{1};
  mira::serve::server srv(ctx.get_executor(), c);
  auto ep = srv.start();
  BOOST_REQUIRE(ep);
  std::chrono::steady_clock::duration stop_took{};
  bool done = false;
  asio::co_spawn(
      ctx,
      [&]() -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        tcp::socket half(ex), lingering(ex);
        // Half a body.
        co_await half.async_connect(*ep, asio::use_awaitable);
        std::string head = post_runs + "Content-Length: 100\r\n\r\n" + std::string(50, ' ');
        co_await asio::async_write(half, asio::buffer(head), asio::use_awaitable);
        // A body over the cap, refused: the server lingers to read it away.
        co_await lingering.async_connect(*ep, asio::use_awaitable);
        auto over = post_runs + "Content-Length: 2048\r\n\r\n";
        co_await asio::async_write(lingering, asio::buffer(over), asio::use_awaitable);
        std::string answer;
        char buf[4096];
        while (answer.find("\r\n\r\n") == std::string::npos) {
          auto n = co_await lingering.async_read_some(asio::buffer(buf), asio::use_awaitable);
          answer.append(buf, n);
        }
        BOOST_TEST(answer.rfind("HTTP/1.1 413", 0) == 0u, answer);
        // A round trip on a third connection: the server has read the first one's bytes by now.
        co_await still_serving(*ep);
        auto t0 = std::chrono::steady_clock::now();
        co_await srv.stop();
        stop_took = std::chrono::steady_clock::now() - t0;
      },
      [&](std::exception_ptr e) {
        done = true;
        if (e) std::rethrow_exception(e);
      });
  ctx.run_for(std::chrono::seconds(90));
  BOOST_TEST(done);
  BOOST_TEST((stop_took < std::chrono::seconds(10)),
             std::chrono::duration<double>(stop_took).count() << " s");
}

namespace {

const std::string token_header = "Authorization: Bearer 0123456789abcdef0123\r\n";

// 3000 requests for the dashboard's script (6 KiB each) in one write, which the client then
// never reads: 19 MiB of answers, beyond what the kernel's buffers hold on loopback (its own
// receive buffer is set small, which also stops its growth), so the server soon waits for it.
asio::awaitable<void> pipeline_unread(tcp::socket& s, tcp::endpoint ep, const std::string& extra) {
  s.open(ep.protocol());
  s.set_option(asio::socket_base::receive_buffer_size(4096));
  co_await s.async_connect(ep, asio::use_awaitable);
  auto text = std::make_shared<std::string>();
  for (int i = 0; i < 3000; ++i)
    *text += "GET /dashboard.js HTTP/1.1\r\nHost: localhost\r\n" + extra + "\r\n";
  // Not awaited: the server stops reading once its writes wait.
  asio::async_write(s, asio::buffer(*text), [text](boost::system::error_code, std::size_t) {});
}

// Round trips on `s`: each lets the server's other connections take a step or more (about 4),
// so that it has written to a client that does not read until the buffers are full (about 650
// answers, two steps each).
asio::awaitable<void> round_trips(tcp::socket& s, const std::string& request) {
  for (int i = 0; i < 1000; ++i)
    BOOST_TEST((co_await ask(s, request)).rfind("HTTP/1.1 200", 0) == 0u);
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_client_that_does_not_read_makes_room_whatever_it_sent) {
  // A full table: a client with the token waiting, and two that pipelined thousands of requests
  // and read nothing, one of them with the token. Newcomers take their places (503 before).
  auto c = small_config();
  c.token = "0123456789abcdef0123";
  c.max_connections = 3;
  c.header_timeout = c.idle_timeout = c.write_timeout = std::chrono::seconds(30);
  run_with_server(
      [](tcp::endpoint ep) -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        const std::string version =
            "GET /v1/version HTTP/1.1\r\nHost: localhost\r\n" + token_header;
        tcp::socket proven(ex), silent(ex), with_token(ex), first(ex), second(ex);
        co_await proven.async_connect(ep, asio::use_awaitable);
        BOOST_TEST((co_await ask(proven, version + "\r\n")).rfind("HTTP/1.1 200", 0) == 0u);
        co_await pipeline_unread(silent, ep, "");
        co_await pipeline_unread(with_token, ep, token_header);
        co_await round_trips(proven, version + "\r\n");
        co_await first.async_connect(ep, asio::use_awaitable);
        auto a = co_await ask(first, version + "\r\n");
        BOOST_TEST(a.rfind("HTTP/1.1 200", 0) == 0u, a.substr(0, 200));
        co_await second.async_connect(ep, asio::use_awaitable);
        auto b = co_await ask(second, version + "\r\n");
        BOOST_TEST(b.rfind("HTTP/1.1 200", 0) == 0u, b.substr(0, 200));
        auto again = co_await ask(proven, version + "\r\n");
        BOOST_TEST(again.rfind("HTTP/1.1 200", 0) == 0u, again.substr(0, 200));
      },
      c);
}

BOOST_AUTO_TEST_CASE(a_client_that_stops_reading_is_closed_after_write_timeout) {
  auto c = small_config();
  c.idle_timeout = std::chrono::seconds(60);  // the write timeout alone closes it
  c.write_timeout = std::chrono::milliseconds(300);
  run_with_server(
      [](tcp::endpoint ep) -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        tcp::socket s(ex);
        co_await pipeline_unread(s, ep, "");
        // Time is the subject here: longer than the write timeout, far shorter than idle.
        asio::steady_timer wait(ex, std::chrono::seconds(3));
        co_await wait.async_wait(asio::use_awaitable);
        auto t0 = std::chrono::steady_clock::now();
        auto got = co_await read_to_end(s);  // what was under way, then the end
        BOOST_TEST((std::chrono::steady_clock::now() - t0 < std::chrono::seconds(20)));
        std::size_t answers = 0;
        for (auto at = got.find("HTTP/1.1 200"); at != std::string::npos;
             at = got.find("HTTP/1.1 200", at + 1))
          ++answers;
        BOOST_TEST(answers < 3000u);  // closed before it had everything
      },
      c);
}

BOOST_AUTO_TEST_CASE(a_body_without_the_token_is_refused_before_it_is_read) {
  auto c = small_config();
  c.token = "0123456789abcdef0123";
  c.max_body_bytes = 1 << 20;
  c.header_timeout = c.idle_timeout = std::chrono::seconds(30);
  run_with_server(
      [](tcp::endpoint ep) -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        tcp::socket s(ex);
        co_await s.async_connect(ep, asio::use_awaitable);
        // The header alone: the answer comes without the body (the server waited for it before).
        auto head = post_runs + "Content-Length: 1000000\r\n\r\n";
        co_await asio::async_write(s, asio::buffer(head), asio::use_awaitable);
        std::string answer;
        char buf[4096];
        while (answer.find("\r\n\r\n") == std::string::npos) {
          auto n = co_await s.async_read_some(asio::buffer(buf), asio::use_awaitable);
          answer.append(buf, n);
        }
        BOOST_TEST(answer.rfind("HTTP/1.1 401", 0) == 0u, answer);
      },
      c);
}

BOOST_AUTO_TEST_CASE(the_token_cookie_opens_a_get_but_changes_nothing) {
  auto c = small_config();
  c.token = "0123456789abcdef0123";
  run_with_server(
      [](tcp::endpoint ep) -> asio::awaitable<void> {
        const std::string cookie = "Cookie: theme=dark; mira_token=0123456789abcdef0123\r\n";
        auto get = co_await send_and_read(
            ep,
            "GET /v1/runs HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n" + cookie + "\r\n");
        BOOST_TEST(get.rfind("HTTP/1.1 200", 0) == 0u, get);
        auto wrong = co_await send_and_read(
            ep,
            "GET /v1/runs HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"
            "Cookie: mira_token=0123456789abcdef0124\r\n\r\n");
        BOOST_TEST(wrong.rfind("HTTP/1.1 401", 0) == 0u, wrong);
        auto post = co_await send_and_read(
            ep, "POST /v1/runs/20990101T000000Z-0000/cancel HTTP/1.1\r\nHost: localhost\r\n" +
                    cookie + "Connection: close\r\n\r\n");
        BOOST_TEST(post.rfind("HTTP/1.1 401", 0) == 0u, post);
      },
      c);
}

BOOST_AUTO_TEST_CASE(a_transfer_encoding_that_does_not_end_in_chunked_is_refused) {
  refused(post_runs + "Transfer-Encoding: gzip\r\n\r\n{}", "400", "bad_transfer_encoding");
  refused(post_runs + "Transfer-Encoding: chunked, gzip\r\n\r\n2\r\n{}\r\n0\r\n\r\n", "400",
          "bad_transfer_encoding");
  refused(
      "POST /v1/runs HTTP/1.0\r\nHost: localhost\r\nContent-Type: application/json\r\n"
      "Transfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
      "400", "bad_transfer_encoding");
}

BOOST_AUTO_TEST_CASE(stop_closes_a_connection_that_does_not_read) {
  auto c = small_config();
  c.max_connections = 4;
  c.header_timeout = c.idle_timeout = c.write_timeout = std::chrono::seconds(60);
  asio::io_context ctx{1};
  mira::serve::server srv(ctx.get_executor(), c);
  auto ep = srv.start();
  BOOST_REQUIRE(ep);
  std::chrono::steady_clock::duration stop_took{};
  bool done = false;
  asio::co_spawn(
      ctx,
      [&]() -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        tcp::socket s(ex);
        co_await pipeline_unread(s, *ep, "");
        tcp::socket other(ex);
        co_await other.async_connect(*ep, asio::use_awaitable);
        co_await round_trips(other, "GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n");
        auto t0 = std::chrono::steady_clock::now();
        co_await srv.stop();
        stop_took = std::chrono::steady_clock::now() - t0;
      },
      [&](std::exception_ptr e) {
        done = true;
        if (e) std::rethrow_exception(e);
      });
  ctx.run_for(std::chrono::seconds(90));
  BOOST_TEST(done);
  BOOST_TEST((stop_took < std::chrono::seconds(2)), std::chrono::duration<double>(stop_took).count()
                                                        << " s");
}

// The run manager's limits, with the example study and a server on a thread of its own, so that
// a client on the test's thread sees when the server's executor is held up.
namespace {

namespace store = mira::store;

struct threaded_server {
  asio::io_context ctx{1};
  mira::serve::server srv;
  tcp::endpoint ep;
  std::thread thread;
  explicit threaded_server(mira::serve::server_config c) : srv(ctx.get_executor(), std::move(c)) {
    auto started = srv.start();
    BOOST_REQUIRE(started);
    ep = *started;
    thread = std::thread([this] { ctx.run_for(std::chrono::seconds(120)); });  // a watchdog
  }
  ~threaded_server() {
    asio::co_spawn(ctx, srv.stop(), asio::detached);
    thread.join();
    std::error_code ec;
    std::filesystem::remove_all(srv.config().results_dir, ec);  // a big run's folder, too
  }
};

mira::serve::server_config runs_config(const std::string& study_command) {
  mira::serve::server_config c;
  c.port = 0;
  c.studies.push_back({"example", {"/bin/sh", "-c", study_command}});
  char tmpl[] = "/tmp/mira-serve-runs-XXXXXX";
  c.results_dir = ::mkdtemp(tmpl);
  return c;
}

// Writes `method target body` on `s` as one request (Connection: close).
void send_request(tcp::socket& s, const std::string& method, const std::string& target,
                  const std::string& body) {
  std::string req = method + " " + target + " HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n";
  if (!body.empty())
    req +=
        "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  req += "\r\n" + body;
  asio::write(s, asio::buffer(req));
}

// One request on its own connection (Connection: close): everything the server sends.
std::string http(tcp::endpoint ep, const std::string& method, const std::string& target,
                 const std::string& body = "") {
  asio::io_context io;
  tcp::socket s(io);
  s.connect(ep);
  send_request(s, method, target, body);
  std::string out;
  char buf[65536];
  boost::system::error_code ec;
  while (!ec) out.append(buf, s.read_some(asio::buffer(buf), ec));
  return out;
}

// Sends `method target body` and asks /healthz again and again until its answer comes: the
// slowest /healthz answer, in seconds, and the request's answer.
std::pair<double, std::string> healthz_while(tcp::endpoint ep, const std::string& method,
                                             const std::string& target,
                                             const std::string& body = "") {
  asio::io_context io;
  tcp::socket s(io);
  s.connect(ep);
  send_request(s, method, target, body);
  double worst = 0;
  int asked = 0;
  while (s.available() == 0) {
    auto t0 = std::chrono::steady_clock::now();
    auto health = http(ep, "GET", "/healthz");
    BOOST_TEST(health.rfind("HTTP/1.1 200", 0) == 0u);
    worst = std::max(worst,
                     std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    ++asked;
  }
  BOOST_TEST(asked > 0);
  std::string out;
  char buf[65536];
  boost::system::error_code ec;
  while (!ec) out.append(buf, s.read_some(asio::buffer(buf), ec));
  return {worst, out};
}

// A saved run of `n` cases, its last session begun and never ended (as a killed server leaves
// it): passed, failed and error in turn. Its id.
std::string saved_run(const std::filesystem::path& results, std::size_t n, std::size_t planned) {
  const std::string id = "20261201T000000Z-0001";
  auto st = store::run_store::create(results, id, store::layout::compact);
  BOOST_REQUIRE(st);
  store::session_entry session;
  session.planned = planned;
  BOOST_REQUIRE(!st->begin_session(std::move(session)));
  auto writer = st->writer();
  BOOST_REQUIRE(writer);
  const mira::schedule::case_state states[] = {mira::schedule::case_state::passed,
                                               mira::schedule::case_state::failed,
                                               mira::schedule::case_state::error};
  for (std::size_t i = 0; i < n; ++i) {
    mira::plan::planned_case c;
    c.params.eval = "echo";
    c.params.sample = "case-" + std::to_string(i);
    c.params.target = "sim";
    c.key = mira::plan::case_key(c.params);
    mira::schedule::case_record r;
    r.state = states[i % 3];
    r.attempts = 1;
    auto record = boost::json::parse(store::case_line(c, r)).as_object();
    record["output"] = std::string(1000, 'x');  // about what a small study answers
    (*writer)->submit(c.key, boost::json::serialize(record),
                      [](boost::system::error_code ec) { BOOST_TEST(!ec); });
  }
  (*writer)->drain();
  return id;
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_big_report_does_not_hold_up_healthz) {
  auto c = runs_config("exec " MIRA_EXAMPLE_STUDY);
  auto id = saved_run(c.results_dir, 150000, 150000);
  threaded_server s(c);
  // Rendering 150 000 cases takes seconds; the server answers others meanwhile.
  auto [worst, report] = healthz_while(s.ep, "GET", "/v1/runs/" + id + "/report?format=html");
  BOOST_TEST(report.rfind("HTTP/1.1 200", 0) == 0u);
  BOOST_TEST(worst < 1.0);
}

BOOST_AUTO_TEST_CASE(a_big_plan_does_not_hold_up_healthz) {
  auto c = runs_config("exec " MIRA_EXAMPLE_STUDY);
  c.max_cases = 4000000;
  threaded_server s(c);
  // The results directory becomes a file: the request is planned, then fails to make its run
  // folder (500), so what the test times is the planning alone, not the run's start.
  std::filesystem::remove_all(c.results_dir);
  std::ofstream(c.results_dir) << "not a directory\n";
  // 39 cases a trial: 3.5 million cases to plan.
  auto [worst, answer] = healthz_while(s.ep, "POST", "/v1/runs",
                                       R"({"study":"example","selection":{"trials":90000}})");
  BOOST_TEST(answer.rfind("HTTP/1.1 500", 0) == 0u, answer.substr(0, 300));
  BOOST_TEST(answer.find("\"code\":\"store_error\"") != std::string::npos);
  BOOST_TEST(worst < 1.0);
}

BOOST_AUTO_TEST_CASE(a_plan_over_max_cases_is_refused_before_anything_starts) {
  auto c = runs_config("exec " MIRA_EXAMPLE_STUDY);
  c.max_cases = 100;
  threaded_server s(c);
  for (auto trials : {"10", "100000"}) {  // 390 cases, and 3.9 million: neither is planned
    auto answer = http(s.ep, "POST", "/v1/runs",
                       std::string(R"({"study":"example","selection":{"trials":)") + trials + "}}");
    BOOST_TEST(answer.rfind("HTTP/1.1 413", 0) == 0u, answer);
    BOOST_TEST(answer.find("\"code\":\"too_many_cases\"") != std::string::npos, answer);
    BOOST_TEST(answer.find("\"max_cases\":100") != std::string::npos, answer);
  }
  auto answer = http(s.ep, "POST", "/v1/runs", R"({"study":"example","selection":{"trials":10}})");
  BOOST_TEST(answer.find("plans 390 cases") != std::string::npos, answer);
  BOOST_TEST(std::filesystem::is_empty(c.results_dir));  // no run folder
}

BOOST_AUTO_TEST_CASE(a_run_starting_many_processes_does_not_hold_up_healthz) {
  auto c = runs_config("exec " MIRA_EXAMPLE_STUDY);
  c.max_procs = 100;
  c.max_connections = 16;  // the descriptors of the test's process go to the studies
  threaded_server s(c);
  // Spawned on the server's thread, 100 processes held /healthz for seconds; now on the run thread.
  auto [worst, answer] = healthz_while(
      s.ep, "POST", "/v1/runs",
      R"({"study":"example","selection":{"evals":["arithmetic"]},"options":{"procs":100}})");
  BOOST_TEST(answer.rfind("HTTP/1.1 201", 0) == 0u, answer.substr(0, 300));
  BOOST_TEST(worst < 1.0);
}

BOOST_AUTO_TEST_CASE(processes_beyond_max_procs_or_the_descriptor_budget_are_refused) {
  auto c = runs_config("exec " MIRA_EXAMPLE_STUDY);
  c.max_procs = 4;
  c.max_connections = 16;
  rlimit was{};
  BOOST_REQUIRE(::getrlimit(RLIMIT_NOFILE, &was) == 0);
  rlimit low = was;
  low.rlim_cur = 16 + 64 + 7 * 6 + 5;  // room for 7 study processes
  BOOST_REQUIRE(::setrlimit(RLIMIT_NOFILE, &low) == 0);
  {
    threaded_server s(c);
    BOOST_REQUIRE(::setrlimit(RLIMIT_NOFILE, &was) == 0);  // the budget is taken at the start
    auto over = http(s.ep, "POST", "/v1/runs", R"({"study":"example","options":{"procs":5}})");
    BOOST_TEST(over.rfind("HTTP/1.1 422", 0) == 0u, over);
    BOOST_TEST(over.find("at most 4") != std::string::npos, over);
    // 4 processes go; 4 more would be beyond the 7 the descriptors allow.
    const std::string long_run =
        R"({"study":"example","selection":{"trials":2000},"options":{"procs":4,"concurrency":1}})";
    auto first = http(s.ep, "POST", "/v1/runs", long_run);
    BOOST_REQUIRE(first.rfind("HTTP/1.1 201", 0) == 0u);
    auto second = http(s.ep, "POST", "/v1/runs", long_run);
    BOOST_TEST(second.rfind("HTTP/1.1 429", 0) == 0u, second);
    BOOST_TEST(second.find("\"code\":\"too_many_processes\"") != std::string::npos, second);
    auto id = boost::json::parse(first.substr(first.find("\r\n\r\n") + 4)).at("run_id");
    http(s.ep, "POST", "/v1/runs/" + std::string(id.as_string()) + "/cancel");
  }
}

BOOST_AUTO_TEST_CASE(concurrent_catalog_requests_start_the_study_once) {
  char tmpl[] = "/tmp/mira-serve-starts-XXXXXX";
  std::string starts = std::string(::mkdtemp(tmpl)) + "/starts";
  auto c = runs_config("echo started >> " + starts + "; exec " MIRA_EXAMPLE_STUDY);
  threaded_server s(c);
  asio::io_context io;
  std::vector<tcp::socket> clients;
  const std::string req =
      "GET /v1/studies/example/catalog HTTP/1.1\r\nHost: localhost\r\n"
      "Connection: close\r\n\r\n";
  for (int i = 0; i < 20; ++i) {  // all sent before any is read
    clients.emplace_back(io);
    clients.back().connect(s.ep);
    asio::write(clients.back(), asio::buffer(req));
  }
  for (auto& client : clients) {
    std::string out;
    char buf[65536];
    boost::system::error_code ec;
    while (!ec) out.append(buf, client.read_some(asio::buffer(buf), ec));
    BOOST_TEST(out.rfind("HTTP/1.1 200", 0) == 0u, out.substr(0, 300));
  }
  std::ifstream in(starts);
  std::string line;
  int started = 0;
  while (std::getline(in, line)) ++started;
  BOOST_TEST(started == 1);
  std::filesystem::remove_all(std::filesystem::path(starts).parent_path());
}

BOOST_AUTO_TEST_CASE(an_interrupted_runs_status_counts_its_saved_records) {
  auto c = runs_config("exec " MIRA_EXAMPLE_STUDY);
  auto id = saved_run(c.results_dir, 30, 50);  // 10 passed, 10 failed, 10 error of 50
  threaded_server s(c);
  auto answer = http(s.ep, "GET", "/v1/runs/" + id);
  BOOST_REQUIRE(answer.rfind("HTTP/1.1 200", 0) == 0u);
  auto status = boost::json::parse(answer.substr(answer.find("\r\n\r\n") + 4)).as_object();
  BOOST_TEST(status.at("state").as_string() == "interrupted");
  BOOST_TEST(status.at("done").to_number<int>() == 30);
  BOOST_TEST(status.at("total").to_number<int>() == 50);
  auto& counts = status.at("counts").as_object();
  BOOST_TEST(counts.at("passed").to_number<int>() == 10);
  BOOST_TEST(counts.at("failed").to_number<int>() == 10);
  BOOST_TEST(counts.at("error").to_number<int>() == 10);
  BOOST_TEST(status.at("resumable").as_bool());
}

BOOST_AUTO_TEST_CASE(an_interrupted_runs_records_are_counted_once_per_meta_json) {
  auto c = runs_config("exec " MIRA_EXAMPLE_STUDY);
  auto id = saved_run(c.results_dir, 30, 50);
  threaded_server s(c);
  auto done = [&] {
    auto answer = http(s.ep, "GET", "/v1/runs?limit=200");
    BOOST_REQUIRE(answer.rfind("HTTP/1.1 200", 0) == 0u);
    auto page = boost::json::parse(answer.substr(answer.find("\r\n\r\n") + 4)).as_object();
    return page.at("runs").as_array().at(0).as_object().at("done").to_number<int>();
  };
  BOOST_TEST(done() == 30);
  // Its records gone, meta.json untouched: the counts kept are answered, nothing is read again.
  auto folder = std::filesystem::path(c.results_dir) / id;
  for (auto& e : std::filesystem::directory_iterator(folder))
    if (e.path().filename() != "meta.json") std::filesystem::remove_all(e.path());
  BOOST_TEST(done() == 30);
  // A new meta.json (a session began or ended): counted again.
  auto meta = folder / "meta.json";
  std::filesystem::last_write_time(
      meta, std::filesystem::last_write_time(meta) + std::chrono::seconds(1));
  BOOST_TEST(done() == 0);
}
