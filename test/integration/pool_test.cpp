// study_pool against real processes of the Python test study: a sequential study runs faster
// with more processes, cancellation and timeouts reach the process that holds the request, a
// crash loses no case, processes that disagree are refused, fail-fast cancels on every process.
#include "common/fake_study.hpp"
#include "common/run_co.hpp"
#include "integration/interrupt.hpp"
#include "integration/process_util.hpp"

#include <mira/pool.hpp>
#include <mira/schedule/run_plan.hpp>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/experimental/parallel_group.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include <cstring>
#include <map>

using namespace mira;
using namespace mira::test;
using schedule::case_state;
using std::chrono::milliseconds;

namespace {

pool_options quiet_pool(std::size_t procs, std::size_t cap = 0) {
  pool_options o;
  o.processes = procs;
  o.max_in_flight_per_process = cap;
  o.host_options_for = [](std::size_t) {
    auto h = quiet_options();
    h.on_stderr_line = [](std::string_view) {};
    return h;
  };
  o.restart_backoff = milliseconds(50);
  return o;
}

asio::awaitable<study_pool> start_pool(std::vector<std::string> args, pool_options o) {
  auto pool = co_await study_pool::start(co_await asio::this_coro::executor,
                                         py_study(std::move(args)), std::move(o));
  if (!pool) BOOST_FAIL("the pool did not start: " << pool.error().message());
  co_return std::move(*pool);
}

plan::plan plan_of(const protocol::list_result& list) {
  auto p = plan::make_plan(list, plan::selection{});
  BOOST_REQUIRE(p);
  return std::move(*p);
}

// The pool's whole listing, planned.
asio::awaitable<plan::plan> listed_plan(study_pool& pool) {
  auto list = co_await pool.list_all();
  BOOST_REQUIRE(list);
  co_return plan_of(*list);
}

// Every frame the host sent to one process, per process (the recordings are one per pid).
struct frames {
  std::vector<std::int64_t> runs;     // ids of `run` requests
  std::vector<std::int64_t> cancels;  // ids the `cancel` requests name
};

std::map<std::string, frames> sent_by_process(const temp_dir& dir) {
  std::map<std::string, frames> out;
  for (auto& entry : std::filesystem::directory_iterator(dir.path)) {
    auto& f = out[entry.path().filename().string()];
    std::istringstream in(read_file(entry.path().string()));
    for (std::string line; std::getline(in, line);) {
      auto o = json::parse(line).as_object();
      auto* m = o.if_contains("method");
      if (!m) continue;
      if (*m == "run") f.runs.push_back(o.at("id").as_int64());
      if (*m == "cancel") f.cancels.push_back(o.at("params").at("id").as_int64());
    }
  }
  return out;
}

bool contains(const std::vector<std::int64_t>& v, std::int64_t x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

}  // namespace

BOOST_AUTO_TEST_SUITE(pool_tests)

// The ratio of two runs measured side by side: 16 cases of 200 ms on a study that answers
// one at a time take 3.2 s on one process and about 0.8 s on four.
BOOST_AUTO_TEST_CASE(a_sequential_study_runs_at_least_2_5_times_sooner_on_four_processes) {
  auto seconds_with = [](std::size_t procs) {
    return run_co(
        [&](asio::io_context&) -> asio::awaitable<double> {
          std::vector<std::string> args1 = {"--sequential", "--samples", "16", "--run-ms", "200"};
          auto pool = co_await start_pool(args1, quiet_pool(procs, (8 + procs - 1) / procs));
          auto p = co_await listed_plan(pool);
          schedule::run_policy policy;
          policy.concurrency.max_concurrent = 8;
          auto report = co_await schedule::run_plan(pool, p, policy);
          co_await pool.shutdown();
          BOOST_TEST(report.cases.size() == 16u);
          for (auto& c : report.cases) BOOST_TEST(c.state == case_state::passed);
          co_return report.seconds;
        },
        std::chrono::seconds(60));
  };
  double one = seconds_with(1);
  double four = seconds_with(4);
  BOOST_TEST_MESSAGE("P=1: " << one << " s, P=4: " << four << " s");
  BOOST_TEST(one / four >= 2.5);
}

BOOST_AUTO_TEST_CASE(a_cancelled_request_sends_cancel_to_the_process_that_holds_it) {
  temp_dir rec;
  run_co([&](asio::io_context&) -> asio::awaitable<void> {
    std::vector<std::string> args2 = {"--run-ms", "3000", "--record", rec / "{pid}"};
    auto pool = co_await start_pool(args2, quiet_pool(3));
    asio::cancellation_signal sig;
    std::vector<error_code> codes(3);
    int done = 0;
    asio::steady_timer all_done(co_await asio::this_coro::executor,
                                asio::steady_timer::time_point::max());
    for (int i = 0; i < 3; ++i) {
      auto on_done = [&, i](error_code ec, protocol::run_result) {
        codes[static_cast<std::size_t>(i)] = ec;
        if (++done == 3) all_done.cancel();
      };
      if (i == 1)
        pool.run(echo_case("a"), asio::bind_cancellation_slot(sig.slot(), on_done));
      else
        pool.run(echo_case("b"), on_done);
    }
    // Cancel once every process has read its run (each records what it reads): a request not
    // yet written would be withdrawn without a `cancel` frame.
    asio::steady_timer t(co_await asio::this_coro::executor);
    for (int tries = 0; tries < 2000; ++tries) {
      std::size_t with_run = 0;
      try {
        for (auto& [pid, f] : sent_by_process(rec)) with_run += !f.runs.empty();
      } catch (const std::exception&) {  // a line still being written
      }
      if (with_run == 3) break;
      t.expires_after(milliseconds(5));
      co_await t.async_wait(asio::use_awaitable);
    }
    BOOST_TEST((pool.loads() == std::vector<std::size_t>{1, 1, 1}));
    BOOST_TEST(pool.process(1).study()->study == "py-study");
    sig.emit(asio::cancellation_type::terminal);
    co_await asio::post(co_await asio::this_coro::executor, asio::use_awaitable);
    co_await pool.shutdown();
    if (done < 3) co_await all_done.async_wait(asio::as_tuple(asio::use_awaitable));
    BOOST_TEST(codes[1] == asio::error::operation_aborted);
  });
  auto sent = sent_by_process(rec);
  BOOST_TEST(sent.size() == 3u);
  int cancels = 0;
  for (auto& [pid, f] : sent) {
    BOOST_TEST(f.runs.size() == 1u);  // one request per process: they were spread
    for (auto id : f.cancels) {
      ++cancels;
      BOOST_TEST(contains(f.runs, id));  // the process that got `cancel` holds that run
    }
  }
  BOOST_TEST(cancels == 1);
}

// The pool's abandoned count is signalled, as a handle's: a waiter wakes when a request is
// abandoned and again when the study's late answer comes (run_plan over a pool waits on it
// instead of polling), and a cancelled wait completes with operation_aborted.
BOOST_AUTO_TEST_CASE(the_pools_abandoned_count_is_signalled) {
  temp_dir rec;
  run_co([&](asio::io_context& ctx) -> asio::awaitable<void> {
    std::vector<std::string> args = {"--run-ms", "300", "--ignore-cancel", "--record",
                                     rec / "{pid}"};
    auto pool = co_await start_pool(args, quiet_pool(1));
    std::optional<std::size_t> first;
    pool.async_wait_abandoned(0, [&](error_code, std::size_t n) { first = n; });
    asio::cancellation_signal sig;
    std::optional<error_code> run_ec;
    pool.run(echo_case("a"),
             asio::bind_cancellation_slot(sig.slot(), [&](error_code ec, auto) { run_ec = ec; }));
    // Cancelled once the process has read it: a request not yet written is withdrawn unsent.
    asio::steady_timer t(ctx.get_executor());
    for (int tries = 0; tries < 2000; ++tries) {
      std::size_t runs = 0;
      try {
        for (auto& [pid, f] : sent_by_process(rec)) runs += f.runs.size();
      } catch (const std::exception&) {  // a line still being written
      }
      if (runs == 1) break;
      t.expires_after(milliseconds(5));
      co_await t.async_wait(asio::use_awaitable);
    }
    BOOST_TEST(!first);
    sig.emit(asio::cancellation_type::terminal);
    auto [ec1, n1] = co_await pool.async_wait_abandoned(0, asio::as_tuple(asio::use_awaitable));
    BOOST_TEST(!ec1);
    BOOST_TEST(n1 == 1u);
    BOOST_TEST(first.value_or(0) == 1u);
    BOOST_TEST(*run_ec == asio::error::operation_aborted);
    // The study ignores `cancel` and answers after 300 ms: that late answer is the signal.
    auto [ec2, n2] = co_await pool.async_wait_abandoned(1, asio::as_tuple(asio::use_awaitable));
    BOOST_TEST(!ec2);
    BOOST_TEST(n2 == 0u);
    BOOST_TEST(pool.abandoned() == 0u);
    asio::cancellation_signal stop;
    std::optional<error_code> stopped;
    asio::steady_timer stopped_timer(ctx.get_executor(), asio::steady_timer::time_point::max());
    pool.async_wait_abandoned(
        0, asio::bind_cancellation_slot(stop.slot(), [&](error_code ec, std::size_t) {
          stopped = ec;
          stopped_timer.cancel();
        }));
    stop.emit(asio::cancellation_type::terminal);
    if (!stopped) co_await stopped_timer.async_wait(asio::as_tuple(asio::use_awaitable));
    BOOST_TEST(*stopped == asio::error::operation_aborted);
    co_await pool.shutdown();
  });
}

BOOST_AUTO_TEST_CASE(timeouts_through_the_pool_cancel_each_request_on_its_own_process) {
  temp_dir rec;
  std::size_t attempts = 0;
  run_co([&](asio::io_context&) -> asio::awaitable<void> {
    std::vector<std::string> args = {"--run-ms", "5000",     "--samples",
                                     "6",        "--record", rec / "{pid}"};
    auto pool = co_await start_pool(args, quiet_pool(3, 2));
    auto p = co_await listed_plan(pool);
    schedule::run_policy policy;
    policy.concurrency.max_concurrent = 6;
    policy.case_timeout = milliseconds(300);
    policy.retry.max_retries = 0;
    auto report = co_await schedule::run_plan(pool, p, policy);
    co_await pool.shutdown();
    for (auto& c : report.cases) {
      BOOST_TEST(c.state == case_state::failed);
      attempts += static_cast<std::size_t>(c.attempts);
    }
  });
  auto sent = sent_by_process(rec);
  std::size_t cancels = 0;
  for (auto& [pid, f] : sent) {
    BOOST_TEST(f.runs.size() == 2u);  // the cap: two per process
    BOOST_TEST(f.cancels.size() == f.runs.size());
    for (auto id : f.cancels) BOOST_TEST(contains(f.runs, id));
    cancels += f.cancels.size();
  }
  BOOST_TEST(cancels == attempts);
}

// A run stopped while its attempts race their timeouts: the cases in flight are cancelled (a
// resume runs them again), not failed by a timeout that never passed.
BOOST_AUTO_TEST_CASE(stopping_a_pooled_run_with_a_case_timeout_cancels_what_is_in_flight) {
  run_co([&](asio::io_context& ctx) -> asio::awaitable<void> {
    std::vector<std::string> args = {"--run-ms", "5000", "--samples", "4"};
    auto pool = co_await start_pool(args, quiet_pool(2));
    auto p = co_await listed_plan(pool);
    schedule::run_policy policy;
    policy.concurrency.max_concurrent = 2;
    policy.case_timeout = std::chrono::seconds(30);
    std::size_t starts = 0;
    auto report = co_await run_interrupted_after(ctx, pool, p, policy, 2, starts);
    co_await pool.shutdown();
    BOOST_TEST(starts == 2u);
    BOOST_TEST(report.stopped == schedule::stop_reason::interrupted);
    for (auto& c : report.cases) BOOST_TEST(c.state == case_state::cancelled);
  });
}

// A process that died for good has nothing left to signal: its slot is not watched. (It was,
// and its finished host answered each watch at once, spinning the pool at full CPU.)
BOOST_AUTO_TEST_CASE(a_dead_process_is_not_watched_in_a_loop) {
  temp_file mark;
  std::remove(mark.path.c_str());
  asio::io_context ctx;
  std::size_t handlers = 0;
  std::size_t while_waiting = 0;
  bool done = false;
  std::exception_ptr failure;
  asio::co_spawn(
      ctx,
      [&]() -> asio::awaitable<void> {
        std::vector<std::string> args = {"--die-after", "1", "--die-once", mark.path};
        auto o = quiet_pool(2);
        o.max_restarts = 0;
        auto pool = co_await start_pool(args, o);
        auto [ec, r] = co_await pool.run(echo_case("a"), asio::as_tuple(asio::use_awaitable));
        BOOST_TEST(ec == errc::study_exited);  // the first process died with it
        asio::cancellation_signal stop;
        pool.async_wait_abandoned(
            0, asio::bind_cancellation_slot(stop.slot(), [](error_code, std::size_t) {}));
        auto before = handlers;
        asio::steady_timer t(ctx, milliseconds(300));
        co_await t.async_wait(asio::as_tuple(asio::use_awaitable));
        while_waiting = handlers - before;
        stop.emit(asio::cancellation_type::terminal);
        co_await pool.shutdown();
      },
      [&](std::exception_ptr e) {
        done = true;
        failure = e;
      });
  auto watchdog = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!done && ctx.run_one_until(watchdog) > 0) ++handlers;
  BOOST_REQUIRE(done);
  if (failure) std::rethrow_exception(failure);
  BOOST_TEST_MESSAGE("handlers while waiting: " << while_waiting);
  BOOST_TEST(while_waiting < 1000u);
}

