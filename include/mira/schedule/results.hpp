// The results model: how each case of a run ended and the run's report. No Asio and no host:
// aggregation, the run store and the renderers use it without pulling in the connection.
#pragma once

#include <mira/protocol/types.hpp>

#include <array>
#include <cstddef>
#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mira::schedule {

/// How a case ended. N/A, skipped and cancelled are outside pass-rate denominators. A new state
/// gets its name in case_state_names below.
enum class case_state {
  passed,
  failed,     // the subject failed (or timed out, unless timeouts count as infra)
  na,         // every score N/A, or retries exhausted on an infrastructure problem
  skipped,    // target unavailable, or the study skipped it
  cancelled,  // stopped by fail-fast, a budget or the deadline before it finished
  error,      // the study rejected the request, or the connection failed
  executed,   // operation::execute: the transcript is in, the verdict comes from a later score
};

/// The one table of case states and their names (saved records, reports, the server's counts),
/// in declaration order: entry i is the state whose value is i.
struct case_state_name {
  case_state state;
  std::string_view name;
};
inline constexpr std::array<case_state_name, 7> case_state_names{{
    {case_state::passed, "passed"},
    {case_state::failed, "failed"},
    {case_state::na, "na"},
    {case_state::skipped, "skipped"},
    {case_state::cancelled, "cancelled"},
    {case_state::error, "error"},
    {case_state::executed, "executed"},
}};
inline constexpr std::size_t case_state_count = case_state_names.size();
static_assert(
    [] {
      for (std::size_t i = 0; i < case_state_count; ++i)
        if (static_cast<std::size_t>(case_state_names[i].state) != i) return false;
      return true;
    }(),
    "case_state_names: entry i is the state whose value is i");

/// Every case state, in declaration order: for counting or listing them all.
inline constexpr std::array<case_state, case_state_count> all_case_states = [] {
  std::array<case_state, case_state_count> states{};
  for (std::size_t i = 0; i < case_state_count; ++i) states[i] = case_state_names[i].state;
  return states;
}();

/// The state's name ("passed", "na", ...).
std::string_view to_string(case_state s);
/// The state a name stands for; nothing for a name that is none of them.
std::optional<case_state> case_state_from_string(std::string_view name);
std::ostream& operator<<(std::ostream& os, case_state s);

/// One attempt that did not give the final outcome, and why it was retried.
struct attempt_error {
  std::string cause;    // "rate limit", "retryable error", "infra", "study exited", "timeout"
  std::string message;  // the study's or the host's words
};

struct case_record {
  case_state state = case_state::cancelled;
  int attempts = 0;  // beside `state`, so the record has no padding: a run keeps one per case
  /// The final attempt's result exactly as the study sent it (its JSON text), if it gave one.
  /// Kept as text only, decoded by result() when asked: a decoded view beside it would cost
  /// about 700 bytes more per case, and a run keeps every case until its report.
  std::string result_json;
  std::vector<attempt_error> retried;  // every earlier attempt's failure
  std::string message;                 // why this state, when the result does not say
  double latency_seconds = 0;          // host-measured, final attempt

  bool has_result() const { return !result_json.empty(); }
  /// result_json decoded (run_result; for operation::execute the ExecuteResult's run fields),
  /// nullopt without one. Decoded on each call: keep the value while using it.
  std::optional<protocol::run_result> result() const;
};

enum class stop_reason {
  none,
  fail_fast,
  budget,
  deadline,
  study_failed,
  interrupted,
  requested,  // run_hooks::stop_after asked (e.g. results could no longer be saved)
};
std::string_view to_string(stop_reason r);
std::ostream& operator<<(std::ostream& os, stop_reason r);
/// The reason a saved session's label names: to_string()'s names, and "cancelled" (a server's
/// or a caller's stop, interrupted); another label is a stop someone requested.
stop_reason stop_reason_from_label(std::string_view label);

struct run_report {
  /// In plan order: every case's, or the first cases' only when a run keeps no more
  /// (run_policy::kept_records, session_options::kept_records).
  std::vector<case_record> cases;
  stop_reason stopped = stop_reason::none;
  std::string stop_message;
  double seconds = 0;
  int restarts = 0;  // processes the pool started again (study_pool::restarts)
  /// The saved run and the study (initialize.study) the report is of, when known: what a
  /// report names them by.
  std::string run_id;
  std::string study;
  std::string started;  // when the run began: UTC, ISO 8601 ("2026-11-30T08:15:02Z")
};

}  // namespace mira::schedule
