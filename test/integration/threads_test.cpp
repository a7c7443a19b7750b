// Sessions, hosts and pools on executors that run handlers on several threads at once: the
// plain executor of an io_context run by 2 and 4 threads. The rows of the thread review
// (shared reviews/threads-review.md) that a program can show: a saved session and a pool
// session of 1 040 cases, sessions started while other threads run the context with restarts
// forced, a request's notifications against its completion, each hook alone at a time. Run
// under the tsan preset, these report nothing; under the plain build they check the outcomes.
#include "common/temp_dir.hpp"
#include "integration/process_util.hpp"

#include <mira/fail_when.hpp>
#include <mira/host.hpp>
#include <mira/pool.hpp>
#include <mira/session/session.hpp>
#include <mira/store/run_reader.hpp>
#include <mira/store/run_store.hpp>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/parallel_group.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/test/data/monomorphic.hpp>
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <unistd.h>

namespace asio = boost::asio;
namespace bdata = boost::unit_test::data;
namespace fs = std::filesystem;
using namespace mira;
using namespace mira::test;

namespace {

// Runs `ctx` on `threads` threads (this one included) until it has no work left, or fails the
// test after `limit` instead of hanging.
void run_threads(asio::io_context& ctx, int threads,
                 std::chrono::seconds limit = std::chrono::seconds(120)) {
  auto stop_at = std::chrono::steady_clock::now() + limit;
  std::vector<std::thread> others;
  for (int i = 1; i < threads; ++i) others.emplace_back([&] { ctx.run_until(stop_at); });
  ctx.run_until(stop_at);
  for (auto& t : others) t.join();
  BOOST_REQUIRE_MESSAGE(ctx.stopped(), "the context still had work after the time limit");
}

// Counts how often a hook runs while another hook of the same session runs: each hook is
// documented to run alone on the session's executor.
struct overlap_probe {
  std::atomic<int> inside{0};
  std::atomic<int> overlaps{0};
  std::size_t calls = 0;  // written only while inside: a race here is a TSan report
  void enter() {
    if (inside.fetch_add(1) != 0) ++overlaps;
    ++calls;
  }
  void leave() { inside.fetch_sub(1); }
  auto wrap() {
    return [this](auto&&...) {
      enter();
      leave();
    };
  }
};

session_options example_session(const fs::path& results, std::size_t processes) {
  session_options o;
  o.study.command.argv = {MIRA_EXAMPLE_STUDY, "--slow-ms", "20"};
  o.study.pool.processes = processes;
  o.selection.evals = {"slow", "arithmetic", "events"};
  o.selection.trials = 40;
  o.policy.concurrency.max_concurrent = 16;
  o.save.emplace();
  o.save->results_dir = results;
  return o;
}

void probe_hooks(session_hooks& h, overlap_probe& p) {
  h.on_attempt = p.wrap();
  h.on_case = p.wrap();
  h.on_notification = p.wrap();
  h.on_stderr_line = p.wrap();
  h.on_warning = p.wrap();
  h.on_restart = p.wrap();
  h.on_log = p.wrap();
}

using session_result = tl::expected<session_outcome, session_error>;

// Starts every session once the threads run (co_spawned from a posted handler) and waits for
// them all.
std::vector<std::optional<session_result>> run_sessions(std::vector<session_options> all,
                                                        int threads) {
  asio::io_context ctx(threads);
  std::vector<std::optional<session_result>> out(all.size());
  auto guard = asio::make_work_guard(ctx);
  std::atomic<std::size_t> left{all.size()};
  asio::post(ctx, [&] {
    for (std::size_t i = 0; i < all.size(); ++i)
      async_run_session(ctx.get_executor(), std::move(all[i]),
                        [&, i](std::exception_ptr e, session_result r) {
                          if (!e) out[i].emplace(std::move(r));
                          if (--left == 0) guard.reset();
                        });
  });
  run_threads(ctx, threads);
  return out;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(threads)

const int thread_counts[] = {2, 4};
const std::size_t process_counts[] = {1, 2};

BOOST_DATA_TEST_CASE(a_saved_session_of_1040_cases_on_a_multi_threaded_context,
                     bdata::make(thread_counts) * bdata::make(process_counts), threads, processes) {
  for (int round = 0; round < 3; ++round) {
    temp_dir dir;
    overlap_probe probe;
    auto o = example_session(dir.path / "results", processes);
    probe_hooks(o.hooks, probe);
    std::vector<session_options> one;
    one.push_back(std::move(o));
    auto r = run_sessions(std::move(one), threads);
    BOOST_REQUIRE(r[0].has_value());
    BOOST_REQUIRE_MESSAGE(r[0]->has_value(), r[0]->error().message());
    auto& out = **r[0];
    BOOST_TEST(out.plan.cases.size() == 1080u);
    BOOST_TEST(out.ran == 1080u);
    BOOST_TEST((out.stopped() == schedule::stop_reason::none));
    BOOST_TEST(out.unsaved.empty());
    BOOST_TEST(probe.overlaps.load() == 0);
    BOOST_TEST(probe.calls >= 2 * 1080u);  // an attempt and a case each, at least
    auto reader = store::run_store::open(dir.path / "results", out.run_id);
    BOOST_REQUIRE(reader);
    BOOST_TEST(reader->reader().size() == 1080u);
  }
}

BOOST_DATA_TEST_CASE(sessions_started_while_threads_run_with_restarts_forced,
                     bdata::make(thread_counts), threads) {
  temp_dir dir;
  std::vector<session_options> all;
  std::vector<std::unique_ptr<overlap_probe>> probes;
  for (std::size_t processes : {1u, 2u, 2u}) {
    session_options o;
    // Each process dies when its 40th run arrives: 300 cases force several restarts.
    o.study.command = py_study({"--samples", "100", "--die-after", "40"});
    o.study.pool.processes = processes;
    o.study.pool.max_restarts = 20;
    o.study.pool.restart_backoff = std::chrono::milliseconds(1);
    o.selection.trials = 1;
    o.policy.concurrency.max_concurrent = 8;
    o.save.emplace();
    o.save->results_dir = dir.path / "results";
    probes.push_back(std::make_unique<overlap_probe>());
    probe_hooks(o.hooks, *probes.back());
    all.push_back(std::move(o));
  }
  auto planned = all.size();
  auto results = run_sessions(std::move(all), threads);
  for (std::size_t i = 0; i < planned; ++i) {
    BOOST_REQUIRE(results[i].has_value());
    BOOST_REQUIRE_MESSAGE(results[i]->has_value(), results[i]->error().message());
    auto& out = **results[i];
    BOOST_TEST(out.summary.count(schedule::case_state::cancelled) == 0u);
    BOOST_TEST(out.ran == out.plan.cases.size());
    BOOST_TEST(probes[i]->overlaps.load() == 0);
  }
  BOOST_TEST(no_children_left());
}

// Rows 7 and 11: a session cancelled at its first attempt, with its stop label set from a thread
// of its own meanwhile, on a multi-threaded context: it stops as interrupted, saves what ended
// and writes the label. The cancellation is emitted where the awaiting coroutine runs (a strand),
// as Asio asks.
BOOST_DATA_TEST_CASE(a_session_cancelled_at_its_first_attempt_on_threads,
                     bdata::make(thread_counts), threads) {
  for (int round = 0; round < 10; ++round) {
    temp_dir dir;
    asio::io_context ctx(threads);
    auto strand = asio::make_strand(ctx);
    asio::cancellation_signal stop;
    std::atomic<session*> opened{nullptr};
    std::atomic<bool> fired{false};
    std::thread labeller;
    auto o = example_session(dir.path / "results", 1);
    o.hooks.on_attempt = [&](std::size_t) {
      if (fired.exchange(true)) return;
      labeller = std::thread([&] {
        opened.load()->set_stop_label("cancelled");
        asio::post(strand, [&] { stop.emit(asio::cancellation_type::terminal); });
      });
    };
    std::optional<session_outcome> out;
    asio::co_spawn(
        strand,
        [&]() -> asio::awaitable<void> {
          // Each operation made outside the co_await that awaits it (g++ 12 and temporaries).
          auto opening = session::open(std::move(o));
          auto s = co_await std::move(opening);
          if (!s) co_return;
          opened = &*s;
          auto running =
              s->async_run(asio::bind_cancellation_slot(stop.slot(), asio::use_awaitable));
          out.emplace(co_await std::move(running));
        },
        asio::detached);
    run_threads(ctx, threads);
    if (labeller.joinable()) labeller.join();
    BOOST_REQUIRE(out.has_value());
    BOOST_TEST((out->stopped() == schedule::stop_reason::interrupted));
    BOOST_TEST(out->resumable());
    auto saved = store::load_run(dir.path / "results", out->run_id);
    BOOST_REQUIRE(saved);
    BOOST_TEST(saved->cases.size() == out->ran);
    BOOST_TEST(saved->meta.sessions.back().stopped == "cancelled");
  }
}

// Row 5: each completion, on a strand of its own over a 4-thread context, comes after all six
// notifications of its run.
BOOST_AUTO_TEST_CASE(every_completion_follows_its_requests_notifications) {
  asio::io_context ctx(4);
  study_command cmd;
  cmd.argv = {MIRA_EXAMPLE_STUDY};
  auto host = host_handle::spawn(ctx.get_executor(), cmd);
  BOOST_REQUIRE(host);
  constexpr int runs = 4000;
  std::atomic<int> complete{0}, early{0}, failed{0};
  auto guard = asio::make_work_guard(ctx);
  asio::co_spawn(
      ctx,
      [&]() -> asio::awaitable<void> {
        auto init = co_await host->initialize();
        if (!init) {
          guard.reset();
          co_return;
        }
        for (int i = 0; i < runs; ++i) {
          auto strand = asio::make_strand(ctx);
          auto seen = std::make_shared<int>(0);  // touched on `strand` only
          protocol::run_params p;
          p.eval = "events";
          p.sample = "tool-use";
          p.target = "sim";
          request_options ro;
          ro.on_notification = [seen](const notification&) { ++*seen; };
          host->run(std::move(p), std::move(ro),
                    asio::bind_executor(strand, [&, seen](error_code ec, auto) {
                      if (ec) ++failed;
                      if (*seen != 8) ++early;
                      if (++complete < runs) return;
                      asio::co_spawn(
                          ctx,
                          [h = *host]() mutable -> asio::awaitable<void> { co_await h.shutdown(); },
                          asio::detached);
                      guard.reset();
                    }));
        }
      },
      asio::detached);
  run_threads(ctx, 4);
  BOOST_TEST(complete.load() == runs);
  BOOST_TEST(failed.load() == 0);
  BOOST_TEST(early.load() == 0);
}

// Uncorrelated notifications reach host_options::on_notification one at a time, in order.
BOOST_AUTO_TEST_CASE(uncorrelated_notifications_arrive_alone_and_in_order) {
  asio::io_context ctx(4);
  host_options ho;
  overlap_probe probe;
  std::vector<std::int64_t> order;  // pushed only inside the probe
  std::atomic<std::size_t> delivered{0};
  std::optional<host_handle> handle;  // set before the study can write
  auto guard = asio::make_work_guard(ctx);
  ho.on_notification = [&](const notification& n) {
    probe.enter();
    if (auto* seq = n.params.if_contains("seq")) order.push_back(seq->to_number<std::int64_t>());
    probe.leave();
    if (++delivered != 2000) return;
    asio::co_spawn(
        ctx, [h = *handle]() mutable -> asio::awaitable<void> { co_await h.shutdown(); },
        asio::detached);
    guard.reset();
  };
  // A study of one line of shell: 2 000 numbered log notifications with no request id, then it
  // waits for its input to close.
  study_command cmd;
  cmd.argv = {"/bin/sh", "-c",
              "i=0; while [ $i -lt 2000 ]; do "
              "echo '{\"jsonrpc\":\"2.0\",\"method\":\"log\",\"params\":{\"level\":\"info\","
              "\"message\":\"m\",\"seq\":'$i'}}'; i=$((i+1)); done; cat > /dev/null"};
  auto host = host_handle::spawn(ctx.get_executor(), cmd, std::move(ho));
  BOOST_REQUIRE(host);
  handle = *host;  // no thread runs the context yet
  run_threads(ctx, 4, std::chrono::seconds(60));
  BOOST_TEST(probe.overlaps.load() == 0);
  BOOST_REQUIRE(order.size() == 2000u);
  for (std::size_t i = 0; i < order.size(); ++i) BOOST_TEST_REQUIRE(order[i] == std::int64_t(i));
}

// fail_when: the outage eval's infra result stops its slow sibling, which a plain
// wait_for_one_error would have run to its end.
BOOST_AUTO_TEST_CASE(fail_when_stops_the_group_on_an_infra_outcome) {
  asio::io_context ctx;
  bool checked = false;
  asio::co_spawn(
      ctx,
      [&]() -> asio::awaitable<void> {
        study_command cmd;
        cmd.argv = {MIRA_EXAMPLE_STUDY, "--slow-ms", "60000"};
        // No co_await in this full-expression: g++ 12 would destroy the default host_options
        // argument twice.
        auto ex = co_await asio::this_coro::executor;
        auto host = host_handle::spawn(ex, cmd);
        BOOST_REQUIRE(host);
        // Awaited into a local: g++ 12 destroys a temporary of a co_await inside a macro's
        // expression twice.
        auto init = co_await host->initialize();
        BOOST_REQUIRE(init.has_value());
        auto make = [](const char* eval, const char* sample) {
          protocol::run_params p;
          p.eval = eval;
          p.sample = sample;
          p.target = "sim";
          return p;
        };
        auto op = [&](const char* eval, const char* sample) {
          return host->run(make(eval, sample),
                           as_expected(fail_when(infra_failure, asio::deferred)));
        };
        std::vector<decltype(op("", ""))> ops;
        ops.push_back(op("slow", "long-task"));
        ops.push_back(op("outage", "provider-503"));
        auto start = std::chrono::steady_clock::now();
        auto [order, codes, results] =
            co_await asio::experimental::make_parallel_group(std::move(ops))
                .async_wait(asio::experimental::wait_for_one_error(), asio::use_awaitable);
        auto took = std::chrono::steady_clock::now() - start;
        BOOST_TEST(took < std::chrono::seconds(30));
        BOOST_TEST(codes[1] == errc::rejected_outcome);
        BOOST_REQUIRE(results[1].has_value());  // the result is kept
        BOOST_TEST((results[1]->transcript.error_kind == protocol::error_kind::infra));
        BOOST_TEST(codes[0] == asio::error::operation_aborted);
        co_await host->shutdown();
        checked = true;
      },
      asio::detached);
  ctx.run_for(std::chrono::seconds(60));
  BOOST_TEST(checked);
}

// Row 9: a cancellation emitted right after async_wait_abandoned, from a thread that does not
// run the context (so the wait itself reaches the host's strand later), is not lost.
BOOST_AUTO_TEST_CASE(a_wait_for_abandoned_requests_cancelled_at_once_is_cancelled) {
  asio::io_context ctx;
  study_command cmd;
  cmd.argv = {MIRA_EXAMPLE_STUDY};
  auto host = host_handle::spawn(ctx.get_executor(), cmd);
  BOOST_REQUIRE(host);
  asio::cancellation_signal sig;
  std::optional<error_code> got;
  host->async_wait_abandoned(
      0, asio::bind_cancellation_slot(sig.slot(), [&](error_code ec, std::size_t) {
        got = ec;
        asio::co_spawn(
            ctx, [h = *host]() mutable -> asio::awaitable<void> { co_await h.shutdown(); },
            asio::detached);
      }));
  sig.emit(asio::cancellation_type::terminal);
  ctx.run_for(std::chrono::seconds(30));
  BOOST_REQUIRE(got.has_value());
  BOOST_TEST(*got == asio::error::operation_aborted);
}

// Row 8: a pool request cancelled after the pool took it from its queue for a process, but
// before it reached that process, completes as cancelled and is never sent. The first request
// completes on the strand both handlers run on and cancels the second there: the pool's release
// of the first has just taken the second out of the queue.
BOOST_AUTO_TEST_CASE(a_pool_request_cancelled_while_handed_over_is_never_sent) {
  temp_file record;
  asio::io_context ctx;
  int completed = 0;
  std::optional<error_code> second_ec;
  asio::cancellation_signal second;
  asio::co_spawn(
      ctx,
      [&]() -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        pool_options po;
        po.processes = 1;
        po.max_in_flight_per_process = 1;
        // The operation made outside the co_await: g++ 12 mishandles the temporaries of a
        // full-expression that awaits.
        auto starting = study_pool::start(ex, py_study({"--record", record.path}), po);
        auto pool = co_await std::move(starting);
        BOOST_REQUIRE(pool.has_value());
        auto strand = asio::make_strand(ex);
        pool->run(echo_case("a"),
                  asio::bind_executor(strand, [&](error_code, protocol::run_result) {
                    second.emit(asio::cancellation_type::terminal);
                    ++completed;
                  }));
        pool->run(
            echo_case("b"),
            asio::bind_cancellation_slot(
                second.slot(),
                asio::bind_executor(strand, [&, p = *pool](error_code ec, protocol::run_result) {
                  second_ec = ec;
                  ++completed;
                  // The last to complete (both run on `strand`, in order).
                  asio::co_spawn(
                      ctx, [p]() mutable -> asio::awaitable<void> { co_await p.shutdown(); },
                      asio::detached);
                })));
      },
      asio::detached);
  ctx.run_for(std::chrono::seconds(30));
  BOOST_REQUIRE(completed == 2);
  BOOST_REQUIRE(second_ec.has_value());
  BOOST_TEST(*second_ec == asio::error::operation_aborted);
  auto sent = read_file(record.path);
  std::size_t runs = 0;
  for (std::size_t at = 0; (at = sent.find("\"method\":\"run\"", at)) != std::string::npos; ++at)
    ++runs;
  BOOST_TEST(runs == 1u, sent);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(session_causes)

session_result open_and_run(session_options o) {
  asio::io_context ctx;
  std::optional<session_result> r;
  async_run_session(ctx.get_executor(), std::move(o),
                    [&](std::exception_ptr, session_result out) { r.emplace(std::move(out)); });
  ctx.run_for(std::chrono::seconds(60));
  BOOST_REQUIRE(r.has_value());
  return std::move(*r);
}

BOOST_AUTO_TEST_CASE(a_missing_or_unexecutable_program_is_spawn_failed) {
  temp_dir dir;
  session_options missing;
  missing.study.command.argv = {(dir.path / "no-such-study").string()};
  auto r = open_and_run(std::move(missing));
  BOOST_REQUIRE(!r);
  BOOST_TEST(r.error().code == errc::spawn_failed, r.error().message());
  BOOST_TEST((r.error().code == session_condition::study_failed));
  BOOST_TEST(r.error().message().find("no-such-study") != std::string::npos);

  auto plain = dir.path / "not-executable";
  std::FILE* f = std::fopen(plain.c_str(), "w");
  BOOST_REQUIRE(f);
  std::fputs("#!/bin/sh\n", f);
  std::fclose(f);
  session_options unexecutable;
  unexecutable.study.command.argv = {plain.string()};
  r = open_and_run(std::move(unexecutable));
  BOOST_REQUIRE(!r);
  BOOST_TEST(r.error().code == errc::spawn_failed, r.error().message());
  BOOST_TEST((r.error().code == session_condition::study_failed));
}

BOOST_AUTO_TEST_CASE(a_study_that_exits_at_start_is_study_exited_with_its_status) {
  session_options o;
  o.study.command.argv = {"/bin/sh", "-c", "echo 'no API key' >&2; exit 3"};
  o.hooks.on_log = [](const log_record&) {};  // the host's warning about initialize
  auto r = open_and_run(std::move(o));
  BOOST_REQUIRE(!r);
  BOOST_TEST(r.error().code == errc::study_exited, r.error().message());
  BOOST_TEST((r.error().code == session_condition::study_failed));
  BOOST_TEST(r.error().code != errc::spawn_failed);
  BOOST_REQUIRE(r.error().exit.has_value());
  BOOST_TEST(r.error().exit->code == 3);
  BOOST_REQUIRE(!r.error().stderr_tail.empty());
  BOOST_TEST(r.error().stderr_tail.back() == "no API key");
}

// With hooks.on_log set, a session writes nothing to the process's stderr: here the study dies
// with a case in flight (the host's warning about its failed request goes to the sink).
BOOST_AUTO_TEST_CASE(a_log_sink_keeps_the_process_stderr_clean) {
  temp_dir dir;
  auto captured = dir.path / "stderr.txt";
  std::fflush(stderr);
  int saved = ::dup(2);
  int to = ::open(captured.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  BOOST_REQUIRE(saved >= 0 && to >= 0);
  ::dup2(to, 2);
  ::close(to);
  std::vector<std::string> logged;
  session_options o;
  o.study.command = py_study({"--die-after", "2"});
  o.selection.trials = 1;
  o.hooks.on_log = [&](const log_record& r) { logged.emplace_back(r.message); };
  auto r = open_and_run(std::move(o));
  std::fflush(stderr);
  ::dup2(saved, 2);
  ::close(saved);
  BOOST_REQUIRE_MESSAGE(r.has_value(), (r ? std::string() : r.error().message()));
  BOOST_TEST(!logged.empty());
  BOOST_TEST(read_file(captured.string()).empty(), read_file(captured.string()));
}

BOOST_AUTO_TEST_SUITE_END()
