// The `mira` executable: output formats, exit codes, usage errors.
#include "integration/process_util.hpp"

#include <mira/version.hpp>

#include <boost/json/parse.hpp>
#include <boost/test/unit_test.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <optional>

using namespace mira::test;
namespace json = boost::json;
namespace fs = std::filesystem;

namespace {

const std::string mira_bin = MIRA_CLI;
const std::string example = MIRA_EXAMPLE_STUDY;

command_result cli(const std::string& args) {
  return run_command(mira_bin + " " + args + " 2>/dev/null");
}

// The output with every run of two or more spaces made two: table rows are padded into
// columns whose width depends on the longest key of the run.
std::string squeezed(const std::string& out) {
  std::string s;
  for (std::size_t i = 0; i < out.size(); ++i)
    if (!(out[i] == ' ' && i >= 2 && out[i - 1] == ' ' && out[i - 2] == ' ')) s += out[i];
  return s;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(mira_cli)

BOOST_AUTO_TEST_CASE(run_prints_a_table_and_exits_0_when_everything_passes) {
  auto r = cli("run --dry-run --max-retries 1 -- " + example);
  BOOST_TEST(r.code == 0);
  BOOST_TEST(
      r.out.find("37 passed, 0 failed, 1 n/a, 3 skipped, 0 cancelled, 0 errors (41 cases)") !=
      std::string::npos);
  // The infra error is retried, then reported N/A.
  BOOST_TEST(squeezed(r.out).find("N/A  outage/provider-503@sim  (gave up after 2 attempts: "
                                  "provider returned 503") != std::string::npos);
  BOOST_TEST(r.out.find("coin/flip@sim  3/3 passed · rate 100% · pass@1 1.00 · pass@2 1.00 · "
                        "pass@3 1.00") != std::string::npos);
  BOOST_TEST(r.out.find("arithmetic    25/25") != std::string::npos);
  BOOST_TEST(squeezed(r.out).find("SKIP  greet/hi@anthropic/claude-opus  (target unavailable)") !=
             std::string::npos);
  BOOST_TEST(r.out.find("PASS  coin/flip@sim#2") != std::string::npos);
  BOOST_TEST(r.out.find("PASS  reasoning/puzzle-1@sim[effort=high]") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(jsonl_is_one_result_per_case_with_its_key) {
  auto r = cli("run --dry-run -j 3 --max-retries 0 --format jsonl -- " + example);
  BOOST_TEST(r.code == 0);
  std::istringstream in(r.out);
  std::set<std::string> keys;
  std::optional<json::object> summary;
  for (std::string line; std::getline(in, line);) {
    auto v = json::parse(line).as_object();
    if (v.contains("summary")) {
      summary = v.at("summary").as_object();
      continue;
    }
    keys.insert(std::string(v.at("key").as_string()));
    BOOST_TEST(v.contains("status"));
    BOOST_TEST(v.contains("transcript"));
  }
  BOOST_TEST(keys.size() == 41u);
  BOOST_TEST(keys.count("arithmetic/case-24@sim") == 1u);
  BOOST_REQUIRE(summary);
  BOOST_TEST(summary->at("counts").at("passed").as_int64() == 37);
  BOOST_TEST(summary->at("trials").at(0).at("pass_at_k").at("3").to_number<double>() == 1.0);
}

BOOST_AUTO_TEST_CASE(a_timed_out_case_is_cancelled_and_fails_the_run) {
  auto r = cli("run --dry-run --max-retries 0 --timeout 0.2 -- " + example + " --slow-ms 30000");
  BOOST_TEST(r.code == 1);
  BOOST_TEST(squeezed(r.out).find("FAIL  slow/long-task@sim  (timed out after 0.2 s)") !=
             std::string::npos);
}

BOOST_AUTO_TEST_CASE(list_prints_every_page) {
  auto r = cli("list --json -- " + example);
  BOOST_TEST(r.code == 0);
  auto v = json::parse(r.out);
  BOOST_TEST(v.at("evals").at(1).at("name").as_string() == "arithmetic");
  BOOST_TEST(v.at("evals").at(1).at("samples").as_array().size() == 25u);
  auto text = cli("list -- " + example);
  BOOST_TEST(text.out.find("arithmetic — Adds two numbers (paginated dataset)  (25 samples)") !=
             std::string::npos);
}

BOOST_AUTO_TEST_CASE(usage_errors_exit_2) {
  BOOST_TEST(cli("").code == 2);
  BOOST_TEST(cli("frobnicate").code == 2);
  BOOST_TEST(cli("run").code == 2);
  BOOST_TEST(cli("run --dry-run --timeout soon -- x").code == 2);
  BOOST_TEST(cli("run --dry-run --timeout -1 -- x").code == 2);
  BOOST_TEST(cli("run --dry-run -j 0 -- x").code == 2);
  BOOST_TEST(cli("run --dry-run --format yaml -- x").code == 2);  // xml is junit's alias
  BOOST_TEST(cli("run --dry-run --bogus -- x").code == 2);
  BOOST_TEST(cli("run --dry-run --help").code == 0);
  // The version printed is the one project() sets, through the generated mira/version.hpp.
  BOOST_TEST(cli("--version").out == "mira " + std::string(mira::version) + " (protocol 1.1)\n");
}

// A report that cannot be written is refused before the study starts (it failed, rc 3, after
// the whole suite had run), and nothing is saved.
BOOST_AUTO_TEST_CASE(an_out_that_cannot_be_written_is_refused_before_the_run) {
  temp_dir dir;
  const auto results = (dir.path / "results").string();
  for (const auto& out : {dir.path / "nodir" / "x.xml", dir.path}) {
    auto r = run_command(mira_bin + " run --format junit --results-dir " + results + " --out " +
                         out.string() + " -- " + example + " 2>&1");
    BOOST_TEST(r.code == 2, r.out);
    BOOST_TEST(r.out.find("mira: --out " + out.string() + ": ") != std::string::npos, r.out);
    BOOST_TEST(!fs::exists(results));
  }
  // A device is written in place, and is fine.
  BOOST_TEST(cli("run --dry-run --format junit --out /dev/null -- " + example).code == 0);
}

BOOST_AUTO_TEST_CASE(host_and_study_errors_exit_3) {
  BOOST_TEST(cli("run --dry-run -- /nonexistent/study").code == 3);
  BOOST_TEST(cli("list -- /bin/false").code == 3);
  auto died = cli(std::string("run --dry-run -- ") + MIRA_PYTHON3 +
                  " " MIRA_PY_STUDY " --run-ms 500 --die-after 2");
  BOOST_TEST(died.code == 3);
}

// A study of another protocol major: the mismatch is said once (it used to be logged by the
// host and printed by the CLI).
BOOST_AUTO_TEST_CASE(a_protocol_mismatch_is_printed_once) {
  auto r = run_command(mira_bin +
                       " list -- /bin/sh -c 'read l; printf \"%s\\n\" "
                       "\"{\\\"id\\\":1,\\\"result\\\":{\\\"protocol_version\\\":\\\"2.0\\\","
                       "\\\"study\\\":\\\"old\\\",\\\"evals\\\":0}}\"; cat >/dev/null' 2>&1");
  BOOST_TEST(r.code == 3);
  std::size_t n = 0;
  for (auto pos = r.out.find("speaks protocol 2.0"); pos != std::string::npos;
       pos = r.out.find("speaks protocol 2.0", pos + 1))
    ++n;
  BOOST_TEST(n == 1u, "the mismatch appears " << n << " times in:\n" << r.out);
}

BOOST_AUTO_TEST_CASE(plan_shows_counts_and_cases_without_running) {
  auto r = cli("plan -- " + example);
  BOOST_TEST(r.code == 0);
  BOOST_TEST(r.out.find("reasoning: 2 sample(s) x 1 target(s) x 2 axis combination(s) x 1 "
                        "trial(s) = 4 case(s)") != std::string::npos);
  BOOST_TEST(r.out.find("coin: 1 sample(s) x 1 target(s) x 1 axis combination(s) x 3 trial(s) = "
                        "3 case(s)") != std::string::npos);
  BOOST_TEST(r.out.find("total: 41 case(s), 3 on unavailable targets (reported as skipped)") !=
             std::string::npos);
  auto j = cli("plan --json --evals 'reason*' --axis effort=high -- " + example);
  BOOST_TEST(j.code == 0);
  BOOST_TEST(j.out ==
             "{\"eval\":\"reasoning\",\"sample\":\"puzzle-1\",\"target\":\"sim\","
             "\"params\":{\"effort\":\"high\"},\"key\":\"reasoning/puzzle-1@sim[effort=high]\","
             "\"provider\":\"sim\"}\n"
             "{\"eval\":\"reasoning\",\"sample\":\"puzzle-2\",\"target\":\"sim\","
             "\"params\":{\"effort\":\"high\"},\"key\":\"reasoning/puzzle-2@sim[effort=high]\","
             "\"provider\":\"sim\"}\n");
  // A filter: the grid's product, then what is left of it.
  auto f = cli("plan puzzle-1 -- " + example);
  BOOST_TEST(f.out.find("reasoning: 2 sample(s) x 1 target(s) x 2 axis combination(s) x 1 "
                        "trial(s) = 4 case(s), 2 after the filter\n") != std::string::npos);
  BOOST_TEST(f.out.find("total: 2 case(s)\n") != std::string::npos);
  auto t = cli("plan --trials 2 --seed 7 coin -- " + example);
  BOOST_TEST(t.out.find("coin: 1 sample(s) x 1 target(s) x 1 axis combination(s) x 2 trial(s) = "
                        "2 case(s)") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(selection_errors_name_the_flag_and_exit_2) {
  auto r = run_command(mira_bin + " plan --axis effort=extreme -- " + example + " 2>&1");
  BOOST_TEST(r.code == 2);
  BOOST_TEST(r.out.find("mira: --axis effort: \"extreme\" matches no value (values: low, high)") !=
             std::string::npos);
  auto e = run_command(mira_bin + " run --dry-run --evals nope -- " + example + " 2>&1");
  BOOST_TEST(e.code == 2);
  BOOST_TEST(e.out.find("--evals: \"nope\" matches no eval") != std::string::npos);
  BOOST_TEST(cli("run --dry-run --axis effort -- x").code == 2);
  BOOST_TEST(cli("run --dry-run --provider-concurrency sim -- x").code == 2);
  BOOST_TEST(cli("run --dry-run --max-cost -3 -- x").code == 2);
}

BOOST_AUTO_TEST_CASE(group_by_breaks_the_pass_rate_down) {
  auto r = cli("run --dry-run --group-by difficulty --evals arithmetic -- " + example);
  BOOST_TEST(r.code == 0);
  BOOST_TEST(r.out.find("-- by difficulty (passed/scored, 95% interval) --\neasy  16/16  100%") !=
             std::string::npos);
  BOOST_TEST(r.out.find("hard  9/9  100%") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(fail_fast_budget_and_deadline_stop_the_run) {
  const std::string py = std::string(MIRA_PYTHON3) + " " MIRA_PY_STUDY;
  auto ff = cli("run --dry-run --fail-fast -- " + py + " --run-ms 20000");
  BOOST_TEST(ff.code == 1);
  BOOST_TEST(squeezed(ff.out).find("STOP  echo/a@sim  (cancelled: fail-fast)") !=
             std::string::npos);
  BOOST_TEST(ff.out.find("FAIL  echo/fail@sim") != std::string::npos);
  BOOST_TEST(ff.out.find("stopped (fail-fast): case echo/fail@sim failed") != std::string::npos);

  auto budget =
      cli("run --dry-run -j 1 --max-cost 0.15 --samples a --trials 5 -- " + py + " --cost 0.1");
  BOOST_TEST(budget.code == 4);
  BOOST_TEST(budget.out.find("2 passed, 0 failed, 0 n/a, 0 skipped, 3 cancelled") !=
             std::string::npos);
  BOOST_TEST(budget.out.find("stopped (budget): the cost budget") != std::string::npos);

  temp_file base;
  const std::string marker = base.path + ".died";
  auto restarted = run_command(mira_bin + " run --dry-run --samples a --trials 4 -- " + py +
                               " --run-ms 50 --die-after 2 --die-once " + marker + " 2>&1");
  std::remove(marker.c_str());
  BOOST_TEST(restarted.code == 0);
  BOOST_TEST(restarted.out.find("mira: starting the study again: the study exited or closed its "
                                "output: the study exited [exit code 3]") != std::string::npos);
  BOOST_TEST(restarted.out.find("4 passed, 0 failed") != std::string::npos);

  auto deadline = cli("run --dry-run --deadline 0.3 -- " + py + " --run-ms 20000");
  BOOST_TEST(deadline.code == 4);
  BOOST_TEST(deadline.out.find("stopped (deadline): the run deadline (0.3 s) passed") !=
             std::string::npos);
}

BOOST_AUTO_TEST_CASE(ctrl_c_cancels_saves_and_tells_how_to_resume) {
  namespace fs = std::filesystem;
  char tmpl[] = "/tmp/mira-int-XXXXXX";
  fs::path dir = ::mkdtemp(tmpl);
  auto results = (dir / "results").string();
  const std::string py = std::string(MIRA_PYTHON3) + " " MIRA_PY_STUDY;
  // The study sends the host SIGINT when the third run arrives: Ctrl-C at a known point.
  auto r = run_command(mira_bin + " run --samples a --trials 6 -j 3 --results-dir " + results +
                       " -- " + py + " --run-ms 20000 --interrupt-host-after 3 2>&1");
  BOOST_TEST(r.code == 130);
  BOOST_TEST(r.out.find("mira: interrupted: cancelling the cases in flight") != std::string::npos);
  BOOST_TEST(r.out.find("stopped (interrupted)") != std::string::npos);
  BOOST_TEST(r.out.find("resume with: mira run --resume ") != std::string::npos);
  std::vector<fs::path> runs(fs::directory_iterator(results), fs::directory_iterator{});
  BOOST_REQUIRE(runs.size() == 1u);
  auto id = runs[0].filename().string();
  auto resumed =
      cli("run --samples a --trials 6 --resume " + id + " --results-dir " + results + " -- " + py);
  BOOST_TEST(resumed.code == 0);
  BOOST_TEST(resumed.out.find("6 passed, 0 failed") != std::string::npos);
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(resume_warns_about_a_changed_study_version_seed_or_eval) {
  temp_dir dir;
  const std::string py = std::string(MIRA_PYTHON3) + " " MIRA_PY_STUDY;
  auto results = dir / "results";
  BOOST_TEST(cli("run --samples a --seed 7 --results-dir " + results + " -- " + py).code == 0);
  std::vector<std::filesystem::path> runs(std::filesystem::directory_iterator(results),
                                          std::filesystem::directory_iterator{});
  BOOST_REQUIRE(runs.size() == 1u);
  auto id = runs[0].filename().string();
  auto same = run_command(mira_bin + " run --samples a --seed 7 --resume " + id +
                          " --results-dir " + results + " -- " + py + " 2>&1");
  BOOST_TEST(same.code == 0);
  BOOST_TEST(same.out.find("warning") == std::string::npos);
  auto changed =
      run_command(mira_bin + " run --samples a --seed 8 --resume " + id + " --results-dir " +
                  results + " -- " + py + " --study-version 0.0.2 --scorer exact 2>&1");
  BOOST_TEST(changed.code == 0);
  BOOST_TEST(changed.out.find("made by study version 0.0.1, this is 0.0.2") != std::string::npos);
  BOOST_TEST(changed.out.find("made with --seed 7, this run uses 8") != std::string::npos);
  BOOST_TEST(changed.out.find("eval 'echo' changed since run " + id) != std::string::npos);
}

BOOST_AUTO_TEST_CASE(report_formats_are_well_formed) {
  temp_file xml, csv, md, js;
  const std::string base = "run --dry-run --max-retries 0 ";
  BOOST_TEST(cli(base + "--format junit --out " + xml.path + " -- " + example).code == 0);
  auto parsed = run_command(std::string(MIRA_PYTHON3) +
                            " -c \"import sys, xml.dom.minidom as m; d = m.parse(sys.argv[1]); "
                            "print(len(d.getElementsByTagName('testcase')), "
                            "len(d.getElementsByTagName('skipped')))\" " +
                            xml.path);
  BOOST_TEST(parsed.out == "41 4\n");  // 3 unavailable + 1 N/A
  BOOST_TEST(cli(base + "--format csv --out " + csv.path + " -- " + example).code == 0);
  auto rows = run_command(std::string(MIRA_PYTHON3) +
                          " -c \"import csv, sys; r = list(csv.reader(open(sys.argv[1]))); "
                          "print(len(r), r[0][8], r[1][8])\" " +
                          csv.path);
  BOOST_TEST(rows.out == "42 status passed\n");
  BOOST_TEST(cli(base + "--format md --out " + md.path + " -- " + example).code == 0);
  BOOST_TEST(read_file(md.path).find("| arithmetic | 25/25 | - |") != std::string::npos);
  BOOST_TEST(cli(base + "--format json --out " + js.path + " -- " + example).code == 0);
  auto report = json::parse(read_file(js.path)).as_object();
  BOOST_TEST(report.at("cases").as_array().size() == 41u);
  BOOST_TEST(cli("run --dry-run --out x.json -- " + example).code == 2);  // --out needs a format
}

BOOST_AUTO_TEST_CASE(colour_only_when_asked_for_or_on_a_terminal_and_never_with_no_color) {
  const std::string run = "run --dry-run --max-retries 0 --evals greet ";
  // stdout is a pipe here: auto means no colour.
  BOOST_TEST(cli(run + "-- " + example).out.find('\x1b') == std::string::npos);
  auto always = cli(run + "--color always -- " + example);
  BOOST_TEST(always.out.find("\x1b[1;32mPASS\x1b[0m  greet/hi@sim") != std::string::npos);
  auto no_color = run_command("NO_COLOR=1 " + mira_bin + " " + run + "--color always -- " +
                              example + " 2>/dev/null");
  BOOST_TEST(no_color.out.find('\x1b') == std::string::npos);
  BOOST_TEST(no_color.out.find("PASS  greet/hi@sim") != std::string::npos);
  BOOST_TEST(cli(run + "--color sometimes -- " + example).code == 2);
}

BOOST_AUTO_TEST_CASE(a_heartbeat_reports_progress_when_stderr_is_not_a_terminal) {
  // A 0.1 s heartbeat over a run of about a second: several lines, whatever the scheduling.
  auto r = run_command(mira_bin + " run --dry-run --heartbeat 0.1 --samples a --trials 3 -j 1 -- " +
                       MIRA_PYTHON3 + " " MIRA_PY_STUDY " --run-ms 300 2>&1 >/dev/null");
  BOOST_TEST(r.code == 0);
  BOOST_TEST(r.out.find("progress: [") != std::string::npos);
  BOOST_TEST(r.out.find(" in progress · ") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(study_cmd_splits_like_a_shell) {
  auto r =
      cli(std::string("list --study-cmd \"") + MIRA_PYTHON3 + " '" MIRA_PY_STUDY "' --run-ms 1\"");
  BOOST_TEST(r.code == 0);
  BOOST_TEST(r.out.find("samples: a, b, fail") != std::string::npos);
  BOOST_TEST(cli("list --study-cmd \"python3 'unterminated\"").code == 2);
  BOOST_TEST(cli("list --study-cmd ''").code == 2);
}

BOOST_AUTO_TEST_CASE(a_study_that_never_answers_initialize_times_out) {
  auto t0 = std::chrono::steady_clock::now();
  auto r = run_command(mira_bin + " list --init-timeout 0.3 -- " + MIRA_PYTHON3 +
                       " -c 'import time; time.sleep(60)' 2>&1");
  BOOST_TEST(r.code == 3);
  BOOST_TEST(r.out.find("the study did not answer initialize within 0.3 s (--init-timeout)") !=
             std::string::npos);
  BOOST_TEST((std::chrono::steady_clock::now() - t0 < std::chrono::seconds(20)));
}

BOOST_AUTO_TEST_CASE(the_study_environment_can_be_chosen_and_only_names_are_saved) {
  auto r = run_command(mira_bin + " list --study-env-clear --study-env MIRA_X=1 --study-env PATH " +
                       "-- sh -c 'echo \"x=$MIRA_X home=${HOME:-unset}\" >&2' 2>&1");
  BOOST_TEST(r.out.find("[study] x=1 home=unset") != std::string::npos);
  namespace fs = std::filesystem;
  char tmpl[] = "/tmp/mira-env-XXXXXX";
  fs::path dir = ::mkdtemp(tmpl);
  auto saved = cli("run --max-retries 0 --study-env MIRA_SECRET=hunter2 --results-dir " +
                   (dir / "r").string() + " -- " + example);
  BOOST_TEST(saved.code == 0);
  std::vector<fs::path> runs(fs::directory_iterator(dir / "r"), fs::directory_iterator{});
  BOOST_REQUIRE(runs.size() == 1u);
  auto meta = read_file((runs[0] / "meta.json").string());
  BOOST_TEST(meta.find("MIRA_SECRET") != std::string::npos);
  BOOST_TEST(meta.find("hunter2") == std::string::npos);
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(run_gives_the_study_the_environment_it_was_given) {
  // `mira run` starts itself again with glibc.malloc.hugetlb=1 (tools/mira/main.cpp): the study
  // must see neither that nor the variable that carries the original value across.
  const std::string probe =
      " run --dry-run -- sh -c 'echo \"t=${GLIBC_TUNABLES:-unset} "
      "s=${MIRA_SAVED_GLIBC_TUNABLES:-unset}\" >&2' 2>&1";
  auto unset = run_command("env -u GLIBC_TUNABLES " + mira_bin + probe);
  BOOST_TEST(unset.out.find("[study] t=unset s=unset") != std::string::npos, unset.out);
  auto own = run_command("env GLIBC_TUNABLES=glibc.malloc.arena_max=2 " + mira_bin + probe);
  BOOST_TEST(own.out.find("[study] t=glibc.malloc.arena_max=2 s=unset") != std::string::npos,
             own.out);
}

BOOST_AUTO_TEST_CASE(a_run_is_saved_and_resumes_without_rerunning_saved_cases) {
  namespace fs = std::filesystem;
  char tmpl[] = "/tmp/mira-cli-XXXXXX";
  fs::path dir = ::mkdtemp(tmpl);
  auto results = (dir / "results").string();
  const std::string py = std::string(MIRA_PYTHON3) + " " MIRA_PY_STUDY;

  // The example study: one run folder, one result per case, meta.json.
  auto ex = cli("run --max-retries 0 --results-dir " + results + " -- " + example);
  BOOST_TEST(ex.code == 0);
  std::vector<fs::path> runs(fs::directory_iterator(results), fs::directory_iterator{});
  BOOST_REQUIRE(runs.size() == 1u);
  BOOST_TEST(std::distance(fs::directory_iterator(runs[0] / "cases"), fs::directory_iterator{}) ==
             41);
  auto meta = json::parse(read_file((runs[0] / "meta.json").string())).as_object();
  BOOST_TEST(meta.at("study").at("study").as_string() == "example-study");
  BOOST_TEST(meta.at("summary").at("counts").at("passed").as_int64() == 37);
  BOOST_TEST(meta.at("environment").at("cpus").as_int64() > 0);
  BOOST_TEST(meta.at("fingerprints").at("greet").as_string().size() == 64u);
  auto report = json::parse(read_file((runs[0] / "report.json").string())).as_object();
  BOOST_TEST(report.at("records").at("count").as_int64() == 41);
  BOOST_TEST(report.at("summary").at("trials").as_array().size() == 1u);
  // The events eval's notifications, each with its case key.
  auto events = read_file((runs[0] / "events.ndjson").string());
  BOOST_TEST(events.find("{\"key\":\"events/tool-use@sim\",\"method\":\"event\"") !=
             std::string::npos);
  BOOST_TEST(fs::exists(runs[0] / "study.stderr.log"));
  // mira report shows it again from the folder alone.
  auto again = cli("report " + runs[0].filename().string() + " --results-dir " + results);
  BOOST_TEST(again.code == 0);
  BOOST_TEST(
      again.out.find("37 passed, 0 failed, 1 n/a, 3 skipped, 0 cancelled, 0 errors (41 cases)") !=
      std::string::npos);
  BOOST_TEST(again.out.find("coin/flip@sim  3/3 passed") != std::string::npos);
  BOOST_TEST(cli("report 20990101T000000Z-0000 --results-dir " + results).code == 2);
  fs::remove_all(results);

  // Fail-fast leaves two cases cancelled, unsaved; resuming runs exactly those two.
  auto first = cli("run --fail-fast --results-dir " + results + " -- " + py + " --run-ms 20000");
  BOOST_TEST(first.code == 1);
  runs.assign(fs::directory_iterator(results), fs::directory_iterator{});
  BOOST_REQUIRE(runs.size() == 1u);
  auto id = runs[0].filename().string();
  temp_file rec;
  auto resumed = run_command(mira_bin + " run --resume " + id + " --results-dir " + results +
                             " -- " + py + " --record " + rec.path + " 2>&1");
  BOOST_TEST(resumed.code == 1);  // echo/fail is still a failure, from the saved run
  BOOST_TEST(resumed.out.find("resuming run " + id + ": 1 of 3 case(s) already saved") !=
             std::string::npos);
  BOOST_TEST(resumed.out.find("2 passed, 1 failed, 0 n/a, 0 skipped, 0 cancelled") !=
             std::string::npos);
  std::size_t run_frames = 0;
  std::istringstream in(read_file(rec.path));
  for (std::string line; std::getline(in, line);)
    if (line.find("\"method\":\"run\"") != std::string::npos) {
      ++run_frames;
      BOOST_TEST(line.find("\"sample\":\"fail\"") == std::string::npos);
    }
  BOOST_TEST(run_frames == 2u);
  BOOST_TEST(std::distance(fs::directory_iterator(runs[0] / "cases"), fs::directory_iterator{}) ==
             3);

  // A resume of nothing, or by another study, is refused.
  auto missing = run_command(mira_bin + " run --resume 20990101T000000Z-0000 --results-dir " +
                             results + " -- " + py + " 2>&1");
  BOOST_TEST(missing.code == 2);
  BOOST_TEST(missing.out.find("no saved run \"20990101T000000Z-0000\"") != std::string::npos);
  auto other = run_command(mira_bin + " run --resume " + id + " --results-dir " + results + " -- " +
                           example + " 2>&1");
  BOOST_TEST(other.code == 2);
  BOOST_TEST(other.out.find("was made by study 'py-study', this is 'example-study'") !=
             std::string::npos);
  BOOST_TEST(cli("run --resume ../x -- " + py).code == 2);

  // --dry-run saves nothing.
  auto dry = cli("run --dry-run --results-dir " + (dir / "dry").string() + " -- " + py);
  BOOST_TEST(dry.code == 1);
  BOOST_TEST(!fs::exists(dir / "dry"));
  BOOST_TEST(cli("run --dry-run --resume x -- " + py).code == 2);
  fs::remove_all(dir);
}

// A saved run of the example study's greet eval in `results`; its id.
std::string saved_greet_run(const std::string& results) {
  namespace fs = std::filesystem;
  auto r = cli("run --evals greet --max-retries 0 --results-dir " + results + " -- " + example);
  BOOST_TEST_REQUIRE(r.code == 0);
  std::vector<fs::path> runs(fs::directory_iterator(results), fs::directory_iterator{});
  BOOST_TEST_REQUIRE(runs.size() == 1u);
  return runs[0].filename().string();
}

BOOST_AUTO_TEST_CASE(report_out_writes_a_fifo_in_place_and_a_symlink_through) {
  namespace fs = std::filesystem;
  temp_dir dir;
  auto results = dir / "results";
  auto id = saved_greet_run(results);
  const auto report = "report " + id + " --results-dir " + results + " --format json --out ";

  // A FIFO is written, not replaced. Opened for reading first (without blocking), with room
  // for the whole report, so the CLI neither waits for a reader nor blocks on a full pipe, and
  // a CLI that replaced the FIFO leaves nothing to read instead of a hang.
  auto fifo = dir.path / "report.fifo";
  BOOST_REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  int rd = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  BOOST_REQUIRE(rd >= 0);
  ::fcntl(rd, F_SETPIPE_SZ, 1 << 20);
  BOOST_TEST(cli(report + fifo.string()).code == 0);
  std::string got;
  char buf[65536];
  for (ssize_t n; (n = ::read(rd, buf, sizeof buf)) > 0;)
    got.append(buf, static_cast<std::size_t>(n));
  ::close(rd);
  BOOST_TEST(fs::is_fifo(fs::symlink_status(fifo)));
  boost::system::error_code ec;
  auto doc = json::parse(got, ec);
  BOOST_TEST_REQUIRE(!ec, "the FIFO received: " << got.substr(0, 200));
  BOOST_TEST(doc.at("cases").as_array().size() > 0u);

  // A symbolic link is written through: the target changes, the link stays a link.
  fs::create_directory(dir.path / "site");
  { std::ofstream(dir.path / "site" / "report.json") << "old"; }
  auto link = dir.path / "latest.json";
  fs::create_symlink("site/report.json", link);
  BOOST_TEST(cli(report + link.string()).code == 0);
  BOOST_TEST(fs::is_symlink(fs::symlink_status(link)));
  BOOST_TEST(fs::read_symlink(link) == "site/report.json");
  auto written = json::parse(read_file((dir.path / "site" / "report.json").string()));
  BOOST_TEST(written.at("cases").as_array().size() == doc.at("cases").as_array().size());
  // A link to a file not there yet: the file is made where the link points.
  auto dangling = dir.path / "next.json";
  fs::create_symlink("site/next.json", dangling);
  BOOST_TEST(cli(report + dangling.string()).code == 0);
  BOOST_TEST(fs::is_symlink(fs::symlink_status(dangling)));
  BOOST_TEST(fs::is_regular_file(dir.path / "site" / "next.json"));
  BOOST_TEST(std::distance(fs::directory_iterator(dir.path / "site"), fs::directory_iterator{}) ==
             2);  // no temporary left
  // "-" is standard output: the report instead of the table.
  auto dash = cli(report + "-");
  BOOST_TEST(dash.code == 0);
  BOOST_TEST(json::parse(dash.out).at("cases").as_array().size() ==
             doc.at("cases").as_array().size());
  BOOST_TEST(!fs::exists(dir.path / "-"));
}

BOOST_AUTO_TEST_CASE(a_report_of_unreadable_results_is_an_error_naming_them) {
  namespace fs = std::filesystem;
  temp_dir dir;
  auto results = dir / "results";
  auto id = saved_greet_run(results);
  std::vector<fs::path> files;
  for (auto& e : fs::directory_iterator(fs::path(results) / id / "cases"))
    files.push_back(e.path() / "result.json");
  BOOST_REQUIRE(files.size() >= 2u);
  const auto report = mira_bin + " report " + id + " --results-dir " + results + " 2>&1";

  // One unreadable: the report of the others, a warning naming it, and exit 3.
  std::ofstream(files[0]) << "{\"torn";
  auto some = run_command(report);
  BOOST_TEST(some.code == 3);
  BOOST_TEST(some.out.find("cannot read " + files[0].string()) != std::string::npos);
  BOOST_TEST(some.out.find("the report is incomplete: 1 of " + std::to_string(files.size()) +
                           " saved result(s) of run " + id + " cannot be read") !=
             std::string::npos);
  BOOST_TEST(some.out.find("(" + std::to_string(files.size() - 1) + " cases)") !=
             std::string::npos);

  // None readable: no report at all, an error, exit 3.
  for (auto& f : files) std::ofstream(f) << "not json";
  auto none = run_command(report);
  BOOST_TEST(none.code == 3);
  for (auto& f : files) BOOST_TEST(none.out.find("cannot read " + f.string()) != std::string::npos);
  BOOST_TEST(none.out.find("none of the " + std::to_string(files.size()) +
                           " saved result(s) of run " + id + " can be read") != std::string::npos);
  BOOST_TEST(none.out.find("(0 cases)") == std::string::npos);
  BOOST_TEST(none.out.find("pass rate") == std::string::npos);
}

// A disk that fills while the run finishes (here a file size limit, which fails writes the same
// way): the run exited 0 with a warning naming no file and left no report.json. Now the run
// fails (exit 3) naming the file, stays unfinished, and a resume finishes it. `mira report`
// printed "rewrote report.json and report.html" after failing to, and exited 0.
BOOST_AUTO_TEST_CASE(a_finish_that_cannot_write_fails_the_run_and_names_the_file) {
  temp_dir dir;
  auto results = dir / "results";
  const std::string py = std::string(MIRA_PYTHON3) + " " MIRA_PY_STUDY;
  // 12 blocks of 512 bytes: room for meta.json and report.json, not for report.html.
  const std::string limited = "sh -c \"trap '' XFSZ; ulimit -f 12; exec " + mira_bin;
  const std::string run = " --results-dir " + results + " -- " + py + " 2>&1";
  auto first = run_command(limited + " run" + run + "\"");
  BOOST_TEST(first.code == 3, first.out);
  auto id = only_run(results).filename().string();
  auto folder = fs::path(results) / id;
  BOOST_TEST(
      first.out.find("mira: error: cannot finish run " + id + ": cannot write " +
                     (folder / "report.html").string() + ": File too large") != std::string::npos,
      first.out);
  BOOST_TEST(first.out.find("resume with: ") != std::string::npos);
  auto meta = json::parse(read_file((folder / "meta.json").string()));
  BOOST_TEST(meta.at("finished").as_string().empty());

  auto resumed = run_command(mira_bin + " run --resume " + id + run);
  BOOST_TEST(resumed.code == 1);  // echo/fail
  BOOST_TEST(resumed.out.find("3 of 3 case(s) already saved") != std::string::npos);
  BOOST_TEST(fs::exists(folder / "report.html"));
  BOOST_TEST(
      !json::parse(read_file((folder / "meta.json").string())).at("finished").as_string().empty());

  // A finished run's files are rewritten only when one is missing: report.html is.
  fs::rename(folder / "report.html", folder / "report.html.kept");
  auto report = run_command(limited + " report " + id + " --results-dir " + results + " 2>&1\"");
  BOOST_TEST(report.code == 3, report.out);
  BOOST_TEST(report.out.find("mira: error: cannot write " + (folder / "report.html").string() +
                             ": File too large") != std::string::npos,
             report.out);
  BOOST_TEST(report.out.find("rewrote") == std::string::npos, report.out);
  BOOST_TEST(!fs::exists(folder / "report.html"));  // written whole or not at all
}

// A case whose record cannot be written: the message names the file, in both layouts (it named
// the case only).
BOOST_AUTO_TEST_CASE(a_result_that_cannot_be_saved_names_its_file) {
  const std::string py = std::string(MIRA_PYTHON3) + " " MIRA_PY_STUDY;
  for (std::string layout : {"per-case", "compact"}) {
    temp_dir dir;
    auto results = dir / "results";
    auto r =
        run_command("sh -c \"trap '' XFSZ; ulimit -f 0; exec " + mira_bin + " run -j 1 --store " +
                    layout + " --results-dir " + results + " -- " + py + " 2>&1\"");
    BOOST_TEST(r.code == 3, r.out);
    auto folder = only_run(results);
    auto file = layout == "compact" ? folder / "segments" / "000001.ndjson"
                                    : folder / "cases" / "echo_2fa_40sim" / "result.json";
    BOOST_TEST(r.out.find("mira: error: cannot save the result of echo/a@sim to " + file.string() +
                          ": File too large") != std::string::npos,
               r.out);
    BOOST_TEST(r.out.find("mira: warning: cannot write " + (folder / "meta.json").string() +
                          ": File too large") != std::string::npos,
               r.out);
  }
}

// A meta.json with flipped bytes: doctor says how to fix it, and --fix rebuilds it from the case
// records (both layouts) under the run's lock, keeping the damaged file and every record.
BOOST_AUTO_TEST_CASE(doctor_fix_rebuilds_a_damaged_meta_json_from_the_records) {
  temp_dir dir;
  auto results = dir / "results";
  const std::string py = std::string(MIRA_PYTHON3) + " " MIRA_PY_STUDY;
  for (auto* layout : {"per-case", "compact"}) {
    fs::remove_all(results);
    BOOST_TEST(run_command(mira_bin + " run --store " + layout + " --results-dir " + results +
                           " -- " + py + " >/dev/null 2>&1")
                   .code == 1);  // echo/fail
    auto id = only_run(results).filename().string();
    auto folder = fs::path(results) / id;
    auto meta = read_file((folder / "meta.json").string());
    auto damaged = meta;
    damaged[damaged.size() / 2] = '\x01';
    damaged[damaged.size() / 3] = '\x02';
    std::ofstream(folder / "meta.json", std::ios::binary | std::ios::trunc) << damaged;
    auto records_before = run_command("cd " + folder.string() +
                                      " && find cases segments -type f 2>/dev/null | sort | "
                                      "xargs cat");
    const std::string doctor =
        "cd " + dir.path.string() + " && " + mira_bin + " doctor --results-dir " + results;
    auto told = run_command(doctor + " 2>&1");
    BOOST_TEST(told.code == 1);
    BOOST_TEST(told.out.find("`mira doctor --fix` rebuilds meta.json from the case records") !=
                   std::string::npos,
               told.out);
    auto fixed = run_command(doctor + " --fix 2>&1");
    BOOST_TEST(fixed.out.find("fixed: run " + id + ": meta.json rebuilt from 3 case record(s) (" +
                              layout + " layout); the damaged one kept as " +
                              (folder / "meta.json.damaged").string()) != std::string::npos,
               fixed.out);
    BOOST_TEST(read_file((folder / "meta.json.damaged").string()) == damaged);
    BOOST_TEST(run_command("cd " + folder.string() +
                           " && find cases segments -type f 2>/dev/null | sort | xargs cat")
                   .out == records_before.out);
    auto report = run_command(mira_bin + " report " + id + " --results-dir " + results);
    BOOST_TEST(report.code == 0);
    BOOST_TEST(report.out.find("2 passed, 1 failed, 0 n/a, 0 skipped, 0 cancelled, 0 errors (3 "
                               "cases)") != std::string::npos,
               report.out);
    // Damaged again: the first damaged copy is never overwritten.
    std::ofstream(folder / "meta.json", std::ios::binary | std::ios::trunc) << damaged;
    auto refused = run_command(doctor + " --fix 2>&1");
    BOOST_TEST(refused.code == 1);
    BOOST_TEST(
        refused.out.find("could not fix run " + id + ": " +
                         (folder / "meta.json.damaged").string() + " exists") != std::string::npos,
        refused.out);
  }
}

BOOST_AUTO_TEST_SUITE_END()
