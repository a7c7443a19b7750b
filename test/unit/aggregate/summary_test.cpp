// Aggregation: pass@k, Wilson intervals, percentiles, breakdowns and totals.
#include <mira/aggregate/summary.hpp>
#include <mira/protocol/codec.hpp>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/test/unit_test.hpp>

using namespace mira;
using namespace mira::aggregate;
using schedule::case_state;
namespace tt = boost::test_tools;

BOOST_AUTO_TEST_SUITE(aggregate_tests)

BOOST_AUTO_TEST_CASE(pass_at_k_matches_hand_computed_values) {
  // n = 5, c = 2: pass@1 = 2/5; pass@2 = 1 - C(3,2)/C(5,2) = 1 - 3/10; pass@3 = 1 - 1/10.
  BOOST_TEST(*pass_at_k(5, 2, 1) == 0.4, tt::tolerance(1e-12));
  BOOST_TEST(*pass_at_k(5, 2, 2) == 0.7, tt::tolerance(1e-12));
  BOOST_TEST(*pass_at_k(5, 2, 3) == 0.9, tt::tolerance(1e-12));
  BOOST_TEST(*pass_at_k(5, 2, 4) == 1.0);  // n - c < k
  BOOST_TEST(*pass_at_k(10, 0, 3) == 0.0);
  BOOST_TEST(*pass_at_k(3, 3, 1) == 1.0);
  BOOST_TEST(!pass_at_k(3, 1, 4));  // k > n: undefined, not clamped
  BOOST_TEST(!pass_at_k(0, 0, 1));
}

BOOST_AUTO_TEST_CASE(wilson_interval) {
  auto i = wilson(8, 10);
  BOOST_TEST(i.low == 0.4901625, tt::tolerance(1e-5));
  BOOST_TEST(i.high == 0.9433178, tt::tolerance(1e-5));
  auto all = wilson(10, 10);
  BOOST_TEST(all.high == 1.0, tt::tolerance(1e-12));
  BOOST_TEST(all.low == 0.7224672, tt::tolerance(1e-5));
  auto none = wilson(0, 0);
  BOOST_TEST(none.low == 0.0);
  BOOST_TEST(none.high == 0.0);
}

BOOST_AUTO_TEST_CASE(percentiles_interpolate) {
  BOOST_TEST(percentile({1, 2, 3, 4, 5}, 50) == 3.0);
  BOOST_TEST(percentile({1, 2, 3, 4}, 50) == 2.5);
  BOOST_TEST(percentile({10}, 99) == 10.0);
  BOOST_TEST(percentile({1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 95) == 9.55, tt::tolerance(1e-12));
  BOOST_TEST(percentile({}, 50) == 0.0);
}

// A run of 12 cases: eval e, samples a and b, targets x and y, 3 trials each.
struct twelve_cases {
  protocol::list_result listing;
  plan::plan p;
  std::vector<schedule::case_record> recs;
  twelve_cases();
};

twelve_cases::twelve_cases() {
  auto decoded = protocol::decode_list_result(boost::json::parse(R"({"evals":[
    {"name":"e","samples":[{"id":"a","metadata":{"difficulty":"easy"}},{"id":"b"}],"scorers":[],
     "targets":[{"label":"x","metadata":{"tier":"cheap"}},{"label":"y"}],"trials":3}]})"));
  BOOST_REQUIRE(decoded);
  listing = std::move(*decoded);
  auto planned = plan::make_plan(listing);
  BOOST_REQUIRE(planned);
  p = std::move(*planned);
  BOOST_REQUIRE(p.cases.size() == 12u);
  recs.resize(12);
  // Records keep the study's text; the summary decodes it.
  auto result = [](bool passed, double aggregate, double cost) {
    return boost::json::serialize(boost::json::object{
        {"passed", passed},
        {"aggregate", aggregate},
        {"transcript",
         {{"usage", {{"input_tokens", 10}, {"output_tokens", 5}, {"cost_usd", cost}}},
          {"tool_calls_count", 1},
          {"timing", {{"time_to_first_token_ms", 100}}},
          {"metrics", {{"recall", aggregate}}}}}});
  };
  // e/a@x: pass, pass, fail.  e/a@y: na, skipped(cancelled), pass.  e/b@x: error x3.  e/b@y: pass
  // x3.
  std::vector<case_state> states = {case_state::passed, case_state::passed,    case_state::failed,
                                    case_state::na,     case_state::cancelled, case_state::passed,
                                    case_state::error,  case_state::error,     case_state::error,
                                    case_state::passed, case_state::passed,    case_state::passed};
  for (std::size_t i = 0; i < 12; ++i) {
    recs[i].state = states[i];
    recs[i].attempts = states[i] == case_state::cancelled ? 0 : 1;
    recs[i].latency_seconds = static_cast<double>(i);
    if (states[i] == case_state::passed || states[i] == case_state::failed ||
        states[i] == case_state::na)
      recs[i].result_json =
          result(states[i] == case_state::passed, states[i] == case_state::passed ? 1.0 : 0.0, 0.5);
  }
  recs[6].retried = {{"rate limit", "429"}, {"rate limit", "429"}};
}

