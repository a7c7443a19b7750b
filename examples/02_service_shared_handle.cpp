// Example 2: a service. One host_handle, shared by many coroutines on several threads, each case
// with its own deadline. The handle is created before the threads start (spawn forks), then
// copied into every coroutine; each coroutine runs on its own strand of the shared io_context.
//
// Usage: example_02_service_shared_handle STUDY_CMD [ARGS...]
//        (e.g. build/examples/example_study --slow-ms 5000)
// Runs every available case of the greet, arithmetic and slow evals at once: slow cases get a
// 100 ms deadline, the others 10 s. Exits 0 when every slow case timed out (and was cancelled
// at the study) and every other case finished.
#include <mira/host.hpp>
#include <mira/plan/plan.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <atomic>
#include <cstdio>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

namespace asio = boost::asio;
using namespace asio::experimental::awaitable_operators;
using namespace std::chrono_literals;

struct tally {
  std::atomic<int> finished{0}, timed_out{0}, unexpected{0}, pending{0};
  std::mutex mutex;
  std::set<std::thread::id> threads;  // where the cases' coroutines ran
};

// One case, as a request handler of a service would run it: its own deadline, its own strand.
asio::awaitable<void> serve_case(mira::host_handle host, mira::protocol::run_params p,
                                 std::chrono::milliseconds deadline, tally* t) {
  asio::steady_timer timer(co_await asio::this_coro::executor, deadline);
  auto r = co_await (host.run(p) || timer.async_wait(asio::use_awaitable));
  {
    std::lock_guard lock(t->mutex);
    t->threads.insert(std::this_thread::get_id());
  }
  bool slow = p.eval == "slow";
  if (r.index() == 1) {
    ++(slow ? t->timed_out : t->unexpected);
  } else {
    auto& outcome = std::get<0>(r);
    if (!outcome)
      std::fprintf(stderr, "%s: %s\n", p.eval.c_str(), outcome.error().message().c_str());
    ++(outcome && !slow ? t->finished : t->unexpected);
  }
  if (--t->pending == 0) co_await host.shutdown();  // the last case closes the service
}

// Lists the catalogue, plans the cases and starts one coroutine per case.
asio::awaitable<void> start(mira::host_handle host, tally* t) {
  auto init = co_await host.initialize();
  if (!init) co_return (void) std::fprintf(stderr, "%s\n", init.error().message().c_str());
  auto list = co_await host.list_all();
  if (!list) co_return (void) std::fprintf(stderr, "%s\n", list.error().message().c_str());
  mira::plan::selection sel;
  sel.evals = {"greet", "arithmetic", "slow"};
  auto plan = mira::plan::make_plan(*list, sel);
  if (!plan) co_return (void) std::fprintf(stderr, "%s\n", plan.error().message().c_str());
  auto ex = co_await asio::this_coro::executor;
  std::vector<mira::protocol::run_params> cases;
  for (const auto& c : plan->cases)
    if (c.available) cases.push_back(c.params);
  t->pending = static_cast<int>(cases.size());
  for (auto& p : cases) {
    auto deadline = p.eval == "slow" ? 100ms : 10s;
    asio::co_spawn(asio::make_strand(ex), serve_case(host, p, deadline, t), asio::detached);
  }
  std::printf("%zu cases started\n", cases.size());
}

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s STUDY_CMD [ARGS...]\n", argv[0]);
    return 2;
  }
  asio::io_context ctx;
  mira::study_command cmd;
  cmd.argv = {argv + 1, argv + argc};
  // Before any thread runs the io_context: spawn forks.
  auto host = mira::host_handle::spawn(ctx.get_executor(), cmd);
  if (!host) {
    std::fprintf(stderr, "%s\n", host.error().message().c_str());
    return 1;
  }
  tally t;
  // The coroutines hold their copies of the handle; the last one gone ends the study.
  asio::co_spawn(ctx, start(std::move(*host), &t), asio::detached);

  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) threads.emplace_back([&ctx] { ctx.run(); });
  for (auto& th : threads) th.join();

  std::printf("finished: %d, timed out (cancel sent): %d, unexpected: %d, on %zu threads\n",
              t.finished.load(), t.timed_out.load(), t.unexpected.load(), t.threads.size());
  return t.finished > 0 && t.timed_out > 0 && t.unexpected == 0 ? 0 : 1;
}
