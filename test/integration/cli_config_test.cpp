// The `mira` executable with a mira.toml and the Rust CLI's launch shorthands: the file found
// walking up, each table in effect, its errors, every launcher mode that needs no network
// (python3, node, an executable, cargo with a local crate), format aliases, `report FILTER`,
// `help --full`, `list` metadata, `--axis target=` and `mira doctor` over a broken setup.
#include "integration/process_util.hpp"

#include <boost/json/parse.hpp>
#include <boost/test/unit_test.hpp>

#include <sys/stat.h>

#include <filesystem>
#include <fstream>

using namespace mira::test;
namespace fs = std::filesystem;
namespace json = boost::json;

namespace {

const std::string mira_bin = MIRA_CLI;
const std::string example = MIRA_EXAMPLE_STUDY;
const std::string python = MIRA_PYTHON3;
const std::string py_script = MIRA_PY_STUDY;

// Runs mira in `dir` with stderr folded into the output (the tests read both).
command_result mira_in(const fs::path& dir, const std::string& args, const std::string& env = "") {
  return run_command("cd '" + dir.string() + "' && " + env + " " + mira_bin + " " + args + " 2>&1");
}

void write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

bool contains(const std::string& text, const std::string& piece) {
  return text.find(piece) != std::string::npos;
}

json::object meta_of(const fs::path& run) {
  return json::parse(read_file((run / "meta.json").string())).as_object();
}

std::string which(const std::string& program) {
  auto r = run_command("command -v " + program);
  if (r.code != 0) return {};
  while (!r.out.empty() && r.out.back() == '\n') r.out.pop_back();
  return r.out;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(mira_cli_config)

BOOST_AUTO_TEST_CASE(the_nearest_mira_toml_sets_results_launcher_labels_and_preset) {
  temp_dir t;
  write(t.path / "mira.toml",
        "default_launcher = \"py\"\n"
        "[results]\ndir = \"./saved\"\n"
        "[environment.labels]\nteam = \"evals\"\n"
        "[launchers.py]\ncmd = \"" +
            python + " '" + py_script +
            "'\"\n"
            "[presets.smoke]\nsamples = \"{a,b}\"\ntimeout = 7\n");
  fs::create_directories(t.path / "deep/er");
  auto r = mira_in(t.path / "deep/er", "run --preset smoke");
  BOOST_TEST(r.code == 0, r.out);
  BOOST_TEST(contains(r.out, "2 passed, 0 failed"), r.out);  // `fail` left out by the preset
  auto run = only_run(t.path / "saved");                     // relative to mira.toml
  auto meta = meta_of(run);
  auto& env = meta.at("environment").as_object();
  BOOST_TEST(env.at("labels").at("team").as_string() == "evals");
  BOOST_TEST(!env.at("hostname").as_string().empty());
  auto& config = meta.at("sessions").as_array()[0].at("config").as_object();
  BOOST_TEST(config.at("timeout_s").to_number<double>() == 7.0);
  BOOST_TEST(config.at("preset").as_string() == "smoke");

  // The command line wins over the preset, field by field.
  r = mira_in(t.path, "run --dry-run --preset smoke --samples fail");
  BOOST_TEST(r.code == 1, r.out);
  BOOST_TEST(contains(r.out, "0 passed, 1 failed"), r.out);
  r = mira_in(t.path, "run --dry-run --preset smok");
  BOOST_TEST(r.code == 2);
  BOOST_TEST(contains(r.out, "unknown preset \"smok\" (known: smoke in "), r.out);
}

BOOST_AUTO_TEST_CASE(environment_block_can_be_turned_off) {
  temp_dir t;
  write(t.path / "mira.toml", "[environment]\nenabled = false\n");
  auto r = mira_in(t.path, "run --samples a -- " + python + " " + py_script);
  BOOST_TEST(r.code == 0, r.out);
  auto meta = meta_of(only_run(t.path / "results"));
  BOOST_TEST((!meta.contains("environment") || meta.at("environment").as_object().empty()));
}

BOOST_AUTO_TEST_CASE(target_timeouts_sit_between_the_command_line_and_the_preset) {
  temp_dir t;
  write(t.path / "mira.toml",
        "[presets.p]\ntimeout = 3\n[targets.sim]\ntimeout = 9\n"
        "[targets.ghost]\ntimeout = 1\n");
  auto timeout_of = [&](const std::string& flags) {
    fs::remove_all(t.path / "results");
    auto r = mira_in(t.path, "run --samples a " + flags + " -- " + python + " " + py_script);
    BOOST_TEST(r.code == 0, r.out);
    BOOST_TEST(contains(r.out, "[targets] names \"ghost\", which no eval of the study declares"),
               r.out);
    auto meta = meta_of(only_run(t.path / "results"));
    return meta.at("sessions").as_array()[0].at("config").at("timeout_s").to_number<double>();
  };
  BOOST_TEST(timeout_of("--preset p") == 9.0);
  BOOST_TEST(timeout_of("--preset p --timeout 2") == 2.0);
  // Targets with different timeouts: each case gets its own target's. `slow` (on sim) would
  // take a minute and is cut at sim's 1 s; the other target's 100 s leaves greet alone.
  write(t.path / "mira.toml",
        "[targets.sim]\ntimeout = 1\n[targets.\"anthropic/claude-opus\"]\ntimeout = 100\n");
  fs::remove_all(t.path / "results");
  auto r =
      mira_in(t.path, "run --evals slow,greet --format jsonl -- " + example + " --slow-ms 60000");
  BOOST_TEST(r.code == 1, r.out);
  BOOST_TEST(contains(r.out, "timed out after 1 s"), r.out);
  BOOST_TEST(!contains(r.out, "timed out after 100 s"), r.out);
  r = mira_in(t.path, "run --dry-run --evals greet --timeout 5 -- " + example);
  BOOST_TEST(r.code == 0, r.out);
}

BOOST_AUTO_TEST_CASE(a_malformed_mira_toml_is_an_error_naming_file_line_and_column) {
  temp_dir t;
  write(t.path / "mira.toml", "[results]\ndir = 5\n");
  auto r = mira_in(t.path, "list -- " + example);
  BOOST_TEST(r.code == 2);
  BOOST_TEST(
      contains(r.out, (t.path / "mira.toml").string() + ":2:7: [results] dir must be a string"),
      r.out);
  write(t.path / "mira.toml", "[presets.p\n");
  r = mira_in(t.path, "report some-run");
  BOOST_TEST(r.code == 2);
  BOOST_TEST(contains(r.out, (t.path / "mira.toml").string() + ":1:"), r.out);
  // Unknown keys only warn.
  write(t.path / "mira.toml", "[results]\ndri = \"x\"\n");
  r = mira_in(t.path, "list -- " + example);
  BOOST_TEST(r.code == 0, r.out);
  BOOST_TEST(contains(r.out, "mira.toml:2:7: unknown key 'dri' in [results]; did you mean 'dir'?"),
             r.out);
}

BOOST_AUTO_TEST_CASE(study_files_run_with_their_runner) {
  temp_dir t;
  fs::copy_file(py_script, t.path / "study.py");
  auto r = mira_in(t.path, "list --study study.py");
  BOOST_TEST(r.code == 0, r.out);
  BOOST_TEST(contains(r.out, "samples: a, b, fail"), r.out);
  r = mira_in(t.path, "list --study-python 'study.py --scorer judge'");
  BOOST_TEST(r.code == 0, r.out);
  BOOST_TEST(contains(r.out, "scorers: judge"), r.out);
  r = mira_in(t.path, "list --study " + example);  // an executable
  BOOST_TEST(r.code == 0, r.out);
  BOOST_TEST(contains(r.out, "greet"), r.out);
  fs::copy_file(example, t.path / "study_bin");
  r = mira_in(t.path, "list --study study_bin");  // in the working directory: ./study_bin
  BOOST_TEST(r.code == 0, r.out);
  write(t.path / "notes.txt", "x");
  r = mira_in(t.path, "list --study notes.txt");
  BOOST_TEST(r.code == 2);
  BOOST_TEST(contains(r.out,
                      "cannot tell how to run notes.txt (--study): expected a .py file "
                      "(python3, or uv run when it has inline script metadata), a .mjs or "
                      ".js file (node), a .rs file (cargo), or an executable"),
             r.out);
  r = mira_in(t.path, "list --study gone.py");
  BOOST_TEST(r.code == 2);
  BOOST_TEST(contains(r.out, "--study: no such file: gone.py"), r.out);
  if (which("uv").empty()) {
    r = mira_in(t.path, "list --study-uv study.py");
    BOOST_TEST(r.code == 2);
    BOOST_TEST(contains(r.out, "uv is not on PATH; it is needed to run study.py"), r.out);
  }
}

BOOST_AUTO_TEST_CASE(mjs_studies_run_with_node) {
  if (which("node").empty()) {
    BOOST_TEST_MESSAGE("skipped: node is not on PATH");
    return;
  }
  temp_dir t;
  // A node study that hands its stdio to the Python study: what matters is that node ran it.
  write(t.path / "study.mjs",
        "import { spawnSync } from 'node:child_process';\n"
        "process.stderr.write('node study starting\\n');\n"
        "const r = spawnSync('" +
            python + "', ['" + py_script +
            "'], { stdio: 'inherit' });\n"
            "process.exit(r.status ?? 1);\n");
  auto r = mira_in(t.path, "run --dry-run --samples a --study study.mjs");
  BOOST_TEST(r.code == 0, r.out);
  BOOST_TEST(contains(r.out, "[study] node study starting"), r.out);
  BOOST_TEST(contains(r.out, "1 passed"), r.out);
  auto no_node = mira_in(t.path, "list --study study.mjs", "PATH=/nonexistent");
  BOOST_TEST(no_node.code == 2);
  BOOST_TEST(contains(no_node.out, "node is not on PATH; it is needed to run study.mjs"),
             no_node.out);
}

BOOST_AUTO_TEST_CASE(launchers_from_mira_toml) {
  temp_dir t;
  write(t.path / "mira.toml",
        "[launchers.ex]\nstudy = \"bin/study\"\n"
        "[launchers.py]\npython3 = \"'" +
            py_script + "' --scorer j2\"\n");
  fs::create_directories(t.path / "bin");
  fs::copy_file(example, t.path / "bin/study");
  fs::create_directories(t.path / "sub");
  auto r = mira_in(t.path / "sub", "list --launcher ex");  // relative to mira.toml
  BOOST_TEST(r.code == 0, r.out);
  BOOST_TEST(contains(r.out, "greet"), r.out);
  r = mira_in(t.path / "sub", "list --launcher py");
  BOOST_TEST(r.code == 0, r.out);
  BOOST_TEST(contains(r.out, "scorers: j2"), r.out);
  r = mira_in(t.path, "list --launcher nope");
  BOOST_TEST(r.code == 2);
  BOOST_TEST(contains(r.out, "unknown launcher \"nope\" (known: ex, py in "), r.out);
  r = mira_in(t.path, "list");  // no default_launcher
  BOOST_TEST(r.code == 2);
  BOOST_TEST(contains(r.out, "no study to run: give --study PATH"), r.out);
  r = mira_in(t.path, "list --study x.py -- " + example);
  BOOST_TEST(r.code == 2);
  BOOST_TEST(contains(r.out, "the study is given twice: by --study and after `--`"), r.out);
}

BOOST_AUTO_TEST_CASE(cargo_modes_run_a_local_crate) {
  temp_dir t;
  auto r = mira_in(t.path, "list --study-bin shim", "PATH=/nonexistent");
  BOOST_TEST(r.code == 2);
  BOOST_TEST(contains(r.out, "cargo is not on PATH; it is needed to run cargo bin shim"), r.out);
  if (which("cargo").empty()) {
    BOOST_TEST_MESSAGE("skipped: cargo is not on PATH");
    return;
  }
  // A crate with no dependencies builds offline. Its programs hand their stdio to the example
  // study, so a listing shows cargo ran them.
  const std::string shim =
      "fn main() {\n"
      "    let study = std::env::var(\"MIRA_TEST_STUDY\").expect(\"MIRA_TEST_STUDY\");\n"
      "    let status = std::process::Command::new(study).status().expect(\"spawn\");\n"
      "    std::process::exit(status.code().unwrap_or(1));\n"
      "}\n";
  write(t.path / "crate/Cargo.toml",
        "[package]\nname = \"shim\"\nversion = \"0.1.0\"\nedition = \"2021\"\n[workspace]\n");
  write(t.path / "crate/src/main.rs", shim);
  write(t.path / "crate/examples/ex.rs", shim);
  write(t.path / "single.rs",
        "#!/usr/bin/env cargo\n---\n[package]\nedition = \"2021\"\n---\n" + shim);
  const std::string env =
      "CARGO_NET_OFFLINE=true TMPDIR='" + t.path.string() + "' MIRA_TEST_STUDY='" + example + "'";
  const std::string manifest = " --manifest-path crate/Cargo.toml --init-timeout 600";
  r = mira_in(t.path, "list --study-bin shim" + manifest, env);
  BOOST_TEST(r.code == 0, r.out);
  BOOST_TEST(contains(r.out, "greet"), r.out);
  r = mira_in(t.path, "list --study-example ex --package shim" + manifest, env);
  BOOST_TEST(r.code == 0, r.out);
  BOOST_TEST(contains(r.out, "greet"), r.out);
  r = mira_in(t.path, "list --init-timeout 600 --study single.rs", env);
  BOOST_TEST(r.code == 0, r.out);
  BOOST_TEST(contains(r.out, "greet"), r.out);
  BOOST_TEST(fs::exists(t.path / "mira-script"));  // the crate made for it
  fs::copy_file(t.path / "single.rs", t.path / "single.study");
  r = mira_in(t.path, "list --init-timeout 600 --study-script single.study", env);
  BOOST_TEST(r.code == 0, r.out);
  BOOST_TEST(contains(r.out, "greet"), r.out);
  r = mira_in(t.path, "list --study-python x.py --package shim");
  BOOST_TEST(r.code == 2);
  BOOST_TEST(contains(r.out, "--package and --manifest-path go with --study-bin"), r.out);
}

BOOST_AUTO_TEST_CASE(format_aliases_in_any_case) {
  temp_dir t;
  const std::string study = " --samples a -- " + python + " " + py_script;
  struct alias {
    const char* given;
    const char* starts;
  };
  for (auto a : {alias{"xml", "<?xml"}, alias{"XML", "<?xml"}, alias{"JUnit", "<?xml"},
                 alias{"ndjson", "{\"eval\""}, alias{"NDJSON", "{\"eval\""},
                 alias{"markdown", "## Mira eval results"}, alias{"Md", "## Mira eval results"},
                 alias{"JSON", "{"}, alias{"Csv", "key,"}, alias{"HTML", "<!DOCTYPE html>"}}) {
    auto r = run_command(mira_bin + " run --dry-run --format " + a.given + study + " 2>/dev/null");
    BOOST_TEST_CONTEXT(a.given) {
      BOOST_TEST(r.code == 0);
      BOOST_TEST(r.out.rfind(a.starts, 0) == 0u, r.out.substr(0, 80));
    }
  }
  auto r = mira_in(t.path, "run --dry-run --format yaml" + study);
  BOOST_TEST(r.code == 2);
  BOOST_TEST(contains(r.out,
                      "--format must be table, json, jsonl (ndjson), csv, junit (xml), md "
                      "(markdown) or html, got 'yaml'"),
             r.out);
}

BOOST_AUTO_TEST_CASE(report_takes_a_filter_and_rewrites_the_run_reports_only_unfiltered) {
  temp_dir t;
  auto r = mira_in(t.path, "run -- " + python + " " + py_script);
  BOOST_TEST(r.code == 1, r.out);  // `fail` fails
  auto run = only_run(t.path / "results");
  const auto id = run.filename().string();
  fs::remove(run / "report.html");
  r = run_command("cd '" + t.path.string() + "' && " + mira_bin + " report " + id +
                  " echo/b --format jsonl 2>/dev/null");
  BOOST_TEST(r.code == 0);
  BOOST_TEST(contains(r.out, "\"key\":\"echo/b@sim\""), r.out);
  BOOST_TEST(!contains(r.out, "echo/a@sim"), r.out);
  BOOST_TEST(!fs::exists(run / "report.html"));  // filtered: the run's files are left alone
  r = mira_in(t.path, "report " + id + " no-such-case");
  BOOST_TEST(r.code == 0, r.out);
  BOOST_TEST(
      contains(r.out, "no saved case of run " + id + " has a key containing \"no-such-case\""),
      r.out);
  r = mira_in(t.path, "report " + id);
  BOOST_TEST(r.code == 0, r.out);
  BOOST_TEST(contains(r.out, "rewrote report.json and report.html in"), r.out);
  BOOST_TEST(fs::exists(run / "report.html"));
  BOOST_TEST(contains(read_file((run / "report.json").string()), "\"records\":{\"count\":"));
}

BOOST_AUTO_TEST_CASE(report_leaves_a_rust_runs_report_files_alone) {
  temp_dir t;
  const std::string id = "20261130T081502Z-3fa9";
  auto folder = t.path / "results" / id;
  write(folder / "meta.json",
        R"({"format":1,"run_id":")" + id +
            R"(","study":"example-study","started_unix":1764490502,"finished_unix":1764490510})");
  write(folder / "cases/arithmetic_2fcase_2d1_40sim/result.json",
        R"({"eval":"arithmetic","sample":"case-1","target":"sim","passed":true,"aggregate":1.0,)"
        R"("scores":[{"scorer":"exact","value":1.0,"pass":true,"reason":"r"}],"skipped":false})");
  write(folder / "report.json", "{\"rust\": true}");
  auto r = mira_in(t.path, "report " + id);
  BOOST_TEST(r.code == 0, r.out);
  BOOST_TEST(
      contains(r.out, "was made by the Rust mira CLI: its report files are left as they are"),
      r.out);
  BOOST_TEST(read_file((folder / "report.json").string()) == "{\"rust\": true}");
  BOOST_TEST(!fs::exists(folder / "report.html"));
}

