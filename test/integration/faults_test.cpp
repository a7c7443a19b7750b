// Faults a study can throw at the host (issue: fault tolerance), each against a real process
// that misbehaves on purpose: it ignores `cancel`, hangs, never reads, answers with a line of
// hundreds of megabytes, floods stderr; and a results folder that cannot take a result.
#include "common/fake_study.hpp"
#include "common/run_co.hpp"
#include "common/temp_dir.hpp"
#include "integration/process_util.hpp"

#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/json/parse.hpp>
#include <boost/test/unit_test.hpp>

#include <sys/resource.h>

#include <filesystem>

using namespace mira;
using namespace mira::test;
using namespace boost::asio::experimental::awaitable_operators;
namespace fs = std::filesystem;

namespace {

const std::string mira_bin = MIRA_CLI;
const std::string py = std::string(MIRA_PYTHON3) + " " MIRA_PY_STUDY;

asio::awaitable<host_handle> start(study_command cmd, host_options o) {
  auto host = host_handle::spawn(co_await asio::this_coro::executor, std::move(cmd), std::move(o));
  BOOST_REQUIRE_MESSAGE(host, (host ? "" : host.error().message()));
  auto init = co_await host->initialize();
  BOOST_REQUIRE_MESSAGE(init, (init ? "" : init.error().message()));
  co_return std::move(*host);
}

// Sanitizers change the resident set: ThreadSanitizer keeps shadow memory of about four times
// what the process touches; AddressSanitizer keeps up to 256 MiB of freed memory in quarantine.
// Buffering the whole line or flood would still exceed these bounds.
// g++ says which sanitizer it builds for with a macro, Clang with __has_feature.
#if defined(__has_feature)
#define MIRA_HAS_SANITIZER(name) __has_feature(name)
#else
#define MIRA_HAS_SANITIZER(name) 0
#endif
#if defined(__SANITIZE_THREAD__) || MIRA_HAS_SANITIZER(thread_sanitizer)
constexpr long rss_factor = 5, rss_allowance = 0;
#elif defined(__SANITIZE_ADDRESS__) || MIRA_HAS_SANITIZER(address_sanitizer)
constexpr long rss_factor = 1, rss_allowance = 300;
#else
constexpr long rss_factor = 1, rss_allowance = 0;
#endif

// Peak resident set of this process (the host runs in it), in MiB.
long peak_rss_mib() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss / 1024;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(faults)

BOOST_AUTO_TEST_CASE(a_study_that_ignores_cancel_keeps_its_slots_until_it_answers) {
  // -j 2 and every slow run times out at 0.1 s, but the study keeps working on it until
  // 0.4 s: the host must not hand it more than 2 runs at once. The "fail" samples answer at
  // once and report the most runs the study ever had.
  auto r = run_command(mira_bin +
                       " run --dry-run -j 2 --timeout 0.1 --max-retries 0 --trials 2 --format "
                       "jsonl -- " +
                       py + " --run-ms 400 --ignore-cancel 2>/dev/null");
  BOOST_TEST(r.code == 1);
  std::istringstream in(r.out);
  std::size_t reported = 0;
  for (std::string line; std::getline(in, line);) {
    auto v = json::parse(line).as_object();
    auto* t = v.if_contains("transcript");
    auto* meta = t ? t->as_object().if_contains("metadata") : nullptr;
    if (!meta || !meta->is_object() || !meta->as_object().contains("max_active")) continue;
    ++reported;
    BOOST_TEST(meta->as_object().at("max_active").as_int64() <= 2);
  }
  BOOST_TEST(reported == 2u);
}

BOOST_AUTO_TEST_CASE(a_study_that_never_answers_after_cancel_is_restarted_not_waited_for) {
  // Every run outlives its 0.2 s timeout and the study never answers it: both slots stay held,
  // so after a grace period (the timeout) the study counts as hung and is started again.
  auto r = run_command("timeout 60 " + mira_bin +
                       " run --dry-run -j 2 --timeout 0.2 --max-retries 0 --max-restarts 1 -- " +
                       py + " --run-ms 100000 --ignore-cancel 2>&1");
  BOOST_TEST(r.code == 1);
  // Not "died": it was alive, and the run gave up on it after the case timeout.
  BOOST_TEST(r.out.find("mira: starting the study again: the study never answered 2 cancelled "
                        "request(s), which held every slot for 0.2 s (the case timeout): it is "
                        "treated as hung") != std::string::npos,
             r.out);
  BOOST_TEST(r.out.find("(timed out after 0.2 s)") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_clean_exit_mid_run_is_a_crash_too) {
  temp_file mark;
  fs::remove(mark.path);
  // Exit code 0 with runs in flight: restarted, and the run completes.
  auto r =
      run_command("timeout 60 " + mira_bin + " run --dry-run -j 3 -- " + py +
                  " --run-ms 200 --die-after 2 --die-code 0 --die-once " + mark.path + " 2>&1");
  BOOST_TEST(r.code == 1);  // echo/fail
  BOOST_TEST(r.out.find("mira: starting the study again: the study exited or closed its output: "
                        "the study exited [exit code 0]") != std::string::npos,
             r.out);
  BOOST_TEST(r.out.find("2 passed, 1 failed, 0 n/a, 0 skipped, 0 cancelled, 0 errors") !=
             std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_restarted_study_must_be_the_same_study) {
  temp_file mark;
  fs::remove(mark.path);
  auto r = run_command("timeout 60 " + mira_bin + " run --dry-run -j 1 -- " + py +
                       " --die-after 2 --die-once " + mark.path + " --rename-on-restart 2>&1");
  BOOST_TEST(r.code == 3);
  BOOST_TEST(r.out.find("the restarted study is 'other-study' version 0.0.1 (protocol 1.1), not "
                        "'py-study' version 0.0.1 (protocol 1.1)") != std::string::npos);
}

// The restarted study gets --init-timeout to answer initialize, as the first one does.
BOOST_AUTO_TEST_CASE(a_restarted_study_that_never_answers_initialize_stops_the_run) {
  temp_file mark;
  fs::remove(mark.path);
  // A limit the first study (Python, on a loaded machine) always meets: only the mute one misses.
  auto r = run_command("timeout 60 " + mira_bin + " run --dry-run -j 1 --init-timeout 3 -- " + py +
                       " --die-after 2 --die-once " + mark.path + " --mute-on-restart 2>&1");
  BOOST_TEST(r.code == 3);
  BOOST_TEST(r.out.find("the restarted study did not answer initialize within 3 s "
                        "(--init-timeout)") != std::string::npos,
             r.out);
}

BOOST_AUTO_TEST_CASE(an_idle_study_is_killed_and_restarted_like_a_crashed_one) {
  temp_file mark;
  fs::remove(mark.path);
  // The first study stops writing anything when its second run arrives.
  auto r = run_command("timeout 60 " + mira_bin +
                       " run --dry-run -j 1 --idle-timeout 0.5 --max-retries 2 -- " + py +
                       " --hang-after 2 --die-once " + mark.path + " 2>&1");
  BOOST_TEST(r.code == 1);  // echo/fail fails; nothing else goes wrong
  // The host killed it for its silence, and says so when it starts the next one.
  BOOST_TEST(r.out.find("mira: starting the study again: the study exited or closed its output: "
                        "the study wrote nothing for 0.5 s while 1 request(s) were pending "
                        "(idle timeout), so the host killed it [killed by signal 9 (SIGKILL)]") !=
                 std::string::npos,
             r.out);
  BOOST_TEST(r.out.find("the study died") == std::string::npos);
  BOOST_TEST(r.out.find("2 passed, 1 failed, 0 n/a, 0 skipped, 0 cancelled, 0 errors") !=
             std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_study_killed_by_a_signal_is_reported_by_its_signal_not_its_broken_pipes) {
  // Four runs in flight when it kills itself: the host sees its output end (or its input
  // break) before the exit status, which must still be what every message names.
  auto r = run_command("timeout 60 " + mira_bin + " run --dry-run -j 4 --max-restarts 0 -- " + py +
                       " --samples 8 --run-ms 50 --sigkill-after 3 2>&1");
  BOOST_TEST(r.code == 3);
  // How many were written before it died is timing: the count is not checked.
  BOOST_TEST(r.out.find(" pending request(s) failed: the study died [killed by signal 9 "
                        "(SIGKILL)]") != std::string::npos,
             r.out);
  BOOST_TEST(r.out.find("stopped (study failed): the study exited or closed its output: the study "
                        "died [killed by signal 9 (SIGKILL)]") != std::string::npos);
  BOOST_TEST(r.out.find("closed its output [") == std::string::npos);
  BOOST_TEST(r.out.find("stopped reading its input") == std::string::npos);
}

// A study that died beyond --max-restarts with cases in flight: those were saved as errors ("the
// study exited"), so the resume the run printed ended with them still errors (exit 1).
BOOST_AUTO_TEST_CASE(cases_in_flight_when_the_study_dies_for_good_are_run_by_the_resume) {
  temp_dir dir;
  const auto results = dir / "results";
  auto r = run_command("timeout 60 " + mira_bin + " run -j 4 --max-restarts 0 --results-dir " +
                       results + " -- " + py + " --samples 8 --run-ms 200 --die-after 4 2>&1");
  BOOST_TEST(r.code == 3, r.out);
  BOOST_TEST(r.out.find(" 0 errors ") != std::string::npos, r.out);
  BOOST_TEST(r.out.find("(not run: the study exited") != std::string::npos, r.out);
  auto at = r.out.find("resume with: ");
  BOOST_REQUIRE(at != std::string::npos);
  auto resume = r.out.substr(at + 13, r.out.find('\n', at) - at - 13);
  // The printed command, less the study's switch that kills it.
  resume = resume.substr(0, resume.find(" --die-after"));
  BOOST_REQUIRE(resume.rfind("mira run ", 0) == 0u);
  auto resumed = run_command("timeout 60 " + mira_bin + resume.substr(4) + " 2>&1");
  BOOST_TEST(resumed.code == 0, resumed.out);
  BOOST_TEST(resumed.out.find("8 passed, 0 failed") != std::string::npos, resumed.out);
}

BOOST_AUTO_TEST_CASE(a_study_that_answers_initialize_but_not_list_times_out_naming_the_phase) {
  // The limit is each phase's: 0.3 s once let a loaded machine's Python miss initialize instead.
  auto r =
      run_command("timeout 60 " + mira_bin + " list --init-timeout 3 -- " + py + " --deaf 2>&1");
  BOOST_TEST(r.code == 3);
  BOOST_TEST(r.out.find("did not finish listing its evals within 3 s (--init-timeout)") !=
                 std::string::npos,
             r.out);
}

BOOST_AUTO_TEST_CASE(a_study_that_never_reads_cannot_block_the_host) {
  // Requests of 16 KiB fill the pipe the study never drains; timeouts, the event loop and
  // shutdown keep working.
  std::size_t ticks = 0;
  // Outside the coroutine: a tick already queued when it ends still reads it.
  bool ticking = true;
  run_co(
      [&](asio::io_context&) -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        auto o = quiet_options();
        o.on_stderr_line = [](std::string_view) {};
        o.shutdown_grace = std::chrono::milliseconds(200);
        auto cmd = py_study({"--deaf"});
        auto host = co_await start(cmd, o);
        asio::steady_timer ticker(ex);
        std::function<void()> tick = [&] {
          ticker.expires_after(std::chrono::milliseconds(10));
          ticker.async_wait([&](boost::system::error_code ec) {
            if (ec || !ticking) return;
            ++ticks;
            tick();
          });
        };
        tick();
        std::vector<tl::expected<protocol::run_result, error>> stuck(64);
        std::size_t finished = 0;
        for (auto& slot : stuck)
          asio::co_spawn(ex, host.run(echo_case(std::string(16 << 10, 'x'))),
                         [&](std::exception_ptr, tl::expected<protocol::run_result, error> r) {
                           slot = std::move(r);
                           ++finished;
                         });
        asio::steady_timer deadline(ex, std::chrono::milliseconds(300));
        auto call = host.run(echo_case("a"));
        auto wait = deadline.async_wait(asio::as_tuple(asio::use_awaitable));
        auto raced = co_await (std::move(call) || std::move(wait));
        BOOST_TEST(raced.index() == 1u);  // timed out, and the wait returned
        auto st = co_await host.shutdown();
        BOOST_TEST(st.has_value());
        ticking = false;
        ticker.cancel();
        BOOST_TEST(finished == stuck.size());
        for (auto& r : stuck) {
          BOOST_REQUIRE(!r);
          BOOST_TEST(r.error().code == errc::study_exited);
        }
      },
      std::chrono::seconds(30));
  BOOST_TEST(ticks > 10u);  // at least 0.3 s of ticks went by while writes were stuck
}

BOOST_AUTO_TEST_CASE(a_300_mb_line_is_skipped_in_streaming_fashion) {
  auto before = peak_rss_mib();
  run_co(
      [&](asio::io_context&) -> asio::awaitable<void> {
        auto o = quiet_options();
        o.on_stderr_line = [](std::string_view) {};
        auto cmd = py_study({"--huge-answer", "300"});
        auto host = co_await start(cmd, o);
        auto params = echo_case("a");
        auto r = co_await host.run(params);
        BOOST_REQUIRE(!r);
        BOOST_TEST(r.error().code == errc::response_too_large);
        BOOST_TEST(r.error().message().find("the response was a line of 31457") !=
                   std::string::npos);
        co_await host.shutdown();
      },
      std::chrono::seconds(120));
  // The line is 300 MiB; the host keeps at most its 64 MiB limit of it, once.
  BOOST_TEST_MESSAGE("peak RSS " << before << " MiB before, " << peak_rss_mib() << " MiB after");
  BOOST_TEST(peak_rss_mib() - before < 150 * rss_factor + rss_allowance);
}

BOOST_AUTO_TEST_CASE(a_1_gb_stderr_flood_keeps_only_a_tail) {
  constexpr std::size_t flood = std::size_t{1} << 30;
  std::size_t lines = 0;
  auto before = peak_rss_mib();
  run_co(
      [&](asio::io_context&) -> asio::awaitable<void> {
        auto o = quiet_options();
        o.on_stderr_line = [&](std::string_view) { ++lines; };
        // The study exits when its flood is out, however long the host takes to read it.
        o.shutdown_grace = std::chrono::seconds(200);
        auto cmd = py_study({"--stderr-flood", std::to_string(flood)});
        auto host = co_await start(cmd, o);
        auto params = echo_case("a");
        for (int i = 0; i < 20; ++i) {
          auto r = co_await host.run(params);
          BOOST_TEST(r.has_value());
        }
        auto st = co_await host.shutdown();
        BOOST_REQUIRE(st);
        BOOST_TEST(st->code == 0);
      },
      std::chrono::seconds(240));
  BOOST_TEST(lines == flood / 1024);
  BOOST_TEST_MESSAGE("peak RSS " << before << " MiB before, " << peak_rss_mib() << " MiB after");
  BOOST_TEST(peak_rss_mib() - before < 100 * rss_factor + rss_allowance);
}

BOOST_AUTO_TEST_CASE(a_result_that_cannot_be_saved_stops_the_run_and_is_reported) {
  temp_dir dir;
  auto results = dir / "results";
  // A first run saves a#0..a#2.
  BOOST_TEST(run_command(mira_bin + " run --samples a --trials 3 --results-dir " + results +
                         " -- " + py + " >/dev/null 2>&1")
                 .code == 0);
  std::vector<fs::path> runs(fs::directory_iterator(results), fs::directory_iterator{});
  BOOST_REQUIRE(runs.size() == 1u);
  auto id = runs[0].filename().string();
  // b#0's folder cannot be made (a file is in its way; permissions would not stop root). The
  // failure is known (on the writer thread) long before b#1's 100 ms run ends, and that result
  // stops the run.
  { std::ofstream(runs[0] / "cases" / "echo_2fb_40sim_230") << "in the way"; }
  auto r = run_command(mira_bin + " run -j 1 --trials 3 --resume " + id + " --results-dir " +
                       results + " -- " + py + " --run-ms 100 2>&1");
  BOOST_TEST(r.code == 3);
  BOOST_TEST(r.out.find("mira: error: cannot save the result of echo/b@sim#0") !=
             std::string::npos);
  BOOST_TEST(r.out.find("stopped (requested): cannot save the result of echo/b@sim#0") !=
             std::string::npos);
  BOOST_TEST(r.out.find("1 finished case(s) could not be saved") != std::string::npos);
  BOOST_TEST(r.out.find("PASS  echo/b@sim#0") != std::string::npos);  // reported, not dropped
  BOOST_TEST(r.out.find("resume with: mira run -j 1 --trials 3 --resume " + id) !=
             std::string::npos);
  // What was saved before is intact.
  BOOST_TEST(fs::exists(runs[0] / "cases" / "echo_2fa_40sim_230" / "result.json"));
  // An unwritable results folder fails before anything runs.
  { std::ofstream(dir / "file") << "x"; }
  auto bad = run_command(mira_bin + " run --results-dir " + (dir / "file") + " -- " + py + " 2>&1");
  BOOST_TEST(bad.code == 3);
  BOOST_TEST(bad.out.find("cannot create") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()
