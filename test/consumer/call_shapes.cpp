// Each call shape of a host operation, written as a user writes it, compiled and run against the
// example study for a host_handle and a study_pool alike (the same template serves both):
//   1. `co_await conn.run(c)`: the default token, tl::expected<run_result, error>, never throws;
//   2. `co_await conn.run(c, asio::use_awaitable)`: the result, or a thrown system_error;
//   3. `conn.run(c, [](error_code, run_result) {...})`: a callback;
//   4. `conn.run(c, mira::as_expected(asio::deferred))` in a parallel group waiting with
//      wait_for_one_error: the failing case stops its slow sibling, diagnostics kept;
//   5. `mira::HostHandle` names the handle.
// Usage: consumer_call_shapes STUDY_CMD [ARGS...] (the example study with --slow-ms 60000, so
// that its `slow` case outlasts the test unless it is cancelled). Exits 0 when every shape held.
#include <mira/host.hpp>
#include <mira/pool.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/experimental/parallel_group.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/system_error.hpp>

#include <cstdio>
#include <string>
#include <type_traits>
#include <vector>

namespace asio = boost::asio;

namespace {

mira::protocol::run_params make_case(std::string eval, std::string sample) {
  mira::protocol::run_params p;
  p.eval = std::move(eval);
  p.sample = std::move(sample);
  p.target = "sim";
  return p;
}

int failures = 0;

void check(bool ok, const char* who, const char* shape) {
  std::printf("%s: %s: %s\n", who, shape, ok ? "ok" : "FAILED");
  if (!ok) ++failures;
}

template <class Conn>
asio::awaitable<void> default_token(Conn& conn, const char* who) {
  auto good = make_case("greet", "hi");
  auto bad = make_case("greet", "no-such-sample");
  tl::expected<mira::protocol::run_result, mira::error> passed = co_await conn.run(good);
  tl::expected<mira::protocol::run_result, mira::error> failed = co_await conn.run(bad);
  check(passed && passed->passed && !failed && failed.error().diag.study_error, who,
        "co_await run(c)");
}

template <class Conn>
asio::awaitable<void> use_awaitable(Conn& conn, const char* who) {
  auto good = make_case("greet", "hi");
  auto bad = make_case("greet", "no-such-sample");
  mira::protocol::run_result passed = co_await conn.run(good, asio::use_awaitable);
  bool threw = false;
  try {
    co_await conn.run(bad, asio::use_awaitable);
  } catch (const boost::system::system_error& e) {
    threw = e.code().category() == mira::category();
  }
  check(passed.passed && threw, who, "co_await run(c, use_awaitable)");
}

template <class Conn>
asio::awaitable<void> callback(Conn& conn, const char* who) {
  // The callback never runs inside run(), and this context has one thread: checking `called`
  // before waiting cannot miss it.
  asio::steady_timer called_signal(co_await asio::this_coro::executor,
                                   asio::steady_timer::time_point::max());
  bool called = false, passed = false;
  conn.run(make_case("greet", "hi"), [&](mira::error_code ec, mira::protocol::run_result r) {
    called = true;
    passed = !ec && r.passed;
    called_signal.cancel();
  });
  if (!called) co_await called_signal.async_wait(asio::as_tuple(asio::use_awaitable));
  check(passed, who, "run(c, callback)");
}

template <class Conn>
asio::awaitable<void> fail_fast_group(Conn& conn, const char* who) {
  using op = decltype(conn.run(make_case("", ""), mira::as_expected(asio::deferred)));
  std::vector<op> ops;
  ops.push_back(conn.run(make_case("slow", "long-task"), mira::as_expected(asio::deferred)));
  ops.push_back(conn.run(make_case("greet", "no-such-sample"), mira::as_expected(asio::deferred)));
  auto group = asio::experimental::make_parallel_group(std::move(ops));
  auto [order, codes, results] = co_await std::move(group).async_wait(
      asio::experimental::wait_for_one_error(), asio::use_awaitable);
  bool failed_first = order[0] == 1u && !results[1] && results[1].error().diag.study_error;
  bool slow_cancelled = codes[0] == asio::error::operation_aborted && !results[0];
  check(failed_first && slow_cancelled, who, "run(c, as_expected(deferred)) in a parallel group");
}

template <class Conn>
asio::awaitable<void> every_shape(Conn& conn, const char* who) {
  co_await default_token(conn, who);
  co_await use_awaitable(conn, who);
  co_await callback(conn, who);
  co_await fail_fast_group(conn, who);
}

asio::awaitable<void> with_host(mira::study_command cmd) {
  static_assert(std::is_same_v<mira::HostHandle, mira::host_handle>);
  // No co_await in the full-expression that makes the default host_options (g++ 12).
  auto ex = co_await asio::this_coro::executor;
  auto spawned = mira::HostHandle::spawn(ex, cmd);
  if (!spawned) co_return check(false, "host", spawned.error().message().c_str());
  mira::HostHandle host = *spawned;
  auto init = co_await host.initialize();
  if (!init) co_return check(false, "host", init.error().message().c_str());
  co_await every_shape(host, "host");
  tl::expected<mira::exit_status, mira::error> ended = co_await host.shutdown();
  check(ended.has_value(), "host", "co_await shutdown()");
}

asio::awaitable<void> with_pool(mira::study_command cmd) {
  mira::pool_options o;
  o.processes = 2;
  auto ex = co_await asio::this_coro::executor;
  auto starting = mira::study_pool::start(ex, cmd, o);
  auto started = co_await std::move(starting);
  if (!started) co_return check(false, "pool", started.error().message().c_str());
  co_await every_shape(*started, "pool");
  tl::expected<void, mira::error> ended = co_await started->shutdown();
  check(ended.has_value(), "pool", "co_await shutdown()");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s STUDY_CMD [ARGS...]\n", argv[0]);
    return 2;
  }
  mira::study_command cmd;
  cmd.argv.assign(argv + 1, argv + argc);
  asio::io_context ctx;
  bool finished = false;
  asio::co_spawn(
      ctx,
      [cmd]() -> asio::awaitable<void> {
        co_await with_host(cmd);
        co_await with_pool(cmd);
      },
      [&](std::exception_ptr e) { finished = !e; });
  ctx.run();
  if (!finished) ++failures;
  return failures == 0 ? 0 : 1;
}
