// Example 3: fail fast with a parallel_group. Two cases run at once; the first failure cancels
// its sibling, and the study is sent `cancel` for it. With the `mira::as_expected(token)`
// adapter an operation completes with `(error_code, tl::expected<run_result, error>)`: the
// leading code is what the group's built-in wait_for_one_error looks at, the expected keeps the
// diagnostics, and no coroutine is spawned per case.
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
  using op_type = decltype(host->run(make_case("", ""), mira::as_expected(asio::deferred)));
  std::vector<op_type> ops;
  ops.push_back(host->run(make_case("slow", "long-task"), mira::as_expected(asio::deferred)));
  ops.push_back(host->run(make_case("greet", "no-such-sample"), mira::as_expected(asio::deferred)));
  auto [order, codes, results] =
      co_await asio::experimental::make_parallel_group(std::move(ops))
          .async_wait(asio::experimental::wait_for_one_error(), asio::use_awaitable);
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
