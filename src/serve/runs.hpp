// The server's run manager: starts runs of allow-listed studies through the library (spawn,
// initialize, list, plan, run_plan, the run store), keeps each live run's state and event log,
// cancels, resumes, and answers for saved runs from the results directory. Its state lives on
// the server's executor; what takes long over a big run (planning, loading a saved run,
// rendering a report, ending a session) runs on its own worker threads. Nothing here knows HTTP.
#pragma once

#include <mira/aggregate/summary.hpp>
#include <mira/protocol/types.hpp>
#include <mira/serve/server.hpp>
#include <mira/store/files.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/json/object.hpp>

#include <array>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>

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
  std::array<std::size_t, 7> counts{};  // by case_state, this session's and the reused
  std::string started;                  // UTC, ISO 8601
  std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
  double seconds = 0;
  boost::json::object summary;  // when finished
  std::string stop_reason, stop_message;
  event_log events;
  /// Waiters on new events wait on this timer; publish() cancels it and makes a new one.
  std::shared_ptr<boost::asio::steady_timer> notify;
  boost::asio::cancellation_signal cancel;
  boost::asio::any_io_executor ex;

  void publish(std::string type, boost::json::object data);
  boost::json::object status() const;
};

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
  boost::asio::awaitable<tl::expected<std::string, api_error>> cases(
      std::string id, std::optional<std::string> states);
  /// The report's content type and text.
  boost::asio::awaitable<tl::expected<std::pair<std::string, std::string>, api_error>> report(
      std::string id, std::string format);

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
  /// Refuses new runs, cancels the live ones and waits until each is saved.
  boost::asio::awaitable<void> stop();

 private:
  struct prepared;
  boost::asio::awaitable<tl::expected<prepared, api_error>> prepare(const study_entry& study,
                                                                    const run_options& o);
  /// What start and resume share: counts the run as active, prepares the study, plans the
  /// request's selection, lets `ready` open the run's store (its id, or why not) and starts the
  /// run. On any failure the study is shut down and the run no longer counts.
  boost::asio::awaitable<tl::expected<std::string, api_error>> launch(
      const study_entry& study, const run_request& r,
      std::function<tl::expected<std::string, api_error>(prepared&)> ready);
  /// `owner` (the server) is kept alive until the run has ended and been saved.
  boost::asio::awaitable<void> execute(std::shared_ptr<live_run> run, std::shared_ptr<prepared> p,
                                       std::shared_ptr<void> owner);
  void forget_old_runs();
  /// The session begun in the store and the run's start published; the file that could not be
  /// written, if any (then no case runs).
  store::write_error begin(live_run& run, prepared& prep);
  struct session_ended;
  /// Ends the session in the store (reports, summary, meta.json): work for the worker threads.
  /// `failure`: why results could not be saved, if they could not (the session then stopped).
  static session_ended end_session(prepared& prep, schedule::run_report part, bool interrupted,
                                   const std::optional<std::string>& failure,
                                   const std::string& stderr_text);
  /// The run's final state and its "end" event, from what end_session made (its summary taken).
  void end(live_run& run, session_ended& ended, const std::optional<std::string>& failure);
  const study_entry* find_study(const std::string& name) const;
  tl::expected<void, api_error> admit() const;
  void release();         // a run being planned or going has ended
  void notify_changed();  // wakes stop()
  /// `job()` on the worker threads, resumed on the awaiting coroutine's executor with its result.
  /// `job` touches only what it captures, never the manager's state, and is a named local of the
  /// awaiting coroutine: g++ 12 destroys a temporary in a co_await expression twice (a lambda
  /// passed by value there was seen freed twice).
  template <class F>
  boost::asio::awaitable<std::invoke_result_t<F&>> off_executor(F& job);
  /// A catalog being loaded: its waiters wait on `done` until `result` is set.
  struct catalog_load;

  boost::asio::any_io_executor ex_;
  const server_config& config_;
  std::map<std::string, std::shared_ptr<live_run>> runs_;
  std::map<std::string, boost::json::object> catalogs_;           // by study name, listed once
  std::map<std::string, std::shared_ptr<catalog_load>> loading_;  // by study name
  std::weak_ptr<void> owner_;
  std::size_t active_ = 0;  // runs being planned or going, and catalog loads
  std::shared_ptr<boost::asio::steady_timer>
      changed_;  // cancelled when active_ drops or a run starts
  bool stopping_ = false;
  /// Last: destroyed first, it joins its threads while what they were given still exists.
  boost::asio::thread_pool work_{2};
};

}  // namespace mira::serve::detail