// A process gone for good shrinks what the pool can hold: the run starts no more than that.
// Here the one process left holds two requests it ignores `cancel` for, so nothing can run:
// the study is declared hung after the grace (the case timeout), not left to the deadline
// with attempts waiting in the pool for room, their timeouts not started. With no restarts
// left, the hung process is given up on too, and the pool holds nothing.
BOOST_AUTO_TEST_CASE(a_pool_that_lost_a_process_for_good_is_not_given_more_than_it_holds) {
  temp_file mark;
  std::remove(mark.path.c_str());
  run_co([&](asio::io_context&) -> asio::awaitable<void> {
    std::vector<std::string> args = {"--run-ms",    "2000", "--ignore-cancel", "--samples", "8",
                                     "--die-after", "1",    "--die-once",      mark.path};
    auto o = quiet_pool(2, 2);
    o.max_restarts = 0;
    auto pool = co_await start_pool(args, o);
    auto p = co_await listed_plan(pool);
    schedule::run_policy policy;
    policy.concurrency.max_concurrent = 4;
    policy.case_timeout = milliseconds(200);
    policy.deadline = std::chrono::seconds(10);
    auto report = co_await schedule::run_plan(pool, p, policy);
    BOOST_TEST(pool.capacity() == 0u);
    BOOST_TEST(!pool.serviceable());
    BOOST_TEST(report.stopped == schedule::stop_reason::study_failed);
    BOOST_TEST(report.stop_message.find("never answered 2 cancelled request(s)") !=
               std::string::npos);
    co_await pool.shutdown();
  });
}

