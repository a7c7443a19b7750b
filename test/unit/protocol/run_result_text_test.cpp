// The text decoder against the DOM decoder: the same result for every text, or the same error,
// on hand-picked shapes and on seeded mutations of a typical result and a typical listing.
#include "common/run_result_diff.hpp"

#include <mira/protocol/codec.hpp>
#include "protocol/json_scan.hpp"

#include <boost/json/parse.hpp>
#include <boost/test/unit_test.hpp>

#include <charconv>
#include <cmath>
#include <cstring>
#include <random>
#include <stdexcept>

using namespace mira;

namespace {

const std::string typical =
    R"({"eval":"bench","sample":"s","target":"sim","params":{"lang":"fr","temp":"0.2"},)"
    R"("trial":1,"trials":3,"seed":7,"input":["What is the answer?",{"role":"user"}],)"
    R"("expected":{"answer":42},"passed":true,"aggregate":0.75,"scores":[{"scorer":"contains",)"
    R"("value":1.0,"pass":true,"reason":"found \"42\""},{"scorer":"length","value":0.5,)"
    R"("pass":false,"na":false,"reason":"long\nlines"}],"transcript":{"final_response":)"
    R"("Caf\u00e9 \ud83d\ude00 — 42","iterations":2,"tool_calls_count":1,"tool_calls":)"
    R"(["calculator"],"usage":{"input_tokens":120,"output_tokens":48,"cache_read_tokens":64,)"
    R"("reasoning_tokens":12,"cost_usd":0.00042},"timing":{"duration_ms":420,)"
    R"("time_to_first_token_ms":180},"metrics":{"bleu":0.31,"steps":4},"metadata":)"
    R"({"trace":"https://example.invalid/t/1","n":[1,2.5,null]},"error":"tool timed out",)"
    R"("error_kind":"infra","output":[{"type":"text","text":"42"}],"future":{"x":[]}},)"
    R"("skipped":false,"unknown":[true,{"deep":{"er":null}}]})";

