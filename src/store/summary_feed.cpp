// The summary of a run read back a case at a time (see summary_feed.hpp).
#include <mira/store/summary_feed.hpp>

namespace mira::store {

summary_feed::summary_feed(std::string group_by, const protocol::list_result* listing)
    : group_by_(std::move(group_by)), listing_(listing) {}

void summary_feed::add(const plan::planned_case& c, const schedule::case_record& r) {
  plan::planned_case kept = c;
  // Neighbours mostly share an eval, a target and a provider: one copy of each name.
  if (kept.params.eval == last_.params.eval) kept.params.eval = last_.params.eval;
  if (kept.params.target == last_.params.target) kept.params.target = last_.params.target;
  if (kept.provider == last_.provider) kept.provider = last_.provider;
  if (kept.params.params == last_.params.params) kept.params.params = last_.params.params;
  last_.params.eval = kept.params.eval;
  last_.params.target = kept.params.target;
  last_.provider = kept.provider;
  last_.params.params = kept.params.params;
  plan_.cases.push_back(std::move(kept));
  cases_.push_back(r);
}

aggregate::summary summary_feed::finish() {
  auto s = aggregate::summarize(plan_, cases_, listing_, group_by_);
  plan_ = {};
  cases_ = {};
  return s;
}

}  // namespace mira::store