BOOST_AUTO_TEST_CASE(help_full_and_help_command) {
  auto r = run_command(mira_bin + " help --full");
  BOOST_TEST(r.code == 0);
  for (auto* head : {"mira list - ", "mira plan - ", "mira run - ", "mira score - ",
                     "mira report - ", "mira export - ", "mira store - ", "mira merge - ",
                     "mira doctor - ", "--study-script", "--preset", "docs/cli.md"})
    BOOST_TEST(contains(r.out, head), head);
  r = run_command(mira_bin + " help doctor");
  BOOST_TEST(r.code == 0);
  BOOST_TEST(r.out.rfind("mira doctor - ", 0) == 0u);
  BOOST_TEST(run_command(mira_bin + " help --fulll 2>/dev/null").code == 2);
}

BOOST_AUTO_TEST_CASE(list_shows_sample_target_and_eval_metadata) {
  auto r = run_command(mira_bin + " list -- " + example + " 2>/dev/null");
  BOOST_TEST(r.code == 0);
  BOOST_TEST(contains(r.out, "{difficulty=hard}"), r.out);
  BOOST_TEST(contains(r.out,
                      "anthropic/claude-opus (unavailable) provider=anthropic "
                      "{price_tier=premium}"),
             r.out);
  BOOST_TEST(contains(r.out, "  meta:    {suite=smoke}"), r.out);
}

