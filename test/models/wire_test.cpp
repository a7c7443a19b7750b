// The provider APIs' wire forms without I/O: each API's request body, its answer read back, a
// failed status as an error, and what a subject throws for each error.
#include "models/wire.hpp"

#include <mira/models/provider.hpp>
#include <mira/study/error.hpp>

#include <boost/asio/error.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/system/system_error.hpp>
#include <boost/test/unit_test.hpp>

namespace json = boost::json;
namespace models = mira::models;
namespace detail = mira::models::detail;
using mira::models::api;
using namespace std::chrono_literals;

namespace {

mira::protocol::part media(std::string kind, std::string type, std::optional<std::string> data,
                           std::optional<std::string> uri = std::nullopt) {
  mira::protocol::part p;
  p.kind = std::move(kind);
  p.media_type = std::move(type);
  p.data = std::move(data);
  p.uri = std::move(uri);
  return p;
}

models::request a_conversation() {
  models::request r = models::request::of("What is 2+2?");
  r.system = "Be brief.";
  r.tools.push_back({"calc", "Evaluates arithmetic", {}});
  models::reply earlier;
  earlier.tool_calls.push_back({"c1", "calc", json::object{{"expr", "2+2"}}});
  r.messages.push_back(models::message::assistant(earlier));
  r.messages.push_back(models::message::tool_result("c1", "4"));
  r.temperature = 0.5;
  r.max_tokens = 100;
  r.extra["seed"] = 7;
  return r;
}

json::object parsed(std::string_view text) {
  return json::parse(text).as_object();
}

models::http_response response(int status, std::string body,
                               std::vector<models::http_header> headers = {}) {
  models::http_response r;
  r.status = status;
  r.body = std::move(body);
  r.headers = std::move(headers);
  return r;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(models_wire)

BOOST_AUTO_TEST_CASE(chat_completions_requests_carry_the_conversation) {
  auto body = detail::encode_request(api::openai_chat, "gpt-x", a_conversation());
  BOOST_REQUIRE(body);
  BOOST_TEST(*body == parsed(R"({"model":"gpt-x","messages":[
      {"role":"system","content":"Be brief."},
      {"role":"user","content":"What is 2+2?"},
      {"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function",
        "function":{"name":"calc","arguments":"{\"expr\":\"2+2\"}"}}]},
      {"role":"tool","tool_call_id":"c1","content":"4"}],
    "tools":[{"type":"function","function":{"name":"calc",
      "parameters":{"type":"object","properties":{}},"description":"Evaluates arithmetic"}}],
    "temperature":0.5,"max_tokens":100,"seed":7})"));
}

BOOST_AUTO_TEST_CASE(chat_completions_takes_images_audio_and_files_as_data) {
  auto r = models::request::of("look");
  r.messages[0].content.push_back(media("image", "image/png", "iVBO"));
  r.messages[0].content.push_back(media("image", "image/png", std::nullopt, "https://x/a.png"));
  r.messages[0].content.push_back(
      media("audio", "audio/mpeg", std::nullopt, "data:audio/mpeg;base64,SUQz"));
  auto file = media("file", "application/pdf", "JVBE");
  file.name = "a.pdf";
  r.messages[0].content.push_back(file);
  auto body = detail::encode_request(api::openai_chat, "m", r);
  BOOST_REQUIRE(body);
  BOOST_TEST(body->at("messages").at(0).at("content") == json::parse(R"([
      {"type":"text","text":"look"},
      {"type":"image_url","image_url":{"url":"data:image/png;base64,iVBO"}},
      {"type":"image_url","image_url":{"url":"https://x/a.png"}},
      {"type":"input_audio","input_audio":{"data":"SUQz","format":"mp3"}},
      {"type":"file","file":{"file_data":"data:application/pdf;base64,JVBE","filename":"a.pdf"}}])"));

  auto by_url = models::request::of("listen");
  by_url.messages[0].content.push_back(
      media("audio", "audio/wav", std::nullopt, "https://x/a.wav"));
  auto refused = detail::encode_request(api::openai_chat, "m", by_url);
  BOOST_REQUIRE(!refused);
  BOOST_TEST((refused.error().code == models::errc::bad_request));
}

