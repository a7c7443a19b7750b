// Dialogues held by models: the agent of a study::converse dialogue as a model, and a simulated
// user played by one. Each side sees the dialogue as its own chat history: its messages are the
// "assistant" ones, the other side's the "user" ones.
#pragma once

#include <mira/models/provider.hpp>
#include <mira/study/dialogue.hpp>

#include <string>
#include <string_view>

namespace mira::models {

/// The dialogue so far as the chat history of the side `self` (its messages "assistant", the
/// other side's "user", each one text part, with its other parts when it has some), after
/// `system` as the request's system prompt.
request history_for(const study::conversation& c, study::role self, std::string system = {});

/// The agent of a dialogue as a model: each turn one request with the dialogue so far
/// (history_for the agent), its reply the turn's step with the reply's usage and model. What
/// the provider fails with is thrown as throw_error() says (a rate limit: the case's infra
/// error, which the host retries).
study::dialogue_agent model_agent(provider model, std::string system = {});

/// Whether a simulated user's reply ends the dialogue: `stop_word` alone, ignoring case, white
/// space and a full stop or exclamation mark around it ("DONE", " done. ").
bool says_stop(std::string_view reply, std::string_view stop_word);

/// A simulated user played by a model: `persona` (who the user is, what they want, when they
/// are satisfied) is its system prompt, with an instruction to answer `stop_word` alone once
/// the conversation has nothing more to give; it is given the dialogue with the roles turned
/// around (history_for the user) and its reply is the user's next message, or the end of the
/// dialogue when it says_stop().
study::responder simulated_user(provider model, std::string persona,
                                std::string stop_word = "DONE");

}  // namespace mira::models
