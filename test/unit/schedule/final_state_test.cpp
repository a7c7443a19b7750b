// How a case ends (schedule::final_state): one row per kind of final attempt, and the same
// state whichever way the retry predicate went (the table in docs/pipelines.md); and the names
// of the states, read back.
#include <mira/schedule/classify.hpp>

#include <boost/test/unit_test.hpp>

using namespace mira;
using namespace mira::schedule;

namespace {

struct row {
  const char* what;
  std::optional<errc> error;  // the attempt failed with this
  bool timed_out = false;
  bool passed = false;
  bool all_na = false;
  bool infra = false;
  bool skipped = false;
  bool rate_limited = false;
  bool timeout_is_infra = false;
  bool execute_only = false;
  case_state expected;
};

}  // namespace

BOOST_AUTO_TEST_SUITE(final_state_tests)

BOOST_AUTO_TEST_CASE(every_state_has_one_name_that_reads_back) {
  BOOST_TEST(all_case_states.size() == case_state_count);
  for (std::size_t i = 0; i < all_case_states.size(); ++i) {
    auto s = all_case_states[i];
    BOOST_TEST(static_cast<std::size_t>(s) == i);  // declaration order
    BOOST_TEST((case_state_from_string(to_string(s)) == s));
    for (std::size_t j = 0; j < i; ++j) BOOST_TEST(to_string(s) != to_string(all_case_states[j]));
  }
  BOOST_TEST(to_string(case_state::na) == "na");
  BOOST_TEST(to_string(case_state::executed) == "executed");
  BOOST_TEST(!case_state_from_string("Passed").has_value());
  BOOST_TEST(!case_state_from_string("").has_value());
}

BOOST_AUTO_TEST_CASE(the_final_attempt_alone_decides) {
  const row rows[] = {
      {"timeout", {}, true, false, false, false, false, false, false, false, case_state::failed},
      {"timeout, timeout_is_infra",
       {},
       true,
       false,
       false,
       false,
       false,
       false,
       true,
       false,
       case_state::na},
      {"retryable error", errc::study_error_retryable, false, false, false, false, false, false,
       false, false, case_state::na},
      {"rate-limited error", errc::study_error, false, false, false, false, false, true, false,
       false, case_state::na},
      {"plain error", errc::study_error, false, false, false, false, false, false, false, false,
       case_state::error},
      {"study exited", errc::study_exited, false, false, false, false, false, false, false, false,
       case_state::error},
      {"bad response", errc::bad_response, false, false, false, false, false, false, false, false,
       case_state::error},
      {"passed", {}, false, true, false, false, false, false, false, false, case_state::passed},
      {"failed", {}, false, false, false, false, false, false, false, false, case_state::failed},
      {"every score N/A", {}, false, true, true, false, false, false, false, false, case_state::na},
      {"infra transcript",
       {},
       false,
       false,
       false,
       true,
       false,
       false,
       false,
       false,
       case_state::na},
      {"rate-limited result",
       {},
       false,
       true,
       false,
       false,
       false,
       true,
       false,
       false,
       case_state::na},
      {"skipped", {}, false, false, false, false, true, false, false, false, case_state::skipped},
      {"executed", {}, false, false, false, false, false, false, false, true, case_state::executed},
  };
  for (auto& r : rows) {
    BOOST_TEST_CONTEXT(r.what) {
      mira::error e;
      protocol::run_result res;
      attempt a;
      a.timed_out = r.timed_out;
      if (r.error) {
        e.code = make_error_code(*r.error);
        a.error = &e;
      } else if (!r.timed_out) {
        res.passed = r.passed;
        res.skipped = r.skipped;
        if (r.all_na) res.scores.push_back(protocol::score{});
        if (r.all_na) res.scores.back().na = true;
        if (r.infra) res.transcript.error_kind = protocol::error_kind::infra;
        a.result = &res;
      }
      BOOST_TEST(final_state(a, r.rate_limited, r.timeout_is_infra, r.execute_only) == r.expected);
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
