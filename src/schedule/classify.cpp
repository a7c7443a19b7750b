// Attempt classification (see classify.hpp).
#include <mira/schedule/classify.hpp>

#include <algorithm>
#include <cctype>
#include <cmath>

namespace mira::schedule {

namespace {

bool word_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0;
}

// `needle` (lower case) occurs in `text` with no letter or digit right before or after it.
bool contains_word(std::string_view text, std::string_view needle) {
  if (needle.size() > text.size()) return false;
  for (std::size_t i = 0; i + needle.size() <= text.size(); ++i) {
    bool match = true;
    for (std::size_t j = 0; j < needle.size() && match; ++j)
      match = std::tolower(static_cast<unsigned char>(text[i + j])) == needle[j];
    if (!match) continue;
    bool left = i == 0 || !word_char(text[i - 1]);
    bool right = i + needle.size() == text.size() || !word_char(text[i + needle.size()]);
    if (left && right) return true;
  }
  return false;
}

std::optional<double> number(const boost::json::value* v) {
  if (!v) return std::nullopt;
  if (v->is_number()) return v->to_number<double>();
  return std::nullopt;
}

const boost::json::object* error_data(const attempt& a) {
  if (!a.error || !a.error->diag.study_error || !a.error->diag.study_error->data) return nullptr;
  return a.error->diag.study_error->data->if_object();
}

}  // namespace

bool mentions_rate_limit(std::string_view text) {
  for (std::string_view w : {"429", "rate limit", "rate limited", "rate-limited",
                             "too many requests", "overloaded", "quota exceeded"})
    if (contains_word(text, w)) return true;
  return false;
}

std::optional<duration> retry_after_hint(const boost::json::object& o) {
  if (auto ms = number(o.if_contains("retry_after_ms")); ms && *ms >= 0)
    return std::chrono::duration_cast<duration>(std::chrono::duration<double, std::milli>(*ms));
  if (auto s = number(o.if_contains("retry_after")); s && *s >= 0)
    return std::chrono::duration_cast<duration>(std::chrono::duration<double>(*s));
  return std::nullopt;
}

bool is_rate_limited(const attempt& a) {
  if (auto* d = error_data(a)) {
    if (auto s = number(d->if_contains("http_status")); s && *s == 429) return true;
    if (auto* r = d->if_contains("rate_limited"); r && r->is_bool() && r->get_bool()) return true;
  }
  if (a.error && a.error->diag.study_error &&
      mentions_rate_limit(a.error->diag.study_error->message))
    return true;
  if (a.result && a.result->transcript.error && mentions_rate_limit(*a.result->transcript.error))
    return true;
  return false;
}

bool is_transient(const attempt& a, bool timeout_is_infra) {
  if (a.timed_out) return timeout_is_infra;
  if (a.error) return is_retryable(a.error->code) || a.error->code == errc::study_exited;
  if (a.result) return a.result->transcript.error_kind == protocol::error_kind::infra;
  return false;
}

attempt_verdict classify(const attempt& a, bool timeout_is_infra,
                         const rate_limit_classifier& rate_limited,
                         const retry_predicate& transient) {
  attempt_verdict v;
  v.rate_limited = rate_limited ? rate_limited(a) : is_rate_limited(a);
  v.retry = v.rate_limited || (transient ? transient(a) : is_transient(a, timeout_is_infra));
  if (!v.retry) return v;  // a hint is for the wait before a retry
  if (auto* d = error_data(a)) v.retry_after = retry_after_hint(*d);
  if (!v.retry_after && a.result)
    v.retry_after = retry_after_hint(a.result->transcript.metadata.get());
  return v;
}

case_state final_state(const attempt& a, bool rate_limited, bool timeout_is_infra,
                       bool execute_only) {
  if (a.timed_out) return timeout_is_infra ? case_state::na : case_state::failed;
  if (a.error)
    return is_retryable(a.error->code) || rate_limited ? case_state::na : case_state::error;
  if (!a.result) return case_state::error;
  auto& r = *a.result;
  if (r.skipped) return case_state::skipped;
  if (r.is_na() || r.transcript.error_kind == protocol::error_kind::infra || rate_limited)
    return case_state::na;
  if (execute_only) return case_state::executed;
  return r.passed ? case_state::passed : case_state::failed;
}

}  // namespace mira::schedule
