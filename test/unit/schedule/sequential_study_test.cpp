// Noticing a study that answers one request at a time, from send and answer times alone: the
// decision (judge_answers) on hand-made evidence, and the detector on simulated runs, among them
// the one that printed the advice wrongly (20 one-second cases, 4 at a time, at -j 4).
#include "schedule/sequential_study.hpp"

#include <boost/test/unit_test.hpp>

#include <functional>
#include <queue>
#include <vector>

using namespace mira::schedule;
using std::chrono::microseconds;
using std::chrono::milliseconds;
using std::chrono::seconds;

namespace {

const time_point t0{seconds(1000)};

struct outcome {
  bool told = false;
  time_point when{};
  int times = 0;
};

// A run as run_plan makes it, against a study with `capacity` workers that take requests in the
// order they were written: `j` requests written at t0, the next written as each answer is seen.
// Case i takes durations[i % size]; the host sees each answer `seen_after(i)` after the study
// wrote it, never before the previous one (it reads them in order).
outcome simulate(sequential_detector& d, std::size_t cases, std::size_t j, std::size_t capacity,
                 std::vector<milliseconds> durations,
                 std::function<microseconds(std::size_t)> seen_after = {}) {
  outcome out;
  std::vector<time_point> free(capacity, t0);  // when each worker is next free
  using finish = std::pair<time_point, std::uint64_t>;
  std::priority_queue<finish, std::vector<finish>, std::greater<>> answers;
  std::uint64_t next = 0;
  auto write = [&](time_point now) {
    d.sent(next, now);
    auto worker = std::min_element(free.begin(), free.end());
    *worker = std::max(now, *worker) + durations[next % durations.size()];
    answers.emplace(*worker, next++);
  };
  while (next < std::min(cases, j)) write(t0);
  time_point seen = t0;
  while (!answers.empty()) {
    auto [at, seq] = answers.top();
    answers.pop();
    seen = std::max(seen, at) + (seen_after ? seen_after(seq) : microseconds(0));
    if (d.answered(seq, seen)) out.told = true, out.when = seen, ++out.times;
    if (next < cases) write(seen);
  }
  return out;
}

// The host's own wobble: 1 to 5 ms between seeing one answer and the next, varying.
microseconds wobble(std::size_t i) {
  return milliseconds(1 + (i * 7) % 5);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(sequential_study_tests)

BOOST_AUTO_TEST_CASE(the_decision_needs_enough_even_answers_in_order) {
  answer_evidence e;
  BOOST_TEST((judge_answers(e) == study_shape::undecided));
  e.gaps = 8;
  e.total = milliseconds(8 * 250);
  e.shortest = milliseconds(200);
  e.span = milliseconds(1999);
  BOOST_TEST((judge_answers(e) == study_shape::undecided));  // not yet 2 s
  e.span = seconds(2);
  BOOST_TEST((judge_answers(e) == study_shape::one_at_a_time));
  e.gaps = 7;
  BOOST_TEST((judge_answers(e) == study_shape::undecided));  // too few answers, however long
  e.gaps = 8;
  e.shortest = milliseconds(60);  // under a quarter of the mean gap: two answers came together
  BOOST_TEST((judge_answers(e) == study_shape::concurrent));
  e.shortest = milliseconds(200);
  e.out_of_order = true;
  BOOST_TEST((judge_answers(e) == study_shape::concurrent));
}

// The run that printed the advice in one of two tries: the study ran 4 at a time, so its answers
// came in fours a few milliseconds apart (more than the old 1 ms "together"), in order.
BOOST_AUTO_TEST_CASE(twenty_one_second_cases_four_at_a_time_at_j4_are_not_one_at_a_time) {
  for (auto wobble_ms : {0, 1, 5, 20, 60}) {
    sequential_detector d;
    auto o = simulate(d, 20, 4, 4, {milliseconds(1000)}, [&](std::size_t i) {
      return milliseconds(wobble_ms ? 1 + static_cast<int>(i * 7) % wobble_ms : 0);
    });
    BOOST_TEST(!o.told, "host wobble up to " << wobble_ms << " ms");
  }
}

BOOST_AUTO_TEST_CASE(a_study_answering_one_at_a_time_is_told_once_after_the_window) {
  sequential_detector d;
  auto o = simulate(d, 40, 8, 1, {milliseconds(250)}, wobble);
  BOOST_TEST(o.told);
  BOOST_TEST(o.times == 1);
  // Eight gaps after the first answer (at about 250 ms), spanning 2 s.
  BOOST_TEST((o.when - t0 >= milliseconds(2250)));
  BOOST_TEST((o.when - t0 <= milliseconds(2400)));
}

BOOST_AUTO_TEST_CASE(a_slow_first_case_or_uneven_cases_do_not_hide_one_at_a_time) {
  sequential_detector warm_up;
  // The first case loads a model for 10 s; the others take 300 ms.
  std::vector<milliseconds> first_slow(40, milliseconds(300));
  first_slow[0] = seconds(10);
  BOOST_TEST(simulate(warm_up, 40, 8, 1, first_slow, wobble).told);

  sequential_detector uneven;
  BOOST_TEST(simulate(uneven, 40, 8, 1,
                      {milliseconds(500), milliseconds(1400), milliseconds(800), milliseconds(1100),
                       milliseconds(600)},
                      wobble)
                 .told);
}

BOOST_AUTO_TEST_CASE(a_study_working_on_several_at_once_is_never_told) {
  for (std::size_t capacity : {2, 3, 4, 8}) {
    sequential_detector d;
    BOOST_TEST(!simulate(d, 200, 8, capacity, {milliseconds(250)}, wobble).told,
               capacity << " at once");
  }
  // Cases of uneven length at 4 at once: answers overtake older requests.
  sequential_detector uneven;
  BOOST_TEST(
      !simulate(uneven, 200, 8, 4,
                {milliseconds(900), milliseconds(300), milliseconds(1200), milliseconds(500)},
                wobble)
           .told);
}

BOOST_AUTO_TEST_CASE(fewer_than_four_pending_says_nothing) {
  sequential_detector d;
  BOOST_TEST(!simulate(d, 100, 3, 1, {milliseconds(250)}, wobble).told);
}

BOOST_AUTO_TEST_CASE(once_seen_working_on_two_it_is_never_told) {
  sequential_detector d;
  std::uint64_t seq = 0;
  auto now = t0;
  for (int i = 0; i < 8; ++i) d.sent(seq++, now);
  now += milliseconds(250);
  BOOST_TEST(!d.answered(1, now));  // before request 0's answer
  std::uint64_t oldest = 0;
  bool told = false;
  for (int a = 0; a < 40; ++a) {  // then 10 s of perfect one-at-a-time evidence
    now += milliseconds(250);
    if (oldest == 1) ++oldest;
    told = told || d.answered(oldest++, now);
    d.sent(seq++, now);
  }
  BOOST_TEST(!told);
}

BOOST_AUTO_TEST_CASE(a_dropped_request_restarts_the_window) {
  sequential_detector d;
  std::uint64_t seq = 0;
  auto now = t0;
  for (int i = 0; i < 8; ++i) d.sent(seq++, now);
  std::uint64_t oldest = 0;
  for (int a = 0; a < 8; ++a) {  // 1.75 s of evidence
    now += milliseconds(250);
    BOOST_TEST(!d.answered(oldest++, now));
    d.sent(seq++, now);
  }
  d.dropped(oldest++);  // timed out
  d.sent(seq++, now);
  auto restart = now;
  bool told = false;
  time_point when{};
  for (int a = 0; a < 16 && !told; ++a) {
    now += milliseconds(250);
    if (d.answered(oldest++, now)) told = true, when = now;
    d.sent(seq++, now);
  }
  BOOST_TEST(told);
  BOOST_TEST((when - restart >= seconds(2)));
}

BOOST_AUTO_TEST_SUITE_END()
