// The saved case record's codec: case_line() against golden lines (the bytes the DOM recipe it
// replaced wrote: to_json_text of the parsed result with the host's members set), and
// decode_case_record() reading them back to records that write the same lines again.
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
using mira::schedule::attempt_error;
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

// What echo_study answers, and the shape of a Python study's answer (json.dumps: ", " and ": ").
const std::string echo_result =
    R"({"eval":"echo","sample":"s1","target":"sim","trial":0,"passed":true,"aggregate":1.0,)"
    R"("scores":[{"scorer":"echo","value":1.0,"pass":true,"reason":"echo"}],"transcript":)"
    R"({"final_response":"","iterations":0,"tool_calls_count":0,"usage":{"input_tokens":0,)"
    R"("output_tokens":0,"cost_usd":0.0}},"skipped":false})";
// Tool calls, timing and metadata (benchmarks/typical_result.hpp).
const std::string typical_result =
    R"({"eval":"bench","sample":"s","target":"sim","input":["What is the answer?"],)"
    R"("expected":"42","passed":true,"aggregate":1.0,"scores":[{"scorer":"contains",)"
    R"("value":1.0,"pass":true,"reason":"found \"42\""}],"transcript":{"final_response":)"
    R"("The answer is 42.","iterations":2,"tool_calls_count":1,"tool_calls":["calculator"],)"
    R"("usage":{"input_tokens":120,"output_tokens":48,"cost_usd":0.00042},"timing":)"
    R"({"duration_ms":420},"metadata":{"trace":"https://example.invalid/t/1"}},"skipped":false})";
const std::string python_result =
    "{\"eval\": \"echo\", \"sample\": \"s1\", \"target\": \"sim\", \"passed\": false, "
    "\"aggregate\": 0.5, \"scores\": [{\"scorer\": \"exact\", \"value\": 0.5, \"pass\": false, "
    "\"reason\": \"caf\\u00e9 \\\"quoted\\\"\\nnext\"}], \"transcript\": {\"final_response\": "
    "\"\\u00e9\\u20ac\\ud83d\\ude00 \\/ done\", \"iterations\": 3, \"usage\": {\"input_tokens\": "
    "120, \"output_tokens\": 48, \"cost_usd\": 4.2e-4}, \"metadata\": {\"trace\": null, \"n\": "
    "[1, 2.50, -0, 1E2]}}, \"skipped\": false}\n";

// A saved record as the loader holds it.
case_record read_back(const std::string& line) {
  return decode_case_record(json::parse(line).as_object());
}

const std::vector<attempt_error> two_retries = {{"rate limit", "429 \"slow down\""},
                                                {"timeout", "no answer in 30 s\n"}};

}  // namespace

BOOST_AUTO_TEST_SUITE(records)

BOOST_AUTO_TEST_CASE(case_lines_are_the_golden_bytes) {
  const std::pair<mira::plan::planned_case, case_record> cases[] = {
      // The echo study's answer: its numbers in their shortest form, the host's members last.
      {planned("s1"), record(case_state::passed, echo_result)},
      // A Python study's spacing and escapes, retries, a message beside the result.
      {planned("s1"),
       record(case_state::failed, python_result, 3, two_retries, "retried twice", 12.3456789)},
      // No result: the identity (axis params, trial, seed) and the error in a synthesised one.
      {planned("c", {{"effort", "high"}, {"lang", "fr\"é"}}, 2, 8, 44),
       record(case_state::error, "", 2, two_retries, "the study exited", 1.5)},
      {planned("d"), record(case_state::na, "", 1, {}, "unavailable target", 1e-9)},
      {planned("e"), record(case_state::skipped, "", 0)},
      // A result's members named like the host's keep their places and take the host's values.
      {planned("f"),
       record(case_state::passed, R"({"status":"mine","passed":true,"key":"k","z":1})")},
      // A repeated member: its last value, in its first place (what Boost.JSON's parse kept).
      {planned("g"),
       record(case_state::passed, R"({"a":1,"key":"x","a":[2],"passed":true,"key":"y"})")},
      // A result that is not an object counts as an empty one.
      {planned("h"), record(case_state::passed, "[1,2]", 0)},
  };
  const char* golden[] = {
      R"({"eval":"echo","sample":"s1","target":"sim","trial":0,"passed":true,"aggregate":1,"scores":[{"scorer":"echo","value":1,"pass":true,"reason":"echo"}],"transcript":{"final_response":"","iterations":0,"tool_calls_count":0,"usage":{"input_tokens":0,"output_tokens":0,"cost_usd":0}},"skipped":false,"key":"echo/s1@sim","status":"passed","attempts":1,"latency_ms":250})",
      R"({"eval":"echo","sample":"s1","target":"sim","passed":false,"aggregate":0.5,"scores":[{"scorer":"exact","value":0.5,"pass":false,"reason":"café \"quoted\"\nnext"}],"transcript":{"final_response":"é€😀 / done","iterations":3,"usage":{"input_tokens":120,"output_tokens":48,"cost_usd":0.00042},"metadata":{"trace":null,"n":[1,2.5,0,100]}},"skipped":false,"key":"echo/s1@sim","status":"failed","attempts":3,"retried":[{"cause":"rate limit","message":"429 \"slow down\""},{"cause":"timeout","message":"no answer in 30 s\n"}],"host_message":"retried twice","latency_ms":12345.679})",
      R"({"eval":"echo","sample":"c","target":"sim","params":{"effort":"high","lang":"fr\"é"},"trial":2,"trials":8,"seed":44,"passed":false,"aggregate":0,"scores":[],"transcript":{"final_response":"","iterations":0,"tool_calls_count":0,"usage":{"input_tokens":0,"output_tokens":0,"cost_usd":0},"error":"the study exited"},"skipped":false,"key":"echo/c@sim[effort=high,lang=fr\"é]#2","status":"error","attempts":2,"retried":[{"cause":"rate limit","message":"429 \"slow down\""},{"cause":"timeout","message":"no answer in 30 s\n"}],"latency_ms":1500})",
      R"({"eval":"echo","sample":"d","target":"sim","passed":false,"aggregate":0,"scores":[],"transcript":{"final_response":"","iterations":0,"tool_calls_count":0,"usage":{"input_tokens":0,"output_tokens":0,"cost_usd":0},"error":"unavailable target","error_kind":"infra"},"skipped":false,"key":"echo/d@sim","status":"na","attempts":1,"latency_ms":0})",
      R"({"eval":"echo","sample":"e","target":"sim","passed":false,"aggregate":0,"scores":[],"transcript":{"final_response":"","iterations":0,"tool_calls_count":0,"usage":{"input_tokens":0,"output_tokens":0,"cost_usd":0}},"skipped":true,"key":"echo/e@sim","status":"skipped","attempts":0})",
      R"({"status":"passed","passed":true,"key":"echo/f@sim","z":1,"attempts":1,"latency_ms":250})",
      R"({"a":[2],"key":"echo/g@sim","passed":true,"status":"passed","attempts":1,"latency_ms":250})",
      R"({"key":"echo/h@sim","status":"passed","attempts":0})",
  };
  static_assert(std::size(cases) == std::size(golden));
  for (std::size_t i = 0; i < std::size(cases); ++i) {
    BOOST_TEST_CONTEXT("case " << i) {
      BOOST_TEST(case_line(cases[i].first, cases[i].second) == golden[i]);
      // Straight from the text, and the same text as Boost.JSON would write the same value.
      BOOST_TEST(case_line(cases[i].first, cases[i].second) ==
                 mira::protocol::to_json_text(json::parse(golden[i])));
    }
  }
}