BOOST_AUTO_TEST_CASE(chat_completions_answers_are_read_whole) {
  auto r = detail::decode_reply(api::openai_chat, R"({"id":"x","model":"gpt-x-2024",
      "choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant",
        "content":"Let me compute.","reasoning_content":"2+2 is arithmetic",
        "tool_calls":[{"id":"c9","type":"function","function":{"name":"calc",
          "arguments":"{\"expr\":\"2+2\"}"}},
          {"id":"c10","type":"function","function":{"name":"calc","arguments":"not json"}}]}}],
      "usage":{"prompt_tokens":30,"completion_tokens":12,
        "prompt_tokens_details":{"cached_tokens":10},
        "completion_tokens_details":{"reasoning_tokens":5}}})");
  BOOST_REQUIRE(r);
  BOOST_TEST(r->text == "Let me compute.");
  BOOST_TEST(r->reasoning == "2+2 is arithmetic");
  BOOST_TEST(r->finish_reason == "tool_calls");
  BOOST_TEST(r->model == "gpt-x-2024");
  BOOST_REQUIRE(r->tool_calls.size() == 2U);
  BOOST_TEST(r->tool_calls[0].id == "c9");
  BOOST_TEST(r->tool_calls[0].arguments == json::parse(R"({"expr":"2+2"})"));
  BOOST_TEST(r->tool_calls[1].arguments == json::value("not json"));
  BOOST_TEST(r->usage.input_tokens == 30);
  BOOST_TEST(r->usage.output_tokens == 12);
  BOOST_TEST(r->usage.cache_read_tokens == 10);
  BOOST_TEST(r->usage.reasoning_tokens == 5);
  BOOST_TEST(r->raw.at("id") == "x");
  BOOST_TEST(!r->from_cache);
  // A compatible server's `reasoning`, and content given as parts.
  auto other = detail::decode_reply(api::openai_chat, R"({"choices":[{"message":{
      "content":[{"type":"text","text":"a"},{"type":"text","text":"b"}],"reasoning":"r"}}]})");
  BOOST_REQUIRE(other);
  BOOST_TEST(other->text == "ab");
  BOOST_TEST(other->reasoning == "r");
}

BOOST_AUTO_TEST_CASE(responses_requests_carry_the_conversation) {
  auto body = detail::encode_request(api::openai_responses, "gpt-x", a_conversation());
  BOOST_REQUIRE(body);
  BOOST_TEST(*body == parsed(R"({"model":"gpt-x","input":[
      {"role":"system","content":"Be brief."},
      {"role":"user","content":"What is 2+2?"},
      {"type":"function_call","call_id":"c1","name":"calc","arguments":"{\"expr\":\"2+2\"}"},
      {"type":"function_call_output","call_id":"c1","output":"4"}],
    "tools":[{"type":"function","name":"calc","parameters":{"type":"object","properties":{}},
      "description":"Evaluates arithmetic","strict":false}],
    "temperature":0.5,"max_output_tokens":100,"seed":7})"));
  auto r = models::request::of("look");
  r.messages[0].content.push_back(media("image", "image/jpeg", "/9j/"));
  r.messages[0].content.push_back(
      media("file", "application/pdf", std::nullopt, "https://x/a.pdf"));
  auto multimodal = detail::encode_request(api::openai_responses, "m", r);
  BOOST_REQUIRE(multimodal);
  BOOST_TEST(multimodal->at("input").at(0).at("content") == json::parse(R"([
      {"type":"input_text","text":"look"},
      {"type":"input_image","image_url":"data:image/jpeg;base64,/9j/"},
      {"type":"input_file","file_url":"https://x/a.pdf"}])"));
}

