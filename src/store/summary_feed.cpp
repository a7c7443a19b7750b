// The summary of a run read back a case at a time (see summary_feed.hpp).
#include <mira/store/summary_feed.hpp>

#include <mira/store/run_reader.hpp>

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

std::optional<aggregate::summary> saved_summary(const run_reader& run,
                                                const std::string& group_by) {
  const auto& meta = run.meta();
  if (meta.made_by_rust_host || !meta.summary || !run.unreadable().empty() ||
      !completeness_of(run).complete())
    return std::nullopt;
  auto s = aggregate::summary_from_json(*meta.summary);
  if (!s || s->group_by != group_by) return std::nullopt;
  std::array<std::size_t, schedule::case_state_count> counts{};
  for (std::size_t i = 0; i < run.size(); ++i) {
    auto state = run.status(i);
    if (!state) return std::nullopt;
    ++counts[static_cast<std::size_t>(*state)];
  }
  if (counts != s->counts) return std::nullopt;
  return std::move(*s);
}

}  // namespace mira::store
