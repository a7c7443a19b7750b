// An LLM judge over any provider: study::scorers::model_graded with a model of this layer as
// the judge. The judge is asked for {"score": <0.0-1.0>, "reason": "..."} and that object is
// read as Rust's mira-judge reads it, prose around it or not, so the two SDKs judge alike.
#pragma once

#include <mira/models/provider.hpp>
#include <mira/study/scorers.hpp>

#include <boost/asio/awaitable.hpp>
#include <tl/expected.hpp>

#include <string>
#include <string_view>

namespace mira::models {

/// What the judge was asked to answer, as it gets it: a system prompt (the instruction to reply
/// with the JSON object only), then one user message, the scorer's prompt (judge_request.prompt:
/// the rubric, the input, the expected answer, the response, the tools called, the error).
extern const std::string_view judge_instruction;

/// A judge's verdict, read from its reply.
struct verdict {
  double score = 0.0;  ///< clamped to 0..1
  std::string reason;  ///< empty when the reply gave none
};

/// The verdict in a judge's reply, by Rust mira-judge's rule: the reply (trimmed) as JSON, else
/// the text from its first `{` to its last `}` as JSON; of that, `score` (a number, or a string
/// holding one) clamped to 0..1, and `reason` (a string, else empty). An error saying what was
/// wrong otherwise: no JSON object, JSON that does not parse, no numeric score.
tl::expected<verdict, std::string> parse_verdict(std::string_view reply);

/// A judge (study::scorers::judge) asking one provider's model.
///
/// grade() sends the judge_instruction and the request's prompt at temperature 0, asking for a
/// JSON object where the API can (Chat's response_format, Responses' text format; Anthropic has
/// none: 1024 tokens at most), through the response cache as every request. It throws (an N/A
/// score, see model_graded) when no verdict can be had: no key ("OPENAI_API_KEY is not set"),
/// a refused request, a reply with no verdict in it. A rate limit, a 5xx or a network failure
/// throws study::infra_error instead: the case ends as an infra error and the host retries it.
class llm_judge final : public study::scorers::judge {
 public:
  explicit llm_judge(provider model) : model_(std::move(model)) {}

  boost::asio::awaitable<study::scorers::judgement> grade(
      const study::scorers::judge_request& asked) override;

  const provider& model() const noexcept { return model_; }

 private:
  provider model_;
};

/// study::scorers::model_graded with an llm_judge of `judge`: a scorer named
/// `model_graded("<rubric>")`, passing when the judge's score is at least `threshold`.
study::scorer model_graded(provider judge, std::string rubric, double threshold = 0.5);

/// The judge the environment chooses: MIRA_JUDGE is `openai-chat` (the default),
/// `openai-responses` or `anthropic`; MIRA_JUDGE_MODEL the model (default gpt-4o-mini for the
/// OpenAI APIs, claude-haiku-4-5 for Anthropic). Throws std::invalid_argument for another
/// MIRA_JUDGE, naming the three.
provider judge_from_environment(provider_options options = {});

}  // namespace mira::models