BOOST_AUTO_TEST_CASE(axis_target_is_targets_and_braces_survive_commas) {
  auto plan = [](const std::string& flags) {
    return run_command(mira_bin + " plan --json " + flags + " -- " + example + " 2>/dev/null");
  };
  auto by_axis = plan("--evals greet --axis target=sim");
  auto by_targets = plan("--evals greet --targets sim");
  BOOST_TEST(by_axis.code == 0);
  BOOST_TEST(!by_axis.out.empty());
  BOOST_TEST(by_axis.out == by_targets.out);
  // Split at the commas, either glob would match nothing: they stay whole.
  auto ok = plan("--evals '{greet,coin}' --targets '{sim,nothing}'");
  BOOST_TEST(ok.code == 0);
  BOOST_TEST(contains(ok.out, "greet/"));
  BOOST_TEST(contains(ok.out, "coin/"));
}

// A study whose listing breaks every rule doctor knows.
const char* const broken_study = R"(import json, sys
evals = [
  {"name": "dup", "samples": [{"id": "s"}, {"id": "s"}], "scorers": ["x"],
   "targets": [{"label": "t"}, {"label": "t"}],
   "axes": [{"name": "target", "values": ["a"]}, {"name": "k", "values": ["v", "v"]}]},
  {"name": "dup", "samples": [{"id": "s"}], "scorers": ["x"], "targets": [{"label": "t"}]},
  {"name": "bare", "samples": [], "scorers": [], "targets": [{"label": "off", "available": False}]},
]
for line in sys.stdin:
    m = json.loads(line)
    if "id" not in m:
        continue
    r = {}
    if m["method"] == "initialize":
        r = {"protocol_version": "1.1", "study": "broken", "evals": 3, "capabilities": []}
    elif m["method"] == "list":
        r = {"evals": evals}
    print(json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": r}), flush=True)
)";

