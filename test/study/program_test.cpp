// run_program against real programs (cat, sh, sleep, head): its pipes, its time limit, its
// cancellation, and that nothing (process, zombie, descriptor) outlives a run; to_transcript.
#include <mira/study/program.hpp>

#include "common/run_co.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/system_error.hpp>
#include <boost/test/unit_test.hpp>

#include <poll.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <filesystem>
#include <functional>
#include <mutex>
#include <thread>
#include <variant>
#include <vector>

namespace asio = boost::asio;
namespace study = mira::study;
using namespace std::chrono_literals;
using boost::system::system_error;
using mira::test::run_co;
using steady = std::chrono::steady_clock;

namespace {

study::program_result run(study::program_options o) {
  return run_co([&o](asio::io_context&) { return study::run_program(o); });
}

study::program_options sh(std::string script) {
  return {.argv = {"sh", "-c", std::move(script)}};
}

std::string pattern(std::size_t n) {
  std::string s(n, '\0');
  for (std::size_t i = 0; i < n; ++i) s[i] = static_cast<char>('a' + i % 23);
  return s;
}

// Whether this process has a child, live or zombie (without reaping it).
bool has_children() {
  siginfo_t info{};
  return ::waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT) == 0;
}

// Whether a process (not ours) has ended: a pidfd is readable once it has, zombie or not. The
// wait only covers a SIGKILL in flight; a live process fails the test after 5 s.
bool ended(pid_t pid) {
  const int fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (fd < 0) return errno == ESRCH;
  pollfd p{fd, POLLIN, 0};
  const bool readable = ::poll(&p, 1, 5000) == 1;
  ::close(fd);
  return readable;
}

std::size_t open_fds() {
  return static_cast<std::size_t>(std::distance(
      std::filesystem::directory_iterator("/proc/self/fd"), std::filesystem::directory_iterator{}));
}

bool aborted(const system_error& e) {
  return e.code() == asio::error::operation_aborted;
}

// The program is started, `type` is emitted on the slot bound to its coroutine once the child
// exists, and what run_program ended with is kept, with the time it took after the emission.
struct cancelled_run {
  bool done = false;
  std::exception_ptr error;
  std::chrono::milliseconds after_emit{0};
};

cancelled_run run_and_cancel(const std::function<asio::awaitable<study::program_result>()>& make,
                             asio::cancellation_type type) {
  BOOST_REQUIRE(!has_children());
  asio::io_context ctx;
  asio::cancellation_signal signal;
  cancelled_run r;
  asio::co_spawn(ctx, make(),
                 asio::bind_cancellation_slot(signal.slot(),
                                              [&r](std::exception_ptr e, study::program_result) {
                                                r.done = true;
                                                r.error = e;
                                              }));
  while (!r.done && !has_children()) ctx.run_one();
  const auto emitted = steady::now();
  signal.emit(type);
  ctx.run_for(20s);
  r.after_emit = std::chrono::duration_cast<std::chrono::milliseconds>(steady::now() - emitted);
  return r;
}

asio::awaitable<study::program_result> hearing_partial(study::program_options o) {
  co_await asio::this_coro::reset_cancellation_state(asio::enable_partial_cancellation());
  co_return co_await study::run_program(std::move(o));
}

asio::awaitable<study::program_result> hearing_total(study::program_options o) {
  co_await asio::this_coro::reset_cancellation_state(asio::enable_total_cancellation());
  co_return co_await study::run_program(std::move(o));
}

study::program_options true_program() {
  return {.argv = {"true"}};
}

// What the races of the chains below came to; the chains run at once, on different threads.
struct race_tally {
  std::atomic<int> program_first{0};  // the program's result came first
  std::atomic<int> timer_first{0};    // the timer's did: the program was cancelled, or not heard
  std::atomic<int> failed{0};         // the program's result says it failed
  std::atomic<int> chains_done{0};
  std::atomic<int> chains_thrown{0};
  std::mutex m;
  std::string failures;  // how each failed run ended, for the log
};

