// host_handle against a real child process: the Python test study and its misbehaviours.
#include "common/fake_study.hpp"
#include "common/run_co.hpp"
#include "common/schema.hpp"
#include "integration/process_util.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/experimental/parallel_group.hpp>
#include <boost/asio/steady_timer.hpp>

#include <unistd.h>
#include <cerrno>

using namespace mira;
using namespace mira::test;
using namespace boost::asio::experimental::awaitable_operators;
using std::chrono::milliseconds;

namespace {

host_options test_options(captured_log* log = nullptr) {
  auto o = quiet_options(log);
  o.on_stderr_line = [](std::string_view) {};
  o.shutdown_grace = std::chrono::seconds(10);
  return o;
}

asio::awaitable<host_handle> start(study_command cmd, host_options o = test_options()) {
  auto ex = co_await asio::this_coro::executor;
  auto host = host_handle::spawn(ex, std::move(cmd), std::move(o));
  BOOST_REQUIRE_MESSAGE(host, (host ? "" : host.error().message()));
  auto init = co_await host->initialize();
  BOOST_REQUIRE_MESSAGE(init, (init ? "" : init.error().message()));
  co_return std::move(*host);
}

// All lines of a recording as JSON objects.
std::vector<json::object> frames(const std::string& path) {
  std::vector<json::object> out;
  std::istringstream in(read_file(path));
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) out.push_back(json::parse(line).as_object());
  return out;
}

// Runs `n` copies of one case concurrently and returns every outcome.
asio::awaitable<std::vector<tl::expected<protocol::run_result, error>>> run_many(host_handle host,
                                                                                 int n) {
  auto ex = co_await asio::this_coro::executor;
  using op_t = decltype(asio::co_spawn(ex, host.run(echo_case("a")), asio::deferred));
  std::vector<op_t> ops;
  for (int i = 0; i < n; ++i)
    ops.push_back(asio::co_spawn(ex, host.run(echo_case("a")), asio::deferred));
  auto [order, excs, results] =
      co_await asio::experimental::make_parallel_group(std::move(ops))
          .async_wait(asio::experimental::wait_for_all(), asio::use_awaitable);
  co_return std::move(results);
}

std::string method_of(const json::object& f) {
  auto* m = f.if_contains("method");
  return m && m->is_string() ? std::string(m->get_string()) : std::string();
}

}  // namespace

BOOST_AUTO_TEST_SUITE(python_study)

BOOST_AUTO_TEST_CASE(a_timeout_sends_cancel_with_the_run_id) {
  temp_file rec;
  run_co([&](asio::io_context& ctx) -> asio::awaitable<void> {
    auto cmd = py_study({"--run-ms", "10000", "--record", rec.path});
    auto host = co_await start(cmd);
    asio::steady_timer timer(ctx, milliseconds(100));
    auto t0 = std::chrono::steady_clock::now();
    auto raced = co_await (host.run(echo_case("a")) || timer.async_wait(asio::use_awaitable));
    BOOST_TEST(raced.index() == 1u);
    BOOST_TEST((std::chrono::steady_clock::now() - t0 < std::chrono::seconds(3)));
    auto st = co_await host.shutdown();
    BOOST_REQUIRE(st);
    BOOST_TEST(st->code == 0);
  });
  std::int64_t run_id = -1, cancel_target = -2;
  for (auto& f : frames(rec.path)) {
    auto method = method_of(f);
    if (method == "run") run_id = f.at("id").as_int64();
    if (method == "cancel") cancel_target = f.at("params").at("id").as_int64();
  }
  BOOST_TEST(run_id == cancel_target);
  BOOST_TEST(no_children_left());
}