// Processes whose ignored cancels hold every slot are given up on as hung and started again,
// each within its own restarts; when none are left, the run stops naming the hang.
BOOST_AUTO_TEST_CASE(hung_processes_are_started_again_then_given_up_for_good) {
  std::vector<std::string> told;
  run_co([&](asio::io_context&) -> asio::awaitable<void> {
    std::vector<std::string> args = {"--run-ms", "60000", "--ignore-cancel", "--samples", "8"};
    auto o = quiet_pool(2, 1);
    o.max_restarts = 1;
    o.restart_backoff = milliseconds(1);
    o.on_restart = [&](std::size_t slot, const std::string& what) {
      told.push_back(std::to_string(slot) + " " + what);
    };
    auto pool = co_await start_pool(args, o);
    auto p = co_await listed_plan(pool);
    schedule::run_policy policy;
    policy.concurrency.max_concurrent = 2;
    policy.case_timeout = milliseconds(200);
    policy.deadline = std::chrono::seconds(30);
    auto report = co_await schedule::run_plan(pool, p, policy);
    BOOST_TEST(report.restarts == 2);
    BOOST_TEST(report.stopped == schedule::stop_reason::study_failed);
    BOOST_TEST(
        report.stop_message.find("never answered 2 cancelled request(s)") != std::string::npos,
        report.stop_message);
    BOOST_TEST(!pool.serviceable());
    co_await pool.shutdown();
  });
  BOOST_REQUIRE(told.size() == 4u);
  for (std::size_t i = 0; i < 4; ++i) {
    BOOST_TEST(told[i].find("was given up on: the study never answered") != std::string::npos,
               told[i]);
    const char* end = i < 2 ? "; starting it again" : "; no restarts left for it";
    BOOST_TEST(told[i].size() >= std::strlen(end));
    BOOST_TEST(told[i].compare(told[i].size() - std::strlen(end), std::string::npos, end) == 0,
               told[i]);
  }
  BOOST_TEST((told[0][0] == '1' && told[1][0] == '2'));
}