// `rounds` runs of `true`, each raced in `||` against a timer of a quarter to seven quarters of
// how long a run takes, so the cancellation comes before, as and after the program ends.
asio::awaitable<void> race_the_end(steady::duration typical, int rounds, int offset,
                                   race_tally& tally) {
  using namespace asio::experimental::awaitable_operators;
  asio::steady_timer timer(co_await asio::this_coro::executor);
  for (int i = 0; i < rounds; ++i) {
    timer.expires_after(typical * ((i + offset) % 7 + 1) / 4);
    auto o = true_program();
    auto r = co_await (study::run_program(std::move(o)) || timer.async_wait(asio::use_awaitable));
    if (r.index() == 1)
      ++tally.timer_first;
    else if (std::get<0>(r).exit_code == 0)
      ++tally.program_first;
    else {
      ++tally.failed;
      auto& p = std::get<0>(r);
      std::lock_guard lock(tally.m);
      tally.failures += "chain " + std::to_string(offset) + " round " + std::to_string(i) +
                        ": exit code " + std::to_string(p.exit_code) + ", signal " +
                        std::to_string(p.signal) + ", stderr: " + p.err + "\n";
    }
  }
}

// SIGPIPE back to its default action (ending the process) while it lives.
struct default_sigpipe {
  default_sigpipe() { std::signal(SIGPIPE, SIG_DFL); }
  default_sigpipe(const default_sigpipe&) = delete;
  default_sigpipe& operator=(const default_sigpipe&) = delete;
  ~default_sigpipe() { std::signal(SIGPIPE, SIG_IGN); }
};

}  // namespace

BOOST_AUTO_TEST_SUITE(program)

BOOST_AUTO_TEST_CASE(cat_echoes_stdin) {
  auto r = run({.argv = {"cat"}, .stdin_data = "hello\n"});
  BOOST_TEST(r.out == "hello\n");
  BOOST_TEST(r.err.empty());
  BOOST_TEST(r.exit_code == 0);
  BOOST_TEST(r.signal == 0);
  BOOST_TEST(!r.timed_out);
  BOOST_TEST(!r.truncated);
}

BOOST_AUTO_TEST_CASE(exit_code_and_stderr) {
  auto r = run(sh("echo out; echo x >&2; exit 3"));
  BOOST_TEST(r.exit_code == 3);
  BOOST_TEST(r.signal == 0);
  BOOST_TEST(r.out == "out\n");
  BOOST_TEST(r.err == "x\n");
}

// Far more than a pipe holds, both ways at once, and on both outputs (stderr written first, so
// reading stdout alone to its end would never return).
BOOST_AUTO_TEST_CASE(output_larger_than_a_pipe) {
  const auto mib = pattern(std::size_t{1} << 20);
  auto echoed = run({.argv = {"cat"}, .stdin_data = mib});
  BOOST_TEST(echoed.out.size() == mib.size());
  BOOST_TEST((echoed.out == mib));

  auto both = run(sh("head -c 1048576 /dev/zero >&2; head -c 1048576 /dev/zero"));
  BOOST_TEST(both.exit_code == 0);
  BOOST_TEST(both.err.size() == std::size_t{1} << 20);
  BOOST_TEST(both.out.size() == std::size_t{1} << 20);
  BOOST_TEST(!both.truncated);
}

BOOST_AUTO_TEST_CASE(output_beyond_max_output_is_truncated) {
  auto r = run({.argv = {"head", "-c", "100000", "/dev/zero"}, .max_output = 1000});
  BOOST_TEST(r.out.size() == 1000u);
  BOOST_TEST(r.truncated);
  BOOST_TEST(r.exit_code == 0);

  auto exact = run({.argv = {"head", "-c", "1000", "/dev/zero"}, .max_output = 1000});
  BOOST_TEST(exact.out.size() == 1000u);
  BOOST_TEST(!exact.truncated);
}

