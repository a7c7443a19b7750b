// `mira compare` end to end: two saved runs of a test study whose environment knob makes chosen
// cases fail; the comparison flags exactly those, with the gate's exit code, every output format
// and the bad inputs (another study, an unknown run) exiting 2. Each rule of the gate is driven by
// a real candidate run: one that lacks cases, one stopped by its budget, errors where the base
// passed, nothing scored, and five flips too few for the test.
#include "integration/process_util.hpp"

#include <boost/json/parse.hpp>
#include <boost/test/unit_test.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>

using namespace mira::test;
namespace fs = std::filesystem;
namespace json = boost::json;

namespace {

const std::string mira_bin = MIRA_CLI;
const std::string study = std::string(MIRA_PYTHON3) + " " + MIRA_COMPARE_STUDY;

// stdout and stderr together.
command_result cli(const std::string& args) {
  return run_command(mira_bin + " " + args + " 2>&1");
}

// A saved run of the study with `env` (--study-env flags) in a results dir of its own.
fs::path saved_run(const fs::path& dir, const std::string& env) {
  auto r = cli("run --color never --results-dir " + dir.string() + " " + env + " -- " + study);
  BOOST_REQUIRE_MESSAGE(r.code == 0 || r.code == 1, r.out);
  return only_run(dir);
}

// The checks of the gate's rules in a JSON comparison, by rule name.
std::map<std::string, json::object> rules(const json::object& comparison) {
  std::map<std::string, json::object> out;
  for (auto& r : comparison.at("gate").at("rules").as_array())
    out[std::string(r.at("rule").as_string())] = r.as_object();
  return out;
}

std::set<std::string> keys(const json::value& list) {
  std::set<std::string> out;
  for (auto& c : list.as_array()) out.insert(std::string(c.at("key").as_string()));
  return out;
}

struct two_runs {
  temp_dir tmp;
  fs::path base, candidate;
  two_runs() {
    // Both runs fail text/t5 (both efforts); the candidate also fails math/m0..m3 (8 cases,
    // regressed), passes text/t0@low (failed in the base: fixed), and is N/A on text/t3@high.
    base = saved_run(tmp.path / "base", "--study-env COMPARE_FAIL=text/t5,text/t0@low");
    candidate = saved_run(tmp.path / "cand",
                          "--study-env COMPARE_FAIL=text/t5,math/m0,math/m1,math/m2,math/m3 "
                          "--study-env COMPARE_NA=text/t3@high");
  }
};

}  // namespace

BOOST_AUTO_TEST_SUITE(compare_cli)

