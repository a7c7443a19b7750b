// The session's run ledger driven case by case, without a process or an event loop: what is
// saved, what stops a run, what a resume reuses and what the session's end says.
#include "session/ledger.hpp"
// The ledger is the session's sans-I/O core: no Asio header may come in with it.
#ifdef BOOST_ASIO_DETAIL_CONFIG_HPP
#error "session/ledger.hpp includes an Asio header"
#endif

#include <mira/protocol/codec.hpp>

#include <boost/json/parse.hpp>
#include <boost/test/unit_test.hpp>

using namespace mira;
using detail::keeping;
using detail::run_ledger;
using detail::save_action;
using schedule::case_state;

namespace {

// Eval e: samples a, b, c against target x, two trials each: six cases.
struct six_cases {
  protocol::list_result listing;
  plan::plan p;
  six_cases() {
    auto decoded = protocol::decode_list_result(boost::json::parse(R"({"evals":[
      {"name":"e","samples":[{"id":"a"},{"id":"b"},{"id":"c"}],"scorers":[],
       "targets":[{"label":"x"}],"trials":2}]})"));
    BOOST_REQUIRE(decoded);
    listing = std::move(*decoded);
    auto planned = plan::make_plan(listing);
    BOOST_REQUIRE(planned);
    p = std::move(*planned);
    BOOST_REQUIRE(p.cases.size() == 6u);
  }
};

