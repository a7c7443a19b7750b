// A typed ATIF trajectory for subjects written in C++: steps (user, agent, system) with their
// message, reasoning, tool calls, tool results, usage and time, added in order and written as the
// ATIF-v1.7 document a transcript's `trajectory` carries, with the flat fields projected from it.
// Scorers that read arguments or observations (tool_called_with, observation_contains) need it.
#pragma once

#include <mira/protocol/types.hpp>

#include <chrono>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mira::study {

namespace json = boost::json;

/// Who a step is from: ATIF's `source`.
enum class step_source { user, agent, system };

/// "user", "agent" or "system".
std::string_view to_string(step_source s) noexcept;

/// A tool call an agent step made: ATIF's ToolCall.
struct tool_call {
  std::string id{};    ///< tool_call_id; step::call numbers it ("call-1", ...) when empty
  std::string name{};  ///< function_name
  json::value arguments = json::object();
};

/// What a tool gave back: one result of ATIF's `observation`, tied to its call by id.
struct tool_result {
  std::string call_id{};  ///< source_call_id; empty when the result answers no call
  std::string content{};
};

/// One step. Its setters return *this, to be chained:
///
///     tb.agent("Reading the file.").reasoning("...").call("read", {{"path", "a.txt"}})
///         .result("hello").usage({.input_tokens = 120, .output_tokens = 30});
class step {
 public:
  explicit step(step_source source = step_source::agent, std::string message = {});

  /// The step's text (an agent step's is its reply; the last agent step's is the transcript's
  /// final_response).
  step& message(std::string text);
  /// Text added to the message (a streamed delta).
  step& append(std::string_view text);
  /// Multimodal parts of the message (protocol::part's JSON form), beside its text. ATIF's own
  /// content parts hold only text and image paths, so these ride the step's `extra.parts`.
  step& parts(json::array parts);
  /// The agent's reasoning (reasoning_content).
  step& reasoning(std::string text);
  /// A tool call; an empty id is numbered in the step ("call-1", "call-2", ...), which is where
  /// ATIF ties a result to its call.
  step& call(std::string name, json::value arguments = json::object(), std::string id = {});
  /// A tool's result; an empty call_id answers the step's last call.
  step& result(std::string content, std::string call_id = {});
  /// Adds to the step's usage (ATIF step metrics: prompt, completion and cached tokens, cost;
  /// reasoning tokens in metrics.extra).
  step& usage(const protocol::usage& u);
  /// The model that made this step (model_name), when it is not the trajectory's.
  step& model(std::string name);
  /// How many model calls the step stands for (llm_call_count); 0 marks an agent step that is
  /// not a model turn (a scripted dispatch), which the projection does not count as an iteration.
  step& llm_calls(std::int64_t n);
  /// When the step happened, written as ISO 8601 UTC with milliseconds.
  step& at(std::chrono::system_clock::time_point t);
  /// Members of the step's `extra` (merged; `parts` is the message's parts).
  step& extra(json::object members);

  /// What the step holds, as set.
  step_source source() const noexcept { return source_; }
  const std::string& text() const noexcept { return message_; }
  const json::array& parts() const noexcept { return parts_; }
  const std::vector<tool_call>& calls() const noexcept { return calls_; }
  const std::vector<tool_result>& results() const noexcept { return results_; }
  const protocol::usage& usage() const noexcept { return usage_; }

  /// The ATIF step object, numbered `step_id`.
  json::object to_json(std::int64_t step_id) const;

 private:
  step_source source_;
  std::string message_;
  json::array parts_;
  std::optional<std::string> reasoning_;
  std::vector<tool_call> calls_;
  std::vector<tool_result> results_;
  protocol::usage usage_;
  std::optional<std::string> model_;
  std::optional<std::int64_t> llm_calls_;
  std::optional<std::string> timestamp_;
  json::object extra_;
};

/// An ATIF trajectory built step by step. Steps are numbered 1, 2, ... in the order added;
/// references returned by user(), agent(), system() and add() stay valid as more are added.
class trajectory_builder {
 public:
  /// The agent that produced the trajectory (ATIF's required agent name and version).
  explicit trajectory_builder(std::string agent_name, std::string agent_version = "0");

  /// The agent's model (agent.model_name).
  trajectory_builder& model(std::string name);
  /// A session id (session_id).
  trajectory_builder& session(std::string id);
  /// The tools the agent had (agent.tool_definitions, e.g. OpenAI function schemas).
  trajectory_builder& tool_definitions(json::array definitions);

  /// Adds a user, agent or system step with this message, and returns it for its setters.
  step& user(std::string message);
  step& agent(std::string message = {});
  step& system(std::string message);
  /// Adds a step built apart (an agent function's, say).
  step& add(step s);

  /// The steps, in order (step i is numbered i + 1).
  const std::deque<step>& steps() const noexcept { return steps_; }
  /// The last agent step, or nullptr when there is none.
  step* last_agent() noexcept;
  /// The sum of the steps' usage.
  protocol::usage total_usage() const;

  /// The ATIF-v1.7 document: schema_version, agent, steps, and final_metrics (the steps' usage
  /// summed, and their count).
  json::object to_json() const;
  /// Sets t.trajectory to to_json() and fills the flat fields from it (final_response,
  /// tool_calls, tool_calls_count, iterations, usage) as protocol::project_trajectory does:
  /// a field the subject already set stays.
  void fill(protocol::transcript& t) const;

 private:
  std::string name_;
  std::string version_;
  std::optional<std::string> model_;
  std::optional<std::string> session_;
  json::array tool_definitions_;
  std::deque<step> steps_;
};

}  // namespace mira::study