BOOST_AUTO_TEST_CASE(doctor_names_each_problem_of_a_broken_setup) {
  temp_dir t;
  write(t.path / "broken.py", broken_study);
  write(t.path / "mira.toml",
        "default_launcher = \"main\"\n"
        "[results]\ndir = \"runs\"\n"
        "[launchers.main]\nstudy = \"broken.py\"\n"
        "[launchers.fast]\nuv = \"missing.py\"\n"
        "[presets.none]\nsamples = \"zzz\"\n"
        "[targets.ghost]\ntimeout = 3\n"
        "[environment]\nenabeld = true\n");
  // A run that never finished, with a torn write and an unreadable result.
  auto run = t.path / "runs/20261201T000000Z-0001";
  write(run / "meta.json",
        R"({"format":2,"run_id":"20261201T000000Z-0001","started":"2026-12-01T00:00:00Z",)"
        R"("sessions":[{"started":"2026-12-01T00:00:00Z"}]})");
  write(run / "cases/echo%2Fa%40sim/result.json", "{\"torn");
  write(run / "cases/echo%2Fb%40sim/.result.json.tmp-123", "{");
  write(t.path / "runs/not-a-run/x", "");
  const std::string path_env = which("uv").empty() ? "" : "PATH=/usr/bin:/bin";
  auto r = mira_in(t.path, "doctor", path_env);
  BOOST_TEST(r.code == 1, r.out);
  for (auto* problem : {
           "unknown key 'enabeld' in [environment]; did you mean 'enabled'?",
           "launcher \"fast\": uv is not on PATH; it is needed to run missing.py",
           "error: two evals are named \"dup\": case keys collide",
           "error: eval \"dup\": sample \"s\" is listed twice: case keys collide",
           "error: eval \"dup\": target \"t\" is listed twice: case keys collide",
           "error: eval \"dup\": an axis is named \"target\"",
           "error: eval \"dup\": axis \"k\" lists \"v\" twice: case keys collide",
           "warning: eval \"bare\": no samples",
           "warning: eval \"bare\": no scorers",
           "warning: eval \"bare\": target \"off\" is unavailable",
           "warning: preset \"none\" (line 8): ",
           "warning: [targets] \"ghost\" (line 10): no eval of the study declares this target",
           "run 20261201T000000Z-0001: its last session did not finish",
           "run 20261201T000000Z-0001: cannot read ",
           "leftover temporary file ",
           "run not-a-run: no meta.json",
       })
    BOOST_TEST(contains(r.out, problem), problem << "\n" << r.out);
  BOOST_TEST(contains(r.out, "summary: "), r.out);
}

