#include <mira/models/dialogue.hpp>
#include <mira/protocol/codec.hpp>

#include <cctype>
#include <utility>

namespace mira::models {

namespace asio = boost::asio;

request history_for(const study::conversation& c, study::role self, std::string system) {
  request r;
  r.system = std::move(system);
  for (const auto& m : c) {
    message said = message::user(m.text);
    for (const auto& p : m.parts) {
      // Parts keep their JSON form in the dialogue; one this layer cannot read is left out.
      if (auto decoded = protocol::decode_part(p)) said.content.push_back(std::move(*decoded));
    }
    if (m.role == self) said.role = "assistant";
    r.messages.push_back(std::move(said));
  }
  return r;
}

study::dialogue_agent model_agent(provider model, std::string system) {
  return [model = std::move(model), system = std::move(system)](
             const study::conversation& c) -> asio::awaitable<study::agent_turn> {
    // Named, not a temporary in the co_await expression (g++ 12: docs/toolchain-notes.md).
    auto asked = history_for(c, study::role::agent, system);
    auto reply = co_await model.complete(std::move(asked));
    study::step s(study::step_source::agent, reply.text);
    s.usage(reply.usage).model(reply.model).llm_calls(1);
    co_return s;
  };
}

bool says_stop(std::string_view reply, std::string_view stop_word) {
  auto edge = [](char ch) {
    return std::isspace(static_cast<unsigned char>(ch)) || ch == '.' || ch == '!';
  };
  while (!reply.empty() && edge(reply.front())) reply.remove_prefix(1);
  while (!reply.empty() && edge(reply.back())) reply.remove_suffix(1);
  if (reply.size() != stop_word.size() || stop_word.empty()) return false;
  for (std::size_t i = 0; i < reply.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(reply[i])) !=
        std::tolower(static_cast<unsigned char>(stop_word[i])))
      return false;
  return true;
}

study::responder simulated_user(provider model, std::string persona, std::string stop_word) {
  auto system = std::move(persona) +
                "\n\nYou are the user in this conversation, not the "
                "assistant: write the user's next message only. When the conversation has "
                "nothing more to give you, answer " +
                stop_word + " alone.";
  return [model = std::move(model), system = std::move(system), stop_word = std::move(stop_word)](
             const study::conversation& c) -> asio::awaitable<std::optional<study::message>> {
    auto asked = history_for(c, study::role::user, system);
    auto reply = co_await model.complete(std::move(asked));
    if (says_stop(reply.text, stop_word)) co_return std::nullopt;
    co_return study::message{study::role::user, std::move(reply.text), {}};
  };
}

}  // namespace mira::models