BOOST_AUTO_TEST_CASE(summary_of_a_run) {
  twelve_cases run;
  auto& recs = run.recs;
  auto* listing = &run.listing;
  auto* p = &run.p;
  auto s = summarize(*p, recs, &*listing, "difficulty");
  BOOST_TEST(s.count(case_state::passed) == 6u);
  BOOST_TEST(s.count(case_state::error) == 3u);
  BOOST_TEST(s.overall.scored == 10u);  // N/A and cancelled are out of the denominator
  BOOST_TEST(s.overall.passed == 6u);
  BOOST_TEST(s.matrix.at({"e", "x"}).scored == 6u);
  BOOST_TEST(s.matrix.at({"e", "y"}).passed == 4u);
  BOOST_TEST(s.per_target.at("y").scored == 4u);
  BOOST_REQUIRE(s.trials.size() == 4u);
  auto& t = s.trials[0];
  BOOST_TEST(t.logical_key == "e/a@x");
  BOOST_TEST(t.scored == 3u);
  BOOST_TEST(t.passed == 2u);
  BOOST_TEST(*t.pass_at[0] == 2.0 / 3.0, tt::tolerance(1e-12));
  BOOST_TEST(*t.pass_at[1] == 1.0);
  BOOST_TEST(t.mean == 2.0 / 3.0, tt::tolerance(1e-12));
  BOOST_TEST(t.stddev == 0.5773503, tt::tolerance(1e-6));  // sample sd of {1, 1, 0}
  BOOST_TEST(s.trials[1].scored == 1u);                    // na and cancelled do not count
  BOOST_TEST(!s.trials[1].pass_at[1].has_value());         // k = 2 > n = 1
  // group-by difficulty: sample a has it (easy), sample b does not.
  BOOST_REQUIRE(s.groups.size() == 2u);
  BOOST_TEST(s.groups[0].first == "easy");
  BOOST_TEST(s.groups[0].second.scored == 4u);
  BOOST_TEST(s.groups[1].first == "(unset)");
  BOOST_TEST(s.groups[1].second.scored == 6u);
  BOOST_TEST(s.total.input_tokens == 80);  // 8 results: 6 passed, 1 failed, 1 N/A
  BOOST_TEST(s.total.cost_usd == 4.0, tt::tolerance(1e-12));
  BOOST_TEST(s.total.retries == 2u);
  BOOST_TEST(s.total.retry_causes.at("rate limit") == 2u);
  BOOST_TEST(s.total.metric_means.at("recall") == 0.75, tt::tolerance(1e-12));
  BOOST_TEST(s.latency_by_target.at("x").n == 6u);
  BOOST_TEST(s.latency_by_target.at("y").ttft_n == 5u);

  // The box plot of x's latencies {0, 1, 2, 6, 7, 8}: every case's, exact.
  auto& box = s.latency_by_target.at("x");
  BOOST_TEST(box.min == 0.0);
  BOOST_TEST(box.p25 == 1.25, tt::tolerance(1e-12));
  BOOST_TEST(box.p75 == 6.75, tt::tolerance(1e-12));
  BOOST_TEST(box.max == 8.0);

  auto by_tier = summarize(*p, recs, &*listing, "tier");
  BOOST_TEST(by_tier.groups[0].first == "cheap");
  BOOST_TEST(by_tier.groups[0].second.scored == 6u);
}

// Cases end in any order, and a run read back gives its plan a case at a time: the summary is
// the same.
BOOST_AUTO_TEST_CASE(the_accumulator_takes_cases_in_any_order_and_over_a_growing_plan) {
  twelve_cases run;
  schedule::run_report header;
  const auto expected = boost::json::serialize(
      summary_json(summarize(run.p, run.recs, &run.listing, "tier"), header));
  accumulator backwards(run.p, &run.listing, "tier");
  for (auto i = run.recs.size(); i-- > 0;) backwards.add(i, run.recs[i]);
  BOOST_TEST(boost::json::serialize(summary_json(backwards.finish(), header)) == expected);
  plan::plan growing;
  accumulator as_read(growing, &run.listing, "tier");
  for (std::size_t i = 0; i < run.recs.size(); ++i) {
    growing.cases.push_back(run.p.cases[i]);
    as_read.add(i, run.recs[i]);
  }
  BOOST_TEST(boost::json::serialize(summary_json(as_read.finish(), header)) == expected);
}