BOOST_FIXTURE_TEST_CASE(flags_exactly_the_cases_the_knob_broke, two_runs) {
  auto out = tmp.path / "c.json";
  auto r = cli("compare " + base.string() + " " + candidate.string() + " --format json --out " +
               out.string());
  BOOST_TEST_MESSAGE(r.out);
  BOOST_TEST(r.code == 0);  // a regression, but no --fail-on-regression
  auto j = json::parse(read_file(out.string())).as_object();
  std::set<std::string> regressed;
  for (auto s : {"m0", "m1", "m2", "m3"})
    for (auto e : {"high", "low"})
      regressed.insert(std::string("math/") + s + "@sim[effort=" + e + "]");
  BOOST_TEST(keys(j.at("regressions")) == regressed, boost::test_tools::per_element());
  BOOST_TEST(keys(j.at("fixes")) == (std::set<std::string>{"text/t0@sim[effort=low]"}),
             boost::test_tools::per_element());
  BOOST_TEST(keys(j.at("unpaired")) == (std::set<std::string>{"text/t3@sim[effort=high]"}),
             boost::test_tools::per_element());
  auto& overall = j.at("overall").as_object();
  BOOST_TEST(overall.at("paired").as_int64() == 23);
  BOOST_TEST(overall.at("regressed").as_int64() == 8);
  BOOST_TEST(overall.at("fixed").as_int64() == 1);
  // b=8, c=1: p = 2 * (C(9,0) + C(9,1)) / 2^9 = 2 * 10 / 512 = 0.0390625.
  BOOST_TEST(overall.at("p_value").as_double() == 0.0390625, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(j.at("regression").as_bool());
  BOOST_TEST(j.at("not_scored").as_int64() == 1);
  // Per eval: math dropped (8 of 12), text did not.
  auto& per_eval = j.at("per_eval").as_array();
  BOOST_REQUIRE_EQUAL(per_eval.size(), 2u);
  BOOST_TEST(per_eval[0].at("name").as_string() == "math");
  BOOST_TEST(per_eval[0].at("significant_drop").as_bool());
  BOOST_TEST(per_eval[1].at("name").as_string() == "text");
  BOOST_TEST(!per_eval[1].at("significant_drop").as_bool());

  // The gate.
  r = cli("compare " + base.string() + " " + candidate.string() + " --fail-on-regression");
  BOOST_TEST(r.code == 1, r.out);
  BOOST_TEST(r.out.find("significant drop") != std::string::npos, r.out);
  BOOST_TEST(r.out.find("math/m0@sim[effort=high]") != std::string::npos, r.out);
  // At a stricter alpha, not significant.
  r = cli("compare " + base.string() + " " + candidate.string() +
          " --fail-on-regression --alpha 0.01");
  BOOST_TEST(r.code == 0, r.out);
  // The other direction is a gain, never a regression.
  r = cli("compare " + candidate.string() + " " + base.string() + " --fail-on-regression");
  BOOST_TEST(r.code == 0, r.out);
  BOOST_TEST(r.out.find("significant gain") != std::string::npos, r.out);
}

BOOST_FIXTURE_TEST_CASE(every_format_and_group_by_an_axis, two_runs) {
  // By run id in --results-dir, too: copy the candidate beside the base.
  fs::copy(candidate, tmp.path / "base" / candidate.filename(), fs::copy_options::recursive);
  const auto ids = base.filename().string() + " " + candidate.filename().string() +
                   " --results-dir " + (tmp.path / "base").string();
  auto html = tmp.path / "c.html";
  auto r = cli("compare " + ids + " --group-by effort --format html --out " + html.string());
  BOOST_REQUIRE_MESSAGE(r.code == 0, r.out);
  BOOST_TEST(r.out.find("by effort:") != std::string::npos, r.out);  // the table on stdout
  auto page = read_file(html.string());
  BOOST_TEST(page.find("Content-Security-Policy") != std::string::npos);
  BOOST_TEST(page.find("<svg") != std::string::npos);
  BOOST_TEST(page.find("<script") == std::string::npos);

  auto junit = tmp.path / "c.xml";
  r = cli("compare " + ids + " --format junit --out " + junit.string());
  BOOST_REQUIRE_MESSAGE(r.code == 0, r.out);
  auto xml = read_file(junit.string());
  // 23 paired cases and the gate's four rules; 8 regressed cases and the significant drop fail.
  BOOST_TEST(xml.find("tests=\"27\" failures=\"9\"") != std::string::npos, xml);
  // The suite keeps its name from run to run; the run ids are properties.
  BOOST_TEST(xml.find("<testsuite name=\"compare compare-study\" ") != std::string::npos, xml);
  BOOST_TEST(xml.find("<property name=\"candidate\" value=\"" + candidate.filename().string()) !=
                 std::string::npos,
             xml);
  BOOST_TEST(xml.find("<testcase classname=\"gate\" name=\"significant_drop\"><failure") !=
                 std::string::npos,
             xml);

  r = cli("compare " + ids + " --format md --out -");
  BOOST_REQUIRE_MESSAGE(r.code == 0, r.out);
  BOOST_TEST(r.out.find("| math |") != std::string::npos, r.out);
  // The run's Markdown levels: `cat run.md compare.md` is one document.
  BOOST_TEST(r.out.find("## Comparison of compare-study\n") != std::string::npos, r.out);
  BOOST_TEST(r.out.find("\n### Per eval\n") != std::string::npos, r.out);
  BOOST_TEST(r.out.find("\n# ") == std::string::npos, r.out);
  BOOST_TEST(
      r.out.find("**Gate:** failed: the pass rate dropped significantly") != std::string::npos,
      r.out);
}

// A run folder the Rust mira CLI wrote (bare RunResults, its meta.json) against a compact-layout
// run of this host: both read through the store, paired by key.
BOOST_AUTO_TEST_CASE(a_rust_run_folder_against_a_compact_run) {
  temp_dir tmp;
  auto rust = tmp.path / "rust" / "20261130T081502Z-3fa9";
  fs::create_directories(rust);
  std::ofstream(rust / "meta.json")
      << R"({"format":1,"run_id":"20261130T081502Z-3fa9","study":"compare-study",)"
         R"("study_version":"1.0.0","started_unix":1764490502,"finished_unix":1764490510})";
  for (auto sample : {"m0", "m1"}) {
    auto dir = rust / "cases" / (std::string("math_2f") + sample + "_40sim_5beffort_3dlow_5d");
    fs::create_directories(dir);
    std::ofstream(dir / "result.json")
        << R"({"eval":"math","sample":")" << sample
        << R"(","target":"sim","params":{"effort":"low"},"passed":true,"aggregate":1.0,)"
           R"("scores":[{"scorer":"check","value":1.0,"pass":true,"reason":"rust"}],)"
           R"("transcript":{"final_response":"","iterations":1,"tool_calls_count":0,)"
           R"("usage":{"input_tokens":1,"output_tokens":1,"cost_usd":0.0}},"skipped":false})";
  }
  auto compact = tmp.path / "compact";
  auto r = cli("run --store compact --color never --results-dir " + compact.string() +
               " --study-env COMPARE_FAIL=math/m0 -- " + study);
  BOOST_REQUIRE_MESSAGE(r.code == 1, r.out);
  auto out = tmp.path / "c.json";
  r = cli("compare " + rust.string() + " " + only_run(compact).string() + " --format json --out " +
          out.string());
  BOOST_REQUIRE_MESSAGE(r.code == 0, r.out);
  auto j = json::parse(read_file(out.string())).as_object();
  BOOST_TEST(keys(j.at("regressions")) == (std::set<std::string>{"math/m0@sim[effort=low]"}),
             boost::test_tools::per_element());
  BOOST_TEST(j.at("overall").at("paired").as_int64() == 2);
  BOOST_TEST(j.at("only_in_candidate").as_int64() == 22);
  BOOST_TEST(j.at("unpaired").as_array().size() == 22u);
}

