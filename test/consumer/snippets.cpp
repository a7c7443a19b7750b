// Checks that the documentation's code compiles as a user would write it: every C++ snippet of
// README.md's "Using the library", and each code block of docs/host-api.md, docs/session.md,
// docs/pools.md and docs/cancellation.md that fills an option struct (study_command,
// host_options, request_options, session_options, save_options, pool_options) or uses
// fail_when, copied as close to verbatim as compiles, each wrapped in a function that gives it
// the names it uses. Built with `g++ -std=c++20 -Wall -Wextra -Werror` against the installed
// headers, so a snippet that stops compiling, or that warns (e.g.
// -Wmissing-field-initializers on a designated initializer), fails the build. Nothing here is
// run: main returns 0. When a doc's snippet changes, change its copy here.
#include <mira/fail_when.hpp>
#include <mira/host.hpp>
#include <mira/pool.hpp>
#include <mira/schedule/run_plan.hpp>
#include <mira/session/session.hpp>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/experimental/parallel_group.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
#include <cstdint>
#include <iostream>
#include <string>
#include <vector>

// README.md, "Using the library": its file-level lines.
namespace asio = boost::asio;
using namespace asio::experimental::awaitable_operators;  // ||

namespace readme {

// README.md, "Using the library".
asio::awaitable<void> demo() {
  auto ex = co_await asio::this_coro::executor;
  auto host = mira::host_handle::spawn(ex, mira::study_command{{"./my_study"}});
  if (!host) co_return;                     // host.error().message() says why
  auto init = co_await host->initialize();  // refuses a study of another protocol major
  if (!init) co_return;                     // init.error().message() says why
  mira::protocol::run_params c;             // a derived struct: no designated initializers
  c.eval = "greet";
  c.sample = "hi";
  c.target = "sim";
  asio::steady_timer deadline(ex, std::chrono::seconds(30));
  auto r = co_await (host->run(c) || deadline.async_wait(asio::use_awaitable));
  // r.index() == 1: timed out; the study was sent `cancel` for that request.
  co_await host->shutdown();
}

}  // namespace readme

