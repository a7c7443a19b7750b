// What `mira run` writes for a CI log: which progress --progress gives on which terminal, when
// the table is coloured, when GitHub Actions output is on, and how the step summary is appended.
#include "common/temp_dir.hpp"

#include <mira/github_output.hpp>

#include <boost/test/unit_test.hpp>

#include <fstream>
#include <map>
#include <sstream>
#include <string>

using namespace mira::cli;
using mira::test::temp_dir;

namespace {

// An environment of exactly these variables.
env_reader env_of(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

run_args with(std::vector<std::string> flags) {
  flags.insert(flags.end(), {"--", "study"});
  return parse_args(command::run, flags);
}

std::string contents(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

BOOST_AUTO_TEST_SUITE(cli_ci_output)

BOOST_AUTO_TEST_CASE(a_log_is_a_dumb_or_unknown_terminal_or_ci) {
  BOOST_TEST(!output_is_a_log(env_of({{"TERM", "xterm-256color"}})));
  BOOST_TEST(output_is_a_log(env_of({{"TERM", "dumb"}})));
  BOOST_TEST(output_is_a_log(env_of({})));
  BOOST_TEST(output_is_a_log(env_of({{"TERM", ""}})));
  BOOST_TEST(output_is_a_log(env_of({{"TERM", "xterm"}, {"CI", "true"}})));
  BOOST_TEST(output_is_a_log(env_of({{"TERM", "xterm"}, {"CI", "1"}})));
  BOOST_TEST(!output_is_a_log(env_of({{"TERM", "xterm"}, {"CI", "false"}})));
  BOOST_TEST(!output_is_a_log(env_of({{"TERM", "xterm"}, {"CI", ""}})));
}

BOOST_AUTO_TEST_CASE(auto_progress_redraws_only_on_a_live_terminal) {
  auto live = env_of({{"TERM", "xterm"}});
  auto automatic = with({});
  BOOST_TEST((progress_for(automatic, true, live) == progress_mode::tty));
  BOOST_TEST((progress_for(automatic, false, live) == progress_mode::plain));
  BOOST_TEST((progress_for(automatic, true, env_of({{"TERM", "dumb"}})) == progress_mode::plain));
  BOOST_TEST((progress_for(automatic, true, env_of({{"TERM", "xterm"}, {"CI", "true"}})) ==
              progress_mode::plain));
  // Asked for: as asked, whatever stderr is.
  BOOST_TEST((progress_for(with({"--progress", "plain"}), true, live) == progress_mode::plain));
  BOOST_TEST((progress_for(with({"--progress", "tty"}), false, live) == progress_mode::tty));
  BOOST_TEST((progress_for(with({"--progress", "none"}), true, live) == progress_mode::none));
  BOOST_TEST((progress_for(with({"--progress", "auto"}), true, live) == progress_mode::tty));
  BOOST_CHECK_EXCEPTION(with({"--progress", "fancy"}), usage_error, [](const usage_error& e) {
    return e.message == "--progress must be auto, tty, plain or none, got 'fancy'";
  });
}

BOOST_AUTO_TEST_CASE(colour_auto_needs_a_live_terminal_not_asked_to_be_plain) {
  auto live = env_of({{"TERM", "xterm"}});
  BOOST_TEST(colour_for(with({}), true, live));
  BOOST_TEST(!colour_for(with({}), false, live));
  BOOST_TEST(!colour_for(with({}), true, env_of({{"TERM", "dumb"}})));
  BOOST_TEST(!colour_for(with({}), true, env_of({{"TERM", "xterm"}, {"CI", "true"}})));
  BOOST_TEST(!colour_for(with({"--progress", "plain"}), true, live));
  BOOST_TEST(colour_for(with({"--progress", "none"}), true, live));
  BOOST_TEST(colour_for(with({"--color", "always"}), false, env_of({{"TERM", "dumb"}})));
  BOOST_TEST(!colour_for(with({"--color", "always"}), true, env_of({{"NO_COLOR", "1"}})));
  BOOST_TEST(!colour_for(with({"--color", "never"}), true, live));
}

BOOST_AUTO_TEST_CASE(github_output_is_on_only_in_github_actions_and_without_no_github) {
  BOOST_TEST(github_output_on(with({}), env_of({{"GITHUB_ACTIONS", "true"}})));
  BOOST_TEST(!github_output_on(with({"--no-github"}), env_of({{"GITHUB_ACTIONS", "true"}})));
  BOOST_TEST(!github_output_on(with({}), env_of({})));
  BOOST_TEST(!github_output_on(with({}), env_of({{"GITHUB_ACTIONS", "false"}})));
  BOOST_TEST(!github_output_on(with({}), env_of({{"GITHUB_ACTIONS", "1"}})));
  BOOST_TEST(parse_args(command::score, {"--no-github", "--artifacts", "a", "--", "s"}).github ==
             false);
}

BOOST_AUTO_TEST_CASE(the_step_summary_is_appended_to_never_replaced) {
  temp_dir dir;
  auto path = dir / "summary.md";
  BOOST_TEST(!append_step_summary(path, "## first\n"));  // made when missing
  BOOST_TEST(contents(path) == "## first\n");
  BOOST_TEST(!append_step_summary(path, "## second\n"));
  BOOST_TEST(contents(path) == "## first\n\n## second\n");
}

BOOST_AUTO_TEST_CASE(a_step_summary_past_the_limit_is_cut_at_a_line_and_says_so) {
  temp_dir dir;
  auto path = dir / "summary.md";
  std::ofstream(path) << std::string(100, 'x') << '\n';  // an earlier step's 101 bytes
  std::string rows;
  for (int i = 0; i < 100; ++i) rows += "| row " + std::to_string(i) + " |\n";
  auto said = append_step_summary(path, rows, 1024);
  BOOST_REQUIRE(said);
  BOOST_TEST(said->find("was cut to GitHub's 1 KiB a step") != std::string::npos, *said);
  auto text = contents(path);
  BOOST_TEST(text.size() <= 1024u);
  BOOST_TEST(text.rfind(std::string(100, 'x') + "\n\n| row 0 |\n", 0) == 0u);
  auto note = text.find("\n_The summary stops here: GitHub takes at most 1 KiB a step.");
  BOOST_REQUIRE(note != std::string::npos);
  BOOST_TEST(text[note - 1] == '\n');  // after a whole row
  BOOST_TEST(text.substr(note - 3, 2) == " |");

  // Full: nothing more is added, and it says so.
  auto full = append_step_summary(path, rows, 1024);
  BOOST_REQUIRE(full);
  BOOST_TEST(full->find("is full") != std::string::npos, *full);
  BOOST_TEST(contents(path) == text);
}

BOOST_AUTO_TEST_CASE(a_step_summary_that_cannot_be_opened_says_why) {
  temp_dir dir;
  auto said = append_step_summary(dir / "no-such-folder/summary.md", "## r\n");
  BOOST_REQUIRE(said);
  BOOST_TEST(said->find("cannot open " + dir / "no-such-folder/summary.md" +
                        ": No such file or directory") != std::string::npos,
             *said);
}

BOOST_AUTO_TEST_SUITE_END()
