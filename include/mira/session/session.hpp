// A session: the one library operation behind every saved run. It starts the study (or takes a
// started one), plans the selection, opens the run store (a new run, or a saved one to resume),
// runs what the run lacks with each finished case saved, restarts a study that dies, and ends
// the session with the run's report files and meta.json. `mira run`, `mira score`,
// `--execute-only`, `mira serve` and `--experiment` are callers of it; so is any service.
//
//   mira::session_options o;
//   o.study.command.argv = {"python3", "study.py"};
//   o.save = mira::save_options{.results_dir = "results"};
//   auto done = co_await mira::run_session(std::move(o));  // expected<session_outcome, ...>
//
// Cancelling the operation (a cancellation slot, a dropped awaitable, a timeout) stops the run
// as Ctrl-C stops `mira run`: the cases in flight are cancelled, what finished is saved and the
// run can be resumed. The session then still completes with its outcome (stopped:
// interrupted). Cancelled before its run began, it completes with session_errc::cancelled.
#pragma once

#include <mira/aggregate/summary.hpp>
#include <mira/error.hpp>
#include <mira/plan/plan.hpp>
#include <mira/schedule/run_plan.hpp>
#include <mira/session/study_connection.hpp>
#include <mira/store/error.hpp>
#include <mira/store/run_meta.hpp>
#include <mira/store/run_store.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/json/object.hpp>
#include <boost/system/error_code.hpp>
#include <tl/expected.hpp>

#include <cstddef>
#include <exception>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace mira {

/// Why a session could not run. Store failures keep the store's codes (store::errc: a run in
/// use, not found, ...) and a study that could not be started, initialized or listed keeps the
/// host's (mira::errc: spawn_failed, study_exited, timed_out, ...); these are the session's own.
enum class session_errc {
  study_failed = 1,    // no longer made: the study's own mira::errc is kept (session_condition)
  study_incapable,     // it lacks the capability the operation sends (execute, score)
  invalid_selection,   // the selection plans nothing valid (a bad glob, an unknown axis)
  too_many_cases,      // the plan is larger than session_options::max_cases
  nothing_to_run,      // no planned case has an artifact to score
  artifacts_unusable,  // the artifacts directory cannot be made or read
  refused,             // session_options::refine refused the plan (its message says why)
  cancelled,           // cancelled before the run began
};

const boost::system::error_category& session_category() noexcept;
boost::system::error_code make_error_code(session_errc e) noexcept;

/// What a caller may ask of a session_error's code whatever layer made it.
enum class session_condition {
  /// The study could not be started, initialized or listed: every mira::errc (spawn_failed for
  /// a missing or unexecutable program, study_exited for one that ended before answering,
  /// timed_out, bad_response, incompatible_protocol, ...) and session_errc::study_failed.
  study_failed = 1,
};

const boost::system::error_category& session_condition_category() noexcept;
boost::system::error_condition make_error_condition(session_condition e) noexcept;

/// A session that could not run: its kind (session_errc, store::errc, or mira::errc for the
/// study), one line for people, and when it is the study's fault how it ended and its last
/// stderr lines.
struct session_error {
  boost::system::error_code code = {};
  std::string text = {};
  std::vector<std::string> stderr_tail = {};
  /// How the study process ended, when it did (e.g. errc::study_exited: its exit code).
  std::optional<exit_status> exit = {};
  /// session_errc::too_many_cases: the cases the selection plans (a service reports the figure).
  std::size_t cases = 0;
  /// session_errc::invalid_selection: the field of the selection the plan refused; the message
  /// is the plan's (plan::error), which begins with the field's name.
  plan::field field = plan::field::none;

  const std::string& message() const { return text; }
};

/// Where and how a session saves its run.
struct save_options {
  std::filesystem::path results_dir = "results";
  /// A saved run to resume (its folder is locked for the session); empty: a new run.
  std::string resume = {};
  /// A new run's id; empty: store::new_run_id() (retried on a clash).
  std::string new_id = {};
  store::layout layout = store::layout::per_case;
  store::resume_options resume_options = {};
  /// Fills in meta.json and this session's entry of it before the session begins, after the
  /// session filled in the study, its version, initialize, the host and the fingerprints (where
  /// the run had none yet) and the entry's planned and reused counts.
  std::function<void(store::run_meta&, store::session_entry& entry)> describe = {};
  /// Written into the run folder when the session begins (e.g. an archived plan).
  std::vector<store::report_file> files = {};
};

