// The summary of a run read back a case at a time (see summary_feed.hpp).
#include <mira/store/summary_feed.hpp>

namespace mira::store {

summary_feed::summary_feed(std::string group_by, const protocol::list_result* listing)
    : plan_(std::make_unique<plan::plan>()), summary_(*plan_, listing, std::move(group_by)) {}

void summary_feed::add(const plan::planned_case& c, const schedule::case_record& r) {
  plan_->cases.push_back(c);
  summary_.add(plan_->cases.size() - 1, r);
}

aggregate::summary summary_feed::finish() {
  auto s = summary_.finish();
  plan_->cases.clear();
  return s;
}

void count_unfinished(aggregate::summary& s, std::size_t unfinished) {
  s.counts[static_cast<std::size_t>(schedule::case_state::cancelled)] += unfinished;
}

}  // namespace mira::store
