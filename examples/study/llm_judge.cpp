// A study scored by an LLM judge alone: a few questions with reference answers, a subject that
// answers them, and a model that grades each answer against the reference.
//
// The judge is chosen by MIRA_JUDGE (openai-chat, the default; openai-responses; anthropic) and
// MIRA_JUDGE_MODEL, and reaches its provider with OPENAI_API_KEY / ANTHROPIC_API_KEY and
// OPENAI_BASE_URL / ANTHROPIC_BASE_URL (any OpenAI-compatible server: its URL ending in /v1).
// Without a key every case is N/A, saying which key is missing. With MIRA_CACHE_DIR the judge's
// answers are cached: a second run asks nothing.
//
// Targets: `stand-in` answers each sample's expected answer (but one, wrong on purpose), a
// stand-in for a model, so the study runs with no model but the judge's; with
// MIRA_SUBJECT_MODEL set, `openai/<model>` has that model answer (listed unavailable without
// OPENAI_API_KEY).
//
// Usage: mira run -- llm_judge
//        MIRA_JUDGE=anthropic MIRA_JUDGE_MODEL=claude-haiku-4-5 mira run -- llm_judge
#include <mira/models/judge.hpp>
#include <mira/models/targets.hpp>
#include <mira/study.hpp>

#include <cstdlib>
#include <iostream>

namespace asio = boost::asio;
namespace json = boost::json;
namespace models = mira::models;
namespace study = mira::study;
using mira::protocol::transcript;

namespace {

study::sample question(std::string id, std::string text, std::string expected) {
  return {std::move(id), json::array{json::string(text)}, json::value(std::move(expected))};
}

// The stand-in's answer: the expected one, or the sample's `stand_in` when it has one.
asio::awaitable<transcript> stand_in(study::run_context& c) {
  transcript t;
  const auto* wrong = c.sample().metadata.if_contains("stand_in");
  t.final_response = wrong ? wrong->as_string() : c.sample().expected->as_string();
  co_return t;
}

asio::awaitable<transcript> answer(study::run_context& c) {
  if (c.target().provider == "openai") {
    auto model = models::for_target(c);
    co_return co_await model.answer(c);
  }
  co_return co_await stand_in(c);
}

}  // namespace

int main() {
  study::registry s("llm-judge", "0.1.0");
  auto& qa = s.add("qa");
  auto arithmetic = question("arithmetic", "What is 6 times 7?", "42");
  arithmetic.metadata["stand_in"] = "43";
  qa.description("Questions with reference answers, graded by an LLM judge")
      .samples({question("capital", "What is the capital of France?", "Paris"),
                question("element", "Which element has the chemical symbol O?", "oxygen"),
                arithmetic})
      .add_target("stand-in", "sim")
      .subject(answer);
  if (const char* model = std::getenv("MIRA_SUBJECT_MODEL"); model && *model)
    qa.add_target(models::openai_target(model));
  try {
    qa.score_with(models::model_graded(models::judge_from_environment(),
                                       "Does the response answer the question correctly, in "
                                       "agreement with the expected answer?"));
  } catch (const std::invalid_argument& e) {
    std::cerr << "llm_judge: " << e.what()
              << '\n';  // a MIRA_JUDGE or MIRA_CACHE_MODE it does not know
    return 2;
  }
  return study::serve_stdio(s);
}
