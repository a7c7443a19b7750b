// Noticing a study that answers one request at a time, from send and answer times alone.
#include "schedule/sequential_study.hpp"

#include <boost/test/unit_test.hpp>

using namespace mira::schedule;
using std::chrono::milliseconds;
using std::chrono::seconds;

namespace {

const time_point t0{seconds(1000)};

// k requests kept in flight against a study that takes `each` per request, one at a time
// (sequential) or all at once (parallel); true when the detector spoke, with when.
struct outcome {
  bool told = false;
  time_point when{};
  int times = 0;
};

outcome drive(sequential_detector& d, std::size_t k, milliseconds each, bool sequential,
              int answers) {
  outcome out;
  std::uint64_t seq = 0;
  std::uint64_t oldest = 1;
  auto now = t0;
  for (std::size_t i = 0; i < k; ++i) d.sent(++seq, now);
  for (int a = 0; a < answers;) {
    if (sequential) {
      now += each;
      if (d.answered(oldest++, now)) out.told = true, out.when = now, ++out.times;
      d.sent(++seq, now);
      ++a;
    } else {
      // All k answered together after `each`, a microsecond apart, then k more sent.
      now += each;
      for (std::size_t i = 0; i < k; ++i, ++a) {
        now += std::chrono::microseconds(1);
        if (d.answered(oldest++, now)) out.told = true, out.when = now, ++out.times;
      }
      for (std::size_t i = 0; i < k; ++i) d.sent(++seq, now);
    }
  }
  return out;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(sequential_study_tests)

BOOST_AUTO_TEST_CASE(a_study_answering_one_at_a_time_is_noticed_once_after_the_window) {
  sequential_detector d;
  auto o = drive(d, 8, milliseconds(250), true, 40);
  BOOST_TEST(o.told);
  BOOST_TEST(o.times == 1);
  BOOST_TEST((o.when - t0 >= seconds(2)));
  BOOST_TEST((o.when - t0 <= milliseconds(2250)));
}

BOOST_AUTO_TEST_CASE(a_study_answering_a_batch_together_is_not) {
  sequential_detector d;
  BOOST_TEST(!drive(d, 8, milliseconds(250), false, 200).told);
}

BOOST_AUTO_TEST_CASE(fewer_than_four_pending_says_nothing) {
  sequential_detector d;
  BOOST_TEST(!drive(d, 3, milliseconds(250), true, 100).told);
}

BOOST_AUTO_TEST_CASE(answers_out_of_order_are_not_one_at_a_time) {
  sequential_detector d;
  std::uint64_t seq = 0;
  auto now = t0;
  for (int i = 0; i < 6; ++i) d.sent(++seq, now);
  bool told = false;
  // Always the second-oldest answered first: a study working on several at once.
  std::uint64_t next = 2;
  for (int a = 0; a < 40; ++a) {
    now += milliseconds(250);
    told = told || d.answered(next, now);
    d.sent(++seq, now);
    next += 1;
  }
  BOOST_TEST(!told);
}

BOOST_AUTO_TEST_CASE(a_dropped_request_restarts_the_window) {
  sequential_detector d;
  std::uint64_t seq = 0;
  auto now = t0;
  for (int i = 0; i < 8; ++i) d.sent(++seq, now);
  std::uint64_t oldest = 1;
  for (int a = 0; a < 6; ++a) {  // 1.5 s of evidence
    now += milliseconds(250);
    BOOST_TEST(!d.answered(oldest++, now));
    d.sent(++seq, now);
  }
  d.dropped(oldest++);  // timed out
  auto restart = now;
  bool told = false;
  time_point when{};
  for (int a = 0; a < 12 && !told; ++a) {
    now += milliseconds(250);
    if (d.answered(oldest++, now)) told = true, when = now;
    d.sent(++seq, now);
  }
  BOOST_TEST(told);
  BOOST_TEST((when - restart >= seconds(2)));
}

BOOST_AUTO_TEST_SUITE_END()
