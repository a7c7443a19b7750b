// What an attempt's outcome means: retry or not, rate-limited or not, how long the study asked
// to wait. Structured signals first (error data, error_kind), words second.
#pragma once

#include <mira/error.hpp>
#include <mira/schedule/policy.hpp>
#include <mira/schedule/results.hpp>

#include <functional>
#include <optional>
#include <string_view>

namespace mira::schedule {

/// One attempt: the study's result, or an error (timeouts come as `timed_out`).
struct attempt {
  const protocol::run_result* result = nullptr;
  const mira::error* error = nullptr;
  bool timed_out = false;
};

/// Whether a text says "rate limited": 429, "rate limit", "too many requests", "overloaded"
/// or "quota exceeded", as whole words, case-insensitively ("port 4290" is not).
bool mentions_rate_limit(std::string_view text);

/// A `retry_after_ms` (milliseconds) or `retry_after` (seconds) field of a JSON object.
std::optional<duration> retry_after_hint(const boost::json::object& o);

using rate_limit_classifier = std::function<bool(const attempt&)>;
using retry_predicate = std::function<bool(const attempt&)>;

/// Structured (error data `http_status == 429` or `rate_limited == true`), then the words of
/// the error message or the transcript's error.
bool is_rate_limited(const attempt& a);

/// Worth another attempt: a `retryable` error, an infra transcript, a rate limit, a study that
/// died with the case in flight. Never a subject failure; timeouts only when `timeout_is_infra`.
bool is_transient(const attempt& a, bool timeout_is_infra);

/// The verdict the scheduler needs. Custom classifier and predicate replace the defaults.
attempt_verdict classify(const attempt& a, bool timeout_is_infra,
                         const rate_limit_classifier& rate_limited = {},
                         const retry_predicate& transient = {});

/// How a case ends, from its final attempt alone: a timeout is `na` when `timeout_is_infra`,
/// else `failed`; an error flagged `retryable` or rate-limited is `na` (the study called it an
/// infrastructure fault, which the protocol keeps out of pass rates), any other error `error`;
/// a result is `skipped`, `na` (all N/A, infra, rate-limited), `executed` (`execute`) or its
/// verdict. Decided once here, so neither a custom retry predicate nor whether the retries ran
/// out changes it (the state table in docs/pipelines.md).
case_state final_state(const attempt& a, bool rate_limited, bool timeout_is_infra,
                       bool execute_only);

}  // namespace mira::schedule
