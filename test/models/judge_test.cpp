// The LLM judge's reading of a reply, by Rust mira-judge's rule, and the judge the environment
// names.
#include <mira/models/judge.hpp>

#include <boost/test/unit_test.hpp>

#include <cstdlib>

namespace models = mira::models;

BOOST_AUTO_TEST_SUITE(models_judge)

BOOST_AUTO_TEST_CASE(a_verdict_is_found_in_the_reply_as_rust_finds_it) {
  struct row {
    std::string reply;
    double score;
    std::string reason;
  };
  for (const auto& [reply, score, reason] : {
           row{R"({"score": 0.8, "reason": "good"})", 0.8, "good"},
           row{"  {\"score\": 0.25}\n", 0.25, ""},
           row{"Sure!\n```json\n{\"score\": 1, \"reason\": \"ok\"}\n```", 1.0, "ok"},
           row{R"(Verdict: {"score": 0.2, "reason": "wrong {sic}"} Hope this helps.)", 0.2,
               "wrong {sic}"},
           row{R"({"score": "1.5", "reason": "x"})", 1.0, "x"},
           row{R"({"score": "+0.5"})", 0.5, ""},
           row{R"({"score": -3, "reason": 7})", 0.0, ""},
       }) {
    auto v = models::parse_verdict(reply);
    BOOST_REQUIRE_MESSAGE(v, reply << ": " << v.error());
    BOOST_TEST(v->score == score, reply);
    BOOST_TEST(v->reason == reason, reply);
  }
}

BOOST_AUTO_TEST_CASE(a_reply_without_a_verdict_says_why) {
  struct row {
    std::string reply;
    std::string error;
  };
  for (const auto& [reply, error] : {
           row{"not json at all", "unparseable judge reply: no JSON object found"},
           row{"} backwards {", "unparseable judge reply: no JSON object found"},
           row{R"({"reason": "no score"})", "the verdict has no numeric \"score\""},
           row{R"({"score": "high"})", "the verdict has no numeric \"score\""},
           row{"0.7", "the verdict has no numeric \"score\""},  // JSON, but no object
       }) {
    auto v = models::parse_verdict(reply);
    BOOST_REQUIRE(!v);
    BOOST_TEST(v.error() == error, reply);
  }
  // Two objects: from the first '{' to the last '}' is not one JSON value (as in Rust).
  auto two = models::parse_verdict(R"({"score": 1} then {"score": 0})");
  BOOST_REQUIRE(!two);
  BOOST_TEST(two.error().starts_with("unparseable judge reply: "));
}

BOOST_AUTO_TEST_CASE(the_environment_names_the_judge) {
  ::unsetenv("MIRA_JUDGE");
  ::unsetenv("MIRA_JUDGE_MODEL");
  models::provider_options o;
  o.cache = models::response_cache();
  auto chat = models::judge_from_environment(o);
  BOOST_TEST((chat.kind() == models::api::openai_chat));
  BOOST_TEST(chat.model() == "gpt-4o-mini");
  ::setenv("MIRA_JUDGE", "anthropic", 1);
  auto claude = models::judge_from_environment(o);
  BOOST_TEST((claude.kind() == models::api::anthropic_messages));
  BOOST_TEST(claude.model() == "claude-haiku-4-5");
  BOOST_TEST(claude.key_variable() == "ANTHROPIC_API_KEY");
  ::setenv("MIRA_JUDGE", "openai-responses", 1);
  ::setenv("MIRA_JUDGE_MODEL", "judge-1", 1);
  auto responses = models::judge_from_environment(o);
  BOOST_TEST((responses.kind() == models::api::openai_responses));
  BOOST_TEST(responses.model() == "judge-1");
  ::setenv("MIRA_JUDGE", "gemini", 1);
  BOOST_CHECK_THROW(models::judge_from_environment(o), std::invalid_argument);
  ::unsetenv("MIRA_JUDGE");
  ::unsetenv("MIRA_JUDGE_MODEL");
}

BOOST_AUTO_TEST_SUITE_END()