BOOST_AUTO_TEST_CASE(a_process_crashing_mid_run_loses_no_case) {
  temp_dir dir;
  std::size_t restarts_told = 0;
  run_co(
      [&](asio::io_context&) -> asio::awaitable<void> {
        auto o = quiet_pool(3, 2);
        o.on_restart = [&](std::size_t, const std::string&) { ++restarts_told; };
        std::vector<std::string> args3 = {"--sequential", "--samples",   "30", "--run-ms",
                                          "30",           "--die-after", "3",  "--die-once",
                                          dir / "died"};
        auto pool = co_await start_pool(args3, o);
        auto p = co_await listed_plan(pool);
        schedule::run_policy policy;
        policy.concurrency.max_concurrent = 6;
        auto report = co_await schedule::run_plan(pool, p, policy);
        // The crashed slot is live or still being restarted (a busy machine can finish the run
        // on the other two first), never given up: capacity counts both, 2 requests each.
        BOOST_TEST(pool.capacity() == 6u);
        co_await pool.shutdown();
        BOOST_TEST(report.stopped == schedule::stop_reason::none);
        BOOST_TEST(report.cases.size() == 30u);
        for (auto& c : report.cases) BOOST_TEST(c.state == case_state::passed);
        BOOST_TEST(report.restarts == 1);
      },
      std::chrono::seconds(60));
  BOOST_TEST(std::filesystem::exists(dir / "died"));
  BOOST_TEST(restarts_told == 1u);
}

