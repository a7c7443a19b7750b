// The server's run manager: starts and resumes runs of allow-listed studies, each one
// mira::session (the library's saved run: the study, the plan, the run store, the run with every
// case saved, the end with the run's files), keeps each live run's state and event log from the
// session's hooks, cancels, and answers for saved runs from the results directory. Its state
// lives on the server's executor; the sessions (their studies' processes, their scheduling and
// saving, which may wait for the disk) live on a run thread of its own, and what takes long over
// a big run (planning, reading a saved run, rendering a report, ending a session) runs on its
// worker threads. Nothing here knows HTTP.
#pragma once

#include "serve/api.hpp"
#include "serve/case_pages.hpp"
#include "serve/open_runs.hpp"

#include <mira/aggregate/summary.hpp>
#include <mira/protocol/types.hpp>
#include <mira/serve/server.hpp>
#include <mira/store/case_query.hpp>
#include <mira/store/files.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/json/object.hpp>

#include <array>
#include <atomic>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>

namespace mira {
class session;
}

namespace mira::serve::detail {

/// A run this server started or resumed, while it goes and after it ended.
struct live_run {
  explicit live_run(boost::asio::any_io_executor ex);
  std::string id;
  std::string study;              // the allow-list name
  std::string state = "running";  // running, cancelling; then done, stopped, cancelled, interrupted
  bool finished = false;
  bool interrupted = false;  // cancelled by the server's stop, not by a request
  std::size_t total = 0, reused = 0, done = 0, in_progress = 0;
  std::array<std::size_t, schedule::case_state_count>
      counts{};         // by case_state, this session's and the reused
  std::string started;  // UTC, ISO 8601
  std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
  double seconds = 0;
  boost::json::object summary;  // when finished
  std::string stop_reason, stop_message;
  /// How meta.json names a stop: "cancelled" (a client's cancel) or "interrupted" (the server's).
  std::string stop_label = "interrupted";
  event_log events;
  /// Waiters on new events wait on this timer; publish() cancels it and makes a new one.
  std::shared_ptr<boost::asio::steady_timer> notify;
  boost::asio::cancellation_signal cancel;
  boost::asio::any_io_executor ex;
  /// The run's session while its coroutine runs it (in that coroutine's frame).
  mira::session* going = nullptr;

  void publish(std::string type, boost::json::object data);
  /// Wakes the waiters on new events (publish() does; so does one who appended several).
  void wake();
  boost::json::object status() const;
  /// Stops the run, its stop named `label`; a second stop only renames it. A run whose
  /// coroutine has not begun is stopped when it begins (the signal has no handler before).
  void stop(std::string label);
};

/// The status of saved runs whose last session never ended, counted from their records once per
/// version of their meta.json (its time and size), so that listing them again reads no record.
/// Shared with the worker threads that read saved runs.
class saved_counts {
 public:
  using stamp = std::pair<std::filesystem::file_time_type, std::uintmax_t>;
  static constexpr std::size_t max_entries = 4096;
  std::optional<boost::json::object> find(const std::string& id, const stamp& s);
  void keep(const std::string& id, const stamp& s, boost::json::object status);

 private:
  std::mutex mutex_;
  std::map<std::string, std::pair<stamp, boost::json::object>> entries_;
};

/// Reports of saved runs that ended, rendered once and shared by the clients that read one at
/// the same time: forty slow readers of a 50 MB report hold one copy, not forty. An entry lives
/// only while a client holds its text; a new version of the run's meta.json (a resume) makes
/// it stale. Shared with the worker threads that render reports.
class shared_reports {
 public:
  using text = std::shared_ptr<const std::string>;
  text find(const std::string& id, const std::string& format, const saved_counts::stamp& s);
  void keep(const std::string& id, const std::string& format, const saved_counts::stamp& s,
            const text& t);

