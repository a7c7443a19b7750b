// host_handle::spawn from the threads of an io_context that several threads run while they keep
// its service registry and reactor busy: the study is started with posix_spawn, which runs no
// fork handlers, so no spawn can block on a lock another thread held (threads-review row 10).
// Also what a study that cannot start reports.
#include "common/fake_study.hpp"
#include "integration/process_util.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/connect_pipe.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/readable_pipe.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/writable_pipe.hpp>
#include <boost/test/unit_test.hpp>

#include <sys/stat.h>

#include <atomic>
#include <condition_variable>
#include <exception>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

using namespace mira;
using namespace mira::test;

namespace {

constexpr int studies = 40;
constexpr int threads = 4;

// Shared with the threads: a thread stuck in a spawn keeps it (and leaks it) when the watchdog
// gives up on joining it. Boost.Test is not thread-safe, so the threads only record here.
struct spawn_run {
  std::atomic<bool> stop_churn{false};
  std::atomic<int> initialized{0};
  std::mutex m;
  std::condition_variable cv;
  int finished = 0;                   // under m
  int threads_out = 0;                // under m
  std::vector<std::string> failures;  // under m
  asio::io_context ctx{threads};  // last: destroyed first, with the frames that refer to the rest

  void record(std::string failure) {
    std::lock_guard lock(m);
    failures.push_back(std::move(failure));
  }
  void finish(std::string failure) {
    std::lock_guard lock(m);
    if (!failure.empty()) failures.push_back(std::move(failure));
    if (++finished == studies) {
      stop_churn = true;
      cv.notify_all();
    }
  }
};

std::string what(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return x.what();
  } catch (...) {
    return "unknown exception";
  }
}

// Service lookups (each timer and pipe) and descriptor registrations (each pipe opened and
// closed) on the context, for as long as the studies start.
asio::awaitable<void> churn(const std::atomic<bool>& stop) {
  auto ex = co_await asio::this_coro::executor;
  while (!stop) {
    asio::steady_timer t(ex, asio::steady_timer::clock_type::now());
    asio::readable_pipe r(ex);
    asio::writable_pipe w(ex);
    asio::connect_pipe(r, w);
    co_await t.async_wait(asio::use_awaitable);
  }
}

// One example study started, initialized and shut down: what went wrong, or nothing.
asio::awaitable<std::string> start_initialize_stop(std::atomic<int>& initialized) {
  auto o = quiet_options();
  o.on_stderr_line = [](std::string_view) {};
  study_command c;
  c.argv = {MIRA_EXAMPLE_STUDY};
  // No co_await in the spawn's full-expression: g++ 12 destroys its temporaries twice.
  auto ex = co_await asio::this_coro::executor;
  auto host = host_handle::spawn(ex, c, o);
  if (!host) co_return "spawn: " + host.error().message();
  auto init = co_await host->initialize();
  if (!init) co_return "initialize: " + init.error().message();
  ++initialized;
  auto st = co_await host->shutdown();
  if (!st) co_return "shutdown: " + st.error().message();
  co_return std::string();
}

// The error of a study command that cannot start.
mira::error spawn_error(study_command c) {
  asio::io_context ctx;
  auto host = host_handle::spawn(ctx.get_executor(), std::move(c), quiet_options());
  BOOST_REQUIRE(!host);
  return host.error();
}

}  // namespace

BOOST_AUTO_TEST_SUITE(spawn_threads)

BOOST_AUTO_TEST_CASE(forty_studies_start_from_four_threads_busy_with_the_context) {
  auto run = std::make_shared<spawn_run>();
  auto* r = run.get();
  asio::co_spawn(r->ctx, churn(r->stop_churn), [r](std::exception_ptr e) {
    if (e) r->record("churn: " + what(e));
  });
  for (int i = 0; i < studies; ++i)
    asio::co_spawn(r->ctx.get_executor(), start_initialize_stop(r->initialized),
                   [r](std::exception_ptr e, std::string failure) {
                     r->finish(e ? "exception: " + what(e) : std::move(failure));
                   });
  std::vector<std::thread> pool;
  for (int i = 0; i < threads; ++i)
    pool.emplace_back([run] {
      run->ctx.run();
      std::lock_guard lock(run->m);
      ++run->threads_out;
      run->cv.notify_all();
    });

  // The watchdog: a wait with a time limit here rather than a timer on the context, since a
  // thread stuck in a spawn could not be joined. Then the context is stopped either way (what
  // is left is the hosts' own ending, which destroying the context finishes).
  std::unique_lock lock(r->m);
  bool all_done =
      r->cv.wait_for(lock, std::chrono::seconds(60), [&] { return r->finished >= studies; });
  r->ctx.stop();
  bool joinable =
      r->cv.wait_for(lock, std::chrono::seconds(10), [&] { return r->threads_out == threads; });
  int finished = r->finished;
  auto failures = r->failures;
  lock.unlock();
  for (auto& t : pool) {
    if (joinable)
      t.join();
    else
      t.detach();  // stuck: `run` is leaked with it
  }

  BOOST_REQUIRE_MESSAGE(all_done, "watchdog: " << finished << " of " << studies
                                               << " studies done after 60 s (a spawn hung?)");
  BOOST_TEST(joinable);
  BOOST_TEST(finished == studies);
  BOOST_TEST(r->initialized.load() == studies);
  for (const auto& f : failures) BOOST_ERROR(f);
  BOOST_TEST(no_children_left());
}

BOOST_AUTO_TEST_CASE(a_missing_program_is_spawn_failed_naming_it) {
  study_command c;
  c.argv = {"mira-no-such-study-binary"};
  auto e = spawn_error(c);
  BOOST_TEST(e.code == errc::spawn_failed);
  BOOST_TEST(e.diag.message == "'mira-no-such-study-binary' was not found on PATH");

  // With a '/' there is no lookup: posix_spawn's exec fails.
  c.argv = {"/nonexistent-mira-dir/study"};
  e = spawn_error(c);
  BOOST_TEST(e.code == errc::spawn_failed);
  BOOST_TEST(e.diag.message ==
             "cannot start '/nonexistent-mira-dir/study': No such file or directory");

  // So does its chdir into a working directory that is not there.
  c.argv = {MIRA_EXAMPLE_STUDY};
  c.working_directory = "/nonexistent-mira-dir";
  e = spawn_error(c);
  BOOST_TEST(e.code == errc::spawn_failed);
  BOOST_TEST(e.diag.message.find("in '/nonexistent-mira-dir': No such file or directory") !=
             std::string::npos);
  BOOST_TEST(no_children_left());  // glibc reaps a child whose exec or chdir failed
}

BOOST_AUTO_TEST_CASE(a_file_without_execute_permission_is_spawn_failed_permission_denied) {
  temp_dir dir;
  const std::string path = dir / "not-executable";
  {
    std::ofstream f(path);
    f << "#!/bin/sh\nexit 0\n";
  }
  BOOST_REQUIRE(::chmod(path.c_str(), 0644) == 0);  // no execute bit, which stops root too
  study_command c;
  c.argv = {path};
  auto e = spawn_error(c);
  BOOST_TEST(e.code == errc::spawn_failed);
  BOOST_TEST(e.diag.message == "cannot start '" + path + "': Permission denied");
  BOOST_TEST(no_children_left());
}

BOOST_AUTO_TEST_SUITE_END()
