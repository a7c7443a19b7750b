// The scheduler's bookkeeping under a mock clock: caps, AIMD, backoff bounds, retries.
#include "schedule/scheduler.hpp"

#include <boost/test/unit_test.hpp>

#include <set>

using namespace mira::schedule;
using std::chrono::milliseconds;
using std::chrono::seconds;

namespace {

const time_point t0{seconds(1000)};

std::vector<std::size_t> start_all(scheduler& s, time_point now) {
  std::vector<std::size_t> out;
  while (auto id = s.next(now)) out.push_back(*id);
  return out;
}

attempt_verdict ok() {
  return {};
}
attempt_verdict rate_limited() {
  return {true, true, std::nullopt};
}

}  // namespace

BOOST_AUTO_TEST_SUITE(scheduler_tests)

BOOST_AUTO_TEST_CASE(global_and_provider_caps_are_never_exceeded) {
  concurrency_policy c;
  c.max_concurrent = 5;
  c.provider_limits = {{"slow", 2}};
  std::vector<std::string> providers(10, "slow");
  providers.insert(providers.end(), 10, "fast");
  scheduler s(providers, c, {}, 1);
  auto started = start_all(s, t0);
  BOOST_TEST(started.size() == 5u);
  BOOST_TEST(s.in_flight("slow") == 2u);
  BOOST_TEST(s.in_flight("fast") == 3u);
  // Finishing a slow case frees a slot: the next start may only be from the provider with room.
  BOOST_TEST((s.finish(started[0], ok(), t0) == disposition::done));
  auto id = s.next(t0);
  BOOST_REQUIRE(id);
  BOOST_TEST(s.in_flight() == 5u);
  BOOST_TEST(s.in_flight("slow") <= 2u);
}

BOOST_AUTO_TEST_CASE(reserved_slots_count_against_the_global_cap) {
  concurrency_policy c;
  c.max_concurrent = 3;
  scheduler s(std::vector<std::string>(6, "p"), c, {}, 1);
  s.reserve(2);  // two abandoned requests the study is still working on
  BOOST_TEST(start_all(s, t0).size() == 1u);
  s.reserve(3);
  BOOST_TEST(!s.next(t0).has_value());
  s.reserve(0);  // they were answered
  BOOST_TEST(start_all(s, t0).size() == 2u);
  BOOST_TEST(s.in_flight() == 3u);
}

BOOST_AUTO_TEST_CASE(a_burst_of_rate_limits_halves_the_limit_once_per_window) {
  concurrency_policy c;
  c.max_concurrent = 8;
  scheduler s(std::vector<std::string>(20, "p"), c, {}, 7);
  auto started = start_all(s, t0);
  BOOST_REQUIRE(started.size() == 8u);
  // Four 429s from one burst: one decrease (8 -> 4), not four (8 -> 1).
  for (int i = 0; i < 4; ++i)
    BOOST_TEST((s.finish(started[i], rate_limited(), t0) == disposition::retry));
  BOOST_TEST(s.limit("p") == 4u);
  // The provider still serves the other four: a smaller limit, no pause.
  BOOST_TEST(!s.backoff_until("p").has_value());
  // Successes bring the limit back one slot each to the last good level (7).
  for (int i = 4; i < 8; ++i) s.finish(started[i], ok(), t0);
  BOOST_TEST(s.limit("p") == 7u);
  // Rate-limited cases go back to the front of the queue, without a delay of their own.
  auto again = start_all(s, t0);
  BOOST_REQUIRE(again.size() == 7u);
  BOOST_TEST((std::set<std::size_t>(again.begin(), again.begin() + 4) ==
              std::set<std::size_t>(started.begin(), started.begin() + 4)));
  // An attempt that started after the decrease is a new window: it halves again.
  s.finish(again[0], rate_limited(), t0);
  BOOST_TEST(s.limit("p") == 3u);
}

