// The planner: grid order, keys, seeds, selection and its validation, key collisions.
#include <mira/plan/plan.hpp>
#include <mira/protocol/codec.hpp>

#include <boost/json/parse.hpp>
#include <boost/test/unit_test.hpp>

#include <sstream>
#include <string>
#include <string_view>

using namespace mira;

namespace {

protocol::list_result listing() {
  auto l = protocol::decode_list_result(boost::json::parse(R"({"evals":[
    {"name":"e","samples":[{"id":"a","tags":["smoke"]},{"id":"b"}],"scorers":[],
     "targets":[{"label":"sim","provider":"p","available":true},{"label":"off","available":false}],
     "axes":[{"name":"z","values":["1","2"]},{"name":"a","values":["x"]},{"name":"empty","values":[]}],
     "trials":2,"seed":40},
    {"name":"f","samples":[{"id":"s1"},{"id":"s2","tags":["slow"]}],"scorers":[],
     "targets":[{"label":"sim"},{"label":"gpt-4o"}]}]})"));
  BOOST_REQUIRE(l);
  return *l;
}

std::vector<std::string> keys(const plan::plan& p) {
  std::vector<std::string> k;
  for (const auto& c : p.cases) k.push_back(c.key);
  return k;
}

// The message of the plan's refusal of `sel`, which concerns `field`.
std::string error_of(const plan::selection& sel, plan::field field) {
  auto p = plan::make_plan(listing(), sel);
  BOOST_REQUIRE(!p);
  BOOST_TEST((p.error().code == plan::errc::no_match));
  BOOST_TEST((p.error().field == field), p.error().message());
  return p.error().message();
}

}  // namespace

BOOST_AUTO_TEST_SUITE(plan_tests)

// The names of a plan are shared: one per distinct eval, sample, target and provider, which
// every case carrying it points at, and they read as strings.
BOOST_AUTO_TEST_CASE(names_are_shared_by_the_cases_and_read_as_strings) {
  auto p = plan::make_plan(listing());
  BOOST_REQUIRE(p);
  const auto a = p->cases[0];
  const auto b = p->cases[1];  // the same eval, sample and target; another axis value or trial
  BOOST_TEST(a.params.eval == "e");
  BOOST_TEST(&a.params.eval.str() == &b.params.eval.str());
  BOOST_TEST(&a.params.target.str() == &b.params.target.str());
  BOOST_TEST(&a.provider.str() == &b.provider.str());
  BOOST_TEST(a.provider == std::string("p"));
  const std::string& as_string = a.params.sample;
  std::string_view as_view = a.params.sample;
  BOOST_TEST(as_string == "a");
  BOOST_TEST(as_view == "a");
  BOOST_TEST(a.params.eval + "/" + a.params.sample == "e/a");
  BOOST_TEST(std::string("a") < a.params.eval);
  BOOST_TEST(a.params.eval < std::string_view("f"));
  std::ostringstream os;
  os << a.params.target;
  BOOST_TEST(os.str() == "sim");
  // A name assigned a string is its own; an empty one reads as "".
  plan::case_params c;
  BOOST_TEST(c.eval.empty());
  BOOST_TEST(c.eval == "");
  c.eval = std::string("mine");
  BOOST_TEST(c.eval != a.params.eval);
  BOOST_TEST(c.eval.size() == 4u);
  // To and from the wire type, member for member.
  protocol::run_params wire = a.params;
  BOOST_TEST(wire.eval == "e");
  BOOST_TEST(wire.sample == "a");
  BOOST_TEST(wire.trial == a.params.trial);
  BOOST_TEST((wire.seed == a.params.seed));
  BOOST_TEST((wire.params == a.params.params));
  plan::case_params back = wire;
  BOOST_TEST((back == a.params));
  BOOST_TEST(plan::case_key(back) == a.key);
  BOOST_TEST(plan::case_key(wire) == a.key);
  // Axis params too: one per combination, read as a map.
  const auto other = p->cases[8];  // another sample, a's combination
  BOOST_TEST(other.key == "e/b@sim[a=x,z=1]#0");
  BOOST_TEST(&a.params.params.get() == &other.params.params.get());
  BOOST_TEST(a.params.params.at("z") == "1");
  BOOST_TEST(a.params.params.find("a")->second == "x");
  BOOST_TEST(a.params.params.count("nope") == 0u);
  const protocol::axis_params& as_map = a.params.params;
  BOOST_TEST(as_map.size() == 2u);
  plan::case_params none;
  BOOST_TEST(none.params.empty());
  none.params = protocol::axis_params{{"k", "v"}};
  BOOST_TEST(none.params.size() == 1u);
}

