// Example 1: a tiny custom host. Runs one case with `co_await host.run(c)`, then one under a
// deadline: when the timer wins, the run is cancelled and the study is sent `cancel`.
//
// Usage: example_01_deadline STUDY_CMD [ARGS...]
//        (e.g. build/examples/example_study --slow-ms 5000)
// Exits 0 when greet/hi passed and the slow case hit its deadline.
#include <mira/host.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <cstdio>

namespace asio = boost::asio;
using namespace asio::experimental::awaitable_operators;

mira::protocol::run_params make_case(std::string eval, std::string sample) {
  mira::protocol::run_params p;
  p.eval = std::move(eval);
  p.sample = std::move(sample);
  p.target = "sim";
  return p;
}

asio::awaitable<int> demo(std::vector<std::string> argv) {
  auto ex = co_await asio::this_coro::executor;
  mira::study_command cmd;
  cmd.argv = std::move(argv);
  auto host = mira::host_handle::spawn(ex, cmd);
  if (!host) {
    std::fprintf(stderr, "%s\n", host.error().message().c_str());
    co_return 1;
  }
  auto init = co_await host->initialize();
  if (!init) {
    std::fprintf(stderr, "%s\n", init.error().message().c_str());
    co_return 1;
  }

  // 1. One case.
  auto greet = co_await host->run(make_case("greet", "hi"));
  std::printf("greet/hi: %s\n",
              greet ? (greet->passed ? "passed" : "failed") : greet.error().message().c_str());

  // 2. A deadline: whichever finishes first wins; the loser is cancelled.
  asio::steady_timer deadline(ex, std::chrono::milliseconds(100));
  auto raced = co_await (host->run(make_case("slow", "long-task")) ||
                         deadline.async_wait(asio::use_awaitable));
  std::printf("slow/long-task: %s\n", raced.index() == 1 ? "timed out, cancel sent" : "finished");

  co_await host->shutdown();
  co_return greet && greet->passed&& raced.index() == 1 ? 0 : 1;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s STUDY_CMD [ARGS...]\n", argv[0]);
    return 2;
  }
  asio::io_context ctx;
  int rc = 1;
  asio::co_spawn(ctx, demo({argv + 1, argv + argc}), [&](std::exception_ptr e, int r) {
    if (!e) rc = r;
  });
  ctx.run();
  return rc;
}
