// The summary of a run read back a case at a time: what a visit of a run_reader adds each case
// to, so the per-case visit is the one place a summary is made from. For now it keeps each case
// (its names shared) and summarizes them at the end; an online aggregate accumulator takes its
// place behind the same three calls.
#pragma once

#include <mira/aggregate/summary.hpp>
#include <mira/plan/plan.hpp>
#include <mira/protocol/types.hpp>
#include <mira/schedule/results.hpp>

#include <string>

namespace mira::store {

class summary_feed {
 public:
  /// `group_by` and `listing` as aggregate::summarize takes them; `listing` must outlive the feed.
  explicit summary_feed(std::string group_by = {}, const protocol::list_result* listing = nullptr);
  /// The next case, in the order of the report it summarizes.
  void add(const plan::planned_case& c, const schedule::case_record& r);
  std::size_t size() const { return plan_.cases.size(); }
  /// The summary of every case added (the feed is left empty).
  aggregate::summary finish();

 private:
  std::string group_by_;
  const protocol::list_result* listing_;
  plan::plan plan_;
  std::vector<schedule::case_record> cases_;
  plan::planned_case last_;  // the names of the case before, shared with the next one's
};

}  // namespace mira::store