BOOST_AUTO_TEST_CASE(responses_answers_are_read_whole) {
  auto r = detail::decode_reply(api::openai_responses, R"({"model":"gpt-x","status":"completed",
      "output":[
        {"type":"reasoning","summary":[{"type":"summary_text","text":"think"}]},
        {"type":"message","role":"assistant","content":[
          {"type":"output_text","text":"The answer"},{"type":"output_text","text":" is 4."}]},
        {"type":"function_call","call_id":"c2","name":"calc","arguments":"{}"}],
      "usage":{"input_tokens":20,"output_tokens":8,"input_tokens_details":{"cached_tokens":4},
        "output_tokens_details":{"reasoning_tokens":3}}})");
  BOOST_REQUIRE(r);
  BOOST_TEST(r->text == "The answer is 4.");
  BOOST_TEST(r->reasoning == "think");
  BOOST_TEST(r->finish_reason == "tool_calls");
  BOOST_REQUIRE(r->tool_calls.size() == 1U);
  BOOST_TEST(r->tool_calls[0].id == "c2");
  BOOST_TEST(r->usage.input_tokens == 20);
  BOOST_TEST(r->usage.cache_read_tokens == 4);
  BOOST_TEST(r->usage.reasoning_tokens == 3);
  auto cut = detail::decode_reply(api::openai_responses, R"({"status":"incomplete",
      "incomplete_details":{"reason":"max_output_tokens"},"output":[]})");
  BOOST_REQUIRE(cut);
  BOOST_TEST(cut->finish_reason == "length");
}

BOOST_AUTO_TEST_CASE(anthropic_requests_carry_the_conversation) {
  auto body = detail::encode_request(api::anthropic_messages, "claude-x", a_conversation());
  BOOST_REQUIRE(body);
  BOOST_TEST(*body == parsed(R"({"model":"claude-x","max_tokens":100,"messages":[
      {"role":"user","content":"What is 2+2?"},
      {"role":"assistant","content":[{"type":"tool_use","id":"c1","name":"calc",
        "input":{"expr":"2+2"}}]},
      {"role":"user","content":[{"type":"tool_result","tool_use_id":"c1","content":"4"}]}],
    "system":"Be brief.",
    "tools":[{"name":"calc","input_schema":{"type":"object","properties":{}},
      "description":"Evaluates arithmetic"}],
    "temperature":0.5,"seed":7})"));
  auto r = models::request::of("look");
  r.messages[0].content.push_back(
      media("image", "image/png", std::nullopt, "data:image/png;base64,iVBO"));
  r.messages[0].content.push_back(media("image", "image/png", std::nullopt, "https://x/a.png"));
  auto multimodal = detail::encode_request(api::anthropic_messages, "m", r);
  BOOST_REQUIRE(multimodal);
  BOOST_TEST(multimodal->at("max_tokens") == 4096);
  BOOST_TEST(multimodal->at("messages").at(0).at("content") == json::parse(R"([
      {"type":"text","text":"look"},
      {"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBO"}},
      {"type":"image","source":{"type":"url","url":"https://x/a.png"}}])"));
  r.messages[0].content.push_back(media("audio", "audio/wav", "UklG"));
  BOOST_TEST(!detail::encode_request(api::anthropic_messages, "m", r));
}

BOOST_AUTO_TEST_CASE(anthropic_answers_are_read_whole) {
  auto r = detail::decode_reply(api::anthropic_messages, R"({"model":"claude-x",
      "stop_reason":"tool_use","content":[
        {"type":"thinking","thinking":"hmm"},
        {"type":"text","text":"Computing."},
        {"type":"tool_use","id":"t1","name":"calc","input":{"expr":"2+2"}}],
      "usage":{"input_tokens":5,"cache_read_input_tokens":20,"cache_creation_input_tokens":3,
        "output_tokens":9}})");
  BOOST_REQUIRE(r);
  BOOST_TEST(r->text == "Computing.");
  BOOST_TEST(r->reasoning == "hmm");
  BOOST_TEST(r->finish_reason == "tool_calls");
  BOOST_REQUIRE(r->tool_calls.size() == 1U);
  BOOST_TEST(r->tool_calls[0].arguments == json::parse(R"({"expr":"2+2"})"));
  BOOST_TEST(r->usage.input_tokens == 28);  // the whole input, cached or not
  BOOST_TEST(r->usage.cache_read_tokens == 20);
  BOOST_TEST(r->usage.output_tokens == 9);
  for (auto [stop, reason] : {std::pair{"end_turn", "stop"}, std::pair{"max_tokens", "length"},
                              std::pair{"refusal", "content_filter"}}) {
    auto one = detail::decode_reply(api::anthropic_messages,
                                    std::string(R"({"content":[],"stop_reason":")") + stop + "\"}");
    BOOST_REQUIRE(one);
    BOOST_TEST(one->finish_reason == reason);
  }
}