BOOST_AUTO_TEST_CASE(a_pool_with_no_process_left_fails_the_run) {
  run_co([&](asio::io_context&) -> asio::awaitable<void> {
    auto o = quiet_pool(2);
    o.max_restarts = 0;
    std::vector<std::string> args4 = {"--samples", "10", "--die-after", "1"};
    auto pool = co_await start_pool(args4, o);
    auto p = co_await listed_plan(pool);
    schedule::run_policy policy;
    policy.concurrency.max_concurrent = 4;
    auto report = co_await schedule::run_plan(pool, p, policy);
    BOOST_TEST(report.stopped == schedule::stop_reason::study_failed);
    BOOST_TEST(!pool.serviceable());
    co_await pool.shutdown();
  });
}

BOOST_AUTO_TEST_CASE(a_process_that_never_answers_initialize_fails_the_start_in_time) {
  // The timed-out initialize completes later, when the refused process is closed: it must not
  // reach the answers start() already handed back (it wrote into a moved-from vector).
  run_co([&](asio::io_context& ctx) -> asio::awaitable<void> {
    study_command cmd;
    cmd.argv = {MIRA_PYTHON3, "-c", "import time; time.sleep(60)"};
    auto o = quiet_pool(2);
    o.init_timeout = milliseconds(300);
    auto t0 = std::chrono::steady_clock::now();
    auto pool = co_await study_pool::start(ctx.get_executor(), cmd, o);
    BOOST_REQUIRE(!pool);
    BOOST_TEST(pool.error().message().find("did not answer initialize within 0.3 s") !=
               std::string::npos);
    BOOST_TEST((std::chrono::steady_clock::now() - t0 < std::chrono::seconds(20)));
  });
  BOOST_TEST(no_children_left());
}

