// A multi-turn eval: a simulated user tells a bot something, asks follow-ups from the sample's
// script, and stops when the script is done; the bot must remember what it was told. Each case
// is scored on the bot's last reply and on how many turns it took. The `rule-bot` target is a
// few rules (a stand-in for a model), so the study runs offline; with MIRA_AGENT_MODEL set, the
// target `openai/<model>` has that model hold the dialogue (OPENAI_API_KEY, OPENAI_BASE_URL;
// listed unavailable without the key), each of its turns one request with the dialogue so far.
//
// Usage: interactive    (spawned by a host: `mira run -- interactive`)
//        MIRA_AGENT_MODEL=gpt-4o-mini mira run -- interactive
#include <mira/models/dialogue.hpp>
#include <mira/models/targets.hpp>
#include <mira/study.hpp>

#include <cstdlib>

#include <optional>
#include <string>
#include <string_view>

namespace asio = boost::asio;
namespace json = boost::json;
namespace models = mira::models;
namespace study = mira::study;
namespace scorers = mira::study::scorers;
using mira::protocol::transcript;

namespace {

// What the user said after `prefix` in an earlier message ("My name is " -> "Ada"), if anything.
std::optional<std::string> told(const study::conversation& c, std::string_view prefix) {
  for (const auto& m : c) {
    if (m.role != study::role::user || !m.text.starts_with(prefix)) continue;
    auto rest = std::string_view(m.text).substr(prefix.size());
    if (rest.ends_with('.')) rest.remove_suffix(1);
    return std::string(rest);
  }
  return std::nullopt;
}

std::string reply_to(const study::conversation& c) {
  const std::string_view said = c.back().text;
  if (said.starts_with("My name is ")) return "Nice to meet you, " + *told(c, "My name is ") + ".";
  if (said.starts_with("I live in ")) return *told(c, "I live in ") + " is a fine place.";
  if (said == "What is my name?") {
    auto name = told(c, "My name is ");
    return name ? "Your name is " + *name + "." : "You have not told me your name.";
  }
  if (said == "Where do I live?") {
    auto place = told(c, "I live in ");
    return place ? "You live in " + *place + "." : "You have not told me where you live.";
  }
  return "I see.";
}

// The agent: the bot's reply as one step of the trajectory (no model call: llm_calls stays unset).
asio::awaitable<study::agent_turn> bot(const study::conversation& c) {
  co_return study::step(study::step_source::agent, reply_to(c));
}

// The simulated user: the sample's follow-ups in order, then the end of the dialogue.
study::responder scripted_user(json::array follow_ups) {
  return
      [follow_ups](const study::conversation& c) -> asio::awaitable<std::optional<study::message>> {
        const auto asked = (c.size() - 1) / 2;  // the user messages after the opening
        if (asked >= follow_ups.size()) co_return std::nullopt;
        co_return study::message{study::role::user, std::string(follow_ups[asked].as_string())};
      };
}

study::sample dialogue(std::string id, std::string opening, json::array follow_ups,
                       std::string last_reply) {
  return {std::move(id),
          {json::string(opening)},
          json::value(std::move(last_reply)),
          {},
          json::object{{"follow_ups", std::move(follow_ups)}}};
}

}  // namespace

int main() {
  study::registry r("interactive", "0.1.0");
  r.emits_events({"turn"});
  r.emits_trajectories();
  r.default_target({"rule-bot", "local", true, {}});
  study::dialogue_options options;
  options.agent_name = "rule-bot";
  options.agent_version = "1.0";
  auto& memory = r.add("memory");
  if (const char* model = std::getenv("MIRA_AGENT_MODEL"); model && *model)
    memory.add_target("rule-bot", "local").add_target(models::openai_target(model));
  memory.description("Remembers what the user said earlier in the dialogue")
      .samples(
          {dialogue("name", "My name is Ada.", {"I live in Lyon.", "What is my name?"},
                    "Your name is Ada."),
           dialogue("place", "I live in Oslo.", {"Where do I live?"}, "You live in Oslo."),
           dialogue("not-told", "Hello.", {"What is my name?"}, "You have not told me your name.")})
      .max_turns(4)
      .score_with(scorers::succeeded())
      .score_with(scorers::matches_expected())  // the last reply
      .score_with(scorers::turns_within(4))
      .score_with(study::make_scorer(
          "answered_every_follow_up",
          [](const study::sample& s, const transcript& t) {
            return t.iterations ==
                   static_cast<std::int64_t>(s.metadata.at("follow_ups").as_array().size()) + 1;
          }))
      .subject([options](study::run_context& c) {
        auto agent = c.target().provider == "openai"
                         ? models::model_agent(models::for_target(c),
                                               "You are a helpful assistant. Answer in one short "
                                               "sentence.")
                         : study::dialogue_agent(bot);
        return study::converse(
            c, agent, scripted_user(c.sample().metadata.at("follow_ups").as_array()), options);
      });
  return study::serve_stdio(r);
}
