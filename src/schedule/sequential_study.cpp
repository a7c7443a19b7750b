// Noticing a study that answers one request at a time (see sequential_study.hpp).
#include "schedule/sequential_study.hpp"

#include <algorithm>
#include <utility>

namespace mira::schedule {

study_shape judge_answers(const answer_evidence& e, const sequential_rules& rules) {
  if (e.out_of_order) return study_shape::concurrent;
  if (e.gaps == 0) return study_shape::undecided;
  auto mean = std::chrono::duration<double>(e.total) / static_cast<double>(e.gaps);
  if (std::chrono::duration<double>(e.shortest) < mean * rules.together)
    return study_shape::concurrent;
  if (e.gaps >= rules.min_gaps && e.span >= rules.window) return study_shape::one_at_a_time;
  return study_shape::undecided;
}

sequential_detector::sequential_detector(sequential_rules rules) : rules_(rules) {}

void sequential_detector::sent(std::uint64_t seq, time_point now) {
  pending_.emplace(seq, now);
}

bool sequential_detector::answered(std::uint64_t seq, time_point now) {
  auto it = pending_.find(seq);
  if (it == pending_.end()) return false;
  const bool oldest = it == pending_.begin();
  const auto pending = pending_.size();
  const auto sent = it->second;
  pending_.erase(it);  // also once decided: the map must not grow for the rest of the run
  if (decided_) return false;
  auto previous = std::exchange(last_answer_, now);
  if (pending < rules_.min_pending) {
    restart_evidence();  // this answer is only where the next gap starts
  } else {
    if (previous) {
      auto gap = now - std::max(sent, *previous);
      ++evidence_.gaps;
      evidence_.total += gap;
      evidence_.shortest = std::min(evidence_.shortest, gap);
    }
    if (!first_answer_) first_answer_ = now;
    evidence_.span = now - *first_answer_;
  }
  // Whatever the queue: a study that reads one request at a time answers them in order.
  if (!oldest) evidence_.out_of_order = true;
  auto shape = judge_answers(evidence_, rules_);
  decided_ = shape != study_shape::undecided;
  return shape == study_shape::one_at_a_time;
}

void sequential_detector::dropped(std::uint64_t seq) {
  pending_.erase(seq);
  restart_evidence();
}

}  // namespace mira::schedule
