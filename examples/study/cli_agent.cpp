// An external agent as the subject: each case runs agents/file_agent.py (any program would do:
// a coding agent's CLI, a Python agent) in a fresh work folder holding the sample's seeded
// files. The agent reads the files its task names, writes report.txt and records what it did
// as an ATIF trajectory in $MIRA_TRAJECTORY_PATH. Each case is scored on the captured
// report.txt, the response, and the tool calls of the trajectory.
//
// Usage: cli_agent [AGENT.py]    (spawned by a host: `mira run -- cli_agent`); the agent script
// defaults to the one beside this file in the source tree.
#include <mira/study.hpp>

#include <string>
#include <vector>

namespace json = boost::json;
namespace study = mira::study;
namespace scorers = mira::study::scorers;
using mira::protocol::transcript;

#ifndef CLI_AGENT_SCRIPT
#define CLI_AGENT_SCRIPT "agents/file_agent.py"
#endif

namespace {

// Every line of the expected answer, in the response or in the captured report.
study::scorer mentions_expected(std::string name, bool in_report) {
  return study::make_scorer(name, [name, in_report](const study::sample& s, const transcript& t) {
    std::string_view where = t.final_response;
    if (in_report) {
      const auto* report = t.files.if_contains("report.txt");
      where = report && report->is_string() ? std::string_view(report->get_string()) : "";
    }
    for (const auto& line : s.expected->as_array())
      if (where.find(line.as_string()) == std::string_view::npos)
        return study::fail(name, "missing \"" + std::string(line.as_string()) + "\"");
    return study::pass(name);
  });
}

}  // namespace

int main(int argc, char** argv) {
  study::agent_options agent;
  const std::string script = argc > 1 ? argv[1] : CLI_AGENT_SCRIPT;
  agent.argv = {"python3", script, "--workdir", "{workdir}", "--task", "{prompt}"};
  agent.source = study::transcript_source::trajectory_file;
  agent.capture = {"report.txt"};
  agent.time_limit = std::chrono::seconds(30);

  study::registry r("cli-agent", "0.1.0");
  r.emits_trajectories();
  r.default_target({"file_agent", "local", true, {}});
  r.add("word_count")
      .description("Counts the words of the files its task names, in a report and an answer")
      .samples({study::sample{
                    "one-file", {"Count the words in notes.txt"}, json::array{"notes.txt: 5 words"}}
                    .file("notes.txt", "the quick brown fox jumps\n"),
                study::sample{"nested",
                              {"Count the words in a.txt and docs/b.txt"},
                              json::array{"a.txt: 2 words", "docs/b.txt: 4 words"}}
                    .file("a.txt", "one two\n")
                    .file("docs/b.txt", "three four five six\n")
                    .file("unused.txt", "x\n")})
      .score_with(scorers::succeeded())
      .score_with(scorers::tool_called("read_file"))
      .score_with(scorers::tool_not_called("delete_file"))
      .score_with(scorers::file_exists("report.txt"))
      .score_with(mentions_expected("report_counts", true))
      .score_with(mentions_expected("answer_counts", false))
      .subject(study::agent_subject(agent));
  return study::serve_stdio(r);
}