namespace host_api {

// docs/host-api.md, "Starting".
void starting(asio::any_io_executor executor) {
  mira::host_options options{.host_name = "my-service", .stderr_tail_lines = 50};  // see below
  auto host = mira::host_handle::spawn(
      executor,
      mira::study_command{
          .argv = {"python3", "study.py"},    // exact argv, no shell; PATH lookup for argv[0]
          .working_directory = "/srv/evals",  // optional
          .environment = std::vector<std::string>{"KEY=value"}},  // optional: replaces the host's
      options);
  if (!host) std::cerr << host.error().message();  // errc::spawn_failed, names the command
}

// docs/host-api.md, the paragraph after "Starting": members left out take their defaults.
mira::study_command defaults() {
  return mira::study_command{.argv = {"./study"}};
}

// docs/host-api.md, "Operations": request_options.
void request_options_block(mira::host_handle host, mira::protocol::run_params c) {
  auto handler = [](mira::error_code, mira::protocol::run_result) {};
  std::int64_t id = 0;
  mira::request_options o;
  o.request_id = &id;
  o.deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  host.run(c, o, handler);  // id is known here
}

// docs/host-api.md, "Operations": five ways to call the same operation.
asio::awaitable<void> call_shapes(mira::host_handle host, mira::study_pool pool,
                                  mira::protocol::run_params c) {
  // The default token (mira::use_expected): in a coroutine, tl::expected, never a throw.
  tl::expected<mira::protocol::run_result, mira::error> r = co_await host.run(c);
  // asio::use_awaitable: the result, or a boost::system::system_error thrown.
  mira::protocol::run_result passed = co_await host.run(c, asio::use_awaitable);
  // A callback (or deferred, as_tuple(...), use_future, bind_cancellation_slot(...)).
  host.run(c, [](mira::error_code ec, mira::protocol::run_result r) {
    if (!ec) std::cout << r.passed;
  });
  // mira::as_expected(token): void(error_code, tl::expected<T, mira::error>), see below.
  auto op = host.run(c, mira::as_expected(asio::deferred));
  // The same on a pool.
  auto pooled = co_await pool.run(c);
}

// docs/host-api.md, "Operations": as_expected in a parallel_group.
asio::awaitable<void> fail_fast_group(mira::host_handle host, mira::protocol::run_params c,
                                      std::vector<mira::protocol::run_params> cases) {
  using op = decltype(host.run(c, mira::as_expected(asio::deferred)));
  std::vector<op> ops;
  for (auto& c : cases) ops.push_back(host.run(c, mira::as_expected(asio::deferred)));
  auto [order, codes, results] =
      co_await asio::experimental::make_parallel_group(std::move(ops))
          .async_wait(asio::experimental::wait_for_one_error(), asio::use_awaitable);
}

// docs/host-api.md, "Operations": the same group with fail_when.
asio::awaitable<void> fail_when_group(mira::host_handle host, mira::protocol::run_params c,
                                      std::vector<mira::protocol::run_params> cases) {
  using op = decltype(host.run(
      c, mira::as_expected(mira::fail_when(mira::infra_failure, asio::deferred))));
  std::vector<op> ops;
  for (auto& c : cases)
    ops.push_back(
        host.run(c, mira::as_expected(mira::fail_when(mira::infra_failure, asio::deferred))));
  auto [order, codes, results] =
      co_await asio::experimental::make_parallel_group(std::move(ops))
          .async_wait(asio::experimental::wait_for_one_error(), asio::use_awaitable);
  // codes[i] == mira::errc::rejected_outcome: results[i] holds the result that stopped the group
}

// docs/host-api.md, "Operations": errors as values with the default token.
asio::awaitable<void> coroutine_layer(mira::host_handle host, mira::protocol::run_params c) {
  tl::expected<mira::protocol::run_result, mira::error> r = co_await host.run(c);
  if (!r) {
    if (mira::is_retryable(r.error().code)) { /* the study flagged it retryable */
    }
    if (r.error().diag.study_error) { /* its code, message, data */
    }
    if (r.error().diag.exit) { /* the study died: exit code or signal, stderr_tail */
    }
    std::cerr << r.error().message();  // one line with all of it
  }
}

}  // namespace host_api

namespace cancellation {

// docs/cancellation.md, "Two meanings of fail-fast".
asio::awaitable<void> fail_when_pair(mira::host_handle host, mira::protocol::run_params a,
                                     mira::protocol::run_params b) {
  co_await asio::experimental::make_parallel_group(
      host.run(a, mira::as_expected(mira::fail_when(mira::infra_failure, asio::deferred))),
      host.run(b, mira::as_expected(mira::fail_when(mira::infra_failure, asio::deferred))))
      .async_wait(asio::experimental::wait_for_one_error(), asio::use_awaitable);
}

}  // namespace cancellation