BOOST_AUTO_TEST_CASE(bad_input_exits_2_naming_what_is_wrong) {
  temp_dir tmp;
  auto base = saved_run(tmp.path / "a", "");
  auto other = saved_run(tmp.path / "b", "--study-env COMPARE_STUDY=other-study");
  auto r = cli("compare " + base.string() + " " + other.string());
  BOOST_TEST(r.code == 2, r.out);
  BOOST_TEST(r.out.find("'other-study'") != std::string::npos, r.out);
  r = cli("compare " + base.string() + " nosuchrun --results-dir " + (tmp.path / "a").string());
  BOOST_TEST(r.code == 2, r.out);
  BOOST_TEST(r.out.find("nosuchrun") != std::string::npos, r.out);
  r = cli("compare " + base.string());
  BOOST_TEST(r.code == 2, r.out);
  r = cli("compare " + base.string() + " " + base.string() + " --group-by nope");
  BOOST_TEST(r.code == 2, r.out);
  // The library names its option; the command line its flag.
  BOOST_TEST(r.out.find("mira: compare: --group-by 'nope': ") != std::string::npos, r.out);
  r = cli("compare " + base.string() + " " + base.string() + " --alpha 1.5");
  BOOST_TEST(r.code == 2, r.out);
}

// 20 pairs (4 cases N/A in both runs), 5 passed -> failed: a 25-point drop at p = 0.0625, which
// the test lets through at 0.05 and --max-regressions 0 does not.
BOOST_AUTO_TEST_CASE(five_flips_pass_the_test_and_fail_max_regressions_0) {
  temp_dir tmp;
  auto base = saved_run(tmp.path / "base", "--study-env COMPARE_NA=text/t4,text/t5");
  auto cand = saved_run(tmp.path / "cand",
                        "--study-env COMPARE_NA=text/t4,text/t5 --study-env "
                        "COMPARE_FAIL=math/m0,math/m1,math/m2@low");
  const auto runs = "compare " + base.string() + " " + cand.string();
  auto r = cli(runs + " --fail-on-regression");
  BOOST_TEST(r.code == 0, r.out);
  BOOST_TEST(r.out.find("100.0% -> 75.0% over 20 paired case(s): -25.0 pp") != std::string::npos,
             r.out);
  BOOST_TEST(r.out.find("McNemar exact p = 0.0625") != std::string::npos, r.out);
  BOOST_TEST(r.out.find("\ngate: passed\n") != std::string::npos, r.out);

  r = cli(runs + " --max-regressions 0");
  BOOST_TEST(r.code == 1, r.out);
  BOOST_TEST(r.out.find("gate: failed: 5 regression(s) (passed -> failed or error), more than "
                        "--max-regressions 0\n") != std::string::npos,
             r.out);
  r = cli(runs + " --fail-on-regression --max-regressions 5");
  BOOST_TEST(r.code == 0, r.out);

  auto out = tmp.path / "c.json";
  r = cli(runs + " --max-regressions 4 --format json --out " + out.string());
  BOOST_TEST(r.code == 1, r.out);
  auto j = json::parse(read_file(out.string())).as_object();
  BOOST_TEST(!j.at("gate").at("passed").as_bool());
  auto checks = rules(j);
  BOOST_TEST(checks["regressions"].at("fired").as_bool());
  BOOST_TEST(checks["regressions"].at("regressions").as_int64() == 5);
  BOOST_TEST(checks["regressions"].at("max").as_int64() == 4);
  BOOST_TEST(!checks["significant_drop"].at("fired").as_bool());
  BOOST_TEST(checks["significant_drop"].at("p_value").as_double() == 0.0625);
  BOOST_TEST(!checks["missing"].at("fired").as_bool());
  BOOST_TEST(!checks["min_scored"].at("fired").as_bool());
}