BOOST_AUTO_TEST_CASE(grid_is_samples_targets_axes_trials_in_listing_order) {
  auto p = plan::make_plan(listing());
  BOOST_REQUIRE(p);
  BOOST_TEST(p->cases.size() == 2u * 2u * 2u * 2u + 2u * 2u);
  auto& cases = p->cases;
  BOOST_TEST(cases[0].key == "e/a@sim[a=x,z=1]#0");
  BOOST_TEST(cases[0].logical_key() == "e/a@sim[a=x,z=1]");
  BOOST_TEST(cases[1].logical_key() == "e/a@sim[a=x,z=1]");
  BOOST_TEST(cases[16].logical_key() == "f/s1@sim");
  BOOST_TEST(cases[0].params.seed.value() == 40);
  BOOST_TEST(cases[1].key == "e/a@sim[a=x,z=1]#1");
  BOOST_TEST(cases[1].params.seed.value() == 41);
  BOOST_TEST(cases[2].key == "e/a@sim[a=x,z=2]#0");
  BOOST_TEST(cases[4].key == "e/a@off[a=x,z=1]#0");
  BOOST_TEST(!cases[4].available);
  BOOST_TEST(cases[0].provider == "p");
  BOOST_TEST(cases[4].provider == "");
  BOOST_TEST(cases[16].key == "f/s1@sim");  // one trial: no suffix, no seed
  BOOST_TEST(!cases[16].params.seed);
  BOOST_REQUIRE(p->evals.size() == 2u);
  BOOST_TEST(p->evals[0].samples == 2u);
  BOOST_TEST(p->evals[0].targets == 2u);
  BOOST_TEST(p->evals[0].axis_combinations == 2u);
  BOOST_TEST(p->evals[0].trials == 2u);
  BOOST_TEST(p->evals[0].cases == 16u);
}

