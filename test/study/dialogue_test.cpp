// Multi-turn dialogues (dialogue.hpp): the loop's turns against its responder and max_turns, the
// trajectory it writes, an agent's error, and a dialogue served as a case (turn events, the
// eval's max_turns).
#include <mira/study.hpp>

#include "common/run_co.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/local/connect_pair.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/write.hpp>
#include <boost/json/parse.hpp>
#include <boost/test/unit_test.hpp>

namespace asio = boost::asio;
namespace json = boost::json;
namespace study = mira::study;
using mira::protocol::transcript;
using mira::test::run_co;

namespace {

// Answers "reply N: <the last user message>", with one tool call and some usage per turn.
study::dialogue_agent echo_agent() {
  return [](const study::conversation& c) -> asio::awaitable<study::agent_turn> {
    const auto n = static_cast<std::int64_t>(c.size() + 1) / 2;
    study::step s(study::step_source::agent, "reply " + std::to_string(n) + ": " + c.back().text);
    s.call("lookup", {{"turn", n}}).result("found").usage({.input_tokens = 10, .output_tokens = 2});
    co_return s;
  };
}

// Asks "follow-up N" until it has asked `asks` times, then stops.
study::responder asks(int n, int* asked) {
  return
      [n, asked](const study::conversation& c) -> asio::awaitable<std::optional<study::message>> {
        BOOST_TEST((c.back().role == study::role::agent));
        if (*asked >= n) co_return std::nullopt;
        ++*asked;
        co_return study::message{study::role::user, "follow-up " + std::to_string(*asked)};
      };
}

transcript talk(study::message opening, study::dialogue_agent agent, study::responder user,
                study::dialogue_options o) {
  return run_co([&](asio::io_context&) { return study::converse(opening, agent, user, o); });
}

}  // namespace

BOOST_AUTO_TEST_SUITE(dialogue)

BOOST_AUTO_TEST_CASE(the_responder_ends_the_dialogue) {
  int asked = 0;
  std::vector<std::int64_t> turns;
  study::dialogue_options o;
  o.max_turns = 10;
  o.on_turn = [&turns](std::int64_t i) { turns.push_back(i); };
  auto t = talk({study::role::user, "hello"}, echo_agent(), asks(2, &asked), o);
  BOOST_TEST(asked == 2);
  BOOST_TEST(turns == (std::vector<std::int64_t>{1, 2, 3}));
  BOOST_TEST(!t.error);
  BOOST_TEST(t.final_response == "reply 3: follow-up 2");
  BOOST_TEST(t.iterations == 3);
  BOOST_TEST(t.tool_calls_count == 3);
  BOOST_TEST(t.usage.input_tokens == 30);
  BOOST_REQUIRE(t.trajectory);
  const auto& steps = t.trajectory->at("steps").as_array();
  BOOST_REQUIRE(steps.size() == 6u);
  const char* sources[] = {"user", "agent", "user", "agent", "user", "agent"};
  for (std::size_t i = 0; i < steps.size(); ++i) {
    BOOST_TEST(steps[i].at("source").as_string() == sources[i]);
    BOOST_TEST(steps[i].as_object().contains("timestamp"));
  }
  BOOST_TEST(steps[0].at("message").as_string() == "hello");
  BOOST_TEST(steps[2].at("message").as_string() == "follow-up 1");
  BOOST_TEST(steps[3].at("tool_calls").at(0).at("arguments").at("turn").as_int64() == 2);
}

BOOST_AUTO_TEST_CASE(max_turns_caps_the_agents_turns_and_the_responder_is_not_asked_after) {
  for (std::int64_t max : {0, 1, 4}) {
    int asked = 0;
    study::dialogue_options o;
    o.max_turns = max;
    o.timestamps = false;
    auto t = talk({study::role::user, "go"}, echo_agent(), asks(100, &asked), o);
    const auto expected = std::max<std::int64_t>(max, 1);
    BOOST_TEST(t.iterations == expected);
    BOOST_TEST(asked == expected - 1);
    const auto& steps = t.trajectory->at("steps").as_array();
    BOOST_TEST(steps.size() == static_cast<std::size_t>(2 * expected));
    BOOST_TEST(!steps[0].as_object().contains("timestamp"));
  }
}

