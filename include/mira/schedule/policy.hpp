// What a run's scheduling follows: the global and per-provider concurrency caps, the retry
// budget and backoff, and what one attempt's outcome means for scheduling (classify.hpp derives
// it). run_policy (run_plan.hpp) carries them; the scheduler that applies them is the library's.
#pragma once

#include <chrono>
#include <cstddef>
#include <map>
#include <optional>
#include <string>

namespace mira::schedule {

using clock = std::chrono::steady_clock;
using duration = clock::duration;
using time_point = clock::time_point;

struct concurrency_policy {
  std::size_t max_concurrent = 8;                      // global cap
  std::map<std::string, std::size_t> provider_limits;  // per-provider ceilings (default: global)
  /// Adapt per-provider limits to rate limits and back off a provider that hits one. Off:
  /// limits stay at their ceilings and rate-limited cases only wait their retry backoff.
  bool adaptive = true;
};

struct retry_policy {
  int max_retries = 4;  // attempts = max_retries + 1
  duration base_backoff = std::chrono::milliseconds(500);
  duration max_backoff = std::chrono::seconds(30);
};

/// What one attempt's outcome means for scheduling (see classify.hpp for how it is derived).
struct attempt_verdict {
  bool retry = false;                   // another attempt may succeed
  bool rate_limited = false;            // the provider pushed back
  std::optional<duration> retry_after;  // with retry: the study's hint, a minimum wait
};

}  // namespace mira::schedule