 private:
  std::mutex mutex_;
  std::map<std::pair<std::string, std::string>,
           std::pair<saved_counts::stamp, std::weak_ptr<const std::string>>>
      entries_;
};

/// What a run's session hooks keep: the live run's counts, attempts and events (runs.cpp).
struct run_tally;

class run_manager {
 public:
  run_manager(boost::asio::any_io_executor ex, const server_config& config);

  /// Plans the request (the study started, initialized and listed) and starts the run: its id.
  boost::asio::awaitable<tl::expected<std::string, api_error>> start(run_request r);
  /// Runs what the saved run lacks, with the selection it was started with.
  boost::asio::awaitable<tl::expected<std::string, api_error>> resume(std::string id,
                                                                      resume_request r);
  tl::expected<boost::json::object, api_error> cancel(const std::string& id);

  std::shared_ptr<live_run> live(const std::string& id) const;
  /// A live run's state, or a saved one's from its folder (an interrupted session's counts from
  /// its saved records).
  boost::asio::awaitable<tl::expected<boost::json::object, api_error>> status(std::string id);
  boost::asio::awaitable<tl::expected<boost::json::object, api_error>> list(std::size_t limit,
                                                                            std::string cursor);
  /// The study's initialize and listing. One load per study at a time: concurrent requests
  /// share it, and it holds a place among the runs (max_runs) while it goes.
  boost::asio::awaitable<tl::expected<boost::json::object, api_error>> catalog(std::string name);
  /// A heavy read (cases, report) asked for by a client that may leave: set once the client
  /// has gone, and the read is skipped when still queued, or stops between two records.
  using abandoned = std::shared_ptr<const std::atomic<bool>>;
  boost::asio::awaitable<tl::expected<std::string, api_error>> cases(
      std::string id, std::optional<std::string> states, abandoned gone = {});
  /// One page of a saved run's cases (case_pages.hpp), read until `gone`.
  boost::asio::awaitable<tl::expected<boost::json::object, api_error>> case_page(
      std::string id, store::case_query q, abandoned gone = {});
  /// One case of a saved run whole, with its events; 404 when the run has no record of `key`.
  boost::asio::awaitable<tl::expected<boost::json::object, api_error>> one_case(std::string id,
                                                                                std::string key);
  /// Two saved runs compared (compare_page_json), read until `gone`.
  boost::asio::awaitable<tl::expected<boost::json::object, api_error>> compare(compare_query q,
                                                                               abandoned gone = {});
  /// The report's content type and text (shared with other readers of the same report).
  boost::asio::awaitable<tl::expected<std::pair<std::string, shared_reports::text>, api_error>>
  report(std::string id, std::string format, abandoned gone = {});

  /// What a going run keeps alive (the server that owns this manager).
  void set_owner(std::weak_ptr<void> owner) { owner_ = std::move(owner); }
  /// Ended runs whose events are kept in memory.
  static constexpr std::size_t kept_ended_runs = 64;
  /// The events an ended run keeps (its start, its last progress and its end are among them):
  /// its case events are in its folder (/cases), so 64 ended runs stay small.
  static constexpr std::size_t kept_ended_events = 128;

  /// Whether a saved or live run of this id exists.
  bool exists(const std::string& id) const;
  std::size_t active() const { return active_; }
  bool stopping() const { return stopping_; }
  /// Study processes all runs and catalog loads may have at once: what the descriptors the
  /// process may open allow beside max_connections.
  std::size_t process_budget() const { return process_budget_; }
  /// Refuses new runs, cancels the live ones and waits until each is saved.
  boost::asio::awaitable<void> stop();

 private:
  /// A place among the runs (max_runs) while a run is opened or goes, or a catalog loads, with
  /// its study processes counted against the process budget. It is given back when it goes, on
  /// every path (an exception out of a run's coroutine too).
  class place {
   public:
    place(run_manager& m, std::size_t processes) : m_(&m), processes_(processes) {
      ++m_->active_;
      m_->processes_ += processes_;
    }
    place(place&& o) noexcept : m_(std::exchange(o.m_, nullptr)), processes_(o.processes_) {}
    place& operator=(place&&) = delete;
    ~place() {
      if (m_) m_->release(processes_);
    }

