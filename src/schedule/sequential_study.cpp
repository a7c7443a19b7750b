// Noticing a study that answers one request at a time (see sequential_study.hpp).
#include "schedule/sequential_study.hpp"

namespace mira::schedule {

sequential_detector::sequential_detector(std::size_t min_pending, duration window,
                                         duration together)
    : min_pending_(min_pending), window_(window), together_(together) {}

void sequential_detector::sent(std::uint64_t seq, time_point now) {
  pending_.insert(seq);
  if (!since_ && pending_.size() >= min_pending_) since_ = now;
}

bool sequential_detector::answered(std::uint64_t seq, time_point now) {
  bool oldest = !pending_.empty() && *pending_.begin() == seq;
  auto was_pending = pending_.size();
  pending_.erase(seq);  // also once told: the set must not grow for the rest of the run
  if (told_) return false;
  auto previous = last_answer_;
  last_answer_ = now;
  if (was_pending < min_pending_ || !oldest || (previous && now - *previous < together_)) {
    reset();
    if (pending_.size() >= min_pending_) since_ = now;
    return false;
  }
  if (!since_) since_ = now;
  ++answers_;
  // A few answers at least: one slow case alone says nothing about the study.
  if (answers_ >= 3 && now - *since_ >= window_) told_ = true;
  return told_;
}

void sequential_detector::dropped(std::uint64_t seq) {
  pending_.erase(seq);
  reset();
}

}  // namespace mira::schedule
