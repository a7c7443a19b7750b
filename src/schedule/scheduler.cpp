// Scheduler bookkeeping (see scheduler.hpp).
#include "schedule/scheduler.hpp"

#include <algorithm>
#include <cmath>

namespace mira::schedule {

scheduler::scheduler(std::vector<std::string> providers, concurrency_policy concurrency,
                     retry_policy retry, std::uint64_t seed)
    : scheduler(
          providers.size(), [&](std::size_t i) -> std::string_view { return providers[i]; },
          std::move(concurrency), retry, seed) {}

scheduler::scheduler(std::size_t cases,
                     const std::function<std::string_view(std::size_t)>& provider_of,
                     concurrency_policy concurrency, retry_policy retry, std::uint64_t seed)
    : conc_(std::move(concurrency)), retry_(retry), rng_(seed) {
  conc_.max_concurrent = std::max<std::size_t>(1, conc_.max_concurrent);
  cases_.resize(cases);
  for (std::size_t i = 0; i < cases; ++i) {
    auto& b = bucket_of(provider_of(i));
    cases_[i].bucket = static_cast<std::uint32_t>(&b - buckets_.data());
    b.ready.push_back(i);
  }
  waiting_ = cases;
}

scheduler::bucket& scheduler::bucket_of(std::string_view provider) {
  for (auto& b : buckets_)
    if (b.name == provider) return b;
  bucket b;
  b.name = provider;
  auto it = conc_.provider_limits.find(b.name);
  b.ceiling =
      std::clamp<std::size_t>(it == conc_.provider_limits.end() ? conc_.max_concurrent : it->second,
                              1, conc_.max_concurrent);
  b.limit = static_cast<double>(b.ceiling);
  buckets_.push_back(std::move(b));
  return buckets_.back();
}

void scheduler::promote(time_point now) {
  while (!delayed_.empty() && delayed_.top().at <= now) {
    auto id = delayed_.top().id;
    delayed_.pop();
    // A retry goes ahead of cases that never ran: its provider already accepted it once.
    buckets_[cases_[id].bucket].ready.push_front(id);
  }
}

std::optional<std::size_t> scheduler::next(time_point now) {
  if (stopped_ || in_flight_ + reserved_ >= conc_.max_concurrent) return std::nullopt;
  promote(now);
  for (std::size_t n = 0; n < buckets_.size(); ++n) {
    auto& b = buckets_[(rr_ + n) % buckets_.size()];
    if (b.ready.empty() || now < b.backoff_until) continue;
    if (b.in_flight >= static_cast<std::size_t>(std::floor(b.limit))) continue;
    auto id = b.ready.front();
    b.ready.pop_front();
    ++b.in_flight;
    ++in_flight_;
    --waiting_;
    ++cases_[id].attempts;
    cases_[id].started_seq = ++seq_;
    rr_ = (rr_ + n + 1) % buckets_.size();
    return id;
  }
  return std::nullopt;
}

duration scheduler::jittered_backoff(int step, std::optional<duration> hint) {
  // Full jitter: uniform in [0, min(cap, base * 2^step)], never below the study's hint.
  auto base = std::chrono::duration<double>(retry_.base_backoff).count();
  auto cap = std::chrono::duration<double>(retry_.max_backoff).count();
  double ceiling = std::min(cap, base * std::ldexp(1.0, std::min(step, 30)));
  std::uniform_real_distribution<double> dist(0.0, ceiling);
  auto d = std::chrono::duration_cast<duration>(std::chrono::duration<double>(dist(rng_)));
  if (hint && *hint > d) d = *hint;
  return d;
}

disposition scheduler::finish(std::size_t id, const attempt_verdict& v, time_point now) {
  auto& c = cases_[id];
  auto& b = buckets_[c.bucket];
  --b.in_flight;
  --in_flight_;
  if (conc_.adaptive) {
    if (v.rate_limited) {
      // One decrease per window: the 429s of attempts that started before the last decrease
      // answer the same burst, they are not new news.
      if (c.started_seq > b.window_start) {
        double before = b.limit;
        b.limit = std::max(1.0, std::floor(before / 2));
        b.recover_to = std::max(b.limit, std::floor(before) - 1);
        b.window_start = seq_;
        // Pause the provider only when it is serving nothing: no success since the last
        // decrease and nothing else of its in flight. A 429 beside successful requests is a
        // concurrency limit, which the smaller limit already answers.
        if ((!b.success_since_decrease && b.in_flight == 0) || v.retry_after) {
          b.backoff_steps = std::min(b.backoff_steps + 1, 8);
          b.backoff_until = now + jittered_backoff(b.backoff_steps - 1, v.retry_after);
        }
        b.success_since_decrease = false;
      }
    } else {
      b.success_since_decrease = true;
      b.backoff_steps = 0;
      b.limit += b.limit < b.recover_to ? 1.0 : 1.0 / b.limit;
      b.limit = std::min(static_cast<double>(b.ceiling), b.limit);
    }
  }
  if (!v.retry) return disposition::done;
  if (c.attempts > retry_.max_retries || stopped_) return disposition::gave_up;
  ++waiting_;
  if (v.rate_limited && conc_.adaptive && !v.retry_after) {
    // The provider's limit (and its backoff, if any) is the wait: straight back to the front.
    b.ready.push_front(id);
  } else {
    delayed_.push({now + jittered_backoff(c.attempts - 1, v.retry_after), id});
  }
  return disposition::retry;
}

void scheduler::release(std::size_t id) {
  auto& b = buckets_[cases_[id].bucket];
  --b.in_flight;
  --in_flight_;
}

std::vector<std::size_t> scheduler::stop() {
  stopped_ = true;
  std::vector<std::size_t> out;
  for (auto& b : buckets_) {
    out.insert(out.end(), b.ready.begin(), b.ready.end());
    b.ready.clear();
  }
  while (!delayed_.empty()) {
    out.push_back(delayed_.top().id);
    delayed_.pop();
  }
  waiting_ = 0;
  std::sort(out.begin(), out.end());
  return out;
}

std::optional<time_point> scheduler::next_wakeup(time_point now) {
  if (stopped_) return std::nullopt;
  promote(now);
  std::optional<time_point> t;
  auto earliest = [&](time_point p) {
    if (p > now && (!t || p < *t)) t = p;
  };
  if (!delayed_.empty()) earliest(delayed_.top().at);
  bool room = in_flight_ + reserved_ < conc_.max_concurrent;
  for (auto& b : buckets_) {
    if (b.ready.empty()) continue;
    // Startable now (a retry whose delay ended since the caller's last next()): the caller
    // must not sleep on it, since no attempt's end may come to wake it.
    if (room && now >= b.backoff_until &&
        b.in_flight < static_cast<std::size_t>(std::floor(b.limit)))
      return now;
    earliest(b.backoff_until);
  }
  return t;
}

std::size_t scheduler::in_flight(const std::string& provider) const {
  for (auto& b : buckets_)
    if (b.name == provider) return b.in_flight;
  return 0;
}

std::size_t scheduler::limit(const std::string& provider) const {
  for (auto& b : buckets_)
    if (b.name == provider) return static_cast<std::size_t>(std::floor(b.limit));
  return 0;
}

std::optional<time_point> scheduler::backoff_until(const std::string& provider) const {
  for (auto& b : buckets_)
    if (b.name == provider && b.backoff_until != time_point{}) return b.backoff_until;
  return std::nullopt;
}

}  // namespace mira::schedule
