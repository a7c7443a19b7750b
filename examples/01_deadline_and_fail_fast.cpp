// Example 1: a tiny custom host. Runs one case with `co_await host.run(c)`, one under a
// deadline (the study is sent `cancel` when the timer wins), and a fail-fast group in which the
// first failure cancels its siblings.
//
// Usage: example_01_deadline_and_fail_fast STUDY_CMD [ARGS...]
//        (e.g. build/examples/example_study --slow-ms 5000)
#include <mira/host.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/experimental/parallel_group.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <cstdio>

namespace asio = boost::asio;
using namespace asio::experimental::awaitable_operators;
using run_outcome = tl::expected<mira::protocol::run_result, mira::error>;

// A group condition for awaitables that return tl::expected: stop at the first error value.
struct first_failure {
  asio::cancellation_type_t operator()(const std::exception_ptr& e, const run_outcome& r) const {
    return e || !r ? asio::cancellation_type::all : asio::cancellation_type::none;
  }
};

mira::protocol::run_params make_case(std::string eval, std::string sample) {
  mira::protocol::run_params p;
  p.eval = std::move(eval);
  p.sample = std::move(sample);
  p.target = "sim";
  return p;
}

asio::awaitable<void> demo(std::vector<std::string> argv) {
  auto ex = co_await asio::this_coro::executor;
  mira::study_command cmd;
  cmd.argv = std::move(argv);
  auto host = mira::host_handle::spawn(ex, cmd);
  if (!host) {
    std::fprintf(stderr, "%s\n", host.error().message().c_str());
    co_return;
  }
  auto init = co_await host->initialize();
  if (!init) co_return (void) std::fprintf(stderr, "%s\n", init.error().message().c_str());

  // 1. One case.
  auto greet = co_await host->run(make_case("greet", "hi"));
  std::printf("greet/hi: %s\n",
              greet ? (greet->passed ? "passed" : "failed") : greet.error().message().c_str());

  // 2. A deadline: whichever finishes first wins; the loser is cancelled.
  asio::steady_timer deadline(ex, std::chrono::milliseconds(100));
  auto raced = co_await (host->run(make_case("slow", "long-task")) ||
                         deadline.async_wait(asio::use_awaitable));
  std::printf("slow/long-task: %s\n", raced.index() == 1 ? "timed out, cancel sent" : "finished");

  // 3. Fail fast: the unknown sample fails at once and the slow sibling is cancelled.
  using op_type = decltype(asio::co_spawn(ex, host->run(make_case("", "")), asio::deferred));
  std::vector<op_type> ops;
  ops.push_back(asio::co_spawn(ex, host->run(make_case("slow", "long-task")), asio::deferred));
  ops.push_back(
      asio::co_spawn(ex, host->run(make_case("greet", "no-such-sample")), asio::deferred));
  auto [order, exceptions, results] =
      co_await asio::experimental::make_parallel_group(std::move(ops))
          .async_wait(first_failure{}, asio::use_awaitable);
  for (std::size_t i = 0; i < results.size(); ++i)
    std::printf("group case %zu: %s\n", i,
                results[i] ? "passed" : results[i].error().message().c_str());

  co_await host->shutdown();
}

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s STUDY_CMD [ARGS...]\n", argv[0]);
    return 2;
  }
  asio::io_context ctx;
  asio::co_spawn(ctx, demo({argv + 1, argv + argc}), asio::detached);
  ctx.run();
}