BOOST_AUTO_TEST_CASE(environment_and_working_directory) {
  auto r = run({.argv = {"sh", "-c", "printf '%s %s\\n' \"$MIRA_PROGRAM_TEST\" \"$HOME\"; pwd"},
                .cwd = "/",
                .env = {{"MIRA_PROGRAM_TEST", "1"}, {"HOME", "/nowhere"}}});
  BOOST_TEST(r.out == "1 /nowhere\n/\n");
}

BOOST_AUTO_TEST_CASE(a_program_that_cannot_start_is_named) {
  auto names = [](const std::string& name, boost::system::errc::errc_t code) {
    return [name, code](const system_error& e) {
      return e.code() == code && std::string(e.what()).find(name) != std::string::npos;
    };
  };
  using boost::system::errc::no_such_file_or_directory;
  BOOST_CHECK_EXCEPTION(run({.argv = {"mira-no-such-program"}}), system_error,
                        names("mira-no-such-program", no_such_file_or_directory));
  BOOST_CHECK_EXCEPTION(run({.argv = {"/nonexistent/program"}}), system_error,
                        names("/nonexistent/program", no_such_file_or_directory));
  BOOST_CHECK_EXCEPTION(run({.argv = {"/etc/passwd"}}), system_error,
                        names("/etc/passwd", boost::system::errc::permission_denied));
  // Looked up in the child's PATH, not this process's.
  BOOST_CHECK_EXCEPTION(run({.argv = {"sh"}, .env = {{"PATH", "/nonexistent"}}}), system_error,
                        names("sh", no_such_file_or_directory));
  BOOST_CHECK_EXCEPTION(run({.argv = {"true"}, .cwd = "/nonexistent"}), system_error,
                        names("/nonexistent", no_such_file_or_directory));
  BOOST_CHECK_THROW(run({}), std::invalid_argument);
}

BOOST_AUTO_TEST_CASE(sigchld_ignored_is_refused_before_anything_starts) {
  struct sigaction ignore {
  }, before{};
  ignore.sa_handler = SIG_IGN;
  ::sigaction(SIGCHLD, &ignore, &before);
  BOOST_CHECK_EXCEPTION(run({.argv = {"true"}}), system_error, [](const system_error& e) {
    return e.code() == boost::system::errc::no_child_process &&
           std::string(e.what()).find("SIGCHLD is ignored") != std::string::npos;
  });
  ::sigaction(SIGCHLD, &before, nullptr);
  BOOST_TEST(run({.argv = {"true"}}).exit_code == 0);
}

// SIGPIPE at its default action: a child that stops reading its stdin must not end this process.
BOOST_AUTO_TEST_CASE(a_child_that_stops_reading_does_not_raise_sigpipe_here) {
  default_sigpipe guard;
  auto r = run({.argv = {"head", "-c", "1"}, .stdin_data = pattern(std::size_t{1} << 20)});
  BOOST_TEST(r.exit_code == 0);
  BOOST_TEST(r.out == "a");
}

BOOST_AUTO_TEST_CASE(the_time_limit_stops_the_program) {
  auto r = run({.argv = {"sleep", "30"}, .time_limit = 200ms});
  BOOST_TEST(r.timed_out);
  BOOST_TEST(r.exit_code == -1);
  BOOST_TEST(r.signal == SIGTERM);
  BOOST_TEST(r.duration >= 200ms);
  BOOST_TEST(r.duration < 10s);
}

BOOST_AUTO_TEST_CASE(the_time_limit_stops_the_whole_group) {
  auto r = run({.argv = {"sh", "-c", "sleep 30 & echo $!; sleep 30"}, .time_limit = 300ms});
  BOOST_TEST(r.timed_out);
  BOOST_TEST(r.duration < 10s);
  BOOST_REQUIRE(!r.out.empty());
  BOOST_TEST(ended(std::stoi(r.out)));
}

