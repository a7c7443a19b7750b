// Example 3: fail fast with a parallel_group. Two cases run at once; the first failure cancels
// its sibling, and the study is sent `cancel` for it. Over the tl::expected layer the group's
// built-in wait_for_one_error cannot see the error, so a small condition looks inside.
//
// Usage: example_03_fail_fast_group STUDY_CMD [ARGS...]
//        (e.g. build/examples/example_study --slow-ms 5000)
// Exits 0 when the unknown sample failed and the slow sibling was cancelled.
#include <mira/host.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/experimental/parallel_group.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <cstdio>

namespace asio = boost::asio;
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

  // The unknown sample fails at once and the slow sibling is cancelled.
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
  bool slow_cancelled = !results[0] && results[0].error().code == asio::error::operation_aborted;
  co_return slow_cancelled && !results[1] ? 0 : 1;
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