BOOST_AUTO_TEST_CASE(an_answer_that_is_not_the_apis_says_what_is_missing) {
  struct row {
    api a;
    std::string body;
    std::string says;
  };
  for (const auto& [a, body, says] :
       {row{api::openai_chat, "not json", "OpenAI Chat Completions: the answer is not a JSON"},
        row{api::openai_chat, R"({"choices":[]})",
            "OpenAI Chat Completions: the answer has no choices"},
        row{api::openai_chat, R"({"choices":[{}]})", "first choice has no message"},
        row{api::openai_responses, R"({"id":1})", "OpenAI Responses: the answer has no output"},
        row{api::anthropic_messages, "[1]", "Anthropic Messages: the answer is not a JSON object"},
        row{api::anthropic_messages, R"({"content":"x"})", "the answer has no content"}}) {
    auto r = detail::decode_reply(a, body);
    BOOST_REQUIRE(!r);
    BOOST_TEST((r.error().code == models::errc::bad_provider_response));
    BOOST_TEST(r.error().message.find(says) != std::string::npos, r.error().message);
  }
}

BOOST_AUTO_TEST_CASE(a_failed_status_says_what_the_provider_said_and_never_the_key) {
  const auto now = std::chrono::system_clock::now();
  auto limited = detail::failure_of(
      api::openai_chat,
      response(429, R"({"error":{"message":"Rate limit reached","type":"requests"}})",
               {{"Retry-After", "2", false}}),
      "sk-secret", now);
  BOOST_TEST((limited.code == models::errc::rate_limited));
  BOOST_TEST(limited.http_status == 429);
  BOOST_TEST(limited.retry_after.value_or(0ms).count() == 2000);
  BOOST_TEST(limited.message ==
             "OpenAI Chat Completions: rate limited (HTTP 429): Rate limit reached");
  auto ms = detail::failure_of(api::openai_responses,
                               response(429, "{}", {{"retry-after-ms", "1500", false}}), "k", now);
  BOOST_TEST(ms.retry_after.value_or(0ms).count() == 1500);

  auto overloaded = detail::failure_of(
      api::anthropic_messages,
      response(529,
               R"({"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}})"),
      "k", now);
  BOOST_TEST((overloaded.code == models::errc::server_error));
  BOOST_TEST(overloaded.message == "Anthropic Messages: server error (HTTP 529): Overloaded");
  BOOST_TEST(models::is_transient(overloaded.code));

  auto refused = detail::failure_of(
      api::openai_chat,
      response(401, R"({"error":{"message":"Incorrect API key provided: sk-secret."}})"),
      "sk-secret", now);
  BOOST_TEST((refused.code == models::errc::client_error));
  BOOST_TEST(!models::is_transient(refused.code));
  BOOST_TEST(refused.message ==
             "OpenAI Chat Completions: HTTP 401: Incorrect API key provided: ***.");

  auto ollama = detail::failure_of(api::openai_chat,
                                   response(404, R"({"error":"model \"x\" not found"})"), "k", now);
  BOOST_TEST(ollama.message == "OpenAI Chat Completions: HTTP 404: model \"x\" not found");
  auto plain =
      detail::failure_of(api::openai_chat, response(502, "<html>Bad\ngateway</html>"), "k", now);
  BOOST_TEST(plain.message ==
             "OpenAI Chat Completions: server error (HTTP 502): <html>Bad gateway</html>");
  auto timeout = detail::failure_of(api::openai_chat, response(408, ""), "k", now);
  BOOST_TEST((timeout.code == models::errc::timed_out));
}