// What meta.json keeps is the whole summary: read back, it is the same summary (orders, latency
// box, per-target totals included), so a report over a finished run needs none of its records.
BOOST_AUTO_TEST_CASE(a_summary_reads_back_from_its_json_whole) {
  twelve_cases run;
  schedule::run_report header;
  header.seconds = 2.5;
  auto s = summarize(run.p, run.recs, &run.listing, "tier");
  s.target_order = {"y", "x"};  // the plan's order, which is not the names' order
  const auto saved = summary_json(s, header);
  auto back = summary_from_json(saved);
  BOOST_TEST_REQUIRE(back.has_value(), back.error());
  BOOST_TEST(boost::json::serialize(summary_json(*back, header)) == boost::json::serialize(saved));
  BOOST_TEST(back->target_order == s.target_order);
  BOOST_TEST(back->eval_order == s.eval_order);
  BOOST_TEST(back->group_by == "tier");
  BOOST_TEST(back->latency_by_target.at("x").p25 == s.latency_by_target.at("x").p25);
  BOOST_TEST(back->latency_by_target.at("y").ttft_n == 5u);
  BOOST_TEST(back->totals_by_target.at("x").tokens == s.totals_by_target.at("x").tokens);
  BOOST_TEST(back->trials.size() == s.trials.size());
  BOOST_TEST(back->trials[1].pass_at.size() == 3u);
  BOOST_TEST(!back->trials[1].pass_at[1].has_value());

  // What cannot be read is named; an older summary without the box reads with none.
  auto broken = saved;
  broken["totals"].as_object()["retries"] = -1;
  auto refused = summary_from_json(broken);
  BOOST_TEST_REQUIRE(!refused.has_value());
  BOOST_TEST(refused.error() == "summary.totals.retries is not a count");
  broken = saved;
  broken.erase("counts");
  BOOST_TEST(summary_from_json(broken).error() == "summary.counts is missing");
  auto older = saved;
  older["latency"].as_object()["x"].as_object().erase("p25_s");
  older.erase("totals_by_target");
  auto read = summary_from_json(older);
  BOOST_TEST_REQUIRE(read.has_value());
  BOOST_TEST(read->latency_by_target.at("x").p25 == 0.0);
  BOOST_TEST(read->totals_by_target.empty());
}

// A summary made again from a run's records (in key order) shows evals and targets in the order
// the run's own saved summary lists them.
BOOST_AUTO_TEST_CASE(a_summary_made_again_takes_the_saved_order) {
  twelve_cases run;
  auto s = summarize(run.p, run.recs, &run.listing);
  BOOST_TEST((s.target_order == std::vector<std::string>{"x", "y"}));
  auto saved = boost::json::parse(R"({"per_eval":{"e":{}},"per_target":{"y":{},"z":{}}})");
  order_as_saved(s, saved.as_object());
  BOOST_TEST((s.target_order == std::vector<std::string>{"y", "x"}));  // x, not saved, after
  BOOST_TEST((s.eval_order == std::vector<std::string>{"e"}));
}

// A plan put together again (a narrower resume's saved cases after the plan's) may split one
// logical case's trials: they are still one entry of the trials, in order of its first case.
BOOST_AUTO_TEST_CASE(trials_of_a_logical_case_split_in_the_plan_are_joined) {
  twelve_cases run;
  const std::vector<std::size_t> order = {0, 1, 3, 4, 5, 6, 7, 8, 9, 10, 11, 2};
  plan::plan split;
  split.cases = run.p.cases.subset(order);
  std::vector<schedule::case_record> recs;
  for (auto i : order) recs.push_back(run.recs[i]);
  auto s = summarize(split, recs);
  BOOST_REQUIRE(s.trials.size() == 4u);
  BOOST_TEST(s.trials[0].logical_key == "e/a@x");
  BOOST_TEST(s.trials[0].scored == 3u);
  BOOST_TEST(s.trials[0].passed == 2u);
  BOOST_TEST(s.trials[0].stddev == 0.5773503, tt::tolerance(1e-6));
  BOOST_TEST(s.trials[1].logical_key == "e/a@y");
}

BOOST_AUTO_TEST_SUITE_END()
