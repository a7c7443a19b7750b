// The built-in scorers: the vocabulary of the Rust SDK (mira-eval), one factory each, with its
// names and semantics, so that an eval scores alike in either language; the protocol's
// conformance vectors (conformance/scorers.json) pin them. Plus the model-graded judge, as an
// interface a study implements with the model client of its choice.
//
// A scorer's name is what `list` advertises, e.g. `contains("42")`; the score it gives is named
// by its kind, e.g. `contains`. Every check that cannot be verified (no trajectory, a metric or
// time to first token never reported, a bad regular expression) fails with a reason: N/A is kept
// for what could not be evaluated at all, an unreachable judge.
#pragma once

#include <mira/study/scorer.hpp>

#include <boost/asio/awaitable.hpp>
#include <boost/json/value.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace mira::study::scorers {

// --- the run -----------------------------------------------------------------------------------

/// Passes when the transcript carries no error.
scorer succeeded();

// --- the final response ------------------------------------------------------------------------

/// Passes when the final response, trimmed of white space, is not empty.
scorer non_empty();
/// Passes when the final response contains `needle`.
scorer contains(std::string needle);
/// Passes when the final response does not contain `needle`.
scorer not_contains(std::string needle);
/// Passes when the final response equals `expected`, both trimmed, ASCII letters compared without
/// case.
scorer equals(std::string expected);
/// Passes when `pattern` matches somewhere in the final response. The pattern is Perl syntax
/// (Boost.Regex: inline flags such as `(?i)` as in Rust's regex crate), matched on the UTF-8
/// bytes. A pattern that does not compile fails every case with the error as its reason; so does
/// a match too complex to finish.
scorer regex(std::string pattern);
/// Passes when the final response equals the sample's expected answer, both trimmed. A sample
/// whose expected answer is absent or not a string fails (the eval is misconfigured).
scorer matches_expected();
/// Passes when the final response, trimmed, is one JSON value.
scorer json_valid();
/// Passes when the final response is a JSON object whose member `key` is the string `value`.
scorer json_field_equals(std::string key, std::string value);

// --- the workspace -----------------------------------------------------------------------------

/// Passes when the transcript's files hold `path`.
scorer file_exists(std::string path);
/// Passes when the transcript's files hold `path` and its text contains `needle`.
scorer file_contains(std::string path, std::string needle);

// --- tools, by name (transcript.tool_calls) ----------------------------------------------------

/// Passes when `tool` was called at least once.
scorer tool_called(std::string tool);
/// Passes when `tool` was never called.
scorer tool_not_called(std::string tool);
/// Passes when the set of tools called is exactly `tools` (order and repeats aside).
scorer tools_used_exactly(std::vector<std::string> tools);
/// Passes when `first` and `second` were both called and the first call of `first` came before
/// the first call of `second`.
scorer tool_called_before(std::string first, std::string second);
/// Passes when the run made at most `max` tool calls (transcript.tool_calls_count).
scorer tool_calls_within(std::int64_t max);
/// Passes when the run took at most `max` iterations.
scorer turns_within(std::int64_t max);

// --- the ATIF trajectory (transcript.trajectory) -----------------------------------------------
// Each fails with "subject reported no trajectory" when the transcript has none.

/// Passes when some call of `tool` has, at the JSON pointer `pointer` (RFC 6901, e.g.
/// "/ticker") of its arguments, a value equal to `expected` (JSON equality: 3 and 3.0 differ).
scorer tool_called_with(std::string tool, std::string pointer, boost::json::value expected);
/// Passes when some call of `tool` has, at `pointer` in its arguments, a string that `pattern`
/// (as for regex()) matches. A value there that is not a string fails, saying so.
scorer tool_arg_matches(std::string tool, std::string pointer, std::string pattern);
/// Passes when the observation answering some call of `tool` (joined on source_call_id, in the
/// call's step) contains `needle`; multimodal content is read as its text parts, joined by
/// newlines.
scorer observation_contains(std::string tool, std::string needle);
/// Passes when the trajectory has at most `max` steps.
scorer steps_within(std::int64_t max);

