// Multi-turn dialogues (see dialogue.hpp): the turn loop, its trajectory, and its case form.
#include <mira/study/context.hpp>
#include <mira/study/dialogue.hpp>

#include <boost/asio/error.hpp>
#include <boost/system/system_error.hpp>

#include <algorithm>

namespace mira::study {

namespace asio = boost::asio;

namespace {

step& record(trajectory_builder& tb, const message& m, bool timestamps) {
  auto& s = tb.user(m.text);
  if (!m.parts.empty()) s.parts(m.parts);
  if (timestamps) s.at(std::chrono::system_clock::now());
  return s;
}

// The input as parts, when it is more than strings (kept beside its text); its strings become
// text parts.
json::array input_parts(const json::array& input) {
  if (std::all_of(input.begin(), input.end(), [](const json::value& v) { return v.is_string(); }))
    return {};
  json::array parts;
  for (const auto& v : input) {
    if (const auto* s = v.if_string())
      parts.push_back(json::object{{"kind", "text"}, {"text", *s}});
    else
      parts.push_back(v);
  }
  return parts;
}

}  // namespace

asio::awaitable<protocol::transcript> converse(message opening, dialogue_agent agent,
                                               responder user, dialogue_options options) {
  trajectory_builder tb(options.agent_name, options.agent_version);
  conversation convo;
  opening.role = role::user;
  record(tb, opening, options.timestamps);
  convo.push_back(std::move(opening));
  protocol::transcript t;
  const auto turns = std::max<std::int64_t>(options.max_turns, 1);
  for (std::int64_t turn = 1;; ++turn) {
    if (options.on_turn) options.on_turn(turn);
    auto answer = agent(convo);
    agent_turn reply = co_await std::move(answer);
    if (options.timestamps) reply.step.at(std::chrono::system_clock::now());
    const auto& s = tb.add(std::move(reply.step));
    convo.push_back({role::agent, s.text(), s.parts()});
    if (reply.error) {
      t.error = std::move(reply.error);
      t.error_kind = reply.error_kind;
      break;
    }
    if (turn >= turns) break;
    auto ask = user(convo);
    std::optional<message> next = co_await std::move(ask);
    if (!next) break;
    next->role = role::user;
    record(tb, *next, options.timestamps);
    convo.push_back(std::move(*next));
  }
  tb.fill(t);
  co_return t;
}

asio::awaitable<protocol::transcript> converse(run_context& c, dialogue_agent agent, responder user,
                                               dialogue_options options) {
  message opening{role::user, input_text(c.sample().input), input_parts(c.sample().input)};
  if (auto m = c.max_turns()) options.max_turns = *m;
  options.on_turn = [&c, then = std::move(options.on_turn)](std::int64_t turn) {
    // An agent or responder that never waits would not hear a cancel: it ends the dialogue here.
    if (c.cancelled()) throw boost::system::system_error(asio::error::operation_aborted);
    c.turn(turn);
    if (then) then(turn);
  };
  auto dialogue =
      converse(std::move(opening), std::move(agent), std::move(user), std::move(options));
  co_return co_await std::move(dialogue);
}

study::subject dialogue_subject(dialogue_agent agent, responder user, dialogue_options options) {
  // Not a coroutine: converse's parameters own the copies, whatever becomes of this lambda.
  return [agent = std::move(agent), user = std::move(user), options = std::move(options)](
             run_context& c) { return converse(c, agent, user, options); };
}

}  // namespace mira::study
