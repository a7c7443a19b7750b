// The study pool's dispatch choice without processes: fewest in flight, abandoned requests
// counted, the per-process cap, dead slots skipped, completions of a restarted slot ignored.
#include "host/pool_dispatch.hpp"

#include <boost/test/unit_test.hpp>

#include <vector>

using mira::detail::pool_dispatch;

BOOST_AUTO_TEST_SUITE(pool_dispatch_tests)

BOOST_AUTO_TEST_CASE(requests_spread_over_every_process_before_any_gets_a_second) {
  pool_dispatch d(4, 0);
  std::vector<std::size_t> counts(4, 0);
  for (int i = 0; i < 4; ++i) {
    auto s = d.pick();
    BOOST_REQUIRE(s);
    d.started(*s);
    ++counts[*s];
  }
  for (auto c : counts) BOOST_TEST(c == 1u);
}

BOOST_AUTO_TEST_CASE(the_least_loaded_process_is_chosen) {
  pool_dispatch d(3, 0);
  for (int i = 0; i < 3; ++i) d.started(0);
  d.started(1);
  auto g2 = d.started(2);
  d.started(2);
  d.finished(2, g2);  // slot 2: one in flight, slot 1: one, slot 0: three
  auto s = d.pick();
  BOOST_REQUIRE(s);
  BOOST_TEST((*s == 1u || *s == 2u));
  d.started(*s);
  auto t = d.pick();
  BOOST_REQUIRE(t);
  BOOST_TEST(*t != 0u);
  BOOST_TEST(*t != *s);
}

BOOST_AUTO_TEST_CASE(abandoned_requests_count_as_load) {
  pool_dispatch d(2, 0);
  d.set_abandoned(0, 5);
  d.started(1);
  auto s = d.pick();
  BOOST_REQUIRE(s);
  BOOST_TEST(*s == 1u);
  BOOST_TEST(d.load(0) == 5u);
}

BOOST_AUTO_TEST_CASE(no_process_gets_more_than_the_cap) {
  pool_dispatch d(2, 2);
  for (int i = 0; i < 4; ++i) {
    auto s = d.pick();
    BOOST_REQUIRE(s);
    d.started(*s);
  }
  BOOST_TEST(d.in_flight(0) == 2u);
  BOOST_TEST(d.in_flight(1) == 2u);
  BOOST_TEST(!d.pick());
  auto g = d.generation(1);
  d.finished(1, g);
  auto s = d.pick();
  BOOST_REQUIRE(s);
  BOOST_TEST(*s == 1u);
}

BOOST_AUTO_TEST_CASE(abandoned_requests_count_against_the_cap) {
  pool_dispatch d(2, 2);
  d.set_abandoned(0, 2);
  d.started(1);
  d.started(1);
  BOOST_TEST(!d.pick());
  d.set_abandoned(0, 1);
  auto s = d.pick();
  BOOST_REQUIRE(s);
  BOOST_TEST(*s == 0u);
}

BOOST_AUTO_TEST_CASE(a_dead_process_gets_nothing_until_it_is_live_again) {
  pool_dispatch d(2, 0);
  d.set_dead(0);
  for (int i = 0; i < 3; ++i) {
    auto s = d.pick();
    BOOST_REQUIRE(s);
    BOOST_TEST(*s == 1u);
    d.started(*s);
  }
  BOOST_TEST(d.live_count() == 1u);
  d.set_dead(1);
  BOOST_TEST(!d.pick());
  d.set_live(0);
  auto s = d.pick();
  BOOST_REQUIRE(s);
  BOOST_TEST(*s == 0u);
}

BOOST_AUTO_TEST_CASE(completions_from_before_a_restart_do_not_count) {
  pool_dispatch d(1, 0);
  auto old_gen = d.started(0);
  d.started(0);
  d.set_dead(0);
  d.set_live(0);  // a new process: nothing in flight on it
  BOOST_TEST(d.in_flight(0) == 0u);
  auto new_gen = d.started(0);
  BOOST_TEST(new_gen != old_gen);
  d.finished(0, old_gen);  // a request of the dead process completes late
  BOOST_TEST(d.in_flight(0) == 1u);
  d.finished(0, new_gen);
  BOOST_TEST(d.in_flight(0) == 0u);
}

BOOST_AUTO_TEST_SUITE_END()