// --- budgets -----------------------------------------------------------------------------------

/// Passes when input plus output tokens are at most `max`.
scorer tokens_within(std::int64_t max);
/// Passes when output tokens are at most `max`.
scorer output_tokens_within(std::int64_t max);
/// Passes when the cost is at most `max_usd` dollars.
scorer cost_within(double max_usd);
/// Passes when the run's duration is at most `max_ms` (a duration never reported counts as 0).
scorer latency_within(std::int64_t max_ms);
/// Passes when the time to first token is at most `max_ms`; fails when it was never reported.
scorer ttft_within(std::int64_t max_ms);
/// Passes when the subject's metric `name` is at least `min`; fails when it was never reported.
scorer metric_at_least(std::string name, double min);
/// Passes when the subject's metric `name` is at most `max`; fails when it was never reported.
scorer metric_within(std::string name, double max);

// --- multimodal output -------------------------------------------------------------------------

/// Passes when transcript.output holds a part of this kind ("text", "image", "audio", "file",
/// "json").
scorer produced_modality(std::string kind);

// --- combinators -------------------------------------------------------------------------------
// N/A scores of the scorers combined are left out; when all of them are N/A (or there are none)
// the combination is N/A. A combination of any coroutine scorer is a coroutine scorer. Its
// reason lists each score's name after a mark: ✓ passed, ✗ failed, – N/A.

/// Passes when every scorer passes; its value is the mean of theirs. Named `name`, and so is its
/// score.
scorer all_of(std::string name, std::vector<scorer> of);
/// Passes when some scorer passes; its value is the largest of theirs.
scorer any_of(std::string name, std::vector<scorer> of);
/// Passes when `inner` fails; its value is 1 minus the inner one. An N/A inner score stays N/A.
/// Named `not(<inner name>)`; its score `not(<inner score's name>)`. (`not` is a C++ keyword.)
scorer not_(scorer inner);

// --- the model-graded judge --------------------------------------------------------------------

/// What a judge is asked to grade. The references are valid until grade() completes.
struct judge_request {
  /// The rubric given to model_graded().
  const std::string& rubric;
  /// A prompt for the judging model, in Markdown sections: the rubric, the sample's input (its
  /// text), its expected answer when it is a string, the final response, the tools called in
  /// order and the run's error, when there are. A judge may build its own from the rest instead.
  const std::string& prompt;
  const study::sample& sample;
  const protocol::transcript& transcript;
  /// The final response (transcript.final_response).
  const std::string& response;
};

/// A judge's verdict: `score` in 0..1 (clamped) and a short reason.
struct judgement {
  double score = 0.0;
  std::string reason;
};

/// A model that grades a transcript against a rubric, implemented by the study (a client of the
/// judging model's API). It should be a different model from the one under test.
class judge {
 public:
  virtual ~judge() = default;
  /// The judgement of `request`. Throw when none can be had (no credentials, an answer that is
  /// not a verdict): the score is then N/A, not a failure. Throw study::infra_error for a
  /// failure worth a retry (a rate limit, the model unreachable). The awaitable runs on the
  /// executor of whoever awaits the scorer.
  virtual boost::asio::awaitable<judgement> grade(const judge_request& request) = 0;
};

/// A coroutine scorer named `model_graded("<rubric>")` whose score, named `model_graded`, is the
/// judge's: value the judgement's score, passing when it is at least `threshold`. A judge that
/// throws, or scores NaN, gives an N/A score saying why. Two exceptions are not verdicts and
/// propagate: a cancellation (boost::system::system_error with operation_aborted), and
/// study::infra_error (the judge's provider rate-limited or down), which ends the case as an
/// infra error that the host retries.
scorer model_graded(std::shared_ptr<judge> j, std::string rubric, double threshold = 0.5);

}  // namespace mira::study::scorers