/// What the session does with each case.
enum class session_mode {
  run,      // `run`: execute and score
  execute,  // `execute`, each transcript saved in `artifacts` (nothing else is saved)
  score,    // `score`, each transcript read from `artifacts` (cases without one are left out)
};

/// The session's presentation: what a caller shows or keeps. No global sink, and none is
/// required. Every hook runs on the session's executor (see session::open): one at a time,
/// never two at once, whichever threads run the caller's executor. None may block.
struct session_hooks {
  /// The study answered initialize and its listing (a pool: every process).
  std::function<void(const protocol::initialize_result&, std::size_t processes)> on_study = {};
  /// A warning: an unreadable saved record or artifact, a changed eval, a resume's notes.
  std::function<void(const std::string& text)> on_warning = {};
  /// An attempt of a planned case (index into the session's plan) starts.
  std::function<void(std::size_t case_index)> on_attempt = {};
  /// A case's final record (index into the session's plan). A cancelled one was not finished:
  /// a resume runs it. Called before the record is saved (see on_saved).
  std::function<void(std::size_t case_index, const schedule::case_record&)> on_case = {};
  /// Cases whose records are now saved: written and synced (the per-case layout's syncfs after
  /// the renames, the compact one's fdatasync, an execute session's artifact), so they survive
  /// the host's death and a resume does not run them again. Each case session::saves() was true
  /// for comes here once, after its on_case, or goes to on_save_failed. Every call comes before
  /// run() completes.
  std::function<void(std::span<const std::size_t> case_indexes)> on_saved = {};
  /// An event or log notification: `key` is the case's when the study correlated it with one.
  std::function<void(const std::string* key, const notification&)> on_notification = {};
  /// A line the study wrote on stderr; `slot` is 0 for one process, else 1..processes.
  std::function<void(std::size_t slot, std::string_view line)> on_stderr_line = {};
  /// A process of the study is started again, or (a pool of several) is not: as
  /// pool_options::on_restart, `slot` 0 for one process (`why`: how the last one went), else
  /// the pool's slot. Used when the launch sets no on_restart of its own.
  std::function<void(std::size_t slot, const std::string& why)> on_restart = {};
  /// One process answers one request at a time while several wait (see run_hooks).
  std::function<void()> on_sequential_study = {};
  /// A finished case could not be saved (the run then stops): what, where and why. An empty
  /// key: the run's writer could not be opened, and no case runs.
  std::function<void(const std::string& key, const std::string& text)> on_save_failed = {};
  /// The diagnostics of the study's processes (a pool's too): a request that failed after the
  /// study went, a malformed line. When set, nothing of the session goes to the process's
  /// stderr; when empty, each process's host_options::log does (stderr_log_sink() by default).
  std::function<void(const log_record&)> on_log = {};
};

struct session_options {
  /// The study to start. Ignored when `connection` is set.
  study_launch study = {};
  /// A study the caller started (it keeps running after the session) and its listing.
  std::optional<started_study> connection = {};
  plan::selection selection = {};
  /// Refused (session_errc::too_many_cases) before the plan is made, when it can be told from
  /// one trial's. 0: no limit.
  std::size_t max_cases = 0;
  /// Called with the plan and the listing before anything is saved: cuts the plan (a shard),
  /// sets per-case timeouts in `policy`, or refuses the session with an error.
  std::function<std::optional<session_error>(plan::plan&, const protocol::list_result&,
                                             schedule::run_policy& policy)>
      refine = {};
  schedule::run_policy policy = {};  // its `op` and `transcript_for` are the mode's
  session_mode mode = session_mode::run;
  /// session_mode::execute and score: the artifacts directory.
  std::filesystem::path artifacts = {};
  /// Where to save; nothing saves no run (a dry run, or a service that keeps results itself).
  std::optional<save_options> save = {};
  /// What summarize() groups by (a sample metadata key); the listing's samples are kept for it.
  std::string group_by = {};
  /// The outcome's report keeps the whole records of the plan's first `kept_records` cases (what
  /// report.html's table shows). Every case reaches hooks.on_case and the summary; beyond these,
  /// a session keeps 4 to 13 bytes of a case (docs/session.md), so it runs millions.
  std::size_t kept_records = 10000;
  session_hooks hooks = {};
  /// Where the session's long steps run (planning, reading a saved run to resume it, the end of
  /// the session with its reports), e.g. a thread pool, so a server's executor stays free. Empty:
  /// on the session's executor. These steps call no hook; the session's state never leaves its
  /// own executor otherwise.
  std::optional<boost::asio::any_io_executor> work_executor = {};
};

