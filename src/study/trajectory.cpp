// The typed ATIF builder (see trajectory.hpp): steps held typed, written as ATIF-v1.7 JSON once.
#include <mira/protocol/trajectory.hpp>
#include <mira/study/trajectory.hpp>

#include <cstdio>
#include <ctime>

namespace mira::study {

namespace {

void add_usage(protocol::usage& to, const protocol::usage& u) {
  to.input_tokens += u.input_tokens;
  to.output_tokens += u.output_tokens;
  to.cache_read_tokens += u.cache_read_tokens;
  to.reasoning_tokens += u.reasoning_tokens;
  to.cost_usd += u.cost_usd;
}

std::string iso8601(std::chrono::system_clock::time_point t) {
  using namespace std::chrono;
  const auto secs = floor<seconds>(t);
  const auto millis = duration_cast<milliseconds>(t - secs).count();
  const std::time_t tt = system_clock::to_time_t(secs);
  std::tm tm{};
  ::gmtime_r(&tt, &tm);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                static_cast<int>(millis));
  return buf;
}

}  // namespace

std::string_view to_string(step_source s) noexcept {
  switch (s) {
    case step_source::user:
      return "user";
    case step_source::system:
      return "system";
    case step_source::agent:
      break;
  }
  return "agent";
}

step::step(step_source source, std::string message)
    : source_(source), message_(std::move(message)) {}

step& step::message(std::string text) {
  message_ = std::move(text);
  return *this;
}

step& step::append(std::string_view text) {
  message_ += text;
  return *this;
}

step& step::parts(json::array parts) {
  parts_ = std::move(parts);
  return *this;
}

step& step::reasoning(std::string text) {
  reasoning_ = std::move(text);
  return *this;
}

step& step::call(std::string name, json::value arguments, std::string id) {
  if (id.empty()) id = "call-" + std::to_string(calls_.size() + 1);
  calls_.push_back({std::move(id), std::move(name), std::move(arguments)});
  return *this;
}

step& step::result(std::string content, std::string call_id) {
  if (call_id.empty() && !calls_.empty()) call_id = calls_.back().id;
  results_.push_back({std::move(call_id), std::move(content)});
  return *this;
}

step& step::usage(const protocol::usage& u) {
  add_usage(usage_, u);
  return *this;
}

step& step::model(std::string name) {
  model_ = std::move(name);
  return *this;
}

step& step::llm_calls(std::int64_t n) {
  llm_calls_ = n;
  return *this;
}

step& step::at(std::chrono::system_clock::time_point t) {
  timestamp_ = iso8601(t);
  return *this;
}

step& step::extra(json::object members) {
  for (auto& m : members) extra_[m.key()] = std::move(m.value());
  return *this;
}

json::object step::to_json(std::int64_t step_id) const {
  json::object o{{"step_id", step_id}, {"source", to_string(source_)}, {"message", message_}};
  if (timestamp_) o["timestamp"] = *timestamp_;
  if (model_) o["model_name"] = *model_;
  if (reasoning_) o["reasoning_content"] = *reasoning_;
  if (!calls_.empty()) {
    json::array calls;
    for (const auto& c : calls_)
      calls.push_back(json::object{
          {"tool_call_id", c.id}, {"function_name", c.name}, {"arguments", c.arguments}});
    o["tool_calls"] = std::move(calls);
  }
  if (!results_.empty()) {
    json::array results;
    for (const auto& r : results_) {
      json::object one{{"content", r.content}};
      if (!r.call_id.empty()) one["source_call_id"] = r.call_id;
      results.push_back(std::move(one));
    }
    o["observation"] = json::object{{"results", std::move(results)}};
  }
  if (!usage_.is_default()) {
    json::object m{{"prompt_tokens", usage_.input_tokens},
                   {"completion_tokens", usage_.output_tokens},
                   {"cost_usd", usage_.cost_usd}};
    if (usage_.cache_read_tokens) m["cached_tokens"] = usage_.cache_read_tokens;
    if (usage_.reasoning_tokens)
      m["extra"] = json::object{{"reasoning_tokens", usage_.reasoning_tokens}};
    o["metrics"] = std::move(m);
  }
  if (llm_calls_) o["llm_call_count"] = *llm_calls_;
  json::object extra = extra_;
  if (!parts_.empty()) extra["parts"] = parts_;
  if (!extra.empty()) o["extra"] = std::move(extra);
  return o;
}

trajectory_builder::trajectory_builder(std::string agent_name, std::string agent_version)
    : name_(std::move(agent_name)), version_(std::move(agent_version)) {}

trajectory_builder& trajectory_builder::model(std::string name) {
  model_ = std::move(name);
  return *this;
}

trajectory_builder& trajectory_builder::session(std::string id) {
  session_ = std::move(id);
  return *this;
}

trajectory_builder& trajectory_builder::tool_definitions(json::array definitions) {
  tool_definitions_ = std::move(definitions);
  return *this;
}

step& trajectory_builder::user(std::string message) {
  return add(step(step_source::user, std::move(message)));
}

step& trajectory_builder::agent(std::string message) {
  return add(step(step_source::agent, std::move(message)));
}

step& trajectory_builder::system(std::string message) {
  return add(step(step_source::system, std::move(message)));
}

step& trajectory_builder::add(step s) {
  return steps_.emplace_back(std::move(s));
}

step* trajectory_builder::last_agent() noexcept {
  for (auto it = steps_.rbegin(); it != steps_.rend(); ++it)
    if (it->source() == step_source::agent) return &*it;
  return nullptr;
}

protocol::usage trajectory_builder::total_usage() const {
  protocol::usage total;
  for (const auto& s : steps_) add_usage(total, s.usage());
  return total;
}

json::object trajectory_builder::to_json() const {
  json::object agent{{"name", name_}, {"version", version_}};
  if (model_) agent["model_name"] = *model_;
  if (!tool_definitions_.empty()) agent["tool_definitions"] = tool_definitions_;
  json::array steps;
  steps.reserve(steps_.size());
  std::int64_t id = 0;
  for (const auto& s : steps_) steps.push_back(s.to_json(++id));
  const auto u = total_usage();
  json::object metrics{{"total_prompt_tokens", u.input_tokens},
                       {"total_completion_tokens", u.output_tokens},
                       {"total_cost_usd", u.cost_usd},
                       {"total_steps", id}};
  if (u.cache_read_tokens) metrics["total_cached_tokens"] = u.cache_read_tokens;
  if (u.reasoning_tokens) metrics["extra"] = json::object{{"reasoning_tokens", u.reasoning_tokens}};
  json::object doc{{"schema_version", "ATIF-v1.7"}, {"agent", std::move(agent)}};
  if (session_) doc["session_id"] = *session_;
  doc["steps"] = std::move(steps);
  doc["final_metrics"] = std::move(metrics);
  return doc;
}

void trajectory_builder::fill(protocol::transcript& t) const {
  t.trajectory = json::value(to_json());
  // The document is written here, so the projection cannot fail on it.
  protocol::project_trajectory(t);
}

}  // namespace mira::study
