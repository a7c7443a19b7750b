// The session's run ledger: what a session knows of its cases between planning and its end,
// with no I/O. The coroutine shell (session.cpp) tells it what happened - the plan made, the
// saved cases a resume reuses, a case finished, a batch of records back from the writer, a save
// that failed - and does what it answers: save a record or an artifact, stop the run, wait for
// the saves in flight, finish the run's folder. Tests drive it case by case (ledger_test.cpp).
#pragma once

#include <mira/aggregate/summary.hpp>
#include <mira/plan/plan.hpp>
#include <mira/protocol/types.hpp>
#include <mira/schedule/results.hpp>
#include <mira/store/run_meta.hpp>

#include <cstddef>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace mira::detail {

/// Where a session keeps the cases it finishes.
enum class keeping {
  nothing,    // a run that saves nothing
  records,    // a run store: every finished case's record
  artifacts,  // session_mode::execute: each executed (or skipped) case's artifact
};

/// What the shell does with a case that finished.
enum class save_action { none, record, artifact };

/// A save that failed: its case's key and why, for people.
struct failed_save {
  std::string key, message;
};

class run_ledger {
 public:
  /// `kept_records`: how many records (the plan's first cases) the outcome keeps whole;
  /// `group_by`: the summaries' grouping (aggregate::accumulator).
  run_ledger(keeping k, std::size_t kept_records, std::string group_by);

  // -- before the run --------------------------------------------------------------------

  /// The plan is made (and no longer changes): the summaries start over it. `p` and `list`
  /// outlive the ledger's summaries. Again: nothing.
  void planned(const plan::plan& p, const protocol::list_result& list);
  /// A resume reads the saved run: from here on, the run's summary also covers the saved cases
  /// outside this session's plan (outside()), over a plan of its own.
  void reading_saved();
  /// A saved case of the plan that a resume reuses (case `i`).
  void reused(std::size_t i, const schedule::case_record& r);
  /// A saved case outside the plan (a narrower resume).
  void outside(const plan::planned_case& c, const schedule::case_record& r);
  /// The saved run is read: without a case outside the plan, the run's summary is the plan's.
  void saved_read();
  /// Records held from before the run (the artifacts an execute session skips): each case not
  /// in `todo` (ascending) whose record is in `records`.
  void held(std::span<const schedule::case_record> records, std::span<const std::size_t> todo);

  /// Nothing can be saved (the writer could not be opened, `why`): nothing may run, as its
  /// result would be lost. Returns the record (cancelled: not finished, a resume runs it) each
  /// case to run is given, through finished().
  schedule::case_record cannot_save(std::string why);

  // -- while it runs ---------------------------------------------------------------------

  /// Case `i` of the plan finished as `r` (a cancelled case is not finished: a resume runs it):
  /// taken into the summaries; the answer says what to save.
  save_action finished(std::size_t i, const schedule::case_record& r);
  /// Whether a case that ended as `r` is saved (session::saves).
  bool saves(const schedule::case_record& r) const;
  /// `n` saves handed to the writer / back from it (written or failed).
  void handed_over(std::size_t n) { in_flight_ += n; }
  void came_back(std::size_t n) { in_flight_ -= n; }
  /// Every save handed over has come back: the run's folder can be finished.
  bool settled() const { return in_flight_ == 0; }
  /// A save failed. The first failure stops the run: carrying on would lose more results.
  void save_failed(failed_save f);
  /// Why the run must stop (the first failed save), or nothing.
  const std::optional<std::string>& stop() const { return first_failure_; }

  // -- the end ---------------------------------------------------------------------------

  /// Cases this session finished.
  std::size_t ran() const { return ran_; }
  /// The run's report as the session ends: a save that failed after the last case ended still
  /// stops it; `rep.cases` gets the kept records.
  void end(schedule::run_report& rep);
  /// The keys of the cases whose save failed, in the order they failed.
  std::vector<std::string> take_unsaved() { return std::move(unsaved_); }
  /// This session's entry in meta.json as it ends. `interrupted_label`: what an interrupted
  /// session is called (a server's stop says why).
  void close(store::session_entry& s, const schedule::run_report& rep,
             const std::string& interrupted_label) const;
  /// The summary of this session's plan, and of the whole run when a resume read saved cases
  /// outside it (else null). Once, after end().
  aggregate::summary finish_plan();
  std::optional<aggregate::summary> finish_whole();
  /// The plan the whole run's summary is over (null when it is the session's).
  const plan::plan* whole_plan() const { return whole_plan_.get(); }

 private:
  void take(std::size_t i, const schedule::case_record& r);

  keeping keeping_;
  std::size_t kept_;
  const plan::plan* plan_ = nullptr;
  const protocol::list_result* list_ = nullptr;
  std::string group_by_;
  std::optional<aggregate::accumulator> summary_, whole_;
  std::unique_ptr<plan::plan> whole_plan_;
  std::vector<schedule::case_record> kept_records_;
  std::size_t ran_ = 0, in_flight_ = 0;
  std::vector<std::string> unsaved_;
  std::optional<std::string> first_failure_;
};

}  // namespace mira::detail