BOOST_AUTO_TEST_CASE(a_provider_that_serves_nothing_is_paused) {
  concurrency_policy c;
  c.max_concurrent = 4;
  retry_policy r;
  r.base_backoff = milliseconds(200);
  scheduler s(std::vector<std::string>(1, "p"), c, r, 11);
  auto id = s.next(t0);
  s.finish(*id, rate_limited(), t0);  // the first 429: a smaller limit only
  BOOST_TEST(!s.backoff_until("p").has_value());
  id = s.next(t0);
  BOOST_REQUIRE(id);
  s.finish(*id, rate_limited(), t0);  // again, with no success and nothing else in flight
  auto until = s.backoff_until("p");
  BOOST_REQUIRE(until);
  BOOST_TEST((*until <= t0 + milliseconds(200)));  // full jitter within the first step
  auto wake = s.next_wakeup(t0);
  if (*until > t0) {
    BOOST_TEST(!s.next(t0).has_value());
    BOOST_REQUIRE(wake);
    BOOST_TEST((*wake == *until));
  }
  BOOST_TEST(s.next(*until).has_value());
}

// Held by reserved slots only when they fill the cap the scheduler uses (at least 1: a
// policy of 0 means 1), work waits and nothing runs.
BOOST_AUTO_TEST_CASE(held_by_reserved_compares_with_the_cap_in_use) {
  concurrency_policy c;
  c.max_concurrent = 0;
  scheduler s(std::vector<std::string>(2, "p"), c, {}, 1);
  BOOST_TEST(!s.held_by_reserved());  // nothing reserved: a case may start
  auto id = s.next(t0);
  BOOST_REQUIRE(id);
  s.reserve(1);
  BOOST_TEST(!s.held_by_reserved());  // one in flight
  BOOST_TEST((s.finish(*id, ok(), t0) == disposition::done));
  BOOST_TEST(s.held_by_reserved());
  s.reserve(0);
  BOOST_TEST(!s.held_by_reserved());
  BOOST_TEST(s.next(t0).has_value());
}

// The run loop asks next() and then next_wakeup() with a later clock reading: a retry whose
// delay ends between the two is startable, and must not be reported as "wait for an attempt's
// end" (there may be none: the run then slept until its deadline).
BOOST_AUTO_TEST_CASE(a_retry_due_between_next_and_next_wakeup_is_not_lost) {
  retry_policy r;
  r.base_backoff = milliseconds(1);
  scheduler s(std::vector<std::string>(1, "p"), {}, r, 3);
  auto id = s.next(t0);
  BOOST_REQUIRE(id);
  attempt_verdict again{true, false, milliseconds(5)};  // a retry no sooner than t0 + 5 ms
  BOOST_TEST((s.finish(*id, again, t0) == disposition::retry));
  BOOST_TEST(!s.next(t0).has_value());
  auto later = t0 + seconds(1);
  auto wake = s.next_wakeup(later);
  BOOST_REQUIRE(wake);
  BOOST_TEST((*wake <= later));
  BOOST_TEST(s.next(*wake).has_value());
}

BOOST_AUTO_TEST_CASE(the_limit_recovers_fast_to_the_last_good_level_then_probes_slowly) {
  concurrency_policy c;
  c.max_concurrent = 8;
  scheduler s(std::vector<std::string>(200, "p"), c, {}, 3);
  auto first = start_all(s, t0);
  s.finish(first[0], rate_limited(), t0);  // 8 -> 4; 7 was fine
  BOOST_TEST(s.limit("p") == 4u);
  // One slot per success back to 7 ...
  for (int i = 1; i <= 3; ++i) s.finish(first[i], ok(), t0);
  BOOST_TEST(s.limit("p") == 7u);
  // ... then one slot per `limit` successes.
  for (int i = 4; i < 8; ++i) s.finish(first[i], ok(), t0);
  BOOST_TEST(s.limit("p") == 7u);
  int successes = 4;
  while (s.limit("p") < 8u) {
    auto id = s.next(t0);
    BOOST_REQUIRE(id);
    s.finish(*id, ok(), t0);
    ++successes;
  }
  BOOST_TEST(successes == 8);  // 7 + 4/7 after the first eight, then four more
  for (int i = 0; i < 10; ++i) s.finish(*s.next(t0), ok(), t0);
  BOOST_TEST(s.limit("p") == 8u);  // never past the ceiling
}

