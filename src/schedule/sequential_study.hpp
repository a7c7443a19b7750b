// Noticing a study that answers strictly one request at a time (read a line, run the case,
// answer, read the next), so the CLI can say once that more processes would run it in parallel.
// Plain bookkeeping fed with send and answer times; no I/O. Private to the library: run_plan
// feeds it and calls run_hooks::on_sequential_study.
#pragma once

#include <mira/schedule/policy.hpp>

#include <cstdint>
#include <optional>
#include <set>

namespace mira::schedule {

/// Sees a study as sequential when, for at least `window`, at least `min_pending` requests were
/// pending at every answer, every answer was for the oldest pending request, and no two
/// answers came within `together` of each other (a study that works on several at once
/// answers a batch written together at about the same time).
class sequential_detector {
 public:
  explicit sequential_detector(std::size_t min_pending = 4,
                               duration window = std::chrono::seconds(2),
                               duration together = std::chrono::milliseconds(1));

  /// A request was written; `seq` grows with each one.
  void sent(std::uint64_t seq, time_point now);
  /// Its answer came. True the first time the study looks sequential; false ever after.
  bool answered(std::uint64_t seq, time_point now);
  /// It ended without an answer (timeout, cancellation): the evidence so far is dropped.
  void dropped(std::uint64_t seq);

 private:
  void reset() {
    since_.reset();
    answers_ = 0;
  }
  std::size_t min_pending_;
  duration window_, together_;
  std::set<std::uint64_t> pending_;
  std::optional<time_point> since_;  // when the current run of evidence began
  std::optional<time_point> last_answer_;
  std::size_t answers_ = 0;
  bool told_ = false;
};

}  // namespace mira::schedule
