// The LLM judge (see judge.hpp).
#include <mira/models/judge.hpp>
#include <mira/study/error.hpp>

#include <boost/asio/error.hpp>
#include <boost/json/parse.hpp>
#include <boost/system/system_error.hpp>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <stdexcept>

namespace mira::models {

const std::string_view judge_instruction =
    "You grade an AI agent's run against a rubric, strictly and fairly. Answer with a JSON object "
    "and nothing else: {\"score\": <a number from 0.0 to 1.0>, \"reason\": \"<one short "
    "sentence>\"}. A score of 1.0 means the rubric is fully met, 0.0 that it is not met at all.";

namespace {

namespace json = boost::json;

std::string_view trim(std::string_view s) {
  auto first = s.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) return {};
  return s.substr(first, s.find_last_not_of(" \t\r\n") - first + 1);
}

// A score given as a string, read whole as a number (Rust's f64::from_str: a leading '+' too).
std::optional<double> number_in(std::string_view s) {
  if (s.starts_with('+')) s.remove_prefix(1);
  double v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || s.empty()) return std::nullopt;
  return v;
}

tl::expected<json::value, std::string> verdict_json(std::string_view reply) {
  boost::system::error_code ec;
  auto whole = json::parse(trim(reply), ec);
  if (!ec) return whole;
  auto open = reply.find('{');
  auto close = reply.rfind('}');
  if (open == std::string_view::npos || close == std::string_view::npos || close <= open)
    return tl::make_unexpected("unparseable judge reply: no JSON object found");
  auto inner = json::parse(reply.substr(open, close - open + 1), ec);
  if (ec) return tl::make_unexpected("unparseable judge reply: " + ec.message());
  return inner;
}

request judge_request_for(api kind, const std::string& prompt) {
  auto r = request::of(prompt);
  r.system = judge_instruction;
  r.temperature = 0.0;
  if (kind == api::openai_chat)
    r.extra["response_format"] = json::object{{"type", "json_object"}};
  else if (kind == api::openai_responses)
    r.extra["text"] = json::object{{"format", json::object{{"type", "json_object"}}}};
  else
    r.max_tokens = 1024;
  return r;
}

boost::asio::awaitable<study::scorers::judgement> grade_with(provider judge, request r) {
  auto asking = judge.send(std::move(r));
  auto answer = co_await std::move(asking);
  if (!answer) {
    const auto& e = answer.error();
    if (e.code == errc::cancelled)
      throw boost::system::system_error(boost::asio::error::operation_aborted);
    if (is_transient(e.code)) throw study::infra_error("judge: " + e.message, e.retry_after);
    throw std::runtime_error(e.message);
  }
  auto v = parse_verdict(answer->text);
  if (!v) throw std::runtime_error(v.error());
  co_return study::scorers::judgement{v->score, std::move(v->reason)};
}

}  // namespace

tl::expected<verdict, std::string> parse_verdict(std::string_view reply) {
  auto value = verdict_json(reply);
  if (!value) return tl::make_unexpected(std::move(value.error()));
  const auto* o = value->if_object();
  const auto* score = o ? o->if_contains("score") : nullptr;
  std::optional<double> number;
  if (score && score->is_number())
    number = score->to_number<double>();
  else if (score && score->is_string())
    number = number_in(score->get_string());
  if (!number) return tl::make_unexpected("the verdict has no numeric \"score\"");
  verdict v;
  v.score = std::isnan(*number) ? *number : std::clamp(*number, 0.0, 1.0);
  if (const auto* reason = o->if_contains("reason"); reason && reason->is_string())
    v.reason = reason->get_string();
  return v;
}

boost::asio::awaitable<study::scorers::judgement> llm_judge::grade(
    const study::scorers::judge_request& asked) {
  return grade_with(model_, judge_request_for(model_.kind(), asked.prompt));
}

study::scorer model_graded(provider judge, std::string rubric, double threshold) {
  return study::scorers::model_graded(std::make_shared<llm_judge>(std::move(judge)),
                                      std::move(rubric), threshold);
}

provider judge_from_environment(provider_options options) {
  const char* named = std::getenv("MIRA_JUDGE");
  std::string_view name = named && *named ? named : "openai-chat";
  auto kind = api_named(name);
  if (!kind)
    throw std::invalid_argument("MIRA_JUDGE is \"" + std::string(name) +
                                "\": it is openai-chat, openai-responses or anthropic");
  const char* model = std::getenv("MIRA_JUDGE_MODEL");
  std::string m = model && *model                    ? model
                  : *kind == api::anthropic_messages ? "claude-haiku-4-5"
                                                     : "gpt-4o-mini";
  return {*kind, std::move(m), std::move(options)};
}

}  // namespace mira::models