// One to three edits of `text`: a value after a colon replaced by a hostile token, a byte
// dropped or doubled, a member repeated.
std::string mutate(std::string text, std::mt19937& rng) {
  const char* tokens[] = {"null",  "true",  "0",      "-0",        "1.5",
                          "1e400", "\"s\"", "[]",     "{}",        "\"\\u00e9\"",
                          "-1",    "3.0",   "[null]", "{\"a\":1}", "\"\\udc00\""};
  int edits = 1 + static_cast<int>(rng() % 3);
  for (int e = 0; e < edits; ++e) {
    auto pos = rng() % text.size();
    switch (rng() % 4) {
      case 0: {  // a value after a colon replaced by a token
        auto colon = text.find(':', pos);
        if (colon == std::string::npos) break;
        auto end = colon + 1;
        auto value_end = detail::scan_json_value(text, end);
        if (value_end == detail::json_scan_failed) break;
        text.replace(end, value_end - end, tokens[rng() % std::size(tokens)]);
        break;
      }
      case 1:
        text.erase(pos, 1);
        break;
      case 2:
        text.insert(pos, 1, text[pos]);
        break;
      default:  // a member repeated
        auto comma = text.find(",\"", pos);
        if (comma == std::string::npos) break;
        auto colon = text.find(':', comma);
        auto value_end = detail::scan_json_value(text, colon + 1);
        if (colon == std::string::npos || value_end == detail::json_scan_failed) break;
        text.insert(value_end, text.substr(comma, value_end - comma));
        break;
    }
  }
  return text;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(run_result_text)

BOOST_AUTO_TEST_CASE(a_typical_result_reads_the_same_as_through_the_dom) {
  auto r = protocol::decode_run_result_text(typical);
  BOOST_REQUIRE(r);
  BOOST_TEST(r->transcript.final_response == "Café \xF0\x9F\x98\x80 — 42");
  BOOST_TEST(r->params.at("lang") == "fr");
  BOOST_TEST(r->scores.size() == 2u);
  BOOST_TEST(r->scores[0].reason == "found \"42\"");
  BOOST_TEST((r->transcript.error_kind == protocol::error_kind::infra));
  BOOST_TEST(r->transcript.metrics.at("steps") == 4.0);
  BOOST_TEST(r->raw_json == typical);
  BOOST_TEST(test::text_and_dom_disagree(typical) == "");
}

BOOST_AUTO_TEST_CASE(open_ended_members_keep_their_text_and_parse_when_read) {
  namespace json = boost::json;
  // The text decoder keeps each member's text as the study wrote it.
  auto r = protocol::decode_run_result_text(
      R"({"input":[ 1.50 ,"x"],"expected":"42","transcript":{"metadata":{"k":"v"}}})");
  BOOST_REQUIRE(r);
  BOOST_TEST(r->input.text() == R"([ 1.50 ,"x"])");
  BOOST_TEST((r->input.get() == json::array{1.5, "x"}));
  BOOST_REQUIRE(r->expected);
  BOOST_TEST(r->expected->get().as_string() == "42");
  BOOST_TEST((r->transcript.metadata.get() == json::object{{"k", "v"}}));
  BOOST_TEST(r->transcript.output.text() == "[]");
  BOOST_TEST(r->transcript.output.get().empty());
  // Equal values are equal whatever their spelling, or whether text or value.
  BOOST_TEST((r->input == json::array{1.5, "x"}));
  BOOST_TEST(!(r->input == json::array{1.5}));
  BOOST_TEST((r->input == protocol::lazy_json<json::array>::from_checked_text(R"([1.5,"x"])")));

  // A member of the wrong kind is the DOM decoder's error, named.
  auto wrong = protocol::decode_run_result_text(R"({"transcript":{"metadata":[1]}})");
  BOOST_REQUIRE(!wrong);
  BOOST_TEST(wrong.error().message() == "transcript.metadata: expected an object, got array");

  // A value is held as it is: an infinity (1e400 read by the DOM decoder) has no JSON text
  // that reads back as itself, and a double stays a double.
  auto dom = protocol::decode_run_result(json::parse(R"({"expected":1e400,"input":[1.0]})"));
  BOOST_REQUIRE(dom);
  BOOST_TEST(std::isinf(dom->expected->get().as_double()));
  BOOST_TEST(dom->input.get().at(0).is_double());
  BOOST_TEST(dom->input.text() == "[1]");  // to_json_text's spelling

  // Text that was not checked throws when read.
  BOOST_CHECK_THROW(protocol::lazy_json<json::object>::from_checked_text("[1]").get(),
                    std::invalid_argument);
  BOOST_CHECK_THROW(protocol::lazy_json<json::array>::from_checked_text("[1,").get(),
                    boost::system::system_error);
}

BOOST_AUTO_TEST_CASE(odd_shapes_agree_with_the_dom_decoder) {
  // Each row is read by one decoder or handed to the other; the outcome must not differ.
  const char* rows[] = {
      "{}",
      " \t{ \"eval\" : \"e\" } \r\n",
      R"({"eval":null,"params":null,"scores":null,"transcript":null,"expected":null})",
      R"({"trials":0})",
      R"({"trials":-1})",
      R"({"trial":-2})",
      R"({"trial":3.0})",
      R"({"trial":3.5})",
      R"({"trial":9223372036854775807})",
      R"({"trial":9223372036854775808})",
      R"({"trial":-0})",
      R"({"aggregate":-0})",
      R"({"aggregate":18446744073709551616})",
      R"({"aggregate":1e308})",
      R"({"aggregate":1e309})",
      R"({"aggregate":0.90326896642837828})",
      R"({"aggregate":"1"})",
      R"({"passed":1})",
      R"({"eval":"a","eval":"b"})",
      R"({"params":{"k":"a","k":"b"}})",
      R"({"params":{"k":1}})",
      R"({"scores":[null]})",
      R"({"scores":[{"value":"x"}]})",
      R"({"scores":{}})",
      R"({"transcript":{"metrics":{"m":null}}})",
      R"({"transcript":{"metrics":{"m":1,"m":2}}})",
      R"({"transcript":{"tool_calls":["a",1]}})",
      R"({"transcript":{"usage":{"input_tokens":1.5}}})",
      R"({"transcript":{"error_kind":"INFRA"}})",
      R"({"transcript":{"error_kind":7}})",
      R"({"transcript":{"output":{}}})",
      R"({"transcript":{"metadata":[]}})",
      R"({"input":{}})",
      R"({"expected":false})",
      R"({"e\u0076al":"escaped key"})",
      R"({"eval":"tab\tand \\ slash \/ and \u0000"})",
      R"({"eval":"\udc00"})",
      R"({"eval":"\ud800"})",
      "{\"eval\":\"\xff\"}",
      R"([1,2])",
      R"("text")",
      R"({"eval":"e"} trailing)",
      R"({"eval":"e")",
      R"({"x":[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]})",
      // Keys near the field the reader expects next (matched in place when equal).
      R"({"evalx":"a","eval":"b"})",
      R"({"eva":"a","sample":"s"})",
      R"({"sample":"s","eval":"e","eval":"f"})",
      R"({"eval"":"q","eval":"e"})",
      R"({"eval" :"e","sample" : "s","target":"t"})",
      R"({"target":"t","sample":"s","eval":"e"})",
      R"({"transcript":{"final_response":"x","iterations":1,"tool_calls_counts":2}})",
      R"({"scores":[{"scorer":"a","value":1},{"value":2,"scorer":"b"},{"scorerx":1}]})",
      // Whitespace and punctuation around members (the skim tests punctuation first).
      "{\"eval\" : \"e\" ,\n\"sample\"\t:\"s\" , \"params\":{ \"k\" : \"v\" } }",
      R"({"eval":"e" "sample":"s"})",
      R"({"eval" "e"})",
      R"({"eval":"e",})",
      R"({"eval":"e";"sample":"s"})",
      R"({"params":{"k":"v" ,}})",
      // Numbers read in one pass, and the shapes left to the general reading.
      R"({"aggregate":0.00042,"scores":[{"value":-0.5},{"value":-0.0},{"value":12}]})",
      R"({"aggregate":123456789012345678})",
      R"({"aggregate":1234567890123456789})",
      R"({"aggregate":-123456789012345678})",
      R"({"aggregate":1234567890123456.5})",
      R"({"aggregate":123456789012345.5})",
      R"({"aggregate":0.0000000000000000000001})",
      R"({"aggregate":0.00000000000000000000001})",
      R"({"aggregate":1.5e3})",
      R"({"aggregate":15E-1})",
      R"({"aggregate":0.1e1})",
      R"({"transcript":{"metrics":{"a":-0,"b":2.50,"c":7}}})",
      // Open-ended members built in place, or parsed when they hold what is not built.
      R"({"input":[],"transcript":{"metadata":{},"output":[]}})",
      R"({"input":["a",{"k":[1,null,true]}],"transcript":{"metadata":{"k":"v","n":{"m":[]}}}})",
      R"({"input":[1.5,"x"],"transcript":{"metadata":{"d":2.5}}})",
      R"({"input":"text"})",
      R"({"transcript":{"metadata":{"k":1,"k":2}}})",
      R"({"transcript":{"metadata":{"k":1e2}}})",
      R"({"transcript":{"output":[{"type":"text","text":"é"}]}})",
  };
  for (const char* row : rows) {
    BOOST_TEST_CONTEXT(row) {
      BOOST_TEST(test::text_and_dom_disagree(row) == "");
    }
  }
}