/// How a session ended.
struct session_outcome {
  std::string run_id;            // empty when nothing was saved
  std::filesystem::path folder;  // the run folder
  plan::plan plan;               // this session's plan
  /// Over `plan`: how the run stopped, and the records (reused and run now) of its first
  /// session_options::kept_records cases.
  schedule::run_report report;
  aggregate::summary summary;  // of `report`
  /// The whole run's summary as report.json has it (every saved case, also those this
  /// session's selection left out): null when nothing was saved.
  boost::json::object run_summary;
  std::size_t reused = 0;  // cases the run had saved
  std::size_t ran = 0;     // cases this session finished
  /// Finished cases whose result could not be saved (the run stopped at the first).
  std::vector<std::string> unsaved;
  /// The file that could not be written when the run folder was finished: the run is not
  /// finished (a resume finishes it).
  store::write_error unfinished;
  std::vector<std::string> warnings;
  protocol::initialize_result study;
  protocol::list_result listing;  // its samples dropped unless group_by needed them

  schedule::stop_reason stopped() const { return report.stopped; }
  /// Whether the run lacks cases (stopped, cancelled ones) or its files: a resume would run.
  bool resumable() const;
};

namespace detail {
struct session_state;
}

/// A session opened: the study started, the plan made, the run folder opened and locked. Its
/// run id is known before it runs (a server answers with it). Move-only; run it once.
class session {
 public:
  /// Opens a session on the calling coroutine's executor, or on a strand it makes over that
  /// executor when it may run handlers on several threads at once (the plain executor of an
  /// io_context run by several threads, a thread_pool): the session's state, its hooks and the
  /// processes it starts live there, so the caller never needs a strand. May be awaited from any
  /// thread; starting processes does not fork (posix_spawn).
  static boost::asio::awaitable<tl::expected<session, session_error>> open(session_options o);

  session(session&&) noexcept;
  session& operator=(session&&) noexcept;
  ~session();

  const std::string& run_id() const;  // empty without saving
  const std::filesystem::path& folder() const;
  const plan::plan& plan() const;
  const protocol::initialize_result& study() const;
  const protocol::list_result& listing() const;
  /// What a resume takes from the saved run (records by plan index, until run() takes them
  /// into its summary) and what it runs.
  const store::resume_plan& resumed() const;
  /// Whether a case that ended as `r` is saved, so that hooks.on_saved or on_save_failed will
  /// follow its on_case: with a run store, every state but cancelled; in execute mode, the
  /// cases with an artifact (executed, skipped); nothing in a session that saves nothing.
  bool saves(const schedule::case_record& r) const;

  /// How a stop is written in meta.json: "interrupted" unless set (a server writes
  /// "cancelled" for a cancel a client asked for). Call before cancelling, from any thread.
  void set_stop_label(std::string label);

  /// Runs the session: completes with `void(std::exception_ptr, session_outcome)` as co_spawn
  /// does, on the token's terms (use_awaitable, deferred, a callback, ...). A terminal
  /// cancellation stops the run as Ctrl-C does (see above).
  template <class Token>
  auto async_run(Token&& token) {
    return boost::asio::co_spawn(executor(), run(), std::forward<Token>(token));
  }
  boost::asio::awaitable<session_outcome> run();

 private:
  explicit session(std::unique_ptr<detail::session_state> s);
  boost::asio::awaitable<session_outcome> run_steps();
  boost::asio::any_io_executor executor() const;
  std::unique_ptr<detail::session_state> s_;
};

/// The one call: opens the session and runs it.
boost::asio::awaitable<tl::expected<session_outcome, session_error>> run_session(session_options o);

/// run_session() as an asynchronous operation for any completion token, on `ex`:
/// `void(std::exception_ptr, tl::expected<session_outcome, session_error>)`.
template <class Token>
auto async_run_session(boost::asio::any_io_executor ex, session_options o, Token&& token) {
  return boost::asio::co_spawn(ex, run_session(std::move(o)), std::forward<Token>(token));
}

}  // namespace mira

/// @cond
template <>
struct boost::system::is_error_code_enum<mira::session_errc> : std::true_type {};
template <>
struct boost::system::is_error_condition_enum<mira::session_condition> : std::true_type {};
/// @endcond
