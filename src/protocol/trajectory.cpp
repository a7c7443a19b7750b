// ATIF trajectory projection (see trajectory.hpp).
#include <mira/protocol/trajectory.hpp>

namespace mira::protocol {

namespace {

bool accepted_schema_version(std::string_view v) {
  constexpr std::string_view prefix = "ATIF-v1";
  if (v.substr(0, prefix.size()) != prefix) return false;
  auto rest = v.substr(prefix.size());
  return rest.empty() || rest.front() == '.';
}

std::int64_t int_field(const json::object& o, std::string_view key) {
  auto* v = o.if_contains(key);
  if (!v) return 0;
  if (auto* i = v->if_int64()) return *i;
  if (auto* u = v->if_uint64()) return static_cast<std::int64_t>(*u);
  if (auto* d = v->if_double()) return static_cast<std::int64_t>(*d);
  return 0;
}

double num_field(const json::object& o, std::string_view key) {
  auto* v = o.if_contains(key);
  return v && v->is_number() ? v->to_number<double>() : 0.0;
}

std::int64_t extra_reasoning(const json::object& o) {
  auto* extra = o.if_contains("extra");
  return extra && extra->is_object() ? int_field(extra->get_object(), "reasoning_tokens") : 0;
}

// A step message is text or (ATIF >= 1.6) a list of content parts: text parts joined by '\n'.
std::string message_text(const json::value& m) {
  if (auto* s = m.if_string()) return std::string(*s);
  std::string out;
  if (auto* a = m.if_array()) {
    bool first = true;
    for (auto& p : *a) {
      auto* o = p.if_object();
      if (!o) continue;
      auto* type = o->if_contains("type");
      auto* text = o->if_contains("text");
      if (!type || !type->is_string() || type->get_string() != "text") continue;
      if (!first) out += '\n';
      first = false;
      if (text && text->is_string()) out += text->get_string();
    }
  }
  return out;
}

}  // namespace

decoded<trajectory_projection> project(const json::value& trajectory) {
  auto* t = trajectory.if_object();
  if (!t) return tl::make_unexpected(decode_error{"", "trajectory must be an object"});
  auto* sv = t->if_contains("schema_version");
  if (!sv || !sv->is_string())
    return tl::make_unexpected(decode_error{"schema_version", "missing ATIF schema_version"});
  if (!accepted_schema_version(sv->get_string()))
    return tl::make_unexpected(decode_error{
        "schema_version", "unsupported trajectory format \"" + std::string(sv->get_string()) +
                              "\" (this host reads ATIF-v1.x)"});
  trajectory_projection p;
  const json::array* steps = nullptr;
  if (auto* s = t->if_contains("steps")) {
    steps = s->if_array();
    if (!steps) return tl::make_unexpected(decode_error{"steps", "expected an array"});
  }
  usage step_sum;
  if (steps) {
    for (std::size_t i = 0; i < steps->size(); ++i) {
      auto* step = (*steps)[i].if_object();
      if (!step)
        return tl::make_unexpected(
            decode_error{"steps[" + std::to_string(i) + "]", "expected an object"});
      auto* source = step->if_contains("source");
      bool agent = source && source->is_string() && source->get_string() == "agent";
      if (agent) {
        if (auto* m = step->if_contains("message"))
          p.final_response = message_text(*m);
        else
          p.final_response.clear();
        auto* llm = step->if_contains("llm_call_count");
        bool counted =
            !llm || llm->is_null() || !(llm->is_number() && llm->to_number<double>() == 0);
        if (counted) ++p.iterations;
      }
      if (auto* calls = step->if_contains("tool_calls"); calls && calls->is_array()) {
        for (auto& c : calls->get_array()) {
          auto* co = c.if_object();
          auto* name = co ? co->if_contains("function_name") : nullptr;
          if (name && name->is_string()) p.tool_calls.emplace_back(name->get_string());
        }
      }
      if (auto* m = step->if_contains("metrics"); m && m->is_object()) {
        auto& mo = m->get_object();
        step_sum.input_tokens += int_field(mo, "prompt_tokens");
        step_sum.output_tokens += int_field(mo, "completion_tokens");
        step_sum.cache_read_tokens += int_field(mo, "cached_tokens");
        step_sum.reasoning_tokens += extra_reasoning(mo);
        step_sum.cost_usd += num_field(mo, "cost_usd");
      }
    }
  }
  if (auto* fm = t->if_contains("final_metrics"); fm && fm->is_object()) {
    auto& f = fm->get_object();
    p.usage.input_tokens = int_field(f, "total_prompt_tokens");
    p.usage.output_tokens = int_field(f, "total_completion_tokens");
    p.usage.cache_read_tokens = int_field(f, "total_cached_tokens");
    p.usage.reasoning_tokens = extra_reasoning(f);
    p.usage.cost_usd = num_field(f, "total_cost_usd");
  } else {
    p.usage = step_sum;
  }
  return p;
}

namespace {

bool is_default(const json::value* v) {
  if (!v || v->is_null()) return true;
  if (auto* s = v->if_string()) return s->empty();
  if (auto* a = v->if_array()) return a->empty();
  if (v->is_number()) return v->to_number<double>() == 0;
  return false;
}

bool usage_is_default(const json::value* v) {
  if (!v || v->is_null()) return true;
  auto* o = v->if_object();
  if (!o) return false;
  for (auto& kv : *o)
    if (!is_default(&kv.value())) return false;
  return true;
}

}  // namespace

std::optional<decode_error> project_trajectory(json::object& transcript) {
  auto* traj = transcript.if_contains("trajectory");
  if (!traj || traj->is_null()) return std::nullopt;
  auto p = project(*traj);
  if (!p) return std::move(p.error());
  if (is_default(transcript.if_contains("final_response")))
    transcript["final_response"] = p->final_response;
  if (is_default(transcript.if_contains("tool_calls"))) {
    json::array calls;
    for (auto& c : p->tool_calls) calls.emplace_back(c);
    transcript["tool_calls"] = std::move(calls);
  }
  if (is_default(transcript.if_contains("tool_calls_count")))
    transcript["tool_calls_count"] = static_cast<std::int64_t>(p->tool_calls.size());
  if (is_default(transcript.if_contains("iterations"))) transcript["iterations"] = p->iterations;
  if (usage_is_default(transcript.if_contains("usage"))) {
    transcript["usage"] = json::object{{"input_tokens", p->usage.input_tokens},
                                       {"output_tokens", p->usage.output_tokens},
                                       {"cache_read_tokens", p->usage.cache_read_tokens},
                                       {"reasoning_tokens", p->usage.reasoning_tokens},
                                       {"cost_usd", p->usage.cost_usd}};
  }
  return std::nullopt;
}

std::optional<decode_error> project_trajectory(transcript& t) {
  if (!t.trajectory || t.trajectory->is_null()) return std::nullopt;
  auto p = project(*t.trajectory);
  if (!p) return std::move(p.error());
  // In the order and by the rule of the JSON overload above, tool_calls_count included: the
  // projection's count, not that of a tool_calls list the producer set.
  if (t.final_response.empty()) t.final_response = std::move(p->final_response);
  const auto count = static_cast<std::int64_t>(p->tool_calls.size());
  if (t.tool_calls.empty()) t.tool_calls = std::move(p->tool_calls);
  if (t.tool_calls_count == 0) t.tool_calls_count = count;
  if (t.iterations == 0) t.iterations = p->iterations;
  if (t.usage.is_default()) t.usage = p->usage;
  return std::nullopt;
}

json::object synthesize_trajectory(const transcript_summary& t, std::string_view agent_name,
                                   std::string_view agent_version) {
  json::array steps;
  std::int64_t id = 0;
  for (auto& tool : t.tool_calls) {
    ++id;
    steps.push_back(json::object{
        {"step_id", id},
        {"source", "agent"},
        {"message", ""},
        {"tool_calls", json::array{json::object{{"tool_call_id", "call-" + std::to_string(id)},
                                                {"function_name", tool},
                                                {"arguments", json::object{}}}}}});
  }
  ++id;
  steps.push_back(
      json::object{{"step_id", id}, {"source", "agent"}, {"message", t.final_response}});
  json::object metrics{{"total_prompt_tokens", t.usage.input_tokens},
                       {"total_completion_tokens", t.usage.output_tokens},
                       {"total_cost_usd", t.usage.cost_usd},
                       {"total_steps", id}};
  if (t.usage.cache_read_tokens) metrics["total_cached_tokens"] = t.usage.cache_read_tokens;
  if (t.usage.reasoning_tokens)
    metrics["extra"] = json::object{{"reasoning_tokens", t.usage.reasoning_tokens}};
  return {{"schema_version", "ATIF-v1.7"},
          {"agent", json::object{{"name", agent_name}, {"version", agent_version}}},
          {"steps", std::move(steps)},
          {"final_metrics", std::move(metrics)}};
}

}  // namespace mira::protocol