// The background sleep keeps stdout open: without the group killed at the exit, the read would
// last its 30 s.
BOOST_AUTO_TEST_CASE(what_the_program_leaves_running_dies_with_it) {
  auto r = run(sh("sleep 30 & echo $!"));
  BOOST_TEST(r.exit_code == 0);
  BOOST_TEST(!r.timed_out);
  BOOST_TEST(r.duration < 10s);
  BOOST_REQUIRE(!r.out.empty());
  BOOST_TEST(ended(std::stoi(r.out)));
}

BOOST_AUTO_TEST_CASE(a_program_ignoring_sigterm_is_killed_after_the_grace) {
  auto r = run(
      {.argv = {"sh", "-c", "trap '' TERM; sleep 30"}, .time_limit = 300ms, .kill_grace = 100ms});
  BOOST_TEST(r.timed_out);
  BOOST_TEST(r.signal == SIGKILL);
  BOOST_TEST(r.duration >= 400ms);
  BOOST_TEST(r.duration < 10s);
}

BOOST_AUTO_TEST_CASE(cancellation_stops_the_group_and_throws_operation_aborted) {
  const study::program_options o{.argv = {"sh", "-c", "sleep 30 & sleep 30"}};
  struct row {
    const char* how;
    std::function<asio::awaitable<study::program_result>()> make;
    asio::cancellation_type type;
  };
  for (const auto& [how, make, type] :
       {row{"terminal", [&o] { return study::run_program(o); }, asio::cancellation_type::terminal},
        row{"partial", [&o] { return hearing_partial(o); }, asio::cancellation_type::partial}}) {
    BOOST_TEST_CONTEXT(how) {
      auto r = run_and_cancel(make, type);
      BOOST_REQUIRE(r.done);
      BOOST_TEST(r.after_emit < 5s);
      BOOST_REQUIRE(r.error);
      BOOST_CHECK_EXCEPTION(std::rethrow_exception(r.error), system_error, aborted);
      BOOST_TEST(!has_children());
    }
  }
}

// Stopping a program has side effects, which total cancellation rules out.
BOOST_AUTO_TEST_CASE(total_cancellation_is_ignored) {
  const study::program_options o{.argv = {"sleep", "0.2"}};
  auto r = run_and_cancel([&o] { return hearing_total(o); }, asio::cancellation_type::total);
  BOOST_REQUIRE(r.done);
  BOOST_TEST(!r.error);
}

BOOST_AUTO_TEST_CASE(no_descriptor_or_child_outlives_a_run) {
  const auto before = open_fds();
  run({.argv = {"cat"}, .stdin_data = "x"});
  run({.argv = {"sleep", "30"}, .time_limit = 50ms});
  run({.argv = {"head", "-c", "100000", "/dev/zero"}, .max_output = 10});
  BOOST_CHECK_THROW(run({.argv = {"mira-no-such-program"}}), system_error);
  const study::program_options o{.argv = {"sleep", "30"}};
  run_and_cancel([&o] { return study::run_program(o); }, asio::cancellation_type::terminal);
  BOOST_TEST(open_fds() == before);
  BOOST_TEST(!has_children());
}

// The run's state belongs to its pending operations, which the io_context's destructor destroys.
BOOST_AUTO_TEST_CASE(an_io_context_destroyed_meanwhile_takes_the_program_with_it) {
  BOOST_REQUIRE(!has_children());
  {
    asio::io_context ctx;
    asio::co_spawn(ctx, study::run_program({.argv = {"sleep", "30"}}), asio::detached);
    while (!has_children()) ctx.run_one();
    ctx.poll();
  }
  BOOST_TEST(!has_children());
}

