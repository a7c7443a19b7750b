// The saved case record's codec: case_line() against the DOM recipe it replaces
// (protocol::to_json_text(encode_case(c, r))), byte for byte, on fixed and seeded random records.
#include <mira/protocol/json_text.hpp>
#include <mira/store/records.hpp>

#include <boost/json/parse.hpp>
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace json = boost::json;
using mira::schedule::all_case_states;
using mira::schedule::case_record;
using mira::schedule::case_state;
using namespace mira::store;

namespace {

mira::plan::planned_case planned(std::string sample, mira::protocol::axis_params params = {},
                                 int trial = 0, int trials = 1,
                                 std::optional<std::int64_t> seed = std::nullopt) {
  mira::plan::planned_case c;
  c.params.eval = "echo";
  c.params.sample = std::move(sample);
  c.params.target = "sim";
  c.params.params = std::move(params);
  c.params.trial = trial;
  c.params.trials = trials;
  c.params.seed = seed;
  c.key = mira::plan::case_key(c.params);
  return c;
}

case_record record(case_state state, std::string result, int attempts = 1,
                   std::vector<mira::schedule::attempt_error> retried = {},
                   std::string message = {}, double latency = 0.25) {
  case_record r;
  r.state = state;
  r.result_json = std::move(result);
  r.attempts = attempts;
  r.retried = std::move(retried);
  r.message = std::move(message);
  r.latency_seconds = latency;
  return r;
}

std::string the_dom_recipe(const mira::plan::planned_case& c, const case_record& r) {
  return mira::protocol::to_json_text(encode_case(c, r));
}

// What echo_study answers, and the shape of a Python study's answer (json.dumps: ", " and ": ").
const std::string echo_result =
    R"({"eval":"echo","sample":"s1","target":"sim","trial":0,"passed":true,"aggregate":1.0,)"
    R"("scores":[{"scorer":"echo","value":1.0,"pass":true,"reason":"echo"}],"transcript":)"
    R"({"final_response":"","iterations":0,"tool_calls_count":0,"usage":{"input_tokens":0,)"
    R"("output_tokens":0,"cost_usd":0.0}},"skipped":false})";
const std::string python_result =
    "{\"eval\": \"echo\", \"sample\": \"s1\", \"target\": \"sim\", \"passed\": false, "
    "\"aggregate\": 0.5, \"scores\": [{\"scorer\": \"exact\", \"value\": 0.5, \"pass\": false, "
    "\"reason\": \"caf\\u00e9 \\\"quoted\\\"\\nnext\"}], \"transcript\": {\"final_response\": "
    "\"\\u00e9\\u20ac\\ud83d\\ude00 \\/ done\", \"iterations\": 3, \"usage\": {\"input_tokens\": "
    "120, \"output_tokens\": 48, \"cost_usd\": 4.2e-4}, \"metadata\": {\"trace\": null, \"n\": "
    "[1, 2.50, -0, 1E2]}}, \"skipped\": false}\n";

}  // namespace

BOOST_AUTO_TEST_SUITE(records)

