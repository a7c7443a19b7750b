// The example study, written on the study SDK (mira::study): every eval below is a few lines
// of what it is about, and the SDK does the protocol. It gives the host something real to run,
// and its evals cover what a host must handle.
//
// Evals: greet (a target marked unavailable; its transcript carries an ATIF trajectory),
// arithmetic (25 generated samples, listed 10 to a page), reasoning (an `effort` axis), coin (3
// seeded trials), slow (waits, honours cancel), events (a small agent loop with a trajectory,
// and event/log notifications), outage (an infra error, scored N/A).
//
// Options: --slow-ms N (how long `slow` waits, default 200), --no-cancel (do not advertise
// `cancel`).
#include <mira/study.hpp>

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>

namespace asio = boost::asio;
namespace json = boost::json;
namespace study = mira::study;
namespace scorers = mira::study::scorers;
using mira::protocol::transcript;

namespace {

transcript answer(std::string text, std::int64_t in, std::int64_t out) {
  transcript t;
  t.final_response = std::move(text);
  t.iterations = 1;
  t.usage.input_tokens = in;
  t.usage.output_tokens = out;
  t.usage.cost_usd = 0.00001 * static_cast<double>(in + out);
  return t;
}

// An ATIF trajectory of the greeting: what `execute` returns, and what the flat fields project.
json::value greeting_trajectory(const std::string& sample) {
  return json::object{
      {"schema_version", "ATIF-v1.7"},
      {"agent", json::object{{"name", "example-study"}, {"version", "0.1.0"}}},
      {"steps",
       json::array{
           json::object{{"step_id", 1}, {"source", "user"}, {"message", "Say hello, " + sample}},
           json::object{
               {"step_id", 2},
               {"source", "agent"},
               {"message", "Hi! The answer is 42."},
               {"metrics", json::object{{"prompt_tokens", 12}, {"completion_tokens", 8}}}}}}};
}

study::sample arithmetic_sample(std::size_t i) {
  auto n = std::to_string(i);
  return {"case-" + n,
          json::array{"What is " + n + " + " + n + "?"},
          json::value(std::to_string(2 * i)),
          {},
          json::object{{"difficulty", i % 3 == 0 ? "hard" : "easy"}}};
}

}  // namespace