schedule::case_record ended(case_state s, bool with_result = true) {
  schedule::case_record r;
  r.state = s;
  r.attempts = 1;
  if (with_result)
    r.result_json = s == case_state::passed ? R"({"passed":true})" : R"({"passed":false})";
  return r;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(run_ledger_tests)

BOOST_FIXTURE_TEST_CASE(a_saving_run_saves_every_finished_case_and_no_cancelled_one, six_cases) {
  run_ledger ledger(keeping::records, 2, "");
  ledger.planned(p, listing);
  BOOST_TEST((ledger.finished(0, ended(case_state::passed)) == save_action::record));
  BOOST_TEST((ledger.finished(1, ended(case_state::failed)) == save_action::record));
  BOOST_TEST((ledger.finished(2, ended(case_state::error, false)) == save_action::record));
  BOOST_TEST((ledger.finished(3, ended(case_state::skipped)) == save_action::record));
  // A cancelled case is not finished: not saved, not counted as run; a resume runs it.
  BOOST_TEST((ledger.finished(4, ended(case_state::cancelled, false)) == save_action::none));
  BOOST_TEST(ledger.ran() == 4u);
  BOOST_TEST(!ledger.stop());
  schedule::run_report rep;
  ledger.end(rep);
  BOOST_TEST(rep.stopped == schedule::stop_reason::none);
  // The first kept_records cases are kept whole, for the outcome's report.
  BOOST_REQUIRE(rep.cases.size() == 2u);
  BOOST_TEST(rep.cases[0].state == case_state::passed);
  BOOST_TEST(rep.cases[1].state == case_state::failed);
  auto summary = ledger.finish_plan();
  BOOST_TEST(summary.count(case_state::passed) == 1u);
  BOOST_TEST(summary.count(case_state::failed) == 1u);
  BOOST_TEST(summary.count(case_state::cancelled) == 1u);
  BOOST_TEST(!ledger.finish_whole());
}

BOOST_FIXTURE_TEST_CASE(a_run_that_saves_nothing_saves_no_case, six_cases) {
  run_ledger ledger(keeping::nothing, 0, "");
  ledger.planned(p, listing);
  BOOST_TEST((ledger.finished(0, ended(case_state::passed)) == save_action::none));
  BOOST_TEST(!ledger.saves(ended(case_state::failed)));
  BOOST_TEST(ledger.ran() == 1u);
  schedule::run_report rep;
  ledger.end(rep);
  BOOST_TEST(rep.cases.empty());
}

BOOST_FIXTURE_TEST_CASE(an_execute_session_saves_the_artifact_of_what_was_executed, six_cases) {
  run_ledger ledger(keeping::artifacts, 0, "");
  ledger.planned(p, listing);
  BOOST_TEST((ledger.finished(0, ended(case_state::executed)) == save_action::artifact));
  BOOST_TEST((ledger.finished(1, ended(case_state::skipped)) == save_action::artifact));
  // Without a transcript there is nothing to score later; a failure is no artifact.
  BOOST_TEST((ledger.finished(2, ended(case_state::executed, false)) == save_action::none));
  BOOST_TEST((ledger.finished(3, ended(case_state::error)) == save_action::none));
  BOOST_TEST(ledger.ran() == 4u);
}

BOOST_FIXTURE_TEST_CASE(the_first_failed_save_stops_the_run_and_every_one_is_named, six_cases) {
  run_ledger ledger(keeping::records, 0, "");
  ledger.planned(p, listing);
  ledger.finished(0, ended(case_state::passed));
  ledger.finished(1, ended(case_state::passed));
  ledger.handed_over(2);
  BOOST_TEST(!ledger.settled());
  ledger.save_failed({"e/a 1@x", "disk full"});
  ledger.save_failed({"e/a 2@x", "disk still full"});
  ledger.came_back(2);
  BOOST_TEST(ledger.settled());
  BOOST_REQUIRE(ledger.stop());
  BOOST_TEST(*ledger.stop() == "disk full");
  // run_plan had already finished: the failure still stops the run's report.
  schedule::run_report rep;
  ledger.end(rep);
  BOOST_TEST(rep.stopped == schedule::stop_reason::requested);
  BOOST_TEST(rep.stop_message == "disk full");
  auto unsaved = ledger.take_unsaved();
  BOOST_TEST((unsaved == std::vector<std::string>{"e/a 1@x", "e/a 2@x"}));
}

BOOST_FIXTURE_TEST_CASE(a_failed_save_keeps_the_reason_a_run_already_stopped_for, six_cases) {
  run_ledger ledger(keeping::records, 0, "");
  ledger.planned(p, listing);
  ledger.save_failed({"e/a 1@x", "disk full"});
  schedule::run_report rep;
  rep.stopped = schedule::stop_reason::fail_fast;
  rep.stop_message = "e/a 1@x failed";
  ledger.end(rep);
  BOOST_TEST(rep.stopped == schedule::stop_reason::fail_fast);
  BOOST_TEST(rep.stop_message == "e/a 1@x failed");
}

BOOST_FIXTURE_TEST_CASE(a_run_that_cannot_save_runs_nothing, six_cases) {
  run_ledger ledger(keeping::records, 6, "");
  ledger.planned(p, listing);
  auto not_run = ledger.cannot_save("cannot open the segment");
  BOOST_TEST(not_run.state == case_state::cancelled);
  BOOST_TEST(not_run.message == "not run: cannot open the segment");
  BOOST_REQUIRE(ledger.stop());
  for (std::size_t i = 0; i < 6; ++i)
    BOOST_TEST((ledger.finished(i, not_run) == save_action::none));
  BOOST_TEST(ledger.ran() == 0u);
  BOOST_TEST(ledger.take_unsaved().empty());  // no case's save failed: none ran
  BOOST_TEST(ledger.finish_plan().count(case_state::cancelled) == 6u);
}

BOOST_FIXTURE_TEST_CASE(a_resume_counts_the_saved_cases_it_reuses, six_cases) {
  run_ledger ledger(keeping::records, 6, "");
  ledger.planned(p, listing);
  ledger.reading_saved();
  ledger.reused(0, ended(case_state::passed));
  ledger.reused(1, ended(case_state::failed));
  ledger.saved_read();
  BOOST_TEST(!ledger.whole_plan());  // nothing saved outside the plan
  ledger.finished(2, ended(case_state::passed));
  BOOST_TEST(ledger.ran() == 1u);  // reused cases were not run by this session
  schedule::run_report rep;
  ledger.end(rep);
  BOOST_TEST(rep.cases[0].state == case_state::passed);
  BOOST_TEST(rep.cases[1].state == case_state::failed);
  auto summary = ledger.finish_plan();
  BOOST_TEST(summary.count(case_state::passed) == 2u);
  BOOST_TEST(summary.count(case_state::failed) == 1u);
}

BOOST_FIXTURE_TEST_CASE(a_narrower_resume_sums_up_the_whole_run_too, six_cases) {
  // A saved case of another eval, which this session's selection leaves out.
  auto other = protocol::decode_list_result(boost::json::parse(
      R"({"evals":[{"name":"f","samples":[{"id":"z"}],"scorers":[],"targets":[{"label":"x"}]}]})"));
  BOOST_REQUIRE(other);
  auto other_plan = plan::make_plan(*other);
  BOOST_REQUIRE(other_plan);
  run_ledger ledger(keeping::records, 0, "");
  ledger.planned(p, listing);
  ledger.reading_saved();
  ledger.reused(0, ended(case_state::passed));
  ledger.outside(other_plan->cases[0], ended(case_state::failed));
  ledger.saved_read();
  BOOST_REQUIRE(ledger.whole_plan());
  BOOST_TEST(ledger.whole_plan()->cases.size() == 7u);
  ledger.finished(1, ended(case_state::passed));
  schedule::run_report rep;
  ledger.end(rep);
  auto mine = ledger.finish_plan();
  BOOST_TEST(mine.count(case_state::passed) == 2u);
  BOOST_TEST(mine.count(case_state::failed) == 0u);
  auto whole = ledger.finish_whole();
  BOOST_REQUIRE(whole);
  BOOST_TEST(whole->count(case_state::passed) == 2u);
  BOOST_TEST(whole->count(case_state::failed) == 1u);
}

BOOST_FIXTURE_TEST_CASE(records_held_from_before_the_run_count_except_those_to_run, six_cases) {
  run_ledger ledger(keeping::artifacts, 6, "");
  ledger.planned(p, listing);
  std::vector<schedule::case_record> records(6);
  for (auto i : {0, 2, 3}) records[i] = ended(case_state::executed);
  const std::vector<std::size_t> todo{1, 4, 5};
  ledger.held(records, todo);
  BOOST_TEST(ledger.ran() == 0u);
  ledger.finished(1, ended(case_state::executed));
  BOOST_TEST(ledger.ran() == 1u);
  auto summary = ledger.finish_plan();
  BOOST_TEST(summary.count(case_state::executed) == 4u);
  BOOST_TEST(summary.count(case_state::cancelled) == 0u);  // cases 4 and 5: not added
}

BOOST_AUTO_TEST_CASE(a_sessions_entry_says_how_it_ended) {
  struct row {
    schedule::stop_reason stopped;
    const char* label;  // what the entry's "stopped" becomes
  };
  const row rows[] = {
      {schedule::stop_reason::none, ""},
      {schedule::stop_reason::interrupted, "server stopping"},
      {schedule::stop_reason::fail_fast, "fail-fast"},
      {schedule::stop_reason::requested, "requested"},
  };
  for (auto& r : rows) {
    six_cases c;
    run_ledger ledger(keeping::records, 0, "");
    ledger.planned(c.p, c.listing);
    ledger.finished(0, ended(case_state::passed));
    schedule::run_report rep;
    rep.stopped = r.stopped;
    rep.seconds = 2.5;
    rep.stop_message = r.stopped == schedule::stop_reason::none ? "" : "why";
    store::session_entry entry;
    ledger.close(entry, rep, "server stopping");
    BOOST_TEST_CONTEXT(to_string(r.stopped)) {
      BOOST_TEST(entry.stopped == r.label);
      BOOST_TEST(entry.stop_message == rep.stop_message);
      BOOST_TEST(entry.ran == 1u);
      BOOST_TEST(entry.seconds == 2.5);
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