BOOST_AUTO_TEST_CASE(numbers_are_read_correctly_rounded) {
  // Integers of up to 19 digits and decimals of up to 22 places, each read into `aggregate`
  // and compared bit for bit with std::from_chars (the correctly rounded value).
  std::mt19937_64 rng(20261201);
  auto digits = [&](std::size_t n, bool leading) {
    std::string d;
    for (std::size_t i = 0; i < n; ++i)
      d += static_cast<char>('0' + (i == 0 && leading ? 1 + rng() % 9 : rng() % 10));
    return d;
  };
  for (int i = 0; i < 20000; ++i) {
    std::size_t int_len = 1 + rng() % 19;
    std::string number = rng() % 4 == 0 ? "-" : "";
    number += rng() % 3 == 0 ? std::string("0") : digits(int_len, true);
    if (rng() % 4 != 0) number += "." + digits(1 + rng() % 22, false);
    if (number == "-0") continue;  // left to the DOM decoder, whose reading it is
    double expected = 0;
    std::from_chars(number.data(), number.data() + number.size(), expected);
    auto r = protocol::decode_run_result_text(R"({"aggregate":)" + number + "}");
    BOOST_TEST_CONTEXT(number) {
      BOOST_REQUIRE(r);
      BOOST_TEST(std::memcmp(&r->aggregate, &expected, sizeof expected) == 0);
    }
  }
}