int main(int argc, char** argv) {
  int slow_ms = 200;
  study::serve_options options;
  options.page_size = 10;  // arithmetic's 25 samples take three pages
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--slow-ms") && i + 1 < argc)
      slow_ms = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--no-cancel"))
      options.cancel = false;
  }

  study::registry s("example-study", "0.1.0");
  s.default_target({"sim", "sim", true, {}});
  s.emits_events({"started", "turn", "tool_call", "output", "finished"});
  s.emits_trajectories();

  s.add("greet")
      .description("Greets the user and reports the answer")
      .samples({{"hi", {}, {}, {"smoke"}, {}}, {"hello", {}, {}, {"smoke"}, {}}, {"hey"}})
      .add_target("sim", "sim")
      .add_target({"anthropic/claude-opus", "anthropic", false, {{"price_tier", "premium"}}})
      .metadata({{"suite", "smoke"}})
      .score_with(scorers::contains("42"))
      .subject([](study::run_context& c) -> asio::awaitable<transcript> {
        auto t = answer("Hi! The answer is 42.", 12, 8);
        t.trajectory = greeting_trajectory(c.id().sample);
        co_return t;
      });

  s.add("arithmetic")
      .description("Adds two numbers (paginated dataset)")
      .samples(study::sample_generator{25, arithmetic_sample,
                                       [](std::string_view id) -> std::optional<std::size_t> {
                                         if (id.substr(0, 5) != "case-") return std::nullopt;
                                         std::size_t i = 0;
                                         for (char ch : id.substr(5)) {
                                           if (ch < '0' || ch > '9') return std::nullopt;
                                           i = i * 10 + static_cast<std::size_t>(ch - '0');
                                         }
                                         return i;
                                       }})
      .score_with(study::make_scorer(
          "exact",
          [](const study::sample& x, const transcript& t) {
            auto& want = x.expected->as_string();
            return t.final_response == want ? study::pass("exact", "matched")
                                            : study::fail("exact", "expected " + std::string(want));
          }))
      .subject([](study::run_context& c) -> asio::awaitable<transcript> {
        auto n = std::stoll(c.id().sample.substr(5));
        co_return answer(std::to_string(2 * n), 20, 2);
      });

  s.add("reasoning")
      .description("Solves a puzzle at a chosen effort")
      .samples({{"puzzle-1"}, {"puzzle-2"}})
      .axis("effort", {"low", "high"})
      .max_turns(4)
      .score_with(scorers::succeeded())
      .subject([](study::run_context& c) -> asio::awaitable<transcript> {
        bool high = c.param("effort") == "high";
        auto t =
            answer("solved at " + std::string(c.param("effort")) + " effort", 40, high ? 200 : 50);
        t.iterations = high ? 3 : 1;
        t.metrics["steps_per_turn"] = high ? 2.5 : 1.0;
        co_return t;
      });

  s.add("coin")
      .description("A seeded stochastic subject, repeated")
      .samples({{"flip"}})
      .trials(3)
      .seed(42)
      .score_with(study::make_scorer("seeded",
                                     [](const study::sample&, const transcript& t) {
                                       bool heads = t.final_response == "heads";
                                       return heads ? study::pass("seeded", "heads")
                                                    : study::fail("seeded", "tails");
                                     }))
      .subject([](study::run_context& c) -> asio::awaitable<transcript> {
        co_return answer(c.seed().value_or(0) % 5 != 0 ? "heads" : "tails", 5, 1);
      });

  s.add("slow")
      .description("Takes a while; honours cancel")
      .samples({{"long-task"}})
      .score_with(scorers::succeeded())
      .subject([slow_ms](study::run_context& c) -> asio::awaitable<transcript> {
        asio::steady_timer wait(c.get_executor(), std::chrono::milliseconds(slow_ms));
        try {
          co_await wait.async_wait(asio::use_awaitable);
        } catch (const boost::system::system_error&) {
          std::fprintf(stderr, "example-study: run %lld cancelled\n",
                       static_cast<long long>(c.request_id()));
          throw;
        }
        co_return answer("done", 10, 10);
      });

  s.add("events")
      .description("A small agent loop: reasons, calls two tools, answers; streams its events")
      .samples({{"tool-use", {"Which city hosts the 2026 Mira meetup, and what is its weather?"}}})
      .score_with(study::make_scorer("succeeded",
                                     [](const study::sample&, const transcript& t) {
                                       return t.tool_calls_count >= 1
                                                  ? study::pass("succeeded", "used the tool")
                                                  : study::fail("succeeded", "no tool call");
                                     }))
      .subject([](study::run_context& c) -> asio::awaitable<transcript> {
        // The SDK sends `started` before and `finished` after (serve_options::case_events).
        // Each turn of the loop is a step of the trajectory: what the agent thought, the tool
        // it called with which arguments, and what came back.
        study::trajectory_builder tb("example-agent", "0.1.0");
        tb.model("sim");
        tb.user(study::input_text(c.sample().input));
        c.turn(0);
        c.tool_call("search");
        tb.agent("Let me look that up.")
            .reasoning("The question has two parts: the city, then its weather.")
            .call("search", {{"query", "Mira meetup 2026 city"}})
            .result("The 2026 Mira meetup is in Lisbon.")
            .usage({.input_tokens = 30, .output_tokens = 6});
        c.turn(1);
        c.tool_call("weather");
        tb.agent()
            .reasoning("Lisbon; now the weather there.")
            .call("weather", {{"city", "Lisbon"}, {"unit", "celsius"}})
            .result("{\"city\": \"Lisbon\", \"temp_c\": 21, \"sky\": \"clear\"}")
            .usage({.input_tokens = 44, .output_tokens = 8});
        tb.agent("found it: Lisbon, 21 °C and clear")
            .usage({.input_tokens = 60, .output_tokens = 9});
        c.output("found it");
        c.log("used two tools");
        transcript t;
        tb.fill(t);
        co_return t;
      });

  s.add("outage")
      .description("The provider is down: an infra error, N/A")
      .samples({{"provider-503"}})
      .score_with(scorers::succeeded())
      .subject([](study::run_context&) -> asio::awaitable<transcript> {
        auto t = answer("", 0, 0);
        t.error = "provider returned 503 Service Unavailable";
        t.error_kind = mira::protocol::error_kind::infra;
        co_return t;
      });

  return study::serve_stdio(s, options);
}
