// Example 5: a custom host over a socket. host_handle::connect speaks the protocol over one
// full-duplex stream, with no process to manage: here a local socket pair joins it to a small
// study written in this file and served on the same io_context. A study reached over TCP or a
// Unix socket path is the same code with a connected socket. shutdown() half-closes the
// socket's write side; the study answers what it holds and closes its end.
//
// Usage: example_05_custom_host_socket
// Exits 0 when the three cases sent at once come back passed and the study saw the host close.
#include <mira/host.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/local/connect_pair.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <cstdio>
#include <string>

namespace asio = boost::asio;
namespace json = boost::json;
using namespace asio::experimental::awaitable_operators;
using socket_t = asio::local::stream_protocol::socket;

// The study's side: one request per line in, one answer per line out, until the host closes.
asio::awaitable<void> serve_study(socket_t s, bool* saw_close) {
  std::string buf;
  for (;;) {
    auto [ec, n] = co_await asio::async_read_until(s, asio::dynamic_buffer(buf), '\n',
                                                   asio::as_tuple(asio::use_awaitable));
    if (ec) break;  // the host closed its end: the study is done
    auto req = json::parse(std::string_view(buf).substr(0, n - 1)).as_object();
    buf.erase(0, n);
    json::object result;
    if (req.at("method") == "initialize") {
      result = {{"protocol_version", "1.1"},
                {"study", "socket-study"},
                {"evals", 1},
                {"capabilities", json::array{}}};
    } else if (req.at("method") == "run") {
      auto& p = req.at("params").as_object();
      result = {{"eval", p.at("eval")},
                {"sample", p.at("sample")},
                {"target", p.at("target")},
                {"passed", true},
                {"aggregate", 1.0},
                {"scores", json::array{}},
                {"transcript", json::object{{"final_response", "ok"}}}};
    } else {
      continue;
    }
    json::object answer{{"id", req.at("id")}, {"result", std::move(result)}};
    std::string line = json::serialize(answer) + "\n";
    co_await asio::async_write(s, asio::buffer(line), asio::use_awaitable);
  }
  *saw_close = true;
  s.close();  // the host reads end of stream: the study has exited
}

mira::protocol::run_params make_case(std::string sample) {
  mira::protocol::run_params p;
  p.eval = "echo";
  p.sample = std::move(sample);
  p.target = "sim";
  return p;
}

asio::awaitable<int> host_side(socket_t to_study) {
  auto host = mira::host_handle::connect(std::move(to_study));
  auto init = co_await host.initialize();
  if (!init) {
    std::fprintf(stderr, "%s\n", init.error().message().c_str());
    co_return 1;
  }
  std::printf("connected to %s (protocol %s)\n", init->study.c_str(),
              init->protocol_version.c_str());
  // Three requests in flight on the one connection; answers are routed by id.
  auto [a, b, c] =
      co_await (host.run(make_case("a")) && host.run(make_case("b")) && host.run(make_case("c")));
  int passed = 0;
  for (auto* r : {&a, &b, &c}) {
    std::printf("echo/%s@sim: %s\n", (*r) ? (*r)->sample.c_str() : "?",
                *r ? ((*r)->passed ? "passed" : "failed") : (*r).error().message().c_str());
    passed += *r && (*r)->passed;
  }
  // Half-closes the socket and waits for the study's end of stream: "no process".
  auto st = co_await host.shutdown();
  std::printf("shutdown: %s\n", st ? st->to_string().c_str() : st.error().message().c_str());
  co_return passed == 3 ? 0 : 1;
}

int main() {
  asio::io_context ctx;
  socket_t host_end(ctx), study_end(ctx);
  asio::local::connect_pair(host_end, study_end);

  bool saw_close = false;
  asio::co_spawn(ctx, serve_study(std::move(study_end), &saw_close), asio::detached);
  int rc = 1;
  asio::co_spawn(ctx, host_side(std::move(host_end)), [&](std::exception_ptr e, int r) {
    if (!e) rc = r;
  });
  ctx.run();
  std::printf("study saw the host close: %s\n", saw_close ? "yes" : "no");
  return rc == 0 && saw_close ? 0 : 1;
}