BOOST_AUTO_TEST_CASE(an_agents_error_ends_the_dialogue_with_it) {
  int asked = 0;
  auto agent = [](const study::conversation& c) -> asio::awaitable<study::agent_turn> {
    study::agent_turn turn(study::step(study::step_source::agent, "partial"));
    if (c.size() > 1) {
      turn.error = "provider unavailable";
      turn.error_kind = mira::protocol::error_kind::infra;
    }
    co_return turn;
  };
  study::dialogue_options o;
  o.max_turns = 5;
  auto t = talk({study::role::user, "go"}, agent, asks(100, &asked), o);
  BOOST_TEST(t.error.value_or("") == "provider unavailable");
  BOOST_TEST((t.error_kind == mira::protocol::error_kind::infra));
  BOOST_TEST(t.iterations == 2);
  BOOST_TEST(asked == 1);
}

// The dialogue as an eval's subject, served: one `turn` event per agent turn, at most the eval's
// max_turns of them whatever the options say.
BOOST_AUTO_TEST_CASE(a_served_dialogue_sends_turn_events_and_takes_the_evals_max_turns) {
  auto r = std::make_shared<study::registry>("dialogues", "1");
  r->emits_events({"turn"});
  int asked = 0;
  study::dialogue_options o;
  o.max_turns = 50;
  r->add("chat")
      .samples({{"s", json::array{"hi"}}})
      .add_target("sim", "sim")
      .max_turns(3)
      .score_with(study::scorers::turns_within(3))
      .subject(study::dialogue_subject(echo_agent(), asks(100, &asked), o));
  auto lines = run_co([r](asio::io_context& io) -> asio::awaitable<std::vector<json::object>> {
    using socket_t = asio::local::stream_protocol::socket;
    auto study_end = std::make_shared<socket_t>(io);
    socket_t host_end(io);
    asio::local::connect_pair(*study_end, host_end);
    asio::co_spawn(io, study::serve(*r, study::stream_of(*study_end)),
                   [study_end](std::exception_ptr) {});
    std::string request =
        R"({"id":1,"method":"run","params":{"eval":"chat","sample":"s","target":"sim"}})"
        "\n";
    co_await asio::async_write(host_end, asio::buffer(request), asio::use_awaitable);
    std::vector<json::object> got;
    std::string buf;
    for (;;) {
      auto [ec, n] = co_await asio::async_read_until(host_end, asio::dynamic_buffer(buf), '\n',
                                                     asio::as_tuple(asio::use_awaitable));
      if (ec) break;
      got.push_back(json::parse(std::string_view(buf).substr(0, n - 1)).as_object());
      buf.erase(0, n);
      if (got.back().contains("id")) break;
    }
    host_end.close();
    co_return got;
  });
  BOOST_REQUIRE(!lines.empty());
  std::vector<std::int64_t> turns;
  for (std::size_t i = 0; i + 1 < lines.size(); ++i)
    if (lines[i].at("method").as_string() == "event" &&
        lines[i].at("params").at("kind").as_string() == "turn")
      turns.push_back(lines[i].at("params").at("turn").as_int64());
  BOOST_TEST(turns == (std::vector<std::int64_t>{1, 2, 3}));
  BOOST_TEST(asked == 2);
  const auto& result = lines.back().at("result").as_object();
  BOOST_TEST(result.at("passed").as_bool());
  BOOST_TEST(result.at("transcript").at("iterations").as_int64() == 3);
  BOOST_TEST(result.at("transcript").at("final_response").as_string() == "reply 3: follow-up 2");
}

BOOST_AUTO_TEST_SUITE_END()
