// run_plan against the Python test study: a provider with a fixed capacity, fail-fast and
// per-case timeouts that cancel exactly the right requests, a cost budget.
#include "common/fake_study.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/test/data/monomorphic.hpp>
#include <boost/test/data/test_case.hpp>
#include "common/run_co.hpp"
#include "integration/interrupt.hpp"
#include "integration/process_util.hpp"

#include <mira/aggregate/summary.hpp>
#include <mira/schedule/run_plan.hpp>

using namespace mira;
using namespace mira::test;
using schedule::case_state;
using std::chrono::milliseconds;

namespace {

struct session {
  host_handle host;
  protocol::list_result list;
};

asio::awaitable<session> open(std::vector<std::string> args) {
  auto o = quiet_options();
  o.on_stderr_line = [](std::string_view) {};
  auto cmd = py_study(std::move(args));
  auto host = host_handle::spawn(co_await asio::this_coro::executor, cmd, o);
  BOOST_REQUIRE(host);
  auto init = co_await host->initialize();
  BOOST_REQUIRE(init);
  auto list = co_await host->list_all();
  BOOST_REQUIRE(list);
  co_return session{std::move(*host), std::move(*list)};
}

plan::plan make(const protocol::list_result& list, std::vector<std::string> samples,
                std::int64_t trials) {
  plan::selection sel;
  sel.samples = std::move(samples);
  sel.trials = trials;
  auto p = plan::make_plan(list, sel);
  BOOST_REQUIRE(p);
  return std::move(*p);
}

// (method, id, params.id or params.sample) of every frame the host sent, from a recording.
struct frame_info {
  std::string method;
  std::int64_t id = 0;
  std::int64_t target = 0;  // cancel: the id it cancels
  std::string sample;       // run: its sample
};

std::vector<frame_info> sent_frames(const std::string& path) {
  std::vector<frame_info> out;
  std::istringstream in(read_file(path));
  for (std::string line; std::getline(in, line);) {
    auto f = json::parse(line).as_object();
    auto* m = f.if_contains("method");
    if (!m || !f.contains("id")) continue;
    frame_info fi;
    fi.method = std::string(m->as_string());
    fi.id = f.at("id").as_int64();
    if (fi.method == "cancel") fi.target = f.at("params").at("id").as_int64();
    if (fi.method == "run") fi.sample = std::string(f.at("params").at("sample").as_string());
    out.push_back(fi);
  }
  return out;
}

std::size_t rate_limited_answers(const std::string& path) {
  std::size_t n = 0;
  std::istringstream in(read_file(path));
  for (std::string line; std::getline(in, line);)
    if (line.find("\"http_status\":429") != std::string::npos) ++n;
  return n;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(run_plan_tests)

BOOST_AUTO_TEST_CASE(a_provider_with_fixed_capacity_gets_every_case_through) {
  temp_file rec;
  constexpr std::int64_t trials = 20;  // 2 samples x 20 trials = 40 cases
  run_co(
      [&](asio::io_context&) -> asio::awaitable<void> {
        std::vector<std::string> args = {"--capacity", "4", "--run-ms", "30", "--record", rec.path};
        auto s = co_await open(args);
        auto p = make(s.list, {"a", "b"}, trials);
        schedule::run_policy policy;
        policy.concurrency.max_concurrent = 16;
        policy.retry.max_retries = 20;
        policy.retry.base_backoff = milliseconds(20);
        policy.retry.max_backoff = milliseconds(200);
        policy.jitter_seed = 1;
        std::size_t starts = 0, results = 0;
        schedule::run_hooks hooks;
        hooks.on_start = [&](std::size_t) { ++starts; };
        hooks.on_result = [&](std::size_t, const schedule::case_record&) { ++results; };
        auto report = co_await schedule::run_plan(s.host, p, policy, hooks);
        auto sum = aggregate::summarize(p, report.cases);
        BOOST_TEST(sum.count(case_state::passed) == 40u);
        std::size_t attempts = 0;
        for (auto& c : report.cases) attempts += static_cast<std::size_t>(c.attempts);
        BOOST_TEST(starts == attempts);  // one start per attempt, retries included
        BOOST_TEST(results == 40u);      // one final result per case
        BOOST_TEST(report.stopped == schedule::stop_reason::none);
        BOOST_TEST(sum.total.retry_causes["rate limit"] == sum.total.retries);
        co_await s.host.shutdown();
      },
      std::chrono::seconds(60));
  // Adaptation keeps the rejections well below one per case.
  auto rejected = rate_limited_answers(rec.path);
  BOOST_TEST_MESSAGE("429 answers: " << rejected);
  BOOST_TEST(rejected < 40u);
}

// Beyond run_policy::kept_records a case's record lives only while it runs: it still reaches
// on_result whole (each retried attempt in its history), and the report keeps the first ones.
BOOST_AUTO_TEST_CASE(records_beyond_the_kept_ones_reach_the_hook_whole_and_are_not_kept) {
  run_co(
      [&](asio::io_context&) -> asio::awaitable<void> {
        std::vector<std::string> args = {"--capacity", "2", "--run-ms", "20"};
        auto s = co_await open(args);
        auto p = make(s.list, {"a", "b"}, 10);
        schedule::run_policy policy;
        policy.concurrency.max_concurrent = 8;
        policy.concurrency.adaptive = false;  // keep hitting the capacity: retries happen
        policy.retry.max_retries = 50;
        policy.retry.base_backoff = milliseconds(5);
        policy.retry.max_backoff = milliseconds(20);
        policy.jitter_seed = 1;
        policy.kept_records = 3;
        std::size_t results = 0, retried = 0, extra_attempts = 0;
        schedule::run_hooks hooks;
        hooks.on_result = [&](std::size_t, const schedule::case_record& r) {
          ++results;
          retried += r.retried.size();
          extra_attempts += static_cast<std::size_t>(r.attempts - 1);
        };
        auto report = co_await schedule::run_plan(s.host, p, policy, hooks);
        BOOST_TEST(results == 20u);
        BOOST_TEST(report.cases.size() == 3u);
        for (auto& c : report.cases) BOOST_TEST(c.state == case_state::passed);
        BOOST_TEST(retried > 0u);  // the capacity of 2 under 8 in flight turned some away
        BOOST_TEST(retried == extra_attempts);
        co_await s.host.shutdown();
      },
      std::chrono::seconds(60));
}

BOOST_AUTO_TEST_CASE(fail_fast_cancels_exactly_the_in_flight_runs) {
  temp_file rec;
  run_co([&](asio::io_context&) -> asio::awaitable<void> {
    std::vector<std::string> args = {"--run-ms", "20000", "--record", rec.path};
    auto s = co_await open(args);
    auto p = make(s.list, {}, 1);  // a, b, fail
    schedule::run_policy policy;
    policy.fail_fast = true;
    auto t0 = std::chrono::steady_clock::now();
    auto report = co_await schedule::run_plan(s.host, p, policy);
    BOOST_TEST((std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10)));
    BOOST_TEST(report.stopped == schedule::stop_reason::fail_fast);
    BOOST_TEST(report.stop_message == "case echo/fail@sim failed");
    BOOST_TEST(report.cases[0].state == case_state::cancelled);
    BOOST_TEST(report.cases[1].state == case_state::cancelled);
    BOOST_TEST(report.cases[2].state == case_state::failed);
    co_await s.host.shutdown();
  });
  std::vector<std::int64_t> slow_runs, cancelled;
  for (auto& f : sent_frames(rec.path)) {
    if (f.method == "run" && f.sample != "fail") slow_runs.push_back(f.id);
    if (f.method == "cancel") cancelled.push_back(f.target);
  }
  std::sort(cancelled.begin(), cancelled.end());
  BOOST_TEST(cancelled == slow_runs, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(a_case_timeout_cancels_each_attempt_and_fails_the_case) {
  temp_file rec;
  run_co([&](asio::io_context&) -> asio::awaitable<void> {
    std::vector<std::string> args = {"--run-ms", "20000", "--record", rec.path};
    auto s = co_await open(args);
    auto p = make(s.list, {"a", "b"}, 1);
    schedule::run_policy policy;
    policy.case_timeout = milliseconds(100);
    auto report = co_await schedule::run_plan(s.host, p, policy);
    for (auto& c : report.cases) {
      BOOST_TEST(c.state == case_state::failed);
      BOOST_TEST(c.message == "timed out after 0.1 s");
      BOOST_TEST(c.attempts == 1);
    }
    co_await s.host.shutdown();
  });
  std::vector<std::int64_t> runs, cancelled;
  for (auto& f : sent_frames(rec.path)) {
    if (f.method == "run") runs.push_back(f.id);
    if (f.method == "cancel") cancelled.push_back(f.target);
  }
  std::sort(cancelled.begin(), cancelled.end());
  BOOST_TEST(cancelled == runs, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(timeouts_as_infra_are_retried_then_na) {
  run_co([&](asio::io_context&) -> asio::awaitable<void> {
    std::vector<std::string> args = {"--run-ms", "20000"};
    auto s = co_await open(args);
    auto p = make(s.list, {"a"}, 1);
    schedule::run_policy policy;
    policy.case_timeout = milliseconds(50);
    policy.timeout_is_infra = true;
    policy.retry.max_retries = 2;
    policy.retry.base_backoff = milliseconds(1);
    auto report = co_await schedule::run_plan(s.host, p, policy);
    BOOST_TEST(report.cases[0].state == case_state::na);
    BOOST_TEST(report.cases[0].attempts == 3);
    BOOST_TEST(report.cases[0].retried.size() == 2u);
    BOOST_TEST(report.cases[0].retried[0].cause == "timeout");
    co_await s.host.shutdown();
  });
}

BOOST_AUTO_TEST_CASE(a_cost_budget_stops_the_run) {
  run_co([&](asio::io_context&) -> asio::awaitable<void> {
    std::vector<std::string> args = {"--cost", "0.1"};
    auto s = co_await open(args);
    auto p = make(s.list, {"a"}, 10);
    schedule::run_policy policy;
    policy.concurrency.max_concurrent = 1;
    policy.max_cost_usd = 0.25;
    auto report = co_await schedule::run_plan(s.host, p, policy);
    BOOST_TEST(report.stopped == schedule::stop_reason::budget);
    auto sum = aggregate::summarize(p, report.cases);
    BOOST_TEST(sum.count(case_state::passed) == 3u);  // the third crossed $0.25
    BOOST_TEST(sum.count(case_state::cancelled) == 7u);
    BOOST_TEST(report.cases[9].message.find("not run: the cost budget") == 0u);
    co_await s.host.shutdown();
  });
}

// The case in flight when the study died for good never got its verdict, and the ones it never
// got to were not run: all are cancelled ("not run: ..."), so a plain resume runs them, not
// errors.
// A process the caller started (run_plan adopts it as a pool of one) has no command to start it
// again: its death stops the run.
BOOST_AUTO_TEST_CASE(a_study_that_dies_stops_the_run_and_leaves_the_rest_not_run) {
  run_co([&](asio::io_context&) -> asio::awaitable<void> {
    std::vector<std::string> args = {"--run-ms", "200", "--die-after", "2"};
    auto s = co_await open(args);
    auto p = make(s.list, {"a"}, 5);
    schedule::run_policy policy;
    policy.concurrency.max_concurrent = 1;
    auto report = co_await schedule::run_plan(s.host, p, policy);
    BOOST_TEST(report.stopped == schedule::stop_reason::study_failed);
    BOOST_TEST(report.restarts == 0);
    BOOST_TEST(report.cases[0].state == case_state::passed);
    for (std::size_t i = 1; i < 5; ++i) {
      BOOST_TEST(report.cases[i].state == case_state::cancelled);
      BOOST_TEST(report.cases[i].message.find("not run: ") == 0u);
    }
  });
}

// With and without a case timeout (an attempt then races a timer, whose wait ends first when
// the run stops: still a cancellation, not a timeout).
BOOST_DATA_TEST_CASE(cancelling_run_plan_stops_it_and_still_reports,
                     boost::unit_test::data::make({0, 30}), timeout_s) {
  run_co([&](asio::io_context& ctx) -> asio::awaitable<void> {
    std::vector<std::string> args = {"--run-ms", "20000"};
    auto s = co_await open(args);
    auto p = make(s.list, {"a"}, 4);
    schedule::run_policy policy;
    policy.concurrency.max_concurrent = 2;
    if (timeout_s > 0) policy.case_timeout = std::chrono::seconds(timeout_s);
    std::size_t starts = 0;
    auto report = co_await run_interrupted_after(ctx, s.host, p, policy, 2, starts);
    BOOST_TEST(report.stopped == schedule::stop_reason::interrupted);
    for (auto& c : report.cases) {
      BOOST_TEST(c.state == case_state::cancelled);
      BOOST_TEST(c.retried.empty());
    }
    BOOST_TEST(starts == 2u);
    co_await s.host.shutdown();
  });
}

// A pool of one process of the py study, restarted as `o` says; `restarted` counts on_restart.
asio::awaitable<tl::expected<study_pool, error>> one_process(std::vector<std::string> args,
                                                             pool_options o,
                                                             int* restarted = nullptr) {
  o.host_options_for = [](std::size_t) {
    auto h = quiet_options();
    h.on_stderr_line = [](std::string_view) {};
    return h;
  };
  if (restarted) o.on_restart = [restarted](std::size_t, const std::string&) { ++*restarted; };
  co_return co_await study_pool::start(co_await asio::this_coro::executor,
                                       py_study(std::move(args)), std::move(o));
}

BOOST_AUTO_TEST_CASE(a_dead_study_is_restarted_and_its_cases_retried) {
  temp_file base;
  const std::string marker = base.path + ".died";
  run_co(
      [&](asio::io_context&) -> asio::awaitable<void> {
        std::vector<std::string> args = {"--run-ms", "100",        "--die-after",
                                         "3",        "--die-once", marker};
        pool_options o;
        o.restart_backoff = milliseconds(10);
        int restarted = 0;
        auto pool = co_await one_process(args, o, &restarted);
        BOOST_REQUIRE(pool);
        auto list = co_await pool->list_all();
        BOOST_REQUIRE(list);
        auto p = make(*list, {"a"}, 6);
        schedule::run_policy policy;
        policy.concurrency.max_concurrent = 2;
        policy.retry.base_backoff = milliseconds(10);
        auto report = co_await schedule::run_plan(*pool, p, policy);
        BOOST_TEST(report.stopped == schedule::stop_reason::none);
        BOOST_TEST(report.restarts == 1);
        BOOST_TEST(restarted == 1);
        auto sum = aggregate::summarize(p, report.cases);
        BOOST_TEST(sum.count(case_state::passed) == 6u);
        BOOST_TEST(sum.total.retry_causes["study exited"] >= 1u);
        co_await pool->shutdown();
      },
      std::chrono::seconds(60));
  std::remove(marker.c_str());
}

BOOST_AUTO_TEST_CASE(restarts_are_bounded) {
  run_co(
      [&](asio::io_context&) -> asio::awaitable<void> {
        std::vector<std::string> args = {"--run-ms", "50", "--die-after", "1"};
        pool_options o;
        o.max_restarts = 2;
        o.restart_backoff = milliseconds(1);
        auto pool = co_await one_process(args, o);
        BOOST_REQUIRE(pool);
        auto list = co_await pool->list_all();
        BOOST_REQUIRE(list);
        auto p = make(*list, {"a"}, 3);
        schedule::run_policy policy;
        policy.retry.base_backoff = milliseconds(1);
        auto report = co_await schedule::run_plan(*pool, p, policy);
        BOOST_TEST(report.restarts == 2);
        BOOST_TEST(report.stopped == schedule::stop_reason::study_failed);
        BOOST_TEST(report.stop_message.find("the study exited [exit code 3]") != std::string::npos,
                   report.stop_message);
        // Each attempt killed the study: when the restarts ran out, no case had a verdict, so
        // none is final (a resume runs them all).
        for (auto& c : report.cases) {
          BOOST_TEST((c.state == case_state::cancelled));
          BOOST_TEST(c.message.find("not run: ") == 0u, c.message);
        }
        co_await pool->shutdown();
      },
      std::chrono::seconds(60));
}

// While a dead study restarts, the cases waiting for it wait in the pool: the run loop does not
// spin on them (it did, at full CPU, for the whole backoff and start).
BOOST_AUTO_TEST_CASE(a_restarting_study_does_not_spin_the_run_loop) {
  temp_file base;
  const std::string marker = base.path + ".died";
  asio::io_context ctx;
  bool done = false;
  std::exception_ptr failure;
  asio::co_spawn(
      ctx,
      [&]() -> asio::awaitable<void> {
        std::vector<std::string> dies_once = {"--run-ms", "10",         "--die-after",
                                              "1",        "--die-once", marker};
        pool_options o;
        o.restart_backoff = milliseconds(1000);
        o.max_restarts = 1;
        auto pool = co_await one_process(dies_once, o);
        BOOST_REQUIRE(pool);
        auto list = co_await pool->list_all();
        BOOST_REQUIRE(list);
        auto p = make(*list, {"a", "b"}, 1);
        schedule::run_policy policy;
        policy.concurrency.max_concurrent = 1;
        policy.retry.base_backoff = milliseconds(1);
        auto report = co_await schedule::run_plan(*pool, p, policy);
        BOOST_TEST(report.restarts == 1);
        for (auto& c : report.cases) BOOST_TEST(c.state == case_state::passed);
        co_await pool->shutdown();
      },
      [&](std::exception_ptr e) {
        done = true;
        failure = e;
      });
  std::size_t handlers = 0;
  auto watchdog = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!done && ctx.run_one_until(watchdog) > 0) ++handlers;
  BOOST_REQUIRE(done);
  if (failure) std::rethrow_exception(failure);
  BOOST_TEST_MESSAGE("handlers run: " << handlers);
  BOOST_TEST(handlers < 2000u);  // ~100 here; a spinning loop ran ~55 000 in that second
  std::remove(marker.c_str());
}

// The run deadline passes while the dead study waits out its restart backoff: the run ends with
// its report instead of waiting for the restart, and the pool's shutdown ends the backoff.
BOOST_AUTO_TEST_CASE(the_run_deadline_ends_a_run_waiting_for_a_restart) {
  run_co([&](asio::io_context&) -> asio::awaitable<void> {
    std::vector<std::string> dies = {"--run-ms", "10", "--die-after", "1"};
    pool_options o;
    o.restart_backoff = std::chrono::hours(1);
    auto pool = co_await one_process(dies, o);
    BOOST_REQUIRE(pool);
    auto list = co_await pool->list_all();
    BOOST_REQUIRE(list);
    auto p = make(*list, {"a", "b"}, 1);
    schedule::run_policy policy;
    policy.concurrency.max_concurrent = 1;
    policy.deadline = milliseconds(300);
    auto report = co_await schedule::run_plan(*pool, p, policy);
    BOOST_TEST(report.stopped == schedule::stop_reason::deadline);
    BOOST_TEST(report.restarts == 1);
    for (auto& c : report.cases) BOOST_TEST(c.state != case_state::passed);
    co_await pool->shutdown();  // run_co's io_context ends: the hour-long backoff was cut
  });
}

// mira::restart_study, what a pool starts a dead process again with: the same study is taken
// back; another name or study version is refused, naming both; one that never answers
// initialize is given up within the limit. The marker exists, so py_study acts restarted.
BOOST_AUTO_TEST_CASE(restart_study_takes_back_only_the_same_study_in_time) {
  temp_file marker;  // exists
  run_co([&](asio::io_context&) -> asio::awaitable<void> {
    auto first =
        host_handle::spawn(co_await asio::this_coro::executor, py_study({}), quiet_options());
    BOOST_REQUIRE(first);
    auto original = co_await first->initialize();
    BOOST_REQUIRE(original);
    auto restart = [&](std::vector<std::string> args, milliseconds limit) {
      return restart_study(py_study(std::move(args)), quiet_options(), *original, limit);
    };

    // Argument lists named, not braced in the co_await: g++ 12 miscompiles the latter.
    std::vector<std::string> plain, versioned = {"--study-version", "2.0"},
                                    renaming = {"--die-once", marker.path, "--rename-on-restart"},
                                    muted = {"--die-once", marker.path, "--mute-on-restart"};
    auto same = co_await restart(plain, milliseconds(30000));
    BOOST_TEST(same.has_value());

    auto newer = co_await restart(versioned, milliseconds(30000));
    BOOST_REQUIRE(!newer);
    BOOST_TEST((newer.error().code == errc::incompatible_protocol));
    BOOST_TEST(newer.error().diag.message ==
               "the restarted study is 'py-study' version 2.0 (protocol 1.1), not 'py-study' "
               "version 0.0.1 (protocol 1.1)");

    auto renamed = co_await restart(renaming, milliseconds(30000));
    BOOST_REQUIRE(!renamed);
    BOOST_TEST((renamed.error().code == errc::incompatible_protocol));
    BOOST_TEST(renamed.error().diag.message.find("is 'other-study' version 0.0.1") !=
               std::string::npos);

    auto started = std::chrono::steady_clock::now();
    auto mute = co_await restart(muted, milliseconds(300));
    BOOST_REQUIRE(!mute);
    BOOST_TEST((mute.error().code == errc::timed_out));
    BOOST_TEST(mute.error().diag.message ==
               "the restarted study did not answer initialize within 0.3 s");
    BOOST_TEST((std::chrono::steady_clock::now() - started < std::chrono::seconds(20)));
  });
}

BOOST_AUTO_TEST_SUITE_END()
