// The planner's grid and case keys.
#include <mira/plan/plan.hpp>
#include <mira/protocol/codec.hpp>

#include <boost/json/parse.hpp>
#include <boost/test/unit_test.hpp>

using namespace mira;

BOOST_AUTO_TEST_SUITE(plan_tests)

BOOST_AUTO_TEST_CASE(grid_is_samples_targets_axes_trials_in_listing_order) {
  auto list = protocol::decode_list_result(boost::json::parse(R"({"evals":[
    {"name":"e","samples":[{"id":"a"},{"id":"b"}],"scorers":[],
     "targets":[{"label":"sim","provider":"p","available":true},{"label":"off","available":false}],
     "axes":[{"name":"z","values":["1","2"]},{"name":"a","values":["x"]},{"name":"empty","values":[]}],
     "trials":2,"seed":40}]})"));
  BOOST_REQUIRE(list);
  auto cases = plan::plan_all(*list);
  BOOST_TEST(cases.size() == 2u * 2u * 2u * 2u);
  BOOST_TEST(cases[0].key == "e/a@sim[a=x,z=1]#0");
  BOOST_TEST(cases[0].logical_key == "e/a@sim[a=x,z=1]");
  BOOST_TEST(cases[0].params.seed.value() == 40);
  BOOST_TEST(cases[1].key == "e/a@sim[a=x,z=1]#1");
  BOOST_TEST(cases[1].params.seed.value() == 41);
  BOOST_TEST(cases[2].key == "e/a@sim[a=x,z=2]#0");
  BOOST_TEST(cases[4].key == "e/a@off[a=x,z=1]#0");
  BOOST_TEST(!cases[4].available);
  BOOST_TEST(cases[0].provider == "p");
  BOOST_TEST(cases[4].provider == "");
}

BOOST_AUTO_TEST_CASE(single_trial_keys_have_no_suffix_and_no_seed) {
  protocol::run_params p;
  p.eval = "greet";
  p.sample = "hi";
  p.target = "sim";
  BOOST_TEST(plan::case_key(p) == "greet/hi@sim");
  p.params = {{"effort", "high"}, {"budget", "low"}};
  BOOST_TEST(plan::case_key(p) == "greet/hi@sim[budget=low,effort=high]");
  p.trials = 8;
  p.trial = 2;
  BOOST_TEST(plan::case_key(p) == "greet/hi@sim[budget=low,effort=high]#2");
  BOOST_TEST(plan::logical_key(p) == "greet/hi@sim[budget=low,effort=high]");
}

BOOST_AUTO_TEST_SUITE_END()