namespace session {

// docs/session.md, the opening example (examples/06_save_and_resume_a_run.cpp).
asio::awaitable<void> opening(std::string run_id) {
  mira::session_options o;
  o.study.command.argv = {"python3", "study.py"};
  o.save.emplace();
  o.save->results_dir = "results";
  o.save->resume = run_id;  // empty: a new run
  auto done = co_await mira::run_session(std::move(o));
  if (!done)
    std::cerr << done.error().message();  // typed: done.error().code
  else
    std::cout << done->run_id << ": " << done->summary.count(mira::schedule::case_state::passed);
}

// docs/session.md, "Hooks".
asio::awaitable<void> hooks() {
  mira::session_options o;
  o.study.command.argv = {"python3", "study.py"};
  o.save.emplace();
  o.save->results_dir = "results";
  const mira::plan::plan* plan = nullptr;  // set once the session is open
  o.hooks.on_case = [&plan](std::size_t index, const mira::schedule::case_record& record) {
    std::cout << plan->cases.key(index) << ": " << mira::schedule::to_string(record.state) << '\n';
  };
  o.hooks.on_log = [](const mira::log_record& r) {  // the service's own logger in real code
    std::clog << mira::to_string(r.level) << ": " << r.message << '\n';
  };
  auto s = co_await mira::session::open(std::move(o));
  if (!s) co_return;
  plan = &s->plan();
  auto outcome = co_await s->run();
}

// docs/session.md, "What it answers": telling the causes apart.
asio::awaitable<void> errors(mira::session_options o) {
  auto done = co_await mira::run_session(std::move(o));
  if (!done) {
    const mira::session_error& e = done.error();
    if (e.code == mira::errc::spawn_failed) {
      std::cerr << "check the study command: " << e.message() << '\n';
    } else if (e.code == mira::errc::study_exited) {
      std::cerr << "the study ended at start";
      if (e.exit) std::cerr << " (" << e.exit->to_string() << ')';  // e.g. "exit code 3"
      std::cerr << '\n';
      for (const auto& line : e.stderr_tail) std::cerr << "  " << line << '\n';
    } else if (e.code == mira::session_condition::study_failed) {
      std::cerr << "the study could not start: " << e.message() << '\n';
    }
  }
}

// docs/session.md, "A deadline without losing the outcome": what not to do (it compiles).
asio::awaitable<void> deadline_with_or(mira::session_options o, asio::steady_timer& timer) {
  // Loses the outcome: when the timer wins, || throws away what the session completed with.
  auto r = co_await (mira::run_session(std::move(o)) || timer.async_wait(asio::use_awaitable));
}

// docs/session.md, "A deadline without losing the outcome": a slot and a timer that emits.
asio::awaitable<void> deadline_with_signal(mira::session_options o) {
  auto ex = co_await asio::this_coro::executor;  // a strand, on a multi-threaded context
  asio::cancellation_signal stop;
  asio::steady_timer deadline(ex, std::chrono::minutes(10));
  deadline.async_wait([&stop](boost::system::error_code ec) {
    if (!ec) stop.emit(asio::cancellation_type::terminal);
  });
  auto done = co_await mira::async_run_session(
      ex, std::move(o), asio::bind_cancellation_slot(stop.slot(), asio::use_awaitable));
  deadline.cancel();
  if (done && done->stopped() == mira::schedule::stop_reason::interrupted)
    std::cout << "stopped at the deadline; resume run " << done->run_id << '\n';
}

// docs/session.md, "A deadline without losing the outcome": open first.
asio::awaitable<void> deadline_after_open(mira::session_options o, asio::steady_timer& deadline) {
  auto s = co_await mira::session::open(std::move(o));
  if (!s) co_return;
  const std::string run_id = s->run_id();
  auto r = co_await (s->run() || deadline.async_wait(asio::use_awaitable));
  if (r.index() == 1) std::cout << "stopped at the deadline; resume run " << run_id << '\n';
}

}  // namespace session

namespace pools {

// docs/pools.md, "Library".
asio::awaitable<void> library(asio::any_io_executor ex, mira::study_command cmd,
                              mira::protocol::run_params params, mira::request_options opts,
                              mira::plan::plan plan, mira::schedule::run_policy policy,
                              mira::schedule::run_hooks hooks) {
  auto token = [](mira::error_code, mira::protocol::run_result) {};
  mira::pool_options o;
  o.processes = 8;
  o.max_in_flight_per_process = 2;                           // 0: no cap
  auto pool = co_await mira::study_pool::start(ex, cmd, o);  // tl::expected<study_pool, error>
  if (!pool) std::cerr << pool.error().message();
  auto list = co_await pool->list_all();               // from one process
  auto r = co_await pool->run(params);                 // as host_handle::run
  pool->run(params, mira::pool_request{opts}, token);  // any completion token
  auto report = co_await mira::schedule::run_plan(*pool, plan, policy, hooks);
  co_await pool->shutdown();
}

}  // namespace pools

int main() {
  return 0;
}