// A candidate of one eval (--evals math) lacks the 12 text cases of the base.
BOOST_AUTO_TEST_CASE(a_candidate_missing_baseline_cases_fails_the_gate) {
  temp_dir tmp;
  auto base = saved_run(tmp.path / "base", "");
  auto cand = saved_run(tmp.path / "cand", "--evals math");
  const auto runs = "compare " + base.string() + " " + cand.string();
  auto r = cli(runs + " --fail-on-regression");
  BOOST_TEST(r.code == 1, r.out);
  BOOST_TEST(r.out.find("\ngate: failed: 12 baseline case(s) missing from the candidate "
                        "(--allow-missing to accept)\n") != std::string::npos,
             r.out);
  r = cli(runs + " --fail-on-regression --allow-missing");
  BOOST_TEST(r.code == 0, r.out);
  BOOST_TEST(r.out.find("\ngate: passed\n") != std::string::npos, r.out);
  // Without a gate flag the gate is shown and named on stderr, and the exit is 0.
  r = cli(runs);
  BOOST_TEST(r.code == 0, r.out);
  BOOST_TEST(r.out.find("(exit 0 without --fail-on-regression") != std::string::npos, r.out);

  auto out = tmp.path / "c.json";
  r = cli(runs + " --fail-on-regression --format json --out " + out.string());
  BOOST_TEST(r.code == 1, r.out);
  auto checks = rules(json::parse(read_file(out.string())).as_object());
  BOOST_TEST(checks["missing"].at("fired").as_bool());
  BOOST_TEST(checks["missing"].at("missing").as_int64() == 12);
  BOOST_TEST(checks["missing"].at("candidate_stopped").is_null());
}