BOOST_AUTO_TEST_CASE(keys_sort_params_and_add_trials_only_when_repeated) {
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

BOOST_AUTO_TEST_CASE(globs) {
  using plan::glob_match;
  BOOST_TEST(glob_match("*", ""));
  BOOST_TEST(glob_match("gpt-*", "gpt-4o"));
  BOOST_TEST(!glob_match("gpt-*", "claude"));
  BOOST_TEST(glob_match("s?", "s1"));
  BOOST_TEST(!glob_match("s?", "s12"));
  BOOST_TEST(glob_match("s[0-9]", "s7"));
  BOOST_TEST(!glob_match("s[!0-9]", "s7"));
  BOOST_TEST(glob_match("s[^0-9]", "sx"));
  BOOST_TEST(glob_match("*a*b*c", "xxaybbzc"));
  BOOST_TEST(!glob_match("*a*b*c", "xxaybbz"));
  BOOST_TEST(glob_match("a[b", "a[b"));  // an unterminated class is literal
}

// Each case knows its sample's tags (a saved record carries them): kept for the tagged samples
// only, shared by the lists made from a plan, and carried by a planned_case.
BOOST_AUTO_TEST_CASE(a_case_knows_its_samples_tags) {
  auto p = plan::make_plan(listing());
  BOOST_REQUIRE(p);
  const std::vector<std::string> smoke{"smoke"}, slow{"slow"}, none;
  for (std::size_t i = 0; i < p->cases.size(); ++i) {
    auto sample = p->cases.sample(i);
    BOOST_TEST(p->cases.tags(i) == (sample == "a"    ? smoke
                                    : sample == "s2" ? slow
                                                     : none),
               p->cases.key(i));
  }
  auto last = p->cases.subset({p->cases.size() - 1});
  BOOST_TEST(last.tags(0) == slow);
  BOOST_TEST(p->cases[0].tags == smoke);
  plan::case_list pushed;
  pushed.push_back(p->cases[0]);
  pushed.push_back(p->cases[p->cases.size() - 1]);
  BOOST_TEST(pushed.tags(0) == smoke);
  BOOST_TEST(pushed.tags(1) == slow);
}

BOOST_AUTO_TEST_CASE(selection_narrows_the_grid) {
  plan::selection sel;
  sel.evals = {"f"};
  sel.targets = {"gpt-*"};
  auto p = plan::make_plan(listing(), sel);
  BOOST_REQUIRE(p);
  BOOST_TEST(keys(*p) == (std::vector<std::string>{"f/s1@gpt-4o", "f/s2@gpt-4o"}),
             boost::test_tools::per_element());

  plan::selection tags;
  tags.tags = {"smoke", "slow"};  // any of
  auto t = plan::make_plan(listing(), tags);
  BOOST_REQUIRE(t);
  BOOST_TEST(t->cases.size() == 8u + 2u);

  plan::selection filter;
  filter.filter = "@sim[a=x,z=2]";
  auto f = plan::make_plan(listing(), filter);
  BOOST_REQUIRE(f);
  BOOST_TEST(keys(*f) == (std::vector<std::string>{"e/a@sim[a=x,z=2]#0", "e/a@sim[a=x,z=2]#1",
                                                   "e/b@sim[a=x,z=2]#0", "e/b@sim[a=x,z=2]#1"}),
             boost::test_tools::per_element());
  BOOST_TEST(f->evals.size() == 1u);  // f contributes nothing
}

BOOST_AUTO_TEST_CASE(repeated_axis_flags_intersect) {
  plan::selection sel;
  sel.evals = {"e"};
  sel.samples = {"a"};
  sel.targets = {"sim"};
  sel.axes = {{"z", {"1", "2"}}, {"z", {"2"}}};
  auto p = plan::make_plan(listing(), sel);
  BOOST_REQUIRE(p);
  BOOST_TEST(keys(*p) == (std::vector<std::string>{"e/a@sim[a=x,z=2]#0", "e/a@sim[a=x,z=2]#1"}),
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(trials_and_seed_overrides) {
  plan::selection sel;
  sel.evals = {"f"};
  sel.samples = {"s1"};
  sel.targets = {"sim"};
  sel.trials = 3;
  sel.seed = 7;
  auto p = plan::make_plan(listing(), sel);
  BOOST_REQUIRE(p);
  BOOST_REQUIRE(p->cases.size() == 3u);
  BOOST_TEST(p->cases[2].key == "f/s1@sim#2");
  BOOST_TEST(p->cases[2].params.seed.value() == 9);
  BOOST_TEST(p->cases[2].params.trials == 3);
  sel.trials = 0;  // 0 means 1
  auto one = plan::make_plan(listing(), sel);
  BOOST_REQUIRE(one);
  BOOST_TEST(one->cases.size() == 1u);
  BOOST_TEST(one->cases[0].key == "f/s1@sim");
}

// Each names the selection's field in the library's words (a front end puts it in its own: the
// command line's flag, the HTTP API's member) and carries it as data.
BOOST_AUTO_TEST_CASE(selections_that_match_nothing_are_errors_naming_the_field) {
  using plan::field;
  plan::selection s1;
  s1.evals = {"nope*"};
  BOOST_TEST(error_of(s1, field::evals) == "evals: \"nope*\" matches no eval (evals: e, f)");
  plan::selection s2;
  s2.axes = {{"effort", {"high"}}};
  BOOST_TEST(error_of(s2, field::axes) == "axes: unknown axis \"effort\" (declared: z, a, empty)");
  plan::selection s3;
  s3.axes = {{"z", {"3"}}};
  BOOST_TEST(error_of(s3, field::axes) == "axes z: \"3\" matches no value (values: 1, 2)");
  plan::selection s4;
  s4.targets = {"claude"};
  BOOST_TEST(error_of(s4, field::targets) ==
             "targets: \"claude\" matches no target of the selected evals");
  plan::selection s5;
  s5.tags = {"nightly"};
  BOOST_TEST(error_of(s5, field::tags) ==
             "tags: no sample of the selected evals has the tag \"nightly\"");
  plan::selection s6;
  s6.evals = {"f"};
  s6.samples = {"a"};  // a sample of e, not of f
  BOOST_TEST(error_of(s6, field::samples) ==
             "samples: \"a\" matches no sample of the selected evals");
}

BOOST_AUTO_TEST_CASE(colliding_keys_are_an_error_naming_both_cases) {
  auto l = protocol::decode_list_result(boost::json::parse(R"({"evals":[
    {"name":"a/b","samples":[{"id":"c"}],"scorers":[],"targets":[{"label":"t"}]},
    {"name":"a","samples":[{"id":"b/c"}],"scorers":[],"targets":[{"label":"t"}]}]})"));
  BOOST_REQUIRE(l);
  auto p = plan::make_plan(*l);
  BOOST_REQUIRE(!p);
  BOOST_TEST((p.error().code == plan::errc::duplicate_key));
  BOOST_TEST((p.error().field == plan::field::none));  // the listing's fault, not the selection's
  BOOST_TEST(p.error().message() ==
             "two cases have the key \"a/b/c@t\": eval \"a/b\", sample \"c\", target \"t\" and "
             "eval \"a\", sample \"b/c\", target \"t\" (names contain / @ [ ] , = or #)");
}

// Names that repeat clash without any key syntax: a sample listed twice.
BOOST_AUTO_TEST_CASE(a_sample_listed_twice_is_a_key_clash) {
  auto l = protocol::decode_list_result(boost::json::parse(R"({"evals":[
    {"name":"e","samples":[{"id":"s"},{"id":"s"}],"scorers":[],"targets":[{"label":"t"}]}]})"));
  BOOST_REQUIRE(l);
  auto p = plan::make_plan(*l);
  BOOST_REQUIRE(!p);
  BOOST_TEST((p.error().code == plan::errc::duplicate_key));
}

// The compact list: a case read whole, and each part read alone, say the same; a subset shares
// the rows; cases appended one by one (a run read back) read back as they were.
BOOST_AUTO_TEST_CASE(a_case_list_reads_back_what_it_was_given) {
  auto p = plan::make_plan(listing());
  BOOST_REQUIRE(p);
  const auto& cases = p->cases;
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const auto c = cases[i];
    BOOST_TEST(c.key == cases.key(i));
    BOOST_TEST(std::string(c.logical_key()) == cases.logical_key(i));
    BOOST_TEST(c.params.eval.str() == cases.eval(i).str());
    BOOST_TEST(std::string(c.params.sample) == std::string(cases.sample(i)));
    BOOST_TEST(c.provider.str() == cases.provider(i).str());
    BOOST_TEST(c.available == cases.available(i));
    BOOST_TEST(c.params.trial == cases.trial(i));
    if (c.params.eval == std::string_view("e")) BOOST_TEST(*c.params.seed == 40 + c.params.trial);
  }
  std::vector<std::size_t> odd;
  for (std::size_t i = 1; i < cases.size(); i += 2) odd.push_back(i);
  auto part = cases.subset(odd);
  BOOST_REQUIRE(part.size() == odd.size());
  for (std::size_t j = 0; j < odd.size(); ++j) BOOST_TEST(part.key(j) == cases.key(odd[j]));
  plan::case_list appended;
  for (const auto& c : cases) appended.push_back(c);
  BOOST_REQUIRE(appended.size() == cases.size());
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const auto a = appended[i], b = cases[i];
    BOOST_TEST(a.key == b.key);
    BOOST_TEST((a.params == b.params));
    BOOST_TEST(a.provider.str() == b.provider.str());
    BOOST_TEST(a.available == b.available);
  }
  // One row per eval (its trials and seeds), not per case.
  BOOST_TEST(appended.eval_rows() == 2u);
}