BOOST_AUTO_TEST_CASE(saved_records_read_back_to_records_that_write_the_same_line) {
  // Seeded: every state, with and without a result, retries, messages, latencies.
  std::mt19937 rng(4242);
  auto pick = [&](int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng); };
  const std::string results[] = {"", echo_result, python_result, typical_result};
  for (int i = 0; i < 2000; ++i) {
    std::vector<attempt_error> retried;
    for (int k = pick(3); k > 0; --k) retried.push_back({"infra", "try " + std::to_string(k)});
    auto st = all_case_states[pick(static_cast<int>(all_case_states.size()))];
    auto r = record(st, results[pick(4)], pick(4), retried,
                    pick(2) ? "message " + std::to_string(i) : std::string(), pick(100000) / 1e3);
    auto c = planned("s" + std::to_string(i), pick(2) ? mira::protocol::axis_params{{"k", "v"}}
                                                      : mira::protocol::axis_params{});
    auto line = case_line(c, r);
    BOOST_TEST_CONTEXT(line) {
      auto back = read_back(line);
      BOOST_TEST(back.state == r.state);
      BOOST_TEST(back.attempts == r.attempts);
      BOOST_TEST(back.retried.size() == r.retried.size());
      // A result comes back for the states that produce one (a synthesised one too), in the
      // host's form; for the others the record is written again from what it holds.
      const bool produced = st == case_state::passed || st == case_state::failed ||
                            st == case_state::na || (st == case_state::skipped && r.attempts > 0);
      BOOST_TEST(back.has_result() == produced);
      if (produced && r.has_result())
        BOOST_TEST(back.result_json == mira::protocol::to_json_text(json::parse(r.result_json)));
      if (produced || !r.has_result()) BOOST_TEST(case_line(c, back) == line);
    }
  }
}

BOOST_AUTO_TEST_CASE(a_record_the_rust_host_saved_takes_its_state_from_the_verdict) {
  auto saved = json::parse(R"({"eval":"e","sample":"s","target":"t","passed":false,"aggregate":0,)"
                           R"("scores":[{"scorer":"x","value":0,"pass":false,"na":true}],)"
                           R"("transcript":{"final_response":""},"skipped":false,"key":"e/s@t"})")
                   .as_object();
  auto r = decode_case_record(saved);
  BOOST_TEST(r.state == case_state::na);
  BOOST_TEST(r.attempts == 1);
  BOOST_TEST(r.result_json ==
             R"({"eval":"e","sample":"s","target":"t","passed":false,"aggregate":0,)"
             R"("scores":[{"scorer":"x","value":0,"pass":false,"na":true}],)"
             R"("transcript":{"final_response":""},"skipped":false})");
}

BOOST_AUTO_TEST_CASE(the_study_part_keeps_its_member_order_and_odd_host_fields_are_no_error) {
  // A result member named like a host field is the host's once saved: the rest keep their order
  // (the DOM recipe's erase moved the last member into the gap).
  auto r = read_back(R"({"status":"passed","a":1,"b":2,"c":3,"key":"k","attempts":1})");
  BOOST_TEST(r.result_json == R"({"a":1,"b":2,"c":3})");
  // retried entries without their strings (a hand-edited file) read as empty, not as a throw.
  r = read_back(R"({"status":"error","attempts":2,"retried":[{"cause":1},{}, 3]})");
  BOOST_TEST_REQUIRE(r.retried.size() == 2u);
  BOOST_TEST(r.retried[0].cause.empty());
  BOOST_TEST(r.retried[1].message.empty());
}

BOOST_AUTO_TEST_CASE(append_case_line_appends) {
  auto c = planned("a");
  auto r = record(case_state::passed, echo_result);
  std::string out = "before\n";
  append_case_line(out, c, r);
  BOOST_TEST(out == "before\n" + case_line(c, r));
}

BOOST_AUTO_TEST_SUITE_END()
