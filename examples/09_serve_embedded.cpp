// Example 9: the `mira serve` HTTP API embedded in a program's own io_context, beside the
// program's other work: here that work is a client on the same context that starts a run
// through the API, follows its event stream to the end, and then stops the server (which
// would also cancel, save and mark interrupted any run still going).
//
// Usage: example_09_serve_embedded STUDY_CMD [ARGS...]
//        Serves STUDY_CMD as the study "demo" on a free loopback port, results in a temporary
//        directory; prints the run's end event and exits 0 when the run ended "done".
#include <mira/serve/server.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace asio = boost::asio;
using asio::ip::tcp;

// One request on its own connection (Connection: close); everything the server answered.
asio::awaitable<std::string> http(tcp::endpoint ep, std::string request) {
  tcp::socket s(co_await asio::this_coro::executor);
  co_await s.async_connect(ep, asio::use_awaitable);
  co_await asio::async_write(s, asio::buffer(request), asio::use_awaitable);
  std::string in;
  char buf[4096];
  for (;;) {
    auto [ec, n] =
        co_await s.async_read_some(asio::buffer(buf), asio::as_tuple(asio::use_awaitable));
    in.append(buf, n);
    if (ec) co_return in;  // the end of the answer (or of the event stream)
  }
}

asio::awaitable<int> use_the_api(mira::serve::server& srv, tcp::endpoint ep) {
  std::string body = R"({"study":"demo","selection":{"evals":["arithmetic"]}})";
  auto created = co_await http(ep,
                               "POST /v1/runs HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"
                               "Content-Type: application/json\r\nContent-Length: " +
                                   std::to_string(body.size()) + "\r\n\r\n" + body);
  auto at = created.find("\"run_id\":\"");
  if (at == std::string::npos) {
    std::fprintf(stderr, "no run started:\n%s\n", created.c_str());
    co_await srv.stop();
    co_return 1;
  }
  auto id = created.substr(at + 10, created.find('"', at + 10) - at - 10);
  // The event stream ends after the run's "end" event.
  auto events =
      co_await http(ep, "GET /v1/runs/" + id + "/events HTTP/1.1\r\nHost: localhost\r\n\r\n");
  auto end = events.rfind("event: end\ndata: ");
  co_await srv.stop();
  if (end == std::string::npos) co_return 1;
  auto line = events.substr(end + 17, events.find('\n', end + 17) - end - 17);
  std::printf("run %s: %s\n", id.c_str(), line.c_str());
  co_return line.find("\"state\":\"done\"") != std::string::npos ? 0 : 1;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s STUDY_CMD [ARGS...]\n", argv[0]);
    return 2;
  }
  char results[] = "/tmp/mira-example-08-XXXXXX";
  if (!::mkdtemp(results)) return 3;

  asio::io_context ctx{1};  // the program's own context, run by this thread
  mira::serve::server_config config;
  config.port = 0;  // any free port
  config.studies.push_back({"demo", {argv + 1, argv + argc}});
  config.results_dir = results;
  mira::serve::server srv(ctx.get_executor(), config);
  auto ep = srv.start();
  if (!ep) {
    std::fprintf(stderr, "%s\n", ep.error().message().c_str());
    return 3;
  }
  int rc = 1;
  asio::co_spawn(ctx, use_the_api(srv, *ep), [&](std::exception_ptr e, int r) {
    if (!e) rc = r;
  });
  ctx.run();
  return rc;
}