BOOST_AUTO_TEST_CASE(large_listings_plan_every_case) {
  protocol::list_result l;
  protocol::eval_info e;
  e.name = "big";
  e.targets.push_back({"sim", "p", true, {}});
  for (std::size_t i = 0; i < 200000; ++i) e.samples.push_back({std::to_string(i), {}, {}});
  l.evals.push_back(std::move(e));
  auto p = plan::make_plan(l);
  BOOST_REQUIRE(p);
  BOOST_TEST(p->cases.size() == 200000u);
  BOOST_TEST(p->cases.back().key == "big/199999@sim");
}

BOOST_AUTO_TEST_CASE(errors_are_codes_in_the_plan_category) {
  for (auto e : {plan::errc::no_match, plan::errc::duplicate_key, plan::errc::invalid_shard,
                 plan::errc::no_shard_env}) {
    boost::system::error_code ec = e;
    BOOST_TEST(ec.category().name() == std::string("mira.plan"));
    BOOST_TEST(ec.message() != "unknown plan error");
  }
  BOOST_TEST(plan::to_string(plan::field::none).empty());
  const std::pair<plan::field, std::string_view> names[] = {
      {plan::field::evals, "evals"},     {plan::field::samples, "samples"},
      {plan::field::targets, "targets"}, {plan::field::tags, "tags"},
      {plan::field::axes, "axes"},       {plan::field::shard, "shard"}};
  for (auto [f, name] : names) BOOST_TEST(plan::to_string(f) == name);
}

BOOST_AUTO_TEST_SUITE_END()
