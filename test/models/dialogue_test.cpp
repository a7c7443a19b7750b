// Dialogues held by models: each side's history, the stop word, and a dialogue whose agent and
// simulated user are both models of the local provider-shaped server (its echo rule repeats the
// last user text, so a message's way through both sides shows in the replies).
#include <mira/models/dialogue.hpp>

#include "common/run_co.hpp"
#include "models/fake_server.hpp"
#include "models/request_counts.hpp"

#include <boost/json.hpp>
#include <boost/test/unit_test.hpp>

namespace asio = boost::asio;
namespace json = boost::json;
namespace models = mira::models;
namespace study = mira::study;
using mira::test::provider_fixture;
using mira::test::run_co;

BOOST_AUTO_TEST_SUITE(models_dialogue)

BOOST_AUTO_TEST_CASE(each_side_sees_its_own_messages_as_the_assistants) {
  study::conversation c{{study::role::user, "hi", {}},
                        {study::role::agent, "hello", {}},
                        {study::role::user, "bye", {}}};
  auto agent = models::history_for(c, study::role::agent, "be brief");
  BOOST_TEST(agent.system == "be brief");
  BOOST_REQUIRE(agent.messages.size() == 3u);
  BOOST_TEST(agent.messages[0].role == "user");
  BOOST_TEST(agent.messages[1].role == "assistant");
  BOOST_TEST(agent.messages[2].role == "user");
  BOOST_TEST(agent.messages[1].content.at(0).text == "hello");
  auto user = models::history_for(c, study::role::user);
  BOOST_TEST(user.messages[0].role == "assistant");
  BOOST_TEST(user.messages[1].role == "user");
  BOOST_TEST(user.messages[2].role == "assistant");
}

BOOST_AUTO_TEST_CASE(the_stop_word_alone_ends_the_dialogue) {
  BOOST_TEST(models::says_stop("DONE", "DONE"));
  BOOST_TEST(models::says_stop("  done.\n", "DONE"));
  BOOST_TEST(models::says_stop("Done!", "DONE"));
  BOOST_TEST(!models::says_stop("I am done.", "DONE"));
  BOOST_TEST(!models::says_stop("DONE, thanks", "DONE"));
  BOOST_TEST(!models::says_stop("", "DONE"));
  BOOST_TEST(!models::says_stop("", ""));
}

BOOST_FIXTURE_TEST_CASE(a_model_agent_and_a_model_user_hold_a_dialogue, provider_fixture,
                        *boost::unit_test::precondition(mira::test::needs_openssl)) {
  models::provider_options o;
  o.api_key = "sk-test";
  o.base_url = url("/v1");
  o.cache = models::response_cache();
  models::provider model(models::api::openai_chat, "talk-1", o);
  study::dialogue_options options;
  options.max_turns = 3;
  options.timestamps = false;
  auto t = run_co([&](asio::io_context&) -> asio::awaitable<mira::protocol::transcript> {
    // Named, not temporaries in the co_await expression (g++ 12: docs/toolchain-notes.md).
    study::message opening{study::role::user, "hi", {}};
    auto agent = models::model_agent(model);
    auto user = models::simulated_user(model, "You want to say hi.");
    co_return co_await study::converse(std::move(opening), std::move(agent), std::move(user),
                                       options);
  });
  // Three agent turns, two user turns between them: five requests, each echoing the other
  // side's last message.
  BOOST_TEST(t.iterations == 3);
  BOOST_TEST(t.final_response == "echo: echo: echo: echo: echo: hi");
  BOOST_TEST(mira::test::request_counts(*this) == (json::object{{"/v1/chat/completions", 5}}));
  BOOST_TEST(t.usage.input_tokens > 0);
}

BOOST_AUTO_TEST_SUITE_END()
