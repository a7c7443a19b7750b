// Multi-turn dialogues: an agent and a simulated user (a responder) take turns, from the
// sample's input, until the responder stops or the eval's max_turns is reached. Each message is
// a step of the transcript's ATIF trajectory, so the scorers see the last reply as
// final_response and the agent's turns as iterations. Both sides are plain coroutine functions
// of the conversation so far: a scripted bot, a rule, or a model call.
#pragma once

#include <mira/protocol/types.hpp>
#include <mira/study/registry.hpp>
#include <mira/study/trajectory.hpp>

#include <boost/asio/awaitable.hpp>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace mira::study {

class run_context;

/// Who said a message.
enum class role { user, agent };

/// One message of a dialogue: its text, and its multimodal parts (protocol::part's JSON form)
/// when it has more than text.
struct message {
  study::role role = role::user;
  std::string text{};
  json::array parts{};
};

/// The messages so far, the first the opening user message.
using conversation = std::vector<message>;

/// An agent's turn: its step (the reply as the message, with any reasoning, tool calls, results
/// and usage), or the error that ends the dialogue there.
struct agent_turn {
  agent_turn() = default;
  agent_turn(study::step s) : step(std::move(s)) {}  // NOLINT(google-explicit-constructor)

  study::step step{step_source::agent};
  /// Set when the turn failed (a provider outage: error_kind infra): the dialogue ends, and the
  /// transcript carries the error.
  std::optional<std::string> error{};
  protocol::error_kind error_kind = protocol::error_kind::subject;
};

/// The agent: given the conversation (its last message the user's), its turn.
using dialogue_agent = std::function<boost::asio::awaitable<agent_turn>(const conversation&)>;
/// The simulated user: given the conversation (its last message the agent's reply), the next
/// user message, or nullopt to end the dialogue.
using responder =
    std::function<boost::asio::awaitable<std::optional<message>>(const conversation&)>;

struct dialogue_options {
  /// The most agent turns, when the eval sets no max_turns (the eval's wins: it is what `list`
  /// tells the host). At least 1 turn is taken.
  std::int64_t max_turns = 12;
  /// The trajectory's agent.
  std::string agent_name = "agent";
  std::string agent_version = "0";
  /// Called as each agent turn starts, with its number (1, 2, ...).
  std::function<void(std::int64_t)> on_turn{};
  /// Each step stamped with the time it was added (off for byte-stable trajectories).
  bool timestamps = true;
};

/// Runs a dialogue from `opening`: the agent answers, the responder replies, and so on, for at
/// most options.max_turns agent turns. The transcript holds the trajectory (one step per
/// message: user steps for the opening and the responder's messages, the agent's steps as it
/// returned them) and its projection: final_response is the last reply, iterations the agent's
/// turns, tool_calls and usage those of its steps. An agent turn with an error ends the dialogue
/// with transcript.error and error_kind set. Whatever the agent or the responder throws
/// (a cancellation's operation_aborted included) propagates.
boost::asio::awaitable<protocol::transcript> converse(message opening, dialogue_agent agent,
                                                      responder user, dialogue_options options);

/// The same for a case: the opening is the sample's input (input_text, its parts kept), at most
/// the eval's max_turns (else options.max_turns) agent turns, and a `turn` event sent as each
/// starts (declare it: registry::emits_events({"turn"})) before options.on_turn is called.
boost::asio::awaitable<protocol::transcript> converse(run_context& c, dialogue_agent agent,
                                                      responder user, dialogue_options options);

/// A subject that runs converse(c, ...) for each case.
study::subject dialogue_subject(dialogue_agent agent, responder user, dialogue_options options);

}  // namespace mira::study