BOOST_AUTO_TEST_CASE(seeded_mutations_agree_with_the_dom_decoder) {
  // 20 000 variants of the typical result, each decoded both ways.
  std::mt19937 rng(20261130);
  int agreed_valid = 0;
  for (int i = 0; i < 20000; ++i) {
    auto text = mutate(typical, rng);
    auto diff = test::text_and_dom_disagree(text);
    if (!diff.empty()) BOOST_FAIL(diff << " for " << text);
    if (protocol::decode_run_result_text(text)) ++agreed_valid;
  }
  // The mutations must reach both outcomes, or the test proves little.
  BOOST_TEST(agreed_valid > 2000);
  BOOST_TEST(agreed_valid < 18000);
}

BOOST_AUTO_TEST_CASE(listings_agree_with_the_dom_decoder) {
  // The listings take the same text decoder, driven by the same field tables.
  const std::string listing =
      R"({"evals":[{"name":"greet","description":"d","samples":[{"id":"s1","tags":["a"],)"
      R"("metadata":{"k":[1,{"x":null}]}},{"id":"s\u00e9"}],"next_cursor":"c2","scorers":)"
      R"(["exact"],"targets":[{"label":"t","provider":"p","available":false,"metadata":{}}],)"
      R"("axes":[{"name":"lang","values":["fr","en"]}],"max_turns":4,"trials":0,"seed":9,)"
      R"("metadata":{"owner":"x"},"future":1}],"samples":[{"id":"only"}],"next_cursor":null})";
  auto l = protocol::decode_list_result_text(listing);
  BOOST_REQUIRE(l);
  BOOST_TEST(l->evals[0].samples[1].id == "s\u00e9");
  BOOST_TEST(l->evals[0].trials == 1);
  BOOST_TEST(!l->evals[0].targets[0].available);
  BOOST_TEST(test::listing_text_and_dom_disagree(listing) == "");
  for (const char* row : {R"({})", R"({"evals":null})", R"({"evals":[{"name":null}]})",
                          R"({"evals":[{"name":"e","trials":-1}]})",
                          R"({"evals":[{"name":"e","samples":[{"tags":[]}]}]})",
                          R"({"samples":[{"id":"a","id":"b"}]})", R"({"samples":[7]})"}) {
    BOOST_TEST_CONTEXT(row) {
      BOOST_TEST(test::listing_text_and_dom_disagree(row) == "");
    }
  }
  std::mt19937 rng(20261201);
  int valid = 0;
  for (int i = 0; i < 5000; ++i) {
    auto text = mutate(listing, rng);
    auto diff = test::listing_text_and_dom_disagree(text);
    if (!diff.empty()) BOOST_FAIL(diff << " for " << text);
    if (protocol::decode_list_result_text(text)) ++valid;
  }
  BOOST_TEST(valid > 500);
  BOOST_TEST(valid < 4500);
}

BOOST_AUTO_TEST_SUITE_END()
