// The CI gates of `mira run` and `mira report` end to end, against test/studies/ci_study.py
// (passes, failures, errors, N/A, an unavailable target, awkward names, slow cases, a Ctrl-C at
// a known point): a stopped run stays stopped in every artefact and `mira report`, `--check`
// and `--min-scored` exit as the run would, named runs and `latest`, several --out files, and a
// run folder written only when its report is missing or stale.
#include "common/temp_dir.hpp"
#include "integration/process_util.hpp"

#include <boost/json/parse.hpp>
#include <boost/test/unit_test.hpp>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

using namespace mira::test;
namespace fs = std::filesystem;
namespace json = boost::json;

namespace {

const std::string mira_bin = MIRA_CLI;
const std::string study = std::string(MIRA_PYTHON3) + " " MIRA_CI_STUDY;

bool contains(const std::string& text, const std::string& piece) {
  return text.find(piece) != std::string::npos;
}

// `mira ARGS` in `dir` with stdout and stderr together; N/A at once (no retry backoff).
command_result mira_in(const temp_dir& dir, const std::string& args) {
  return run_command("cd '" + dir.path.string() + "' && " + mira_bin + " " + args +
                     " 2>&1 </dev/null");
}

std::string run_flags(const std::string& more = "") {
  return "run --max-retries 0 --color never " + more + " -- " + study;
}

json::object summary_of(const std::string& json_text) {
  return json::parse(json_text).at("summary").as_object();
}

std::vector<std::string> keys_of(const std::string& json_text) {
  std::vector<std::string> keys;
  const auto doc = json::parse(json_text);  // outlives the loop
  for (auto& c : doc.at("cases").as_array()) keys.emplace_back(c.at("key").as_string());
  return keys;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(cli_gates)

// `kill -INT` at the 4th case: report.json said stopped, `mira report` then said all passed,
// exit 0, and doctor found nothing.
BOOST_AUTO_TEST_CASE(a_stopped_run_stays_stopped_in_every_artefact_and_gate) {
  temp_dir dir;
  auto run = mira_in(dir, run_flags("-j 1 --run-id stopped --format json --out run.json") +
                              " --interrupt-host-after 4");
  BOOST_TEST(run.code == 130, run.out);
  BOOST_TEST(contains(run.out, "resume with: mira run --resume stopped"), run.out);
  auto at_run = summary_of(read_file(dir / "run.json"));
  BOOST_TEST(at_run.at("stopped").at("reason").as_string() == "interrupted");
  const auto unfinished = at_run.at("unfinished").as_int64();
  BOOST_TEST(unfinished > 0);
  BOOST_TEST(at_run.at("run_id").as_string() == "stopped");
  BOOST_TEST(at_run.at("study").as_string() == "ci-study");

  // Re-rendered: the same counts, the same stop, however often.
  for (int pass = 0; pass < 2; ++pass) {
    auto again = run_command("cd '" + dir.path.string() + "' && " + mira_bin +
                             " report stopped --format json 2>/dev/null");
    BOOST_TEST(again.code == 0);
    auto s = summary_of(again.out);
    BOOST_TEST(s.at("counts") == at_run.at("counts"), again.out);
    BOOST_TEST(s.at("unfinished").as_int64() == unfinished);
    BOOST_TEST(s.at("stopped").at("reason").as_string() == "interrupted");
  }
  auto folder_report = json::parse(read_file(dir / "results/stopped/report.json"));
  BOOST_TEST(folder_report.at("summary").at("stopped").at("reason").as_string() == "interrupted");

  const auto said = std::to_string(unfinished) + " of 28 planned case(s) not finished: stopped " +
                    "(interrupted)";
  auto table = mira_in(dir, "report stopped --color never");
  BOOST_TEST(contains(table.out, said), table.out);
  auto md = mira_in(dir, "report latest --format md");
  BOOST_TEST(contains(md.out, "mira: latest is run stopped"), md.out);
  BOOST_TEST(contains(md.out, "> **Incomplete:** " + said), md.out);
  auto junit = mira_in(dir, "report stopped --format junit");
  BOOST_TEST(contains(junit.out, "name=\"run complete\" time=\"0\"><error message=\"" + said),
             junit.out);
  BOOST_TEST(contains(junit.out, "<testsuites name=\"mira\" tests=\""), junit.out);
  BOOST_TEST(contains(junit.out, "timestamp=\""), junit.out);
  auto html = mira_in(dir, "report stopped --format html");
  BOOST_TEST(contains(html.out, "<b>Incomplete:</b> " + said), html.out.substr(0, 4000));

  BOOST_TEST(mira_in(dir, "report stopped --check").code == 130);
  auto doctor = mira_in(dir, "doctor");
  BOOST_TEST(
      contains(doctor.out, "run stopped: stopped (interrupted); " + std::to_string(unfinished) +
                               " of 28 planned case(s) not finished; resume it with"),
      doctor.out);

  // Resumed to the end: complete, and the gate is the run's verdict again.
  auto resumed = mira_in(dir, run_flags("--resume latest"));
  BOOST_TEST(resumed.code == 1, resumed.out);  // a failure and an error
  auto done = mira_in(dir, "report stopped --check");
  BOOST_TEST(done.code == 1, done.out);
  BOOST_TEST(!contains(done.out, "not finished"), done.out);
}

// A --fail-fast run: its JUnit from `mira report` had fewer tests than the run's and no sign
// that it stopped.
BOOST_AUTO_TEST_CASE(a_fail_fast_run_reports_and_checks_as_it_ran) {
  temp_dir dir;
  auto run = mira_in(dir, run_flags("-j 1 --fail-fast --run-id ff --out junit:run.xml"));
  BOOST_TEST(run.code == 1, run.out);
  auto report = mira_in(dir, "report ff --format junit");
  BOOST_TEST(contains(report.out, "stopped (fail-fast): case "), report.out);
  BOOST_TEST(contains(read_file(dir / "run.xml"), "stopped (fail-fast): case "));
  BOOST_TEST(mira_in(dir, "report ff --check").code == 1);
}

// A slow case cut off by the run's deadline: exit 4 from the run and from the check, and the
// report says which stop left it unfinished.
BOOST_AUTO_TEST_CASE(a_deadline_stop_checks_as_4) {
  temp_dir dir;
  auto run = mira_in(dir, run_flags("--deadline 1 --run-id late") + " --slow 1 --slow-ms 600000");
  BOOST_TEST(run.code == 4, run.out);
  auto md = mira_in(dir, "report late --format md");
  BOOST_TEST(contains(md.out,
                      "> **Incomplete:** 1 of 30 planned case(s) not finished: stopped "
                      "(deadline): the run deadline (1 s) passed"),
             md.out);
  BOOST_TEST(mira_in(dir, "report late --check").code == 4);
}

// Every target unavailable, or every case N/A: exit 0 and nothing said.
BOOST_AUTO_TEST_CASE(nothing_scored_is_said_and_min_scored_fails_it) {
  temp_dir dir;
  for (std::string knob : {"--all-unavailable", "--all-na"}) {
    auto plain = mira_in(dir, run_flags() + " " + knob);
    BOOST_TEST(plain.code == 0, plain.out);
    BOOST_TEST(contains(plain.out, "mira: warning: no case was scored"), plain.out);
    auto gated = mira_in(dir, run_flags("--min-scored 1") + " " + knob);
    BOOST_TEST(gated.code == 1, gated.out);
    BOOST_TEST(contains(gated.out, "mira: gate failed: 0 case(s) scored, --min-scored asks for 1"),
               gated.out);
    BOOST_TEST(mira_in(dir, "report latest --min-scored 1").code == 1);
  }
  // Enough scored: the gate holds; the run's own verdict (a failure) still counts.
  BOOST_TEST(mira_in(dir, run_flags("--min-scored 5") + " --fail 0 --errors 0").code == 0);
  BOOST_TEST(mira_in(dir, run_flags("--min-scored 100") + " --fail 0 --errors 0").code == 1);
  BOOST_TEST(mira_in(dir, "report latest --check").code == 0);
}

BOOST_AUTO_TEST_CASE(a_named_run_is_refused_when_it_exists_and_latest_finds_it) {
  temp_dir dir;
  BOOST_TEST(mira_in(dir, run_flags("--run-id nightly")).code == 1);
  auto again = mira_in(dir, run_flags("--run-id nightly"));
  BOOST_TEST(again.code == 2, again.out);
  BOOST_TEST(contains(again.out,
                      "--run-id nightly: run nightly already exists in results "
                      "(resume it with --resume nightly, or choose another id)"),
             again.out);
  BOOST_TEST(!contains(again.out, "ci-study"), again.out);  // refused before the study started
  auto bad = mira_in(dir, run_flags("--run-id ../x"));
  BOOST_TEST(bad.code == 2, bad.out);
  BOOST_TEST(mira_in(dir, run_flags("--run-id latest")).code == 2);
  BOOST_TEST(mira_in(dir, run_flags("--run-id other --resume nightly")).code == 2);
  BOOST_TEST(mira_in(dir, run_flags("--run-id second")).code == 1);
  auto latest = mira_in(dir, "report latest --format json");
  BOOST_TEST(contains(latest.out, "mira: latest is run second"), latest.out);
  BOOST_TEST(contains(latest.out, "\"run_id\":\"second\""), latest.out);
  auto none = mira_in(dir, "report latest --results-dir empty");
  BOOST_TEST(none.code == 2, none.out);
  BOOST_TEST(contains(none.out, "latest: there is no saved run in empty"), none.out);
}

// One format per run, --out checked only after the whole suite, and the run's json (plan
// order) and the report's json (key order) listing cases differently.
BOOST_AUTO_TEST_CASE(several_outputs_are_written_checked_first_and_agree) {
  temp_dir dir;
  auto run = mira_in(dir, run_flags("--run-id many --format json --out run.json --out junit:j.xml "
                                    "--out md:s.md --out csv:c.csv --out html:r.html"));
  BOOST_TEST(run.code == 1, run.out);
  for (auto* f : {"run.json", "j.xml", "s.md", "c.csv", "r.html"})
    BOOST_TEST(fs::file_size(dir.path / f) > 0u, f);
  BOOST_TEST(contains(read_file(dir / "j.xml"), "<testsuites name=\"mira\""));
  BOOST_TEST(contains(read_file(dir / "s.md"), "## Mira eval results"));
  auto report = run_command("cd '" + dir.path.string() + "' && " + mira_bin +
                            " report many --format json 2>/dev/null");
  BOOST_TEST((keys_of(report.out) == keys_of(read_file(dir / "run.json"))));
  BOOST_TEST(summary_of(report.out).at("counts") ==
             summary_of(read_file(dir / "run.json")).at("counts"));

  // A path that cannot be written stops the run before the study starts.
  auto refused = mira_in(dir, run_flags("--run-id never --out md:nodir/s.md"));
  BOOST_TEST(refused.code == 2, refused.out);
  BOOST_TEST(contains(refused.out, "mira: --out md:nodir/s.md: the folder nodir does not exist"),
             refused.out);
  BOOST_TEST(!fs::exists(dir.path / "results/never"));
  auto twice = mira_in(dir, run_flags("--out md:s.md --out junit:s.md"));
  BOOST_TEST(twice.code == 2, twice.out);
  BOOST_TEST(mira_in(dir, "report many --out table:t.txt").code == 2);
}

// `mira report` rewrote the run folder on every unfiltered call, a downloaded artefact's too.
BOOST_AUTO_TEST_CASE(the_run_folder_is_written_only_when_its_report_is_missing) {
  temp_dir dir;
  BOOST_TEST(mira_in(dir, run_flags("--run-id kept")).code == 1);
  const auto folder = dir.path / "results/kept";
  const auto html = read_file((folder / "report.html").string());
  const auto stamp = fs::last_write_time(folder / "report.json");
  auto shown = mira_in(dir, "report kept");
  BOOST_TEST(!contains(shown.out, "rewrote"), shown.out);
  BOOST_TEST((fs::last_write_time(folder / "report.json") == stamp));

  fs::remove(folder / "report.html");
  auto elsewhere = mira_in(dir, "report kept --format md --out elsewhere.md");
  BOOST_TEST(elsewhere.code == 0, elsewhere.out);
  BOOST_TEST(!fs::exists(folder / "report.html"));  // --out never writes the run folder
  auto refreshed = mira_in(dir, "report kept");
  BOOST_TEST(contains(refreshed.out, "rewrote report.json and report.html in"), refreshed.out);
  BOOST_TEST(fs::exists(folder / "report.html"));
}

// A record lost from a finished run: the report counted one case fewer and passed. Now the run
// is incomplete, and the report and doctor name the lost case by the keys the session saved.
BOOST_AUTO_TEST_CASE(a_lost_record_makes_the_check_fail) {
  temp_dir dir;
  BOOST_TEST(mira_in(dir, run_flags("--run-id lost") + " --fail 0 --errors 0 --na 0").code == 0);
  const auto folder = dir.path / "results/lost";
  const std::string lost = "math/pass 2@sim";
  std::vector<fs::path> lost_folders;
  for (auto& c : fs::directory_iterator(folder / "cases"))
    if (json::parse(read_file(c.path() / "result.json")).at("key").as_string() == lost)
      lost_folders.push_back(c.path());
  BOOST_REQUIRE(lost_folders.size() == 1u);
  fs::remove_all(lost_folders.front());
  auto check = mira_in(dir, "report lost --check");
  BOOST_TEST(check.code == 3, check.out);
  BOOST_TEST(contains(check.out, "1 of 22 planned case(s) not finished"), check.out);
  auto plain = mira_in(dir, "report lost");
  BOOST_TEST(plain.code == 3, plain.out);
  BOOST_TEST(contains(plain.out,
                      "mira: the report is incomplete: run lost: 1 of 22 planned case(s) have "
                      "no saved record: " +
                          lost + " (`mira run --resume lost` runs them)"),
             plain.out);
  auto doctor = mira_in(dir, "doctor");
  BOOST_TEST(contains(doctor.out,
                      "error: run lost: 1 of 22 planned case(s) have no saved record: " + lost +
                          "; resume it with `mira run --resume lost`"),
             doctor.out);
  // The resume it names runs the lost case, and only it: whole again, its keys its own.
  auto resumed = mira_in(dir, run_flags("--resume lost") + " --fail 0 --errors 0 --na 0");
  BOOST_TEST(resumed.code == 0, resumed.out);
  BOOST_TEST(contains(resumed.out, "resuming run lost: 21 of 22 case(s) already saved"),
             resumed.out);
  BOOST_TEST(contains(read_file(folder / "plan-keys.ndjson"), R"("session":2,)"));
  auto whole = mira_in(dir, "report lost --check");
  BOOST_TEST(whole.code == 0, whole.out);
  BOOST_TEST(!contains(whole.out, "incomplete"), whole.out);
}

// The sharded-matrix recipe: shards, one interrupted, merged; the merge job's gate. A killed
// merge's temporary folder was never removed, and doctor offered to resume it as a run.
BOOST_AUTO_TEST_CASE(a_merged_run_gates_on_its_shards_and_killed_merges_are_cleaned) {
  temp_dir dir;
  const auto leftover = dir.path / "results/.merging-0000dead0000beef";
  fs::create_directories(leftover / "cases");
  auto doctor = mira_in(dir, "doctor");
  BOOST_TEST(contains(doctor.out, "leftover folder of a killed merge: results/.merging-0000dead"),
             doctor.out);
  BOOST_TEST(!contains(doctor.out, "run .merging"), doctor.out);

  BOOST_TEST(mira_in(dir, run_flags("--shard 0/2 --run-id s0")).code == 1);
  auto s1 = mira_in(dir, run_flags("-j 1 --shard 1/2 --run-id s1") + " --interrupt-host-after 3");
  BOOST_TEST(s1.code == 130, s1.out);
  auto merged = mira_in(dir, "merge s0 s1 --run-id merged --allow-partial");
  BOOST_TEST(merged.code == 4, merged.out);
  BOOST_TEST(!fs::exists(leftover));  // removed before the merge began
  auto check = mira_in(dir, "report latest --check");
  BOOST_TEST(contains(check.out, "mira: latest is run merged"), check.out);
  BOOST_TEST(contains(check.out, "stopped (interrupted)"), check.out);
  BOOST_TEST(check.code == 130, check.out);

  // The interrupted shard resumed and merged again: the gate is the suite's verdict.
  BOOST_TEST(mira_in(dir, run_flags("--resume s1")).code == 1);
  BOOST_TEST(mira_in(dir, "merge s0 s1 --run-id whole").code == 0);  // a merge judges nothing
  auto whole = mira_in(dir, "report whole --check");
  BOOST_TEST(whole.code == 1, whole.out);
  BOOST_TEST(!contains(whole.out, "not finished"), whole.out);
}

// A meta.json that cannot be read is the run's trouble (exit 3), not a usage error.
BOOST_AUTO_TEST_CASE(a_damaged_meta_json_is_a_host_error) {
  temp_dir dir;
  BOOST_TEST(mira_in(dir, run_flags("--run-id damaged")).code == 1);
  std::ofstream(dir.path / "results/damaged/meta.json") << "{\"format\":";
  auto report = mira_in(dir, "report damaged");
  BOOST_TEST(report.code == 3, report.out);
  BOOST_TEST(mira_in(dir, "report nosuchrun").code == 2);
}

BOOST_AUTO_TEST_SUITE_END()
