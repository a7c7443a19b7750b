// A study whose subject is another program: each case runs a shell command (any program would
// do: a Python agent, a compiler, a simulator) with the sample's input on its stdin, and scores
// what it printed. The SDK runs it in a process group of its own, with a time limit, and kills
// the group when the host cancels the case.
//
// Evals: shout (`tr` upper-cases the input), count (`wc -w` counts its words), stuck (a command
// that outlives its 1 s limit: an infra error, scored N/A).
//
// Usage: program_study    (spawned by a host: `mira run -- program_study`)
#include <mira/study.hpp>

#include <string>

namespace asio = boost::asio;
namespace json = boost::json;
namespace study = mira::study;
using mira::protocol::transcript;

namespace {

// A subject running `sh -c script` with the sample's first input turn on stdin.
study::subject shell(std::string script, std::chrono::milliseconds limit) {
  return [script, limit](study::run_context& c) -> asio::awaitable<transcript> {
    study::program_options p;
    p.argv = {"/bin/sh", "-c", script};
    if (!c.sample().input.empty()) p.stdin_data = std::string(c.sample().input[0].as_string());
    p.time_limit = limit;
    auto r = co_await study::run_program(std::move(p));
    auto t = study::to_transcript(r);
    // The programs end their answer with a newline; the expected answers do not.
    while (!t.final_response.empty() &&
           (t.final_response.back() == '\n' || t.final_response.back() == ' '))
      t.final_response.pop_back();
    co_return t;
  };
}

study::sample text(std::string id, std::string input, std::string expected) {
  return {std::move(id), json::array{json::string(input)}, json::value(std::move(expected))};
}

}  // namespace

int main() {
  using namespace std::chrono_literals;
  study::registry s("program-study", "0.1.0");
  s.default_target({"sh", "local", true, {}});
  s.add("shout")
      .description("Upper-cases its input with tr")
      .samples({text("hello", "hello", "HELLO"), text("mixed", "MiXeD case", "MIXED CASE")})
      .score_with(study::scorers::succeeded())
      .score_with(study::scorers::matches_expected())
      .subject(shell("tr a-z A-Z", 10s));
  s.add("count")
      .description("Counts the words of its input with wc")
      .samples({text("three", "one two three", "3"), text("none", "", "0")})
      .score_with(study::scorers::matches_expected())
      .subject(shell("wc -w | tr -d ' '", 10s));
  s.add("stuck")
      .description("Outlives its time limit: killed, an infra error, N/A")
      .samples({{"sleeper"}})
      .score_with(study::scorers::succeeded())
      .subject(shell("sleep 30", 1s));
  return study::serve_stdio(s);
}