// A candidate stopped by its budget (7 tokens, each case spends 2) before its end.
BOOST_AUTO_TEST_CASE(a_stopped_candidate_fails_the_gate_and_says_so) {
  temp_dir tmp;
  auto base = saved_run(tmp.path / "base", "");
  auto r = cli("run --color never -j 1 --max-tokens 7 --results-dir " +
               (tmp.path / "cand").string() + " -- " + study);
  BOOST_REQUIRE_MESSAGE(r.code == 4, r.out);
  const auto runs = "compare " + base.string() + " " + only_run(tmp.path / "cand").string();
  r = cli(runs + " --fail-on-regression");
  BOOST_TEST(r.code == 1, r.out);
  // The cases it never ran are missing too (how many is the scheduler's business).
  BOOST_TEST(r.out.find(" baseline case(s) missing from the candidate, and the candidate run "
                        "stopped before its end: budget (--allow-missing to accept)\n") !=
                 std::string::npos,
             r.out);
  r = cli(runs + " --fail-on-regression --allow-missing");
  BOOST_TEST(r.code == 0, r.out);

  auto out = tmp.path / "c.json";
  r = cli(runs + " --fail-on-regression --format json --out " + out.string());
  auto checks = rules(json::parse(read_file(out.string())).as_object());
  BOOST_TEST(checks["missing"].at("candidate_stopped").as_string() == "budget");
}

BOOST_AUTO_TEST_CASE(passed_to_error_is_a_regression) {
  temp_dir tmp;
  auto base = saved_run(tmp.path / "base", "");
  // Six cases answered with an error: 6 of 24 flips, p = 2 / 2^6 = 0.03125.
  auto cand = saved_run(tmp.path / "cand", "--study-env COMPARE_ERROR=math/m0,math/m1,math/m2");
  const auto runs = "compare " + base.string() + " " + cand.string();
  auto r = cli(runs + " --fail-on-regression");
  BOOST_TEST(r.code == 1, r.out);
  BOOST_TEST(r.out.find("math/m0@sim[effort=low]  (passed -> error)") != std::string::npos, r.out);
  BOOST_TEST(r.out.find("gate: failed: the pass rate dropped significantly: 6 regressed against 0 "
                        "fixed") != std::string::npos,
             r.out);
  auto out = tmp.path / "c.json";
  r = cli(runs + " --format json --out " + out.string());
  BOOST_TEST(r.code == 0, r.out);  // no gate flag
  auto j = json::parse(read_file(out.string())).as_object();
  BOOST_TEST(j.at("overall").at("regressed").as_int64() == 6);
  BOOST_TEST(j.at("unpaired").as_array().empty());
  for (auto& c : j.at("regressions").as_array())
    BOOST_TEST(c.at("candidate").as_string() == "error");
}

BOOST_AUTO_TEST_CASE(nothing_or_too_little_scored_in_both_runs_fails_the_gate) {
  temp_dir tmp;
  auto base = saved_run(tmp.path / "base", "");
  // The candidate's target is unavailable: every case skipped, nothing compared.
  auto cand = saved_run(tmp.path / "cand", "--study-env COMPARE_UNAVAILABLE=1");
  auto r = cli("compare " + base.string() + " " + cand.string() + " --fail-on-regression");
  BOOST_TEST(r.code == 1, r.out);
  BOOST_TEST(r.out.find("gate: failed: no case was scored (passed or failed) in both runs: "
                        "nothing was compared") != std::string::npos,
             r.out);
  // Every case N/A in the candidate: the same.
  auto na = saved_run(tmp.path / "na",
                      "--study-env COMPARE_NA=math/m0,math/m1,math/m2,math/m3,math/m4,math/m5,"
                      "text/t0,text/t1,text/t2,text/t3,text/t4,text/t5");
  r = cli("compare " + base.string() + " " + na.string() + " --fail-on-regression");
  BOOST_TEST(r.code == 1, r.out);
  BOOST_TEST(r.out.find("nothing was compared") != std::string::npos, r.out);
  // --min-scored alone turns the gate on: 24 scored in both runs.
  r = cli("compare " + base.string() + " " + base.string() + " --min-scored 25");
  BOOST_TEST(r.code == 1, r.out);
  BOOST_TEST(
      r.out.find("gate: failed: 24 case(s) scored in both runs, fewer than --min-scored 25") !=
          std::string::npos,
      r.out);
  r = cli("compare " + base.string() + " " + base.string() + " --min-scored 24");
  BOOST_TEST(r.code == 0, r.out);
  r = cli("compare " + base.string() + " " + base.string() + " --min-scored 0");
  BOOST_TEST(r.code == 2, r.out);
  BOOST_TEST(r.out.find("--min-scored") != std::string::npos, r.out);
}

BOOST_AUTO_TEST_SUITE_END()
