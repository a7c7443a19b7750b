#include "session/ledger.hpp"

#include <algorithm>

namespace mira::detail {

using schedule::case_state;

run_ledger::run_ledger(keeping k, std::size_t kept_records, std::string group_by)
    : keeping_(k), kept_(kept_records), group_by_(std::move(group_by)) {}

void run_ledger::planned(const plan::plan& p, const protocol::list_result& list) {
  if (summary_) return;
  plan_ = &p;
  list_ = &list;
  summary_.emplace(p, &list, group_by_);
  kept_records_.resize(std::min(p.cases.size(), kept_));
}

void run_ledger::reading_saved() {
  whole_plan_ = std::make_unique<plan::plan>();
  whole_plan_->cases = plan_->cases;
  whole_plan_->evals = plan_->evals;
  whole_.emplace(*whole_plan_, list_, group_by_);
}

void run_ledger::reused(std::size_t i, const schedule::case_record& r) {
  take(i, r);
}

void run_ledger::outside(const plan::planned_case& c, const schedule::case_record& r) {
  whole_plan_->cases.push_back(c);
  whole_->add(whole_plan_->cases.size() - 1, r);
}

void run_ledger::saved_read() {
  if (whole_plan_ && whole_plan_->cases.size() == plan_->cases.size()) {
    whole_.reset();
    whole_plan_.reset();
  }
}

void run_ledger::held(std::span<const schedule::case_record> records,
                      std::span<const std::size_t> todo) {
  auto next_todo = todo.begin();
  for (std::size_t i = 0; i < plan_->cases.size() && i < records.size(); ++i) {
    if (next_todo != todo.end() && *next_todo == i) {
      ++next_todo;
      continue;
    }
    take(i, records[i]);
  }
}

schedule::case_record run_ledger::cannot_save(std::string why) {
  schedule::case_record not_run;
  not_run.message = "not run: " + why;
  if (!first_failure_) first_failure_ = std::move(why);
  return not_run;
}

void run_ledger::take(std::size_t i, const schedule::case_record& r) {
  summary_->add(i, r);
  if (whole_) whole_->add(i, r);
  if (i < kept_records_.size()) kept_records_[i] = r;
}

bool run_ledger::saves(const schedule::case_record& r) const {
  switch (keeping_) {
    case keeping::nothing:
      return false;
    case keeping::records:
      return r.state != case_state::cancelled;
    case keeping::artifacts:
      return r.has_result() && (r.state == case_state::executed || r.state == case_state::skipped);
  }
  return false;
}

save_action run_ledger::finished(std::size_t i, const schedule::case_record& r) {
  take(i, r);
  ran_ += r.state != case_state::cancelled;
  if (!saves(r)) return save_action::none;
  return keeping_ == keeping::records ? save_action::record : save_action::artifact;
}

void run_ledger::save_failed(failed_save f) {
  unsaved_.push_back(std::move(f.key));
  if (!first_failure_) first_failure_ = std::move(f.message);
}

void run_ledger::end(schedule::run_report& rep) {
  if (first_failure_ && rep.stopped == schedule::stop_reason::none) {
    // A result that could not be saved, told after the last case had ended.
    rep.stopped = schedule::stop_reason::requested;
    rep.stop_message = *first_failure_;
  }
  rep.cases = std::move(kept_records_);
}

void run_ledger::close(store::session_entry& s, const schedule::run_report& rep,
                       const std::string& interrupted_label) const {
  s.seconds = rep.seconds;
  s.ran = ran_;
  if (rep.stopped == schedule::stop_reason::interrupted)
    s.stopped = interrupted_label;
  else if (rep.stopped != schedule::stop_reason::none)
    s.stopped = std::string(to_string(rep.stopped));
  s.stop_message = rep.stop_message;
}

aggregate::summary run_ledger::finish_plan() {
  return summary_->finish();
}

std::optional<aggregate::summary> run_ledger::finish_whole() {
  if (!whole_) return std::nullopt;
  return whole_->finish();
}

}  // namespace mira::detail