   private:
    run_manager* m_;
    std::size_t processes_;
  };
  /// The sessions' own thread: a session opened there starts its processes, schedules and hands
  /// its results to the store's writer there, where waiting for a slow disk slows the runs and
  /// never the server's executor.
  struct run_thread {
    boost::asio::io_context ctx{1};
    boost::asio::executor_work_guard<boost::asio::io_context::executor_type> guard =
        boost::asio::make_work_guard(ctx);
    std::thread thread{[this] { ctx.run(); }};
    ~run_thread() {
      guard.reset();
      ctx.stop();
      thread.join();
    }
  };
  /// What start and resume share: takes a place, opens the session of `r` (`resume`: that saved
  /// run's id, else a new run) and starts it. Its id, or why it could not open.
  boost::asio::awaitable<tl::expected<std::string, api_error>> launch(const study_entry& study,
                                                                      run_request r,
                                                                      std::string resume,
                                                                      resume_request rr);
  /// Runs the opened session and ends the live run from its outcome. `owner` (the server) is
  /// kept alive until the run has ended and been saved.
  boost::asio::awaitable<void> execute(std::shared_ptr<live_run> run, mira::session s,
                                       std::shared_ptr<run_tally> tally, place held,
                                       std::shared_ptr<void> owner);
  void forget_old_runs();
  const study_entry* find_study(const std::string& name) const;
  /// Whether a run or a catalog load of `processes` study processes may start now.
  tl::expected<void, api_error> admit(std::size_t processes) const;
  void release(std::size_t processes);  // a place is given back
  void notify_changed();                // wakes stop()
  /// `job()` on `lane`'s threads, resumed on the awaiting coroutine's executor with its result.
  /// `job` touches only what it captures, never the manager's state, and is a named local of the
  /// awaiting coroutine: g++ 12 destroys a temporary in a co_await expression twice (a lambda
  /// passed by value there was seen freed twice).
  template <class F>
  boost::asio::awaitable<std::invoke_result_t<F&>> off_executor(F& job,
                                                                boost::asio::thread_pool& lane);
  /// A catalog being loaded: its waiters wait on `done` until `result` is set.
  struct catalog_load;

  boost::asio::any_io_executor ex_;
  const server_config& config_;
  std::map<std::string, std::shared_ptr<live_run>> runs_;
  std::map<std::string, boost::json::object> catalogs_;           // by study name, listed once
  std::map<std::string, std::shared_ptr<catalog_load>> loading_;  // by study name
  std::shared_ptr<saved_counts> counts_ = std::make_shared<saved_counts>();
  std::shared_ptr<shared_reports> reports_ = std::make_shared<shared_reports>();
  std::shared_ptr<open_runs> opened_ = std::make_shared<open_runs>();
  std::weak_ptr<void> owner_;
  std::size_t active_ = 0;     // places taken: runs being opened or going, and catalog loads
  std::size_t processes_ = 0;  // their study processes
  std::size_t process_budget_ = 0;
  std::shared_ptr<boost::asio::steady_timer>
      changed_;  // cancelled when active_ drops or a run starts
  /// Also read by a session's refine, on the run thread or a worker.
  std::atomic<bool> stopping_ = false;
  /// Last: destroyed first, they join their threads while what they were given still exists.
  run_thread sessions_;
  /// Reads of a whole run (its cases, its report) take seconds on a big run; a run's status and
  /// the runs list read meta.json and cached counts. Each has its own lane, so queued heavy
  /// reads (abandoned by their clients or not) never hold up the list the dashboard polls.
  boost::asio::thread_pool heavy_{2};
  boost::asio::thread_pool light_{1};
};

}  // namespace mira::serve::detail
