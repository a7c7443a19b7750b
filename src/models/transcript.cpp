// A model's replies recorded in a transcript (see transcript.hpp).
#include <mira/models/transcript.hpp>
#include <mira/version.hpp>

#include <boost/json/serialize.hpp>

namespace mira::models {

namespace {

json::object& trajectory_of(protocol::transcript& t, const reply& r) {
  if (!t.trajectory || !t.trajectory->is_object()) {
    json::object agent{{"name", "mira-cpp models"}, {"version", mira::version}};
    if (!r.model.empty()) agent["model_name"] = r.model;
    t.trajectory = json::object{
        {"schema_version", "ATIF-v1.7"}, {"agent", std::move(agent)}, {"steps", json::array{}}};
  }
  auto& doc = t.trajectory->get_object();
  if (!doc["steps"].is_array()) doc["steps"] = json::array{};
  return doc;
}

// A message's content as an ATIF step message: its text, or (with media) content parts; media
// that is not at a URL is named in a text part, since ATIF keeps no bytes.
json::value step_message(const message& m) {
  bool text_only = true;
  for (const auto& p : m.content) text_only = text_only && p.kind == "text";
  if (text_only) return json::value(m.text());
  json::array parts;
  for (const auto& p : m.content) {
    if (p.kind == "text") {
      parts.push_back(json::object{{"type", "text"}, {"text", p.text}});
    } else if (p.kind == "image" && p.uri && !p.uri->starts_with("data:")) {
      parts.push_back(
          json::object{{"type", "image"},
                       {"source", json::object{{"media_type", p.media_type}, {"path", *p.uri}}}});
    } else {
      std::string named = "[" + p.kind + (p.media_type.empty() ? "" : " " + p.media_type) +
                          (p.name.empty() ? "" : " " + p.name) + "]";
      if (p.json) named = json::serialize(*p.json);
      parts.push_back(json::object{{"type", "text"}, {"text", std::move(named)}});
    }
  }
  return parts;
}

json::array tool_calls_of(const std::vector<tool_call>& calls) {
  json::array out;
  for (const auto& c : calls)
    out.push_back(json::object{
        {"tool_call_id", c.id}, {"function_name", c.name}, {"arguments", c.arguments}});
  return out;
}

bool has_call(const json::object& step, std::string_view id) {
  const auto* calls = step.if_contains("tool_calls");
  if (!calls || !calls->is_array()) return false;
  for (const auto& c : calls->get_array()) {
    const auto* o = c.if_object();
    const auto* call_id = o ? o->if_contains("tool_call_id") : nullptr;
    if (call_id && call_id->is_string() && call_id->get_string() == id) return true;
  }
  return false;
}

// A tool's result as an observation of the step whose call it answers, else of the last agent
// step; dropped when there is no agent step.
void observe(json::array& steps, const message& m) {
  json::object* into = nullptr;
  for (auto it = steps.rbegin(); it != steps.rend() && !into; ++it)
    if (auto* s = it->if_object(); s && has_call(*s, m.tool_call_id)) into = s;
  for (auto it = steps.rbegin(); it != steps.rend() && !into; ++it)
    if (auto* s = it->if_object(); s && s->contains("source") && s->at("source") == "agent")
      into = s;
  if (!into) return;
  auto& observation = (*into)["observation"];
  if (!observation.is_object()) observation = json::object{{"results", json::array{}}};
  auto& results = observation.get_object()["results"];
  if (!results.is_array()) results = json::array{};
  results.get_array().push_back(
      json::object{{"source_call_id", m.tool_call_id}, {"content", step_message(m)}});
}

void add_step(json::array& steps, json::object step) {
  json::object numbered{{"step_id", static_cast<std::int64_t>(steps.size() + 1)}};
  for (auto& kv : step) numbered[kv.key()] = std::move(kv.value());
  steps.push_back(std::move(numbered));
}

void record_messages(json::array& steps, const request& asked) {
  std::size_t first = 0;
  if (steps.empty()) {
    if (!asked.system.empty()) add_step(steps, {{"source", "system"}, {"message", asked.system}});
  } else {
    for (std::size_t i = asked.messages.size(); i-- > 0;)
      if (asked.messages[i].role == "assistant") {
        first = i + 1;
        break;
      }
  }
  for (std::size_t i = first; i < asked.messages.size(); ++i) {
    const auto& m = asked.messages[i];
    if (m.role == "tool") {
      observe(steps, m);
    } else if (m.role == "assistant") {
      json::object step{{"source", "agent"},
                        {"message", step_message(m)},
                        {"is_copied_context", true},
                        {"llm_call_count", 0}};
      if (!m.tool_calls.empty()) step["tool_calls"] = tool_calls_of(m.tool_calls);
      add_step(steps, std::move(step));
    } else {
      add_step(steps, {{"source", m.role}, {"message", step_message(m)}});
    }
  }
}

json::object metrics_of(const protocol::usage& u) {
  json::object m{{"prompt_tokens", u.input_tokens}, {"completion_tokens", u.output_tokens}};
  if (u.cache_read_tokens) m["cached_tokens"] = u.cache_read_tokens;
  if (u.cost_usd != 0.0) m["cost_usd"] = u.cost_usd;
  if (u.reasoning_tokens) m["extra"] = json::object{{"reasoning_tokens", u.reasoning_tokens}};
  return m;
}

void add_to(json::object& o, std::string_view key, std::int64_t n) {
  auto& v = o[key];
  v = (v.is_int64() ? v.get_int64() : 0) + n;
}

void add_totals(json::object& doc, const protocol::usage& u, std::size_t steps) {
  auto& fm = doc["final_metrics"];
  if (!fm.is_object()) fm = json::object{};
  auto& f = fm.get_object();
  add_to(f, "total_prompt_tokens", u.input_tokens);
  add_to(f, "total_completion_tokens", u.output_tokens);
  add_to(f, "total_cached_tokens", u.cache_read_tokens);
  auto& cost = f["total_cost_usd"];
  cost = (cost.is_number() ? cost.to_number<double>() : 0.0) + u.cost_usd;
  f["total_steps"] = static_cast<std::int64_t>(steps);
  if (u.reasoning_tokens) {
    auto& extra = f["extra"];
    if (!extra.is_object()) extra = json::object{};
    add_to(extra.get_object(), "reasoning_tokens", u.reasoning_tokens);
  }
}

void record_reply(protocol::transcript& t, json::object& doc, const reply& r) {
  auto& steps = doc["steps"].get_array();
  json::object step{{"source", "agent"}, {"message", r.text}, {"llm_call_count", 1}};
  if (!r.reasoning.empty()) step["reasoning_content"] = r.reasoning;
  if (!r.tool_calls.empty()) step["tool_calls"] = tool_calls_of(r.tool_calls);
  if (!r.model.empty()) step["model_name"] = r.model;
  step["metrics"] = metrics_of(r.usage);
  json::object extra;
  if (!r.finish_reason.empty()) extra["finish_reason"] = r.finish_reason;
  if (r.from_cache) extra["from_cache"] = true;
  if (!extra.empty()) step["extra"] = std::move(extra);
  add_step(steps, std::move(step));
  add_totals(doc, r.usage, steps.size());

  t.final_response = r.text;
  for (const auto& c : r.tool_calls) t.tool_calls.push_back(c.name);
  t.tool_calls_count += static_cast<std::int64_t>(r.tool_calls.size());
  t.iterations += 1;
  t.usage.input_tokens += r.usage.input_tokens;
  t.usage.output_tokens += r.usage.output_tokens;
  t.usage.cache_read_tokens += r.usage.cache_read_tokens;
  t.usage.reasoning_tokens += r.usage.reasoning_tokens;
  t.usage.cost_usd += r.usage.cost_usd;
  if (r.from_cache) {
    auto metadata = t.metadata.get();
    add_to(metadata, "cache_hits", 1);
    t.metadata = metadata;
  }
}

}  // namespace

void record(protocol::transcript& t, const request& asked, const reply& r) {
  auto& doc = trajectory_of(t, r);
  record_messages(doc["steps"].get_array(), asked);
  record_reply(t, doc, r);
}

void record(protocol::transcript& t, const reply& r) {
  record_reply(t, trajectory_of(t, r), r);
}

}  // namespace mira::models