BOOST_AUTO_TEST_CASE(fail_fast_group_cancels_the_slow_siblings) {
  temp_file rec;
  run_co([&](asio::io_context& ctx) -> asio::awaitable<void> {
    auto cmd = py_study({"--run-ms", "10000", "--record", rec.path});
    auto host = co_await start(cmd);
    using outcome = tl::expected<protocol::run_result, error>;
    struct first_failure {
      asio::cancellation_type_t operator()(const std::exception_ptr& e, const outcome& r) const {
        return e || !r || !r->passed ? asio::cancellation_type::all : asio::cancellation_type::none;
      }
    };
    using op_t = decltype(asio::co_spawn(ctx, host.run(echo_case("a")), asio::deferred));
    std::vector<op_t> ops;
    for (auto s : {"a", "fail", "b"})
      ops.push_back(asio::co_spawn(ctx, host.run(echo_case(s)), asio::deferred));
    auto t0 = std::chrono::steady_clock::now();
    auto [order, excs, results] = co_await asio::experimental::make_parallel_group(std::move(ops))
                                      .async_wait(first_failure{}, asio::use_awaitable);
    BOOST_TEST((std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5)));
    BOOST_TEST(order[0] == 1u);
    BOOST_REQUIRE(results[1]);
    BOOST_TEST(!results[1]->passed);
    BOOST_TEST(results[0].error().code == asio::error::operation_aborted);
    BOOST_TEST(results[2].error().code == asio::error::operation_aborted);
    co_await host.shutdown();
  });
  std::vector<std::int64_t> slow_runs, cancelled;
  for (auto& f : frames(rec.path)) {
    auto method = method_of(f);
    if (method == "run" && f.at("params").at("sample").as_string() != "fail")
      slow_runs.push_back(f.at("id").as_int64());
    if (method == "cancel") cancelled.push_back(f.at("params").at("id").as_int64());
  }
  std::sort(cancelled.begin(), cancelled.end());
  BOOST_TEST(cancelled == slow_runs, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(a_study_dying_mid_run_fails_every_pending_request) {
  run_co([](asio::io_context&) -> asio::awaitable<void> {
    auto cmd = py_study({"--run-ms", "10000", "--die-after", "3"});
    auto host = co_await start(cmd);
    auto results = co_await run_many(host, 3);
    for (auto& r : results) {
      BOOST_REQUIRE(!r);
      BOOST_TEST(r.error().code == errc::study_exited);
      BOOST_TEST(is_fatal(r.error().code));
      BOOST_REQUIRE(r.error().diag.exit);
      BOOST_TEST(r.error().diag.exit->code == 3);
      BOOST_REQUIRE(!r.error().diag.stderr_tail.empty());
      BOOST_TEST(r.error().diag.stderr_tail.back() == "py-study: dying on purpose");
      BOOST_TEST(r.error().message().find("exit code 3") != std::string::npos);
    }
  });
  BOOST_TEST(no_children_left());
}

BOOST_AUTO_TEST_CASE(a_study_killed_by_a_signal_is_reported_as_such) {
  run_co([](asio::io_context&) -> asio::awaitable<void> {
    auto cmd = py_study({"--sigkill-after", "1"});
    auto host = co_await start(cmd);
    auto r = co_await host.run(echo_case("a"));
    BOOST_REQUIRE(!r);
    BOOST_REQUIRE(r.error().diag.exit);
    BOOST_TEST(r.error().diag.exit->signal == 9);
    BOOST_TEST(r.error().message().find("SIGKILL") != std::string::npos);
  });
}

BOOST_AUTO_TEST_CASE(a_stderr_flood_never_stalls_the_answers) {
  constexpr std::size_t flood = std::size_t{100} << 20;
  std::size_t bytes = 0, lines = 0;
  run_co(
      [&](asio::io_context&) -> asio::awaitable<void> {
        auto o = test_options();
        o.on_stderr_line = [&](std::string_view l) {
          bytes += l.size() + 1;
          ++lines;
        };
        auto cmd = py_study({"--stderr-flood", std::to_string(flood)});
        auto host = co_await start(cmd, o);
        auto results = co_await run_many(host, 20);
        for (auto& r : results) BOOST_TEST(r.has_value());
        auto st = co_await host.shutdown();
        BOOST_REQUIRE(st);
        BOOST_TEST(st->code == 0);
      },
      std::chrono::seconds(120));
  BOOST_TEST(bytes >= flood);
  BOOST_TEST(lines == flood / 1024);
}

BOOST_AUTO_TEST_CASE(garbage_and_overlong_lines_are_skipped) {
  captured_log log;
  run_co([&](asio::io_context&) -> asio::awaitable<void> {
    auto o = test_options(&log);
    o.max_line_bytes = 1 << 20;
    auto cmd = py_study({"--garbage"});
    auto host = co_await start(cmd, o);
    auto results = co_await run_many(host, 5);
    for (auto& r : results) BOOST_TEST(r.has_value());
    co_await host.shutdown();
  });
  BOOST_TEST(log.count(log_level::warning, "invalid JSON") == 1u);
  BOOST_TEST(log.count(log_level::debug, "invalid JSON") == 9u);  // 2 junk lines x 5 - 1
  BOOST_TEST(log.count(log_level::warning, "not a JSON object") == 1u);
  BOOST_TEST(log.count(log_level::warning, "skipped a line of 2097152 bytes") == 5u);
}

BOOST_AUTO_TEST_CASE(every_frame_validates_against_the_schema,
                     *boost::unit_test::precondition(needs_schema_and_validator)) {
  temp_file rec;
  run_co([&](asio::io_context& ctx) -> asio::awaitable<void> {
    auto cmd =
        py_study({"--run-ms", "200", "--record", rec.path, "--caps", "cancel,execute,score"});
    auto host = co_await start(cmd);
    auto list = co_await host.list_all();
    BOOST_REQUIRE(list);
    auto p = echo_case("a");
    p.params = {{"effort", "high"}};
    p.trial = 1;
    p.trials = 3;
    p.seed = 43;
    auto run = co_await host.run(p);
    BOOST_TEST(run.has_value());
    auto ex = co_await host.execute(echo_case("b"));
    BOOST_REQUIRE(ex);
    protocol::score_params sp;
    sp.identity = echo_case("b");
    sp.transcript = ex->raw().at("transcript").as_object();
    auto scored = co_await host.score(sp);
    BOOST_TEST(scored.has_value());
    asio::steady_timer timer(ctx, milliseconds(20));
    co_await (host.run(echo_case("a")) || timer.async_wait(asio::use_awaitable));  // sends cancel
    co_await host.cancel(999, asio::as_tuple(asio::use_awaitable));
    co_await host.shutdown();
  });
  auto cmd = std::string(MIRA_PYTHON3) + " " + ndjson_validator()->string() + " " +
             (*schema_dir() / "schema.json").string() + " " + rec.path + " --deep";
  auto r = run_command(cmd);
  BOOST_TEST_MESSAGE(r.out);
  BOOST_TEST(r.code == 0);
  BOOST_TEST(frames(rec.path).size() >= 14u);
}

BOOST_AUTO_TEST_CASE(shutdown_escalates_to_sigkill) {
  run_co([](asio::io_context& ctx) -> asio::awaitable<void> {
    study_command stubborn;
    stubborn.argv = {MIRA_PYTHON3, "-c",
                     "import signal,time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
                     "print('ready', flush=True)\ntime.sleep(60)"};
    auto o = test_options();
    // SIGTERM comes after shutdown_grace: a Python that has not yet set SIG_IGN by then dies of
    // it (15, seen once on a loaded machine with 100 ms). Two seconds is ample to start.
    o.shutdown_grace = milliseconds(2000);
    o.terminate_grace = milliseconds(100);
    auto host = host_handle::spawn(ctx.get_executor(), stubborn, o);
    BOOST_REQUIRE(host);
    auto t0 = std::chrono::steady_clock::now();
    auto st = co_await host->shutdown();
    BOOST_REQUIRE(st);
    BOOST_TEST(st->signal == 9);
    BOOST_TEST((std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10)));
  });
  BOOST_TEST(no_children_left());
}