// The state the runs share lives on a strand: an io_context with two threads is fine.
BOOST_AUTO_TEST_CASE(runs_on_an_io_context_with_two_threads) {
  asio::io_context ctx;
  std::vector<std::string> outs(8);
  for (std::size_t i = 0; i < outs.size(); ++i) {
    study::program_options o{.argv = {"cat"}, .stdin_data = std::to_string(i) + pattern(100000)};
    asio::co_spawn(ctx, study::run_program(std::move(o)),
                   [&outs, i](std::exception_ptr e, study::program_result r) {
                     if (!e) outs[i] = std::move(r.out);
                   });
  }
  std::thread second([&ctx] { ctx.run(); });
  ctx.run();
  second.join();
  for (std::size_t i = 0; i < outs.size(); ++i)
    BOOST_TEST((outs[i] == std::to_string(i) + pattern(100000)));
}

// A cancellation that comes as the program ends, from a timer about as long as the run in `||`,
// on an io_context run by four threads: four chains at once, each on a strand of the context
// (where a `||` on several threads belongs, program.hpp), so run_program's own strand runs
// beside the other chains' emissions and completions. Every run completes once, and no child or
// descriptor is left.
BOOST_AUTO_TEST_CASE(a_cancellation_as_the_program_ends_on_four_threads) {
  BOOST_REQUIRE(!has_children());
  const auto fds_before = open_fds();
  const auto t0 = steady::now();
  for (int i = 0; i < 5; ++i) run(true_program());
  const auto typical = (steady::now() - t0) / 5;
  constexpr int chains = 4;
  constexpr int rounds = 100;
  race_tally tally;
  {
    asio::io_context ctx(4);
    for (int k = 0; k < chains; ++k)
      asio::co_spawn(asio::make_strand(ctx), race_the_end(typical, rounds, k, tally),
                     [&tally](std::exception_ptr e) {
                       if (e)
                         ++tally.chains_thrown;
                       else
                         ++tally.chains_done;
                     });
    std::vector<std::thread> others;
    for (int i = 0; i < 3; ++i) others.emplace_back([&ctx] { ctx.run_for(60s); });
    ctx.run_for(60s);  // a watchdog: a hang fails the counts below
    for (auto& t : others) t.join();
  }
  BOOST_TEST_MESSAGE("program first " << tally.program_first.load() << ", timer first "
                                      << tally.timer_first.load());
  BOOST_TEST(tally.chains_done.load() == chains);
  BOOST_TEST(tally.chains_thrown.load() == 0);
  BOOST_TEST(tally.program_first.load() + tally.timer_first.load() == chains * rounds);
  BOOST_TEST(tally.failed.load() == 0, tally.failures);
  BOOST_TEST(!has_children());
  BOOST_TEST(open_fds() == fds_before);
}

BOOST_AUTO_TEST_CASE(to_transcript_says_how_the_program_ended) {
  study::program_result ok{.exit_code = 0, .out = "42\n", .duration = 12ms};
  auto t = study::to_transcript(ok);
  BOOST_TEST(t.final_response == "42\n");
  BOOST_TEST(!t.error);
  BOOST_TEST(t.timing.duration_ms.value_or(0) == 12);

  study::program_result failed{.exit_code = 3};
  BOOST_TEST(study::to_transcript(failed).error.value_or("") == "exited with code 3");
  BOOST_TEST((study::to_transcript(failed).error_kind == mira::protocol::error_kind::subject));

  study::program_result killed{.exit_code = -1, .signal = SIGKILL};
  BOOST_TEST(study::to_transcript(killed).error.value_or("") == "killed by SIGKILL");

  study::program_result late{
      .exit_code = -1, .signal = SIGTERM, .timed_out = true, .duration = 1003ms};
  auto timed_out = study::to_transcript(late);
  BOOST_TEST(timed_out.error.value_or("") == "timed out: stopped after 1003 ms");
  BOOST_TEST((timed_out.error_kind == mira::protocol::error_kind::infra));
}

BOOST_AUTO_TEST_SUITE_END()
