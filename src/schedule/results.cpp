// The results model's names and the decoded view of a case's result (see results.hpp).
#include <mira/protocol/codec.hpp>
#include <mira/schedule/results.hpp>

#include <ostream>

namespace mira::schedule {

std::string_view to_string(case_state s) {
  auto i = static_cast<std::size_t>(s);
  return i < case_state_count ? case_state_names[i].name : "?";
}

std::optional<case_state> case_state_from_string(std::string_view name) {
  for (auto& [state, n] : case_state_names)
    if (n == name) return state;
  return std::nullopt;
}

std::string_view to_string(stop_reason r) {
  switch (r) {
    case stop_reason::none:
      return "none";
    case stop_reason::fail_fast:
      return "fail-fast";
    case stop_reason::budget:
      return "budget";
    case stop_reason::deadline:
      return "deadline";
    case stop_reason::study_failed:
      return "study failed";
    case stop_reason::interrupted:
      return "interrupted";
    case stop_reason::requested:
      return "requested";
  }
  return "?";
}

stop_reason stop_reason_from_label(std::string_view label) {
  if (label == "cancelled") return stop_reason::interrupted;
  for (auto r : {stop_reason::fail_fast, stop_reason::budget, stop_reason::deadline,
                 stop_reason::study_failed, stop_reason::interrupted})
    if (to_string(r) == label) return r;
  return stop_reason::requested;
}

std::optional<protocol::run_result> case_record::result() const {
  if (result_json.empty()) return std::nullopt;
  auto r = protocol::decode_run_result_text(result_json);
  if (!r) return std::nullopt;  // it decoded when it arrived; only a hand-made text can fail
  return std::move(*r);
}

std::ostream& operator<<(std::ostream& os, case_state s) {
  return os << to_string(s);
}
std::ostream& operator<<(std::ostream& os, stop_reason r) {
  return os << to_string(r);
}

}  // namespace mira::schedule