BOOST_AUTO_TEST_CASE(environment_and_working_directory_are_passed) {
  std::vector<std::string> lines;
  run_co([&](asio::io_context& ctx) -> asio::awaitable<void> {
    study_command c;
    c.argv = {"sh", "-c", "echo \"var=$MIRA_TEST_VAR home=${HOME:-unset}\" >&2; pwd >&2"};
    c.working_directory = "/tmp";
    c.environment = std::vector<std::string>{"MIRA_TEST_VAR=42", "PATH=/usr/bin:/bin"};
    auto o = test_options();
    o.on_stderr_line = [&](std::string_view l) { lines.emplace_back(l); };
    auto host = host_handle::spawn(ctx.get_executor(), c, o);
    BOOST_REQUIRE(host);
    auto st = co_await host->shutdown();
    BOOST_REQUIRE(st);
    BOOST_TEST(st->code == 0);
  });
  BOOST_TEST(lines == (std::vector<std::string>{"var=42 home=unset", "/tmp"}),
             boost::test_tools::per_element());
}

// Without on_stderr_line the study's lines go to the log sink, marked as the study's: the library
// writes nothing to stderr of its own accord.
BOOST_AUTO_TEST_CASE(without_a_stderr_hook_the_study_s_lines_go_to_the_log_sink) {
  std::vector<std::string> lines;
  run_co([&](asio::io_context& ctx) -> asio::awaitable<void> {
    study_command c;
    c.argv = {"sh", "-c", "echo one >&2; echo two >&2"};
    auto o = test_options();
    o.on_stderr_line = nullptr;
    o.log = [&](const log_record& r) {
      if (r.source == log_source::study_stderr) lines.emplace_back(r.message);
    };
    auto host = host_handle::spawn(ctx.get_executor(), c, o);
    BOOST_REQUIRE(host);
    auto st = co_await host->shutdown();
    BOOST_REQUIRE(st);
  });
  BOOST_TEST(lines == (std::vector<std::string>{"one", "two"}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(a_command_that_cannot_start_is_an_error) {
  asio::io_context ctx;
  study_command c;
  c.argv = {"mira-no-such-study-binary"};
  auto host = host_handle::spawn(ctx.get_executor(), c, test_options());
  BOOST_REQUIRE(!host);
  BOOST_TEST(host.error().code == errc::spawn_failed);
  BOOST_TEST(host.error().message().find("mira-no-such-study-binary") != std::string::npos);
  c.argv = {};
  BOOST_TEST(!host_handle::spawn(ctx.get_executor(), c, test_options()));
}

BOOST_AUTO_TEST_CASE(dropping_the_last_handle_kills_the_study) {
  {
    asio::io_context ctx;
    std::optional<error_code> pending;
    {
      auto host =
          host_handle::spawn(ctx.get_executor(), py_study({"--run-ms", "60000"}), test_options());
      BOOST_REQUIRE(host);
      // Initialized first: a run before initialize would be refused, not left pending.
      bool ready = false;
      host->initialize([&](error_code ec, protocol::initialize_result) { ready = !ec; });
      while (!ready && ctx.run_one_for(std::chrono::seconds(10)) > 0) {
      }
      BOOST_REQUIRE(ready);
      host->run(echo_case("a"), [&](error_code ec, protocol::run_result) { pending = ec; });
    }  // the last handle goes: the study is killed, the pending request aborted
    ctx.run_for(std::chrono::seconds(10));
    BOOST_REQUIRE(pending);
    BOOST_TEST(*pending == asio::error::operation_aborted);
  }
  BOOST_TEST(no_children_left());
}

BOOST_AUTO_TEST_CASE(destroying_the_context_with_work_pending_kills_the_study) {
  {
    asio::io_context ctx;
    {
      auto host =
          host_handle::spawn(ctx.get_executor(), py_study({"--run-ms", "60000"}), test_options());
      BOOST_REQUIRE(host);
      // A coroutine holding a handle copy waits on a run that never ends, and the context is
      // destroyed without being run to completion.
      asio::co_spawn(
          ctx, [h = *host]() mutable -> asio::awaitable<void> { co_await h.run(echo_case("a")); },
          asio::detached);
    }
    ctx.run_for(milliseconds(200));
  }
  BOOST_TEST(no_children_left());
}

BOOST_AUTO_TEST_SUITE_END()
