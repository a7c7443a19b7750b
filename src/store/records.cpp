// The case record's JSON codec (see records.hpp).
#include <mira/store/records.hpp>

#include <mira/protocol/codec.hpp>
#include <mira/protocol/json_text.hpp>

#include <boost/json/parse.hpp>

#include <cmath>

namespace mira::store {

namespace json = boost::json;
using schedule::case_state;

json::object result_object(const schedule::case_record& r) {
  boost::system::error_code ec;
  auto v = json::parse(r.result_json, ec);
  return !ec && v.is_object() ? std::move(v.as_object()) : json::object{};
}

json::object encode_case(const plan::planned_case& c, const schedule::case_record& r) {
  json::object o;
  if (r.has_result()) {
    o = result_object(r);
  } else {
    o = protocol::encode(c.params);
    o["passed"] = false;
    o["aggregate"] = 0.0;
    o["scores"] = json::array{};
    json::object t{
        {"final_response", ""},
        {"iterations", 0},
        {"tool_calls_count", 0},
        {"usage", json::object{{"input_tokens", 0}, {"output_tokens", 0}, {"cost_usd", 0.0}}}};
    if (!r.message.empty()) t["error"] = r.message;
    if (r.state == case_state::na) t["error_kind"] = "infra";
    o["transcript"] = std::move(t);
    o["skipped"] = r.state == case_state::skipped;
  }
  o["key"] = c.key;
  o["status"] = to_string(r.state);
  o["attempts"] = r.attempts;
  if (!r.retried.empty()) {
    json::array retried;
    for (auto& e : r.retried)
      retried.push_back(json::object{{"cause", e.cause}, {"message", e.message}});
    o["retried"] = std::move(retried);
  }
  if (!r.message.empty() && r.has_result()) o["host_message"] = r.message;
  if (r.attempts > 0) o["latency_ms"] = std::round(r.latency_seconds * 1e6) / 1e3;
  return o;
}

std::optional<std::string> key_of(const json::object& record) {
  if (auto* k = record.if_contains("key"); k && k->is_string()) return std::string(k->get_string());
  auto params = protocol::decode_run_params(record);
  if (!params) return std::nullopt;
  return plan::case_key(*params);
}

schedule::case_record decode_case(const json::object& saved) {
  schedule::case_record r;
  auto text = [&](std::string_view k) -> std::string {
    auto* v = saved.if_contains(k);
    return v && v->is_string() ? std::string(v->get_string()) : std::string();
  };
  auto status = text("status");
  if (auto st = schedule::case_state_from_string(status)) r.state = *st;
  if (status.empty()) {
    // A record the Rust mira CLI saved: a bare RunResult, its state read from the verdict.
    auto result = protocol::decode_run_result(saved);
    if (result) {
      bool all_na = !result->scores.empty();
      for (auto& sc : result->scores) all_na = all_na && sc.na;
      r.state = result->skipped  ? case_state::skipped
                : all_na         ? case_state::na
                : result->passed ? case_state::passed
                                 : case_state::failed;
      r.attempts = 1;
      json::object study_part = saved;
      study_part.erase("key");
      r.result_json = protocol::to_json_text(study_part);
      return r;
    }
  }
  if (auto* v = saved.if_contains("attempts"); v && v->is_int64())
    r.attempts = static_cast<int>(v->get_int64());
  if (auto* v = saved.if_contains("latency_ms"); v && v->is_number())
    r.latency_seconds = v->to_number<double>() / 1000;
  if (auto* v = saved.if_contains("retried"); v && v->is_array())
    for (auto& e : v->get_array())
      if (auto* o = e.if_object())
        r.retried.push_back(
            {std::string(o->at("cause").as_string()), std::string(o->at("message").as_string())});
  r.message = text("host_message");
  // The study's own result, without the host's fields; cases that never produced one (errors,
  // unavailable targets) were saved with a synthesised result that is not put back.
  if (r.state == case_state::passed || r.state == case_state::failed || r.state == case_state::na ||
      (r.state == case_state::skipped && r.attempts > 0)) {
    json::object study_part = saved;
    for (auto k : {"key", "status", "attempts", "retried", "latency_ms", "host_message"})
      study_part.erase(k);
    if (protocol::decode_run_result(study_part)) r.result_json = protocol::to_json_text(study_part);
  }
  if (r.message.empty() && !r.has_result()) {
    if (auto* t = saved.if_contains("transcript"); t && t->is_object())
      if (auto* e = t->get_object().if_contains("error"); e && e->is_string())
        r.message = std::string(e->get_string());
  }
  return r;
}

}  // namespace mira::store