BOOST_AUTO_TEST_CASE(retries_wait_a_jittered_exponential_backoff_within_bounds) {
  retry_policy r;
  r.max_retries = 6;
  r.base_backoff = milliseconds(100);
  r.max_backoff = milliseconds(1000);
  concurrency_policy c;
  c.adaptive = false;
  for (std::uint64_t seed = 0; seed < 20; ++seed) {
    scheduler s({"p"}, c, r, seed);
    auto now = t0;
    for (int attempt = 1; attempt <= 6; ++attempt) {
      auto id = s.next(now);
      BOOST_REQUIRE(id);
      BOOST_TEST((s.finish(*id, {true, false, std::nullopt}, now) == disposition::retry));
      auto wake = s.next_wakeup(now);
      auto bound = std::min(milliseconds(100) * (1 << (attempt - 1)), milliseconds(1000));
      if (wake) {
        BOOST_TEST((*wake - now <= bound));
        now = *wake;
      }
    }
    auto id = s.next(now);
    BOOST_REQUIRE(id);
    BOOST_TEST((s.finish(*id, {true, false, std::nullopt}, now) == disposition::gave_up));
    BOOST_TEST(s.attempts(*id) == 7);
    BOOST_TEST(s.idle());
  }
}

BOOST_AUTO_TEST_CASE(retry_after_is_honoured) {
  concurrency_policy c;
  c.adaptive = false;
  scheduler s({"p"}, c, {}, 5);
  auto id = s.next(t0);
  s.finish(*id, {true, false, seconds(40)}, t0);
  auto wake = s.next_wakeup(t0);
  BOOST_REQUIRE(wake);
  BOOST_TEST((*wake >= t0 + seconds(40)));
  BOOST_TEST(!s.next(t0 + seconds(39)).has_value());
  BOOST_TEST(s.next(t0 + seconds(40)).has_value());
}

BOOST_AUTO_TEST_CASE(subject_failures_are_not_retried) {
  scheduler s({"p"}, {}, {}, 1);
  auto id = s.next(t0);
  BOOST_TEST((s.finish(*id, ok(), t0) == disposition::done));
  BOOST_TEST(s.attempts(*id) == 1);
  BOOST_TEST(s.idle());
}

BOOST_AUTO_TEST_CASE(no_adaptive_keeps_limits_and_provider_backoff_off) {
  concurrency_policy c;
  c.max_concurrent = 4;
  c.adaptive = false;
  scheduler s(std::vector<std::string>(8, "p"), c, {}, 2);
  auto started = start_all(s, t0);
  s.finish(started[0], rate_limited(), t0);
  BOOST_TEST(s.limit("p") == 4u);
  BOOST_TEST(!s.backoff_until("p").has_value());
  BOOST_TEST(s.next(t0).has_value());  // the slot is usable at once
}

BOOST_AUTO_TEST_CASE(stop_returns_what_never_started) {
  concurrency_policy c;
  c.max_concurrent = 2;
  scheduler s(std::vector<std::string>(5, "p"), c, {}, 1);
  auto started = start_all(s, t0);
  auto waiting = s.stop();
  BOOST_TEST(waiting == (std::vector<std::size_t>{2, 3, 4}), boost::test_tools::per_element());
  BOOST_TEST(!s.next(t0).has_value());
  s.release(started[0]);
  BOOST_TEST((s.finish(started[1], {true, false, std::nullopt}, t0) == disposition::gave_up));
  BOOST_TEST(s.idle());
}

BOOST_AUTO_TEST_CASE(providers_take_turns) {
  concurrency_policy c;
  c.max_concurrent = 1;
  scheduler s({"a", "a", "a", "b", "b", "b"}, c, {}, 1);
  std::string order;
  for (int i = 0; i < 6; ++i) {
    auto id = s.next(t0);
    BOOST_REQUIRE(id);
    order += *id < 3 ? 'a' : 'b';
    s.finish(*id, ok(), t0);
  }
  BOOST_TEST(order == "ababab");
}

BOOST_AUTO_TEST_SUITE_END()
