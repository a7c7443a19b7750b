// The summary of a run read back a case at a time: what a visit of a run_reader adds each case
// to, so the per-case visit is the one place a summary is made from. It keeps each case's place
// in a compact plan (16 bytes) and an aggregate::accumulator's share of it, not its record.
#pragma once

#include <mira/aggregate/summary.hpp>
#include <mira/plan/plan.hpp>
#include <mira/protocol/types.hpp>
#include <mira/schedule/results.hpp>

#include <memory>
#include <optional>
#include <string>

namespace mira::store {

class summary_feed {
 public:
  /// `group_by` and `listing` as aggregate::summarize takes them; `listing` must outlive the feed.
  explicit summary_feed(std::string group_by = {}, const protocol::list_result* listing = nullptr);
  /// The next case, in the order of the report it summarizes.
  void add(const plan::planned_case& c, const schedule::case_record& r);
  std::size_t size() const { return plan_->cases.size(); }
  /// The summary of every case added (the feed is left empty).
  aggregate::summary finish();

 private:
  std::unique_ptr<plan::plan> plan_;  // where the accumulator finds it: it does not move
  aggregate::accumulator summary_;
};

/// The planned cases that have no saved record counted as cancelled in `s` (a summary of the
/// saved records), as the run itself counted them when it stopped: every report of a stopped run
/// then has the same counts.
void count_unfinished(aggregate::summary& s, std::size_t unfinished);

class run_reader;

/// The summary the run's last session saved in meta.json, when it is the one its records make
/// (with `group_by`): a run that ran to its end with every record readable, each record's state
/// known to the reader without reading it (a compact run) and counted in it exactly. Nothing
/// otherwise, when the records must be read for it (summary_feed). A million cases are then
/// reported without reading their records.
std::optional<aggregate::summary> saved_summary(const run_reader& run, const std::string& group_by);

}  // namespace mira::store