BOOST_AUTO_TEST_CASE(doctor_fix_creates_only_what_is_missing) {
  temp_dir t;
  auto r = mira_in(t.path, "doctor");
  BOOST_TEST(r.code == 0, r.out);  // nothing there yet: warnings only
  BOOST_TEST(contains(r.out, "no mira.toml in " + t.path.string()), r.out);
  BOOST_TEST(contains(r.out, "does not exist (the first run creates it"), r.out);
  // --fix writes no mira.toml unasked: --init does.
  r = mira_in(t.path, "doctor --fix");
  BOOST_TEST(r.code == 0, r.out);
  BOOST_TEST(!fs::exists(t.path / "mira.toml"));
  BOOST_TEST(contains(r.out, "fixed: created results\n"), r.out);
  BOOST_TEST(contains(r.out, "(--init writes a starter)"), r.out);
  r = mira_in(t.path, "doctor --init");
  BOOST_TEST(r.code == 0, r.out);
  BOOST_TEST(contains(r.out, "fixed: created " + (t.path / "mira.toml").string()), r.out);
  BOOST_TEST(contains(r.out, "summary: 0 warning(s), 0 error(s)"), r.out);
  BOOST_TEST(fs::is_directory(t.path / "results"));
  // An existing mira.toml is never replaced.
  write(t.path / "mira.toml", "[results]\ndir = \"mine\"\n");
  r = mira_in(t.path, "doctor --fix --init");
  BOOST_TEST(r.code == 0, r.out);
  BOOST_TEST(read_file((t.path / "mira.toml").string()) == "[results]\ndir = \"mine\"\n");
  BOOST_TEST(fs::is_directory(t.path / "mine"));
  // A results "dir" that is a file is an error.
  write(t.path / "mira.toml", "[results]\ndir = \"file\"\n");
  write(t.path / "file", "");
  r = mira_in(t.path, "doctor");
  BOOST_TEST(r.code == 1, r.out);
  BOOST_TEST(contains(r.out, "is not a directory: runs cannot be saved there"), r.out);
}

BOOST_AUTO_TEST_SUITE_END()
