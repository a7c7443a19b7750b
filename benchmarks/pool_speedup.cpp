// What a pool of study processes buys, side by side with one process.
//
//   pool_speedup [-P 1,2,4,8,16] -- STUDY_CMD [ARGS...]
//     Every listed case through run_plan over a pool of P processes, -j 2P and at most 2 in
//     flight per process, for each P: the run's seconds, the speedup over the first P, the
//     speedup against the ideal (P / first P), and the host's resident memory per process
//     (the growth from starting the pool, over P). Meant for a study that answers one request
//     at a time (test/studies/py_study.py --sequential --run-ms 100 --samples 400).
//
//   pool_speedup --memory P [-n N] -- STUDY_CMD [ARGS...]
//     The host's resident memory per process of a pool of P, started and after N requests.
//
//   pool_speedup --echo [-n N] [-c C] [-r ROUNDS] -- STUDY_CMD [ARGS...]
//     N `run` requests with C in flight through one host_handle, a pool of 1, a pool of 2 and
//     two host_handles without a pool (half the callers on each; benchmarks/echo_study answers
//     at once): cases/s of each, best of ROUNDS, and the median of the rounds' paired ratios
//     against the host_handle.
#include "bench_util.hpp"

#include <mira/pool.hpp>
#include <mira/schedule/run_plan.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

namespace asio = boost::asio;

