// `mira run` in CI: GitHub Actions annotations and step summary (and nothing of them outside
// GitHub or with --no-github), progress on a pseudo-terminal for each --progress and TERM, and
// docs/ci.md's GitHub step run as the runner runs it (`bash -e` on the step's script) and
// cancelled as the runner cancels it (a signal to that shell's process alone).
#include "integration/process_util.hpp"

#include <boost/json/parse.hpp>
#include <boost/test/unit_test.hpp>

#include <fcntl.h>
#include <pty.h>
#include <signal.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

using namespace mira::test;
namespace fs = std::filesystem;

extern char** environ;

namespace {

const std::string mira_bin = MIRA_CLI;
const std::string example = MIRA_EXAMPLE_STUDY;

// This process's environment with `changes` applied: "K=V" sets K, "K" removes it.
std::vector<std::string> environment_with(const std::vector<std::string>& changes) {
  std::map<std::string, std::string> env;
  for (char** e = environ; *e; ++e) {
    std::string kv(*e);
    auto eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  for (auto& c : changes) {
    auto eq = c.find('=');
    if (eq == std::string::npos)
      env.erase(c);
    else
      env[c.substr(0, eq)] = c.substr(eq + 1);
  }
  std::vector<std::string> out;
  for (auto& [k, v] : env) out.push_back(k + "=" + v);
  return out;
}

std::vector<char*> c_strings(std::vector<std::string>& v) {
  std::vector<char*> out;
  for (auto& s : v) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// `argv` started in `cwd` with the environment changed by `env`, stdin from /dev/null, stdout
// and stderr into files, as a CI runner starts a step.
pid_t start(std::vector<std::string> argv, const std::vector<std::string>& env, const fs::path& cwd,
            const fs::path& out, const fs::path& err) {
  auto envp = environment_with(env);
  auto args = c_strings(argv);
  auto envs = c_strings(envp);
  pid_t pid = ::fork();
  if (pid == 0) {
    ::setpgid(0, 0);  // a group of its own, which exit_code_within kills whole
    int in = ::open("/dev/null", O_RDONLY);
    int o = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int e = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (in < 0 || o < 0 || e < 0 || ::dup2(in, 0) < 0 || ::dup2(o, 1) < 0 || ::dup2(e, 2) < 0 ||
        ::chdir(cwd.c_str()) != 0)
      ::_exit(126);
    ::execve(args[0], args.data(), envs.data());
    ::_exit(127);
  }
  return pid;
}

int exit_code(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// The exit code of `pid`, or -1 when it has not exited within `limit`: then its whole process
// group is killed, so a test that would hang fails instead (the limit is a guard, not a timing).
int exit_code_within(pid_t pid, std::chrono::seconds limit) {
  auto give_up = std::chrono::steady_clock::now() + limit;
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > give_up) {
      ::kill(-pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

struct finished {
  int code = -1;
  std::string out, err;
};

finished run_in(const fs::path& dir, std::vector<std::string> argv,
                const std::vector<std::string>& env) {
  finished r;
  r.code = exit_code(start(std::move(argv), env, dir, dir / "out.txt", dir / "err.txt"));
  r.out = read_file((dir / "out.txt").string());
  r.err = read_file((dir / "err.txt").string());
  return r;
}

std::vector<std::string> lines_starting(const std::string& text, const std::string& head) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);)
    if (l.rfind(head, 0) == 0) out.push_back(l);
  return out;
}

bool has(const std::string& text, const std::string& what) {
  return text.find(what) != std::string::npos;
}

// Twelve failing cases of the Python study: more than GitHub's 10 annotations.
std::vector<std::string> twelve_failures(std::vector<std::string> flags = {}) {
  std::vector<std::string> argv{mira_bin,    "run",  "--dry-run", "--trials", "12",
                                "--samples", "fail", "--format",  "json"};
  argv.insert(argv.end(), flags.begin(), flags.end());
  argv.insert(argv.end(), {"--", MIRA_PYTHON3, MIRA_PY_STUDY});
  return argv;
}

const std::string earlier = "## What an earlier command of the step wrote\n";

// Everything written to a new pseudo-terminal (stdin, stdout and stderr of `argv`) until it
// exits. The terminal is raw, so a '\r' seen is one mira wrote (a cooked one adds one per line).
finished on_pty(std::vector<std::string> argv, const std::vector<std::string>& env) {
  auto envp = environment_with(env);
  auto args = c_strings(argv);
  auto envs = c_strings(envp);
  termios raw{};
  ::cfmakeraw(&raw);
  winsize size{24, 120, 0, 0};
  int master = -1;
  pid_t pid = ::forkpty(&master, nullptr, &raw, &size);
  if (pid == 0) {
    ::execve(args[0], args.data(), envs.data());
    ::_exit(127);
  }
  finished r;
  BOOST_REQUIRE(pid > 0);
  char buf[4096];
  for (;;) {
    auto n = ::read(master, buf, sizeof buf);
    if (n > 0)
      r.out.append(buf, static_cast<std::size_t>(n));
    else if (n < 0 && errno == EINTR)
      continue;
    else
      break;  // EIO: every copy of the terminal's other side is closed
  }
  r.code = exit_code(pid);
  ::close(master);
  return r;
}

// A run of the example study whose slow case takes 1.5 s, so progress is drawn several times:
// every half second on a terminal, every 0.2 s as plain lines.
finished progress_run(std::vector<std::string> flags, const std::vector<std::string>& env) {
  std::vector<std::string> argv{mira_bin, "run",         "--dry-run", "--max-retries",
                                "0",      "--heartbeat", "0.2"};
  argv.insert(argv.end(), flags.begin(), flags.end());
  argv.insert(argv.end(), {"--", example, "--slow-ms", "1500"});
  // None of the test's own CI, NO_COLOR or GitHub settings, unless `env` gives them.
  std::vector<std::string> changes{"CI", "NO_COLOR", "GITHUB_ACTIONS"};
  changes.insert(changes.end(), env.begin(), env.end());
  auto r = on_pty(std::move(argv), changes);
  BOOST_TEST(r.code == 0, r.out);
  return r;
}

// The script of the step whose id is `id` in the first YAML block after `marker` in the doc:
// its `run: |` lines, unindented, which is what the runner writes to the file the shell runs.
std::string step_script(const std::string& doc, const std::string& marker, const std::string& id) {
  auto at = doc.find(marker);
  BOOST_REQUIRE_MESSAGE(at != std::string::npos, "no " << marker << " in docs/ci.md");
  std::istringstream in(doc.substr(doc.find("```yaml", at)));
  std::string line, script;
  bool in_step = false, in_run = false;
  const auto none = std::string::npos;
  std::size_t key_indent = 0, body_indent = none;
  while (std::getline(in, line) && line != "```") {
    auto indent = line.find_first_not_of(' ');
    if (!in_step) {
      in_step = line.find("id: " + id) != none;
      continue;
    }
    if (!in_run) {
      if (indent != none && line.substr(indent) == "run: |") in_run = true, key_indent = indent;
      continue;
    }
    if (indent != none && indent <= key_indent) break;  // the block ends
    if (body_indent == none && indent != none) body_indent = indent;
    script += (indent == none ? "" : line.substr(body_indent)) + "\n";
  }
  BOOST_REQUIRE_MESSAGE(!script.empty(), "no `run: |` in the step " << id);
  return script;
}

// The `script:` of GitLab job `job` in the first YAML block after `marker`, one command per
// line as the runner runs them (a folded `- >` item joined into one line).
std::string job_script(const std::string& doc, const std::string& marker, const std::string& job) {
  auto at = doc.find(marker);
  BOOST_REQUIRE_MESSAGE(at != std::string::npos, "no " << marker << " in docs/ci.md");
  std::istringstream in(doc.substr(doc.find("```yaml", at)));
  std::string line, script;
  bool in_job = false, in_script = false, folding = false;
  while (std::getline(in, line) && line != "```") {
    auto indent = line.find_first_not_of(' ');
    if (indent == 0) in_job = line == job + ":", in_script = false;
    if (!in_job || indent == std::string::npos) continue;
    if (indent == 2) {
      in_script = line == "  script:";
      continue;
    }
    if (!in_script) continue;
    if (indent == 4 && line.compare(4, 2, "- ") == 0) {
      if (!script.empty()) script += "\n";
      folding = line.substr(6) == ">";
      if (!folding) script += line.substr(6);
    } else if (folding) {
      script += (script.empty() || script.back() == '\n' ? "" : " ") + line.substr(indent);
    }
  }
  BOOST_REQUIRE_MESSAGE(!script.empty(), "no script in the job " << job);
  return script + "\n";
}

// The first case record a run under `results` saved, once there is one.
bool a_case_is_saved(const fs::path& results) {
  std::error_code ec;
  for (fs::directory_iterator run(results, ec), end; !ec && run != end; run.increment(ec))
    for (fs::directory_iterator c(run->path() / "cases", ec); !ec && c != end; c.increment(ec))
      if (fs::exists(c->path() / "result.json")) return true;
  return false;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(mira_ci)

BOOST_AUTO_TEST_CASE(github_annotations_go_to_stderr_and_the_md_report_is_appended) {
  temp_dir dir;
  const auto summary = dir / "summary.md";
  std::ofstream(summary) << earlier;
  auto r = run_in(dir.path, twelve_failures(),
                  {"GITHUB_ACTIONS=true", "GITHUB_STEP_SUMMARY=" + summary});
  BOOST_TEST(r.code == 1);
  // stdout is the json report, whole: no workflow command in it.
  BOOST_TEST(boost::json::parse(r.out).at("summary").at("counts").at("failed").as_int64() == 12);
  auto errors = lines_starting(r.err, "::error ");
  BOOST_REQUIRE_EQUAL(errors.size(), 10u);
  BOOST_TEST(errors[0] == "::error title=echo/fail@sim#0 failed::echo: echo");
  auto warnings = lines_starting(r.err, "::warning ");
  BOOST_REQUIRE_EQUAL(warnings.size(), 1u);
  BOOST_TEST(has(warnings[0], "::warning title=mira::2 more failed or errored case(s)"));
  // Appended after what was there, never replacing it.
  auto md = read_file(summary);
  BOOST_TEST(md.rfind(earlier + "\n## Mira eval results\n", 0) == 0u, md);
  BOOST_TEST(has(md, "| echo/fail@sim#11 | failed | echo: echo |"), md);
}

BOOST_AUTO_TEST_CASE(no_github_output_with_no_github_or_outside_github_actions) {
  temp_dir dir;
  const auto summary = dir / "summary.md";
  std::ofstream(summary) << earlier;
  for (auto& [flags, env] :
       std::vector<std::pair<std::vector<std::string>, std::vector<std::string>>>{
           {{"--no-github"}, {"GITHUB_ACTIONS=true", "GITHUB_STEP_SUMMARY=" + summary}},
           {{}, {"GITHUB_ACTIONS", "GITHUB_STEP_SUMMARY=" + summary}}}) {
    auto r = run_in(dir.path, twelve_failures(flags), env);
    BOOST_TEST(r.code == 1);
    BOOST_TEST(lines_starting(r.err, "::").empty(), r.err);
    BOOST_TEST(read_file(summary) == earlier);
  }
}

BOOST_AUTO_TEST_CASE(a_step_summary_that_cannot_be_written_is_a_warning_not_a_failure) {
  temp_dir dir;
  const auto summary = dir / "no-such-folder/summary.md";
  auto r = run_in(dir.path, twelve_failures(),
                  {"GITHUB_ACTIONS=true", "GITHUB_STEP_SUMMARY=" + summary});
  BOOST_TEST(r.code == 1);  // the run's own exit code: cases failed
  BOOST_TEST(has(r.err, "mira: warning: cannot open " + summary + ": No such file or directory"),
             r.err);
  BOOST_TEST(lines_starting(r.err, "::error ").size() == 10u);
}

// The positive control: on a live terminal the line is redrawn and the table coloured, so the
// checks below would see a '\r' or an escape code if one were written.
BOOST_AUTO_TEST_CASE(progress_on_a_pseudo_terminal_redraws_only_when_live) {
  auto live = progress_run({}, {"TERM=xterm-256color"});
  BOOST_TEST(has(live.out, "\r\x1b[K["), live.out);
  BOOST_TEST(has(live.out, "\x1b[1;32mPASS"));
  BOOST_TEST(!has(live.out, "progress: ["));
}

BOOST_AUTO_TEST_CASE(progress_on_a_pseudo_terminal_plain_or_dumb_has_no_cr_or_escape_code) {
  for (auto& [flags, env] :
       std::vector<std::pair<std::vector<std::string>, std::vector<std::string>>>{
           {{"--progress", "plain"}, {"TERM=xterm-256color"}},
           {{}, {"TERM=dumb"}},
           {{}, {"TERM"}}}) {
    auto r = progress_run(flags, env);
    BOOST_TEST_CONTEXT((flags.empty() ? env[0] : flags[1])) {
      BOOST_TEST(!has(r.out, "\r"), r.out);
      BOOST_TEST(!has(r.out, "\x1b"), r.out);
      BOOST_TEST(has(r.out, "\nprogress: ["), r.out);  // one whole line per heartbeat
    }
  }
}

BOOST_AUTO_TEST_CASE(progress_on_a_pseudo_terminal_in_ci_is_plain_and_none_is_silent) {
  auto ci = progress_run({}, {"TERM=xterm-256color", "CI=true"});
  BOOST_TEST(!has(ci.out, "\r"), ci.out);
  BOOST_TEST(!has(ci.out, "\x1b"), ci.out);
  BOOST_TEST(has(ci.out, "\nprogress: ["));
  auto none = progress_run({"--progress", "none"}, {"TERM=xterm-256color"});
  BOOST_TEST(!has(none.out, "\r"), none.out);
  BOOST_TEST(!has(none.out, "progress: ["), none.out);
  BOOST_TEST(has(none.out, "41 cases"));
}

// docs/ci.md's shard step, run as the runner runs it: its script in a file, `bash -e FILE`, in
// a job with GITHUB_ACTIONS and CI set. Cancelling the job signals that shell's process only
// (SIGINT, then SIGTERM): with `exec`, that is mira, which must stop, save and tell how to
// resume. The study's slow case never ends by itself; the signal comes once a case is saved.
BOOST_AUTO_TEST_CASE(the_docs_github_step_is_cancelled_as_github_cancels_it) {
  const auto script = step_script(read_file(MIRA_CI_DOC), "<!-- ci_recipe_test: github", "evals");
  BOOST_TEST(has(script, "exec mira run "), script);
  BOOST_TEST(!has(script, "${{"), "the runner would substitute expressions: " << script);
  for (int sig : {SIGINT, SIGTERM}) {
    BOOST_TEST_CONTEXT(::strsignal(sig)) {
      temp_dir dir;
      fs::create_directory(dir.path / "bin");
      fs::create_symlink(mira_bin, dir.path / "bin" / "mira");
      std::ofstream(dir / "mira.toml") << "default_launcher = \"study\"\n[launchers.study]\n"
                                       << "cmd = \"'" << example << "' --slow-ms 600000\"\n";
      std::ofstream(dir / "step.sh") << script;
      const auto summary = dir / "summary.md";
      std::ofstream(summary) << earlier;
      pid_t shell =
          start({"/bin/bash", "-e", dir / "step.sh"},
                {"PATH=" + dir / "bin" + ":" + std::getenv("PATH"), "GITHUB_ACTIONS=true",
                 "CI=true", "CI_NODE_INDEX=1", "CI_NODE_TOTAL=1", "GITHUB_STEP_SUMMARY=" + summary},
                dir.path, dir / "out.txt", dir / "err.txt");
      BOOST_REQUIRE(shell > 0);
      // Watching the run folder (the guard only stops a test that would hang).
      auto guard = std::chrono::steady_clock::now() + std::chrono::minutes(2);
      while (!a_case_is_saved(dir.path / "results") && std::chrono::steady_clock::now() < guard)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      if (!a_case_is_saved(dir.path / "results")) ::kill(-shell, SIGKILL);
      BOOST_REQUIRE(a_case_is_saved(dir.path / "results"));
      ::kill(shell, sig);  // the shell's process alone, as the runner does
      BOOST_TEST(exit_code_within(shell, std::chrono::seconds(60)) == 130);
      auto out = read_file(dir / "out.txt"), err = read_file(dir / "err.txt");
      BOOST_TEST(has(out, "stopped (interrupted)"), out);
      BOOST_TEST(has(err, "mira: interrupted: cancelling the cases in flight"), err);
      BOOST_TEST(has(err, "resume with: mira run --resume "), err);
      BOOST_TEST(read_file(summary).rfind(earlier + "\n## Mira eval results\n", 0) == 0u);
    }
  }
}

// The docs' gate job on shards as download-artifact lays them out (shards/shard-N/<run id>):
// the merge step, then the gate step, run as the runner runs them. Red for failed cases, a
// missing shard or a run that scored nothing; each --out written.
BOOST_AUTO_TEST_CASE(the_docs_github_gate_job_merges_the_shards_and_gates_on_the_merged_run) {
  const auto doc = read_file(MIRA_CI_DOC);
  const auto merge = step_script(doc, "<!-- ci_recipe_test: github", "merge");
  const auto gate = step_script(doc, "<!-- ci_recipe_test: github", "gate");
  BOOST_TEST(!has(merge + gate, "${{"), "the runner would substitute expressions");
  const std::string study = std::string(MIRA_PYTHON3) + " " MIRA_CI_STUDY;
  struct outcome {
    int merge = -1, gate = -1;
    std::string out;
  };
  // Two shards of the study with `knobs`, then the gate job; `shards` of them are downloaded.
  auto pipeline = [&](const temp_dir& dir, const std::string& knobs, int shards) {
    std::ofstream(dir / "step-merge.sh") << merge;
    std::ofstream(dir / "step-gate.sh") << gate;
    const std::string shell = "cd '" + dir.path.string() + "' && PATH='" + dir.path.string() +
                              "/bin':\"$PATH\" GITHUB_RUN_ID=7 ";
    fs::create_directory(dir.path / "bin");
    fs::create_symlink(mira_bin, dir.path / "bin" / "mira");
    fs::create_directories(dir.path / "shards");
    for (int node = 1; node <= 2; ++node) {
      const auto job = "job" + std::to_string(node);
      auto r = run_command(shell + "CI_NODE_INDEX=" + std::to_string(node) +
                           " CI_NODE_TOTAL=2 mira run --shard auto --no-github --max-retries 0 "
                           "--results-dir " +
                           job + " -- " + study + " " + knobs + " 2>&1");
      BOOST_TEST((r.code == 0 || r.code == 1), r.out);
      if (node <= shards)
        fs::rename(dir.path / job, dir.path / "shards" / ("shard-" + std::to_string(node)));
    }
    outcome o;
    auto m = run_command(shell + "bash -e step-merge.sh 2>&1");
    o.merge = m.code;
    o.out = m.out;
    if (m.code != 0) return o;
    auto g = run_command(shell + "bash -e step-gate.sh 2>&1");
    o.gate = g.code;
    o.out += g.out;
    return o;
  };
  {
    temp_dir dir;
    auto o = pipeline(dir, "", 2);
    BOOST_TEST(o.merge == 0, o.out);
    BOOST_TEST(o.gate == 1, o.out);  // a failure and an error in the suite
    BOOST_TEST(has(o.out, "mira: latest is run evals-7"), o.out);
    BOOST_TEST(has(read_file(dir / "junit.xml"), "<testsuites name=\"mira\""));
    BOOST_TEST(fs::file_size(dir.path / "report.html") > 0u);
  }
  {
    temp_dir dir;
    BOOST_TEST(pipeline(dir, "--fail 0 --errors 0", 2).gate == 0);
  }
  {
    temp_dir dir;
    auto o = pipeline(dir, "--fail 0 --errors 0 --all-unavailable", 2);
    BOOST_TEST(o.gate == 1, o.out);  // --min-scored 1: nothing scored is red
    BOOST_TEST(has(o.out, "gate failed: 0 case(s) scored"), o.out);
  }
  {
    temp_dir dir;
    auto o = pipeline(dir, "--fail 0 --errors 0", 1);  // one shard's artifact is missing
    BOOST_TEST(o.merge == 2, o.out);
  }
}

// The docs' GitLab pipeline: `parallel: 2` copies of the evals job in one checkout (as the gate
// receives their artifacts: results/1, results/2), then the gate job's script.
BOOST_AUTO_TEST_CASE(the_docs_gitlab_pipeline_runs_its_shards_and_gates_on_the_merge) {
  const auto doc = read_file(MIRA_CI_DOC);
  const auto evals = job_script(doc, "<!-- ci_recipe_test: gitlab", "evals");
  const auto gate = job_script(doc, "<!-- ci_recipe_test: gitlab", "gate");
  BOOST_TEST(has(evals, "mira run --shard auto"), evals);
  const std::string study = std::string(MIRA_PYTHON3) + " " MIRA_CI_STUDY;
  for (const std::string knobs : {"", "--fail 0 --errors 0"}) {
    temp_dir dir;
    fs::create_directory(dir.path / "bin");
    fs::create_symlink(mira_bin, dir.path / "bin" / "mira");
    std::ofstream(dir / "mira.toml") << "default_launcher = \"study\"\n[launchers.study]\n"
                                     << "cmd = \"" << study << " " << knobs << "\"\n";
    std::ofstream(dir / "evals.sh") << evals;
    std::ofstream(dir / "gate.sh") << gate;
    const std::string shell = "cd '" + dir.path.string() + "' && PATH='" + dir.path.string() +
                              "/bin':\"$PATH\" CI=true CI_NODE_TOTAL=2 CI_PIPELINE_ID=9 ";
    for (int node = 1; node <= 2; ++node) {
      auto r =
          run_command(shell + "CI_NODE_INDEX=" + std::to_string(node) + " bash -e evals.sh 2>&1");
      BOOST_TEST(r.code == (knobs.empty() ? 1 : 0), r.out);
    }
    auto g = run_command(shell + "bash -e gate.sh 2>&1");
    BOOST_TEST(g.code == (knobs.empty() ? 1 : 0), g.out);
    BOOST_TEST(has(g.out, "mira: latest is run evals-9"), g.out);
    BOOST_TEST(has(g.out, "## Mira eval results"), g.out);
    BOOST_TEST(has(read_file(dir / "junit.xml"), "<testsuites name=\"mira\""));
  }
}

BOOST_AUTO_TEST_SUITE_END()