BOOST_AUTO_TEST_CASE(endpoints_and_headers) {
  BOOST_TEST(detail::endpoint(api::openai_chat, "https://api.openai.com/v1/") ==
             "https://api.openai.com/v1/chat/completions");
  BOOST_TEST(detail::endpoint(api::openai_responses, "http://localhost:8000/v1") ==
             "http://localhost:8000/v1/responses");
  BOOST_TEST(detail::endpoint(api::anthropic_messages, "https://api.anthropic.com") ==
             "https://api.anthropic.com/v1/messages");
  auto openai = detail::headers_for(api::openai_chat, "sk-1", "v");
  BOOST_REQUIRE(openai.size() == 2U);
  BOOST_TEST(openai[1].value == "Bearer sk-1");
  BOOST_TEST(openai[1].secret);
  auto anthropic = detail::headers_for(api::anthropic_messages, "sk-2", "2023-06-01");
  BOOST_REQUIRE(anthropic.size() == 3U);
  BOOST_TEST(anthropic[1].name == "x-api-key");
  BOOST_TEST(anthropic[1].secret);
  BOOST_TEST(anthropic[2].value == "2023-06-01");
}

BOOST_AUTO_TEST_CASE(a_price_table_gives_the_cost) {
  models::reply r;
  r.model = "gpt-x-2024-01-01";
  r.usage.input_tokens = 1'000'000;
  r.usage.output_tokens = 500'000;
  models::price_table prices{{"gpt-x", {0.15, 0.60}}};
  detail::price_reply(r, prices, "gpt-x");
  BOOST_TEST(r.usage.cost_usd == 0.15 + 0.30, boost::test_tools::tolerance(1e-12));
  models::reply unpriced;
  detail::price_reply(unpriced, prices, "other");
  BOOST_TEST(unpriced.usage.cost_usd == 0.0);
}

BOOST_AUTO_TEST_CASE(a_samples_input_is_a_request) {
  mira::study::sample s;
  s.input = json::array{
      "Describe this:",
      json::parse(
          R"({"kind":"image","media_type":"image/png","source":{"uri":"https://x/a.png"}})"),
      json::parse(R"({"role":"assistant","content":"A cat."})"),
      json::parse(R"({"role":"user","content":[{"kind":"text","text":"Sure?"}]})"), 42};
  auto r = models::request_for(s);
  BOOST_REQUIRE(r.messages.size() == 4U);
  BOOST_TEST(r.messages[0].role == "user");
  BOOST_REQUIRE(r.messages[0].content.size() == 2U);
  BOOST_TEST(r.messages[0].content[1].kind == "image");
  BOOST_TEST(r.messages[0].content[1].uri.value_or("") == "https://x/a.png");
  BOOST_TEST(r.messages[1].role == "assistant");
  BOOST_TEST(r.messages[1].text() == "A cat.");
  BOOST_TEST(r.messages[2].text() == "Sure?");
  BOOST_TEST(r.messages[3].text() == "42");
}

BOOST_AUTO_TEST_CASE(each_error_is_thrown_as_a_study_answers_it) {
  models::error cancelled{models::errc::cancelled, "cancelled", std::nullopt, 0};
  BOOST_CHECK_EXCEPTION(
      models::throw_error(cancelled), boost::system::system_error,
      [](const auto& e) { return e.code() == boost::asio::error::operation_aborted; });
  models::error limited{models::errc::rate_limited, "rate limited (HTTP 429)", 3s, 429};
  BOOST_CHECK_EXCEPTION(models::throw_error(limited), mira::study::infra_error, [](const auto& e) {
    return e.retry_after() == std::chrono::milliseconds(3000) &&
           std::string(e.what()) == "rate limited (HTTP 429)";
  });
  models::error refused{models::errc::client_error, "HTTP 400: bad model", std::nullopt, 400};
  BOOST_CHECK_EXCEPTION(models::throw_error(refused), mira::study::request_error,
                        [](const auto& e) {
                          return !e.retryable() && std::string(e.what()) == "HTTP 400: bad model";
                        });
}

BOOST_AUTO_TEST_CASE(api_names_round_trip) {
  for (auto a : {api::openai_chat, api::openai_responses, api::anthropic_messages})
    BOOST_TEST((models::api_named(models::name_of(a)) == a));
  BOOST_TEST(!models::api_named("gemini"));
}

BOOST_AUTO_TEST_SUITE_END()