namespace {

mira::pool_options quiet(std::size_t procs, std::size_t cap) {
  mira::pool_options o;
  o.processes = procs;
  o.max_in_flight_per_process = cap;
  o.host_options_for = [](std::size_t) {
    mira::host_options h;
    h.on_stderr_line = [](std::string_view) {};
    return h;
  };
  return o;
}

// Runs `body` on a fresh io_context until everything it started has ended (its processes
// included: the context runs while they do).
void run_io(std::function<asio::awaitable<void>(asio::io_context&)> body) {
  asio::io_context ctx;
  asio::co_spawn(ctx, body(ctx), [](std::exception_ptr ep) {
    if (ep) std::rethrow_exception(ep);
  });
  ctx.run();
}

asio::awaitable<mira::study_pool> start(asio::io_context& ctx,
                                        const std::vector<std::string>& study,
                                        mira::pool_options o) {
  mira::study_command cmd;
  cmd.argv = study;
  auto pool = co_await mira::study_pool::start(ctx.get_executor(), cmd, std::move(o));
  if (!pool) {
    std::fprintf(stderr, "cannot start the pool: %s\n", pool.error().message().c_str());
    std::exit(1);
  }
  co_return std::move(*pool);
}

int speedup(const std::vector<std::string>& study, const std::vector<std::size_t>& procs) {
  double first_secs = 0;
  std::printf("%4s %4s %8s %9s %7s %10s %18s\n", "P", "j", "seconds", "speedup", "ideal",
              "of ideal", "host KiB/process");
  for (auto p : procs) {
    double secs = 0, rss0 = 0, rss1 = 0;
    run_io([&](asio::io_context& ctx) -> asio::awaitable<void> {
      rss0 = bench::rss_mib();
      auto pool = co_await start(ctx, study, quiet(p, 2));
      rss1 = bench::rss_mib();
      auto list = co_await pool.list_all();
      if (!list) {
        std::fprintf(stderr, "list failed: %s\n", list.error().message().c_str());
        std::exit(1);
      }
      auto plan = mira::plan::make_plan(*list, {});
      if (!plan) std::exit(1);
      mira::schedule::run_policy policy;
      policy.concurrency.max_concurrent = 2 * p;
      auto report = co_await mira::schedule::run_plan(pool, *plan, policy);
      std::size_t failed = 0;
      for (auto& c : report.cases) failed += c.state != mira::schedule::case_state::passed;
      if (failed) std::fprintf(stderr, "pool_speedup: %zu cases did not pass\n", failed);
      secs = report.seconds;
      co_await pool.shutdown();
    });
    auto base = static_cast<double>(procs.front());
    if (first_secs == 0) first_secs = secs;
    double sp = first_secs / secs * base;  // speedup over one process, assuming the first scales
    double ideal = static_cast<double>(p);
    std::printf("%4zu %4zu %8.2f %9.2f %7.0f %9.0f%% %18.0f\n", p, 2 * p, secs, sp, ideal,
                100 * sp / ideal, (rss1 - rss0) * 1024 / static_cast<double>(p));
    std::fflush(stdout);
  }
  return 0;
}

// cases/s of N runs with C in flight through `conn` (a host_handle or a study_pool).
template <class Conn>
asio::awaitable<double> throughput(asio::io_context& ctx, Conn conn, mira::protocol::run_params p,
                                   std::size_t n, std::size_t c) {
  std::size_t next = 0, failures = 0, left = c;
  asio::steady_timer done(ctx, std::chrono::steady_clock::time_point::max());
  auto t0 = std::chrono::steady_clock::now();
  auto worker = [&]() -> asio::awaitable<void> {
    while (next < n) {
      ++next;
      auto [ec, r] = co_await conn.run(p, asio::as_tuple(asio::use_awaitable));
      if (ec || !r.passed) ++failures;
    }
    if (--left == 0) asio::post(ctx, [&] { done.cancel(); });
  };
  for (std::size_t i = 0; i < c; ++i) asio::co_spawn(ctx, worker(), asio::detached);
  co_await done.async_wait(asio::as_tuple(asio::use_awaitable));
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (failures) std::fprintf(stderr, "pool_speedup: %zu failed runs\n", failures);
  co_return static_cast<double>(n) / secs;
}

// Two host_handles without a pool: half the callers on each. What two study processes cost
// this machine by themselves, beside what the pool of 2 costs.
struct two_handles {
  mira::host_handle a, b;
  std::size_t turn = 0;
  template <class Token>
  auto run(mira::protocol::run_params p, Token&& token) {
    return (turn++ % 2 ? b : a).run(std::move(p), std::forward<Token>(token));
  }
};

int echo(const std::vector<std::string>& study, std::size_t n, std::size_t c, std::size_t rounds) {
  double best[4] = {0, 0, 0, 0};
  std::vector<double> ratio1, ratio2, ratio_two;
  for (std::size_t round = 0; round < rounds; ++round) {
    double now[4] = {0, 0, 0, 0};
    run_io([&](asio::io_context& ctx) -> asio::awaitable<void> {
      auto host = co_await bench::start_study(ctx.get_executor(), study);
      auto list = co_await host.list_all();
      if (!list || list->evals.empty()) std::exit(1);
      mira::protocol::run_params p;
      p.eval = list->evals[0].name;
      p.sample = list->evals[0].samples.at(0).id;
      p.target = list->evals[0].targets.at(0).label;
      now[0] = co_await throughput(ctx, host, p, n, c);
      co_await host.shutdown();
      for (std::size_t procs : {1, 2}) {
        auto pool = co_await start(ctx, study, quiet(procs, 0));
        now[procs] = co_await throughput(ctx, pool, p, n, c);
        co_await pool.shutdown();
      }
      auto first = co_await bench::start_study(ctx.get_executor(), study);
      auto second = co_await bench::start_study(ctx.get_executor(), study);
      two_handles two{first, second};  // g++ 12: no co_await inside a braced initializer
      now[3] = co_await throughput(ctx, two, p, n, c);
      co_await two.a.shutdown();
      co_await two.b.shutdown();
    });
    for (int i = 0; i < 4; ++i) best[i] = std::max(best[i], now[i]);
    ratio1.push_back(now[1] / now[0]);
    ratio2.push_back(now[2] / now[0]);
    ratio_two.push_back(now[3] / now[0]);
  }
  std::sort(ratio1.begin(), ratio1.end());
  std::sort(ratio2.begin(), ratio2.end());
  std::sort(ratio_two.begin(), ratio_two.end());
  std::printf("pool_speedup --echo n=%zu c=%zu rounds=%zu (best round of each)\n", n, c, rounds);
  std::printf("host_handle  cases_per_sec %.0f\n", best[0]);
  std::printf("pool P=1     cases_per_sec %.0f (median paired ratio to host_handle %.2f)\n",
              best[1], ratio1[ratio1.size() / 2]);
  std::printf("pool P=2     cases_per_sec %.0f (median paired ratio to host_handle %.2f)\n",
              best[2], ratio2[ratio2.size() / 2]);
  std::printf("2 handles    cases_per_sec %.0f (median paired ratio to host_handle %.2f)\n",
              best[3], ratio_two[ratio_two.size() / 2]);
  return 0;
}

// The host's resident memory per pooled process: a pool of P started (after a pool of 1 that
// pays the one-time costs), then N requests through it so every connection's buffers are used.
int memory(const std::vector<std::string>& study, std::size_t procs, std::size_t n) {
  run_io([&](asio::io_context& ctx) -> asio::awaitable<void> {
    auto warm = co_await start(ctx, study, quiet(1, 0));
    auto list = co_await warm.list_all();
    if (!list || list->evals.empty()) std::exit(1);
    mira::protocol::run_params p;
    p.eval = list->evals[0].name;
    p.sample = list->evals[0].samples.at(0).id;
    p.target = list->evals[0].targets.at(0).label;
    co_await throughput(ctx, warm, p, n, 64);
    double rss0 = bench::rss_mib();
    auto pool = co_await start(ctx, study, quiet(procs, 0));
    double rss1 = bench::rss_mib();
    co_await throughput(ctx, pool, p, n, 64);
    double rss2 = bench::rss_mib();
    std::printf(
        "pool_speedup --memory P=%zu: host resident KiB per process %.0f started, %.0f "
        "after %zu requests at c=64\n",
        procs, (rss1 - rss0) * 1024 / static_cast<double>(procs),
        (rss2 - rss0) * 1024 / static_cast<double>(procs), n);
    co_await pool.shutdown();
    co_await warm.shutdown();
  });
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  auto args = bench::parse_args(argc, argv, {"--echo"});
  if (args.has("--memory") && !args.study.empty())
    return memory(args.study, args.number("--memory", 64), args.number("-n", 100000));
  if (args.study.empty()) {
    std::fprintf(stderr,
                 "usage: pool_speedup [-P 1,2,4,8,16] -- STUDY_CMD [ARGS...]\n"
                 "       pool_speedup --echo [-n N] [-c C] [-r ROUNDS] -- STUDY_CMD [ARGS...]\n"
                 "       pool_speedup --memory P [-n N] -- STUDY_CMD [ARGS...]\n");
    return 2;
  }
  if (args.has("--echo"))
    return echo(args.study, args.number("-n", 200000), args.number("-c", 64), args.number("-r", 3));
  std::vector<std::size_t> procs;
  std::string list = args.options.count("-P") ? args.options["-P"] : "1,2,4,8,16";
  for (std::size_t start = 0; start < list.size();) {
    auto comma = list.find(',', start);
    auto n = std::strtoull(list.substr(start, comma - start).c_str(), nullptr, 10);
    if (n > 0) procs.push_back(n);
    start = comma == std::string::npos ? list.size() : comma + 1;
  }
  if (procs.empty()) return 2;
  return speedup(args.study, procs);
}