BOOST_AUTO_TEST_CASE(case_line_is_the_dom_recipe_byte_for_byte) {
  std::vector<std::pair<mira::plan::planned_case, case_record>> cases;
  const std::vector<mira::schedule::attempt_error> retried = {{"rate limit", "429 \"slow down\""},
                                                              {"timeout", "no answer in 30 s\n"}};
  // Every state, without a result (a synthesised one is written) and with one.
  for (auto st : all_case_states) {
    cases.push_back({planned("a"), record(st, "", 0)});
    cases.push_back({planned("b"), record(st, "", 2, retried, "the study exited", 1.5)});
    cases.push_back({planned("c", {{"effort", "high"}, {"lang", "fr\"é"}}, 2, 8, 44),
                     record(st, "", 1, {}, "unavailable target", 1e-9)});
    cases.push_back({planned("d"), record(st, echo_result)});
    cases.push_back(
        {planned("e"), record(st, python_result, 3, retried, "retried twice", 12.3456789)});
  }
  // Results with members of the host's names: their places are kept, their values the host's.
  cases.push_back({planned("f"), record(case_state::passed,
                                        R"({"status":"mine","passed":true,"key":"k","z":1})")});
  cases.push_back({planned("g"), record(case_state::failed,
                                        R"({"retried":[1],"passed":false,"latency_ms":3})", 0)});
  cases.push_back({planned("h"),
                   record(case_state::failed, R"({"retried":[1],"host_message":"x","attempts":9})",
                          2, retried, "host words")});
  cases.push_back({planned("i"), record(case_state::passed, R"({"host_message":"kept"})")});
  // Left to Boost.JSON: a repeated member (the last value in the first place), a long exponent.
  cases.push_back({planned("j"), record(case_state::passed,
                                        R"({"a":1,"key":"x","a":[2],"passed":true,"key":"y"})")});
  cases.push_back({planned("k"), record(case_state::passed, R"({"n":1e00001,"passed":true})")});
  // Not an object, or not JSON: an empty result.
  for (const char* text : {"[1,2]", "42", "{", "{\"a\":1} x", "\"\xff\""})
    cases.push_back({planned("l"), record(case_state::passed, text)});
  // Empty objects, and a result nested 30 deep.
  cases.push_back({planned("m"), record(case_state::passed, "{}")});
  cases.push_back({planned("n"), record(case_state::passed, " { } ", 0)});
  cases.push_back({planned("o"), record(case_state::passed, "{\"d\":" + std::string(29, '[') +
                                                                std::string(29, ']') + "}")});
  for (auto& [c, r] : cases) {
    BOOST_TEST_CONTEXT(r.result_json << " / " << to_string(r.state)) {
      BOOST_TEST(case_line(c, r) == the_dom_recipe(c, r));
    }
  }
}

BOOST_AUTO_TEST_CASE(random_records_are_the_dom_recipe_byte_for_byte) {
  // Seeded random results: members in random order with random spacing, some named as the
  // host's members, numbers that Boost.JSON reads exactly.
  std::mt19937 rng(4242);
  auto pick = [&](int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng); };
  const char* names[] = {"passed", "aggregate", "scores",  "transcript", "extra",       "key",
                         "status", "attempts",  "retried", "latency_ms", "note\\u00e9", "n"};
  const char* values[] = {"true",
                          "false",
                          "null",
                          "0.5",
                          "1.0",
                          "-0",
                          "17",
                          "1e21",
                          "2E-3",
                          "\"text\"",
                          "\"\\u0041\\n\"",
                          "[]",
                          "{}",
                          "[1, 2.25, {\"x\": [null]}]",
                          "{\"status\": 1}"};
  const char* spaces[] = {"", "", " ", "\n", "\t "};
  for (int i = 0; i < 2000; ++i) {
    std::string text = "{";
    std::vector<int> used;
    int n = pick(8);
    for (int m = 0; m < n; ++m) {
      int name = pick(std::size(names));
      if (std::find(used.begin(), used.end(), name) != used.end()) continue;
      used.push_back(name);
      if (text.size() > 1) text += ',';
      text += spaces[pick(5)];
      text += '"' + std::string(names[name]) + '"' + spaces[pick(5)] + ':' + spaces[pick(5)];
      text += values[pick(std::size(values))];
      text += spaces[pick(5)];
    }
    text += '}';
    auto st = all_case_states[pick(std::size(all_case_states))];
    std::vector<mira::schedule::attempt_error> retried;
    for (int k = pick(3); k > 0; --k) retried.push_back({"infra", "try " + std::to_string(k)});
    auto r = record(st, pick(8) ? text : std::string(), pick(4), retried,
                    pick(2) ? "message " + std::to_string(i) : std::string(), pick(1000) / 7.0);
    auto c = planned("s" + std::to_string(i));
    BOOST_TEST_CONTEXT(text) {
      BOOST_TEST(case_line(c, r) == the_dom_recipe(c, r));
    }
  }
}

BOOST_AUTO_TEST_CASE(append_case_line_appends) {
  auto c = planned("a");
  auto r = record(case_state::passed, echo_result);
  std::string out = "before\n";
  append_case_line(out, c, r);
  BOOST_TEST(out == "before\n" + case_line(c, r));
}

BOOST_AUTO_TEST_SUITE_END()
