// A model's replies recorded in a transcript: ATIF steps that project back to the flat fields
// the record sets, usage added up, and cache hits counted.
#include <mira/models/transcript.hpp>
#include <mira/protocol/trajectory.hpp>

#include <boost/json/parse.hpp>
#include <boost/test/unit_test.hpp>

namespace json = boost::json;
namespace models = mira::models;

namespace {

models::reply reply_of(std::string text, std::int64_t in, std::int64_t out) {
  models::reply r;
  r.text = std::move(text);
  r.model = "m-1";
  r.finish_reason = "stop";
  r.usage.input_tokens = in;
  r.usage.output_tokens = out;
  return r;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(models_transcript)

BOOST_AUTO_TEST_CASE(a_tool_using_conversation_is_a_trajectory) {
  mira::protocol::transcript t;
  auto asked = models::request::of("What is 2+2?");
  asked.system = "Be brief.";
  auto first = reply_of("", 10, 5);
  first.reasoning = "use the tool";
  first.finish_reason = "tool_calls";
  first.usage.cost_usd = 0.25;
  first.usage.reasoning_tokens = 2;
  first.tool_calls.push_back({"c1", "calc", json::object{{"expr", "2+2"}}});
  models::record(t, asked, first);

  asked.messages.push_back(models::message::assistant(first));
  asked.messages.push_back(models::message::tool_result("c1", "4"));
  auto second = reply_of("4", 20, 1);
  second.usage.cache_read_tokens = 8;
  second.from_cache = true;
  models::record(t, asked, second);

  BOOST_REQUIRE(t.trajectory);
  const auto& doc = t.trajectory->as_object();
  BOOST_TEST(doc.at("schema_version") == "ATIF-v1.7");
  const auto& steps = doc.at("steps").as_array();
  BOOST_REQUIRE(steps.size() == 4U);
  BOOST_TEST(steps[0] == json::parse(R"({"step_id":1,"source":"system","message":"Be brief."})"));
  BOOST_TEST(steps[1] == json::parse(R"({"step_id":2,"source":"user","message":"What is 2+2?"})"));
  BOOST_TEST(steps[2] == json::parse(R"({"step_id":3,"source":"agent","message":"",
      "llm_call_count":1,"reasoning_content":"use the tool",
      "tool_calls":[{"tool_call_id":"c1","function_name":"calc","arguments":{"expr":"2+2"}}],
      "model_name":"m-1","metrics":{"prompt_tokens":10,"completion_tokens":5,"cost_usd":0.25,
        "extra":{"reasoning_tokens":2}},
      "extra":{"finish_reason":"tool_calls"},
      "observation":{"results":[{"source_call_id":"c1","content":"4"}]}})"));
  BOOST_TEST(steps[3].at("extra") == json::parse(R"({"finish_reason":"stop","from_cache":true})"));
  BOOST_TEST(steps[3].at("metrics").at("cached_tokens") == 8);

  BOOST_TEST(t.final_response == "4");
  BOOST_TEST(t.tool_calls == std::vector<std::string>{"calc"});
  BOOST_TEST(t.tool_calls_count == 1);
  BOOST_TEST(t.iterations == 2);
  BOOST_TEST(t.usage.input_tokens == 30);
  BOOST_TEST(t.usage.output_tokens == 6);
  BOOST_TEST(t.usage.cache_read_tokens == 8);
  BOOST_TEST(t.usage.reasoning_tokens == 2);
  BOOST_TEST(t.usage.cost_usd == 0.25);
  BOOST_TEST(t.metadata.get().at("cache_hits") == 1);

  // The trajectory says what the flat fields say.
  auto p = mira::protocol::project(*t.trajectory);
  BOOST_REQUIRE(p);
  BOOST_TEST(p->final_response == t.final_response);
  BOOST_TEST(p->tool_calls == t.tool_calls);
  BOOST_TEST(p->iterations == t.iterations);
  BOOST_TEST(p->usage.input_tokens == t.usage.input_tokens);
  BOOST_TEST(p->usage.output_tokens == t.usage.output_tokens);
  BOOST_TEST(p->usage.cache_read_tokens == t.usage.cache_read_tokens);
  BOOST_TEST(p->usage.reasoning_tokens == t.usage.reasoning_tokens);
  BOOST_TEST(p->usage.cost_usd == t.usage.cost_usd);
  BOOST_TEST(doc.at("final_metrics").at("total_steps") == 4);
}

BOOST_AUTO_TEST_CASE(history_given_up_front_is_copied_context_and_media_is_named) {
  mira::protocol::transcript t;
  models::request asked;
  asked.messages.push_back(models::message::user("Hi"));
  asked.messages.push_back(models::message::assistant(reply_of("Hello!", 0, 0)));
  mira::protocol::part image;
  image.kind = "image";
  image.media_type = "image/png";
  image.data = "iVBO";
  mira::protocol::part linked = image;
  linked.data.reset();
  linked.uri = "https://x/cat.png";
  asked.messages.push_back(models::message::user({image, linked}));
  models::record(t, asked, reply_of("A cat.", 1, 1));
  const auto& steps = t.trajectory->as_object().at("steps").as_array();
  BOOST_REQUIRE(steps.size() == 4U);
  BOOST_TEST(steps[1].at("is_copied_context") == true);
  BOOST_TEST(steps[1].at("llm_call_count") == 0);
  BOOST_TEST(steps[2].at("message") == json::parse(R"([{"type":"text","text":"[image image/png]"},
      {"type":"image","source":{"media_type":"image/png","path":"https://x/cat.png"}}])"));
  auto p = mira::protocol::project(*t.trajectory);
  BOOST_REQUIRE(p);
  BOOST_TEST(p->iterations == 1);  // the copied step is no inference of this run
  BOOST_TEST(!t.metadata.get().contains("cache_hits"));
}

BOOST_AUTO_TEST_CASE(a_reply_alone_adds_one_agent_step) {
  mira::protocol::transcript t;
  models::record(t, reply_of("one", 1, 1));
  models::record(t, reply_of("two", 1, 1));
  const auto& steps = t.trajectory->as_object().at("steps").as_array();
  BOOST_REQUIRE(steps.size() == 2U);
  BOOST_TEST(steps[1].at("step_id") == 2);
  BOOST_TEST(t.final_response == "two");
  BOOST_TEST(t.usage.input_tokens == 2);
}

BOOST_AUTO_TEST_SUITE_END()
