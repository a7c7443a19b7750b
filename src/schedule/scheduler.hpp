// The scheduler's bookkeeping, sans I/O: which case may start now under the global and
// per-provider caps, adaptive per-provider limits (AIMD), rate-limit backoff and retries with
// jittered exponential delays. Time is passed in, so tests drive it with a mock clock. Private
// to the library: run_plan drives it; users set its policies (policy.hpp) in run_policy.
#pragma once

#include <mira/schedule/policy.hpp>

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <queue>
#include <random>
#include <string>
#include <vector>

namespace mira::schedule {

enum class disposition {
  done,     // final: record the outcome
  retry,    // queued again (after its backoff)
  gave_up,  // wanted a retry but the attempts are used up: final
};

class scheduler {
 public:
  /// `providers[i]` is case i's provider. `seed` fixes the jitter (tests, reproducible runs).
  scheduler(std::vector<std::string> providers, concurrency_policy concurrency, retry_policy retry,
            std::uint64_t seed = std::random_device{}());
  /// The same with case i's provider read from `provider_of(i)`, i < cases: no list of them.
  scheduler(std::size_t cases, const std::function<std::string_view(std::size_t)>& provider_of,
            concurrency_policy concurrency, retry_policy retry,
            std::uint64_t seed = std::random_device{}());

  /// A case that may start now (it is then in flight), or nothing.
  std::optional<std::size_t> next(time_point now);
  /// Records the end of an attempt of an in-flight case.
  disposition finish(std::size_t id, const attempt_verdict& v, time_point now);
  /// An in-flight case ended without an outcome (cancelled): its slot is freed.
  void release(std::size_t id);
  /// Slots held by work the scheduler no longer tracks: cancelled requests the study has not
  /// answered (it may ignore `cancel`). They count against the global cap until set back.
  void reserve(std::size_t slots) { reserved_ = slots; }
  std::size_t reserved() const { return reserved_; }
  /// Work waits, none is in flight, and reserved slots fill the global cap: only an answer to
  /// an abandoned request (or a new study) lets anything start.
  bool held_by_reserved() const {
    return !stopped_ && in_flight_ == 0 && waiting_ > 0 && reserved_ >= conc_.max_concurrent;
  }
  /// No more starts; returns the cases that were waiting (never started, or between attempts).
  std::vector<std::size_t> stop();

  /// When something blocked now may become startable (a backoff or a retry delay ends);
  /// `now` when something is startable already (next(now) would return it); nothing when
  /// only an attempt's end can unblock it.
  std::optional<time_point> next_wakeup(time_point now);
  bool idle() const { return in_flight_ == 0 && waiting_ == 0; }
  bool stopped() const { return stopped_; }

  std::size_t in_flight() const { return in_flight_; }
  std::size_t in_flight(const std::string& provider) const;
  /// The provider's current adaptive limit (its ceiling when not adaptive).
  std::size_t limit(const std::string& provider) const;
  std::optional<time_point> backoff_until(const std::string& provider) const;
  int attempts(std::size_t id) const { return cases_[id].attempts; }

 private:
  struct bucket {
    std::string name;
    std::size_t ceiling = 1;
    double limit = 1;       // fractional: beyond `recover_to` it grows 1/limit per success
    double recover_to = 0;  // after a decrease, grow one slot per success back to here
    std::size_t in_flight = 0;
    time_point backoff_until{};
    int backoff_steps = 0;
    std::uint64_t window_start = 0;  // attempts started before this belong to the last window
    bool success_since_decrease = true;
    std::deque<std::size_t> ready;
  };
  struct case_state {  // 16 bytes: one per case of the run
    std::uint32_t bucket = 0;
    int attempts = 0;
    std::uint64_t started_seq = 0;  // start order of its current attempt
  };
  struct delayed {
    time_point at;
    std::size_t id;
    bool operator>(const delayed& o) const { return at > o.at || (at == o.at && id > o.id); }
  };

  duration jittered_backoff(int step, std::optional<duration> hint);
  void promote(time_point now);
  bucket& bucket_of(std::string_view provider);

  concurrency_policy conc_;
  retry_policy retry_;
  std::mt19937_64 rng_;
  std::vector<bucket> buckets_;
  std::vector<case_state> cases_;
  std::priority_queue<delayed, std::vector<delayed>, std::greater<>> delayed_;
  std::size_t in_flight_ = 0;
  std::size_t reserved_ = 0;
  std::size_t waiting_ = 0;  // queued or delayed
  std::size_t rr_ = 0;       // round-robin start over buckets, so no provider starves
  std::uint64_t seq_ = 0;    // attempts started so far
  bool stopped_ = false;
};

}  // namespace mira::schedule