BOOST_AUTO_TEST_CASE(processes_that_report_different_versions_are_refused) {
  temp_dir dir;
  run_co([&](asio::io_context& ctx) -> asio::awaitable<void> {
    auto cmd = py_study({"--odd-version-once", dir / "odd"});
    auto pool = co_await study_pool::start(ctx.get_executor(), cmd, quiet_pool(3));
    BOOST_REQUIRE(!pool);
    BOOST_TEST(pool.error().code == errc::incompatible_protocol);
    auto m = pool.error().message();
    BOOST_TEST_MESSAGE(m);
    BOOST_TEST(m.find("study version") != std::string::npos);
    BOOST_TEST(m.find("9.9.9") != std::string::npos);
    BOOST_TEST(m.find("0.0.1") != std::string::npos);
  });
}

BOOST_AUTO_TEST_CASE(a_fail_fast_parallel_group_cancels_the_siblings_on_every_process) {
  temp_dir rec;
  run_co([&](asio::io_context&) -> asio::awaitable<void> {
    std::vector<std::string> args5 = {"--run-ms", "3000", "--record", rec / "{pid}"};
    auto pool = co_await start_pool(args5, quiet_pool(4));
    // Three long runs and one that fails at once, one per process.
    auto [order, e1, r1, e2, r2, e3, r3, e4, r4] =
        co_await asio::experimental::make_parallel_group(
            pool.run(echo_case("a"), asio::deferred), pool.run(echo_case("b"), asio::deferred),
            pool.run(echo_case("a"), asio::deferred), pool.run(echo_case("fail"), asio::deferred))
            .async_wait(asio::experimental::wait_for_one(), asio::use_awaitable);
    BOOST_TEST(order[0] == 3u);
    BOOST_TEST(!e4);
    BOOST_TEST(!r4.passed);
    BOOST_TEST(e1 == asio::error::operation_aborted);
    BOOST_TEST(e2 == asio::error::operation_aborted);
    BOOST_TEST(e3 == asio::error::operation_aborted);
    co_await pool.shutdown();
  });
  auto sent = sent_by_process(rec);
  BOOST_TEST(sent.size() == 4u);
  int processes_cancelled = 0;
  for (auto& [pid, f] : sent) {
    BOOST_TEST(f.runs.size() == 1u);
    BOOST_TEST(f.cancels.size() <= 1u);
    for (auto id : f.cancels) BOOST_TEST(contains(f.runs, id));
    processes_cancelled += !f.cancels.empty();
  }
  BOOST_TEST(processes_cancelled == 3);
}

// Request ids are per process (each process's host numbers its own from 1), so the events of
// requests on two processes carry the same ids: each must still reach its own request.
BOOST_AUTO_TEST_CASE(notifications_reach_the_request_that_caused_them) {
  run_co([&](asio::io_context& ctx) -> asio::awaitable<void> {
    study_command cmd;
    cmd.argv = {MIRA_EXAMPLE_STUDY};
    auto pool = co_await study_pool::start(ctx.get_executor(), cmd, quiet_pool(2));
    BOOST_REQUIRE(pool);
    constexpr int n = 6;
    std::vector<int> events(n, 0);
    std::vector<bool> ok(n, false);
    int done = 0;
    asio::steady_timer all_done(ctx, asio::steady_timer::time_point::max());
    for (int i = 0; i < n; ++i) {
      protocol::run_params p;
      p.eval = "events";
      p.sample = "tool-use";
      p.target = "sim";
      pool_request r;
      r.options.on_notification = [&events, i](const notification& note) {
        if (note.method == "event") ++events[static_cast<std::size_t>(i)];
      };
      pool->run(std::move(p), std::move(r), [&, i](error_code ec, protocol::run_result res) {
        ok[static_cast<std::size_t>(i)] = !ec && res.passed;
        if (++done == n) all_done.cancel();
      });
    }
    if (done < n) co_await all_done.async_wait(asio::as_tuple(asio::use_awaitable));
    for (int i = 0; i < n; ++i) {
      BOOST_TEST(ok[static_cast<std::size_t>(i)]);
      BOOST_TEST(events[static_cast<std::size_t>(i)] == 7);
    }
    co_await pool->shutdown();
  });
}

BOOST_AUTO_TEST_SUITE_END()
