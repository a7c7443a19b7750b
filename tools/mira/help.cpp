// Each command's `--help`: a hand-written head and tail around the options, which come from the
// flag table so that help cannot miss or misdescribe a flag the parser takes.
#include "help.hpp"

#include "flags.hpp"

namespace mira::cli {

namespace {

struct help_text {
  const char* head;  // name, one-line purpose, usage, what to know first
  const char* tail;  // exit codes, examples
};

help_text text_of(command cmd) {
  switch (cmd) {
    case command::list:
      return {
          "mira list - print the study's catalogue (every sample page)\n\n"
          "Usage: mira list [--json] STUDY\n",
          "Example:\n  mira list -- ./build/examples/example_study\n"};
    case command::plan:
      return {
          "mira plan - show what a selection would run, without running it\n\n"
          "Usage: mira plan [FILTER] [selection] [--json] STUDY\n",
          "Example:\n  mira plan --evals 'reason*' --axis effort=high -- "
          "./build/examples/example_study\n"};
    case command::run:
      return {
          "mira run - run the selected cases and report\n\n"
          "Usage: mira run [FILTER] [selection] [options] STUDY\n"
          "       mira run --execute-only --artifacts DIR [selection] [options] STUDY\n"
          "STUDY: -- STUDY_CMD [ARGS...], a --study* flag, --launcher NAME, or none with\n"
          "mira.toml's default_launcher (see Study launch).\n",
          "Exit codes: 0 every scored case passed, 1 some case failed, 2 usage error, 3 host "
          "or\nstudy error, 4 stopped by a budget or the deadline, 130 interrupted (Ctrl-C: "
          "the first\npress cancels what is in flight, saves and reports; the second quits "
          "at once).\n\n"
          "Examples:\n  mira run -j 16 --timeout 30 --group-by effort -- "
          "./build/examples/example_study\n"
          "  mira run --execute-only --artifacts artifacts/ -- "
          "./build/examples/example_study\n"};
    case command::score:
      return {
          "mira score - score saved execute artifacts again, without re-running the "
          "subject\n\n"
          "Usage: mira score --artifacts DIR [FILTER] [selection] [options] STUDY\n\n"
          "Sends `score` with each artifact's transcript (the study must advertise `score`) "
          "and saves\na new run, as `mira run` would. Planned cases without an artifact are "
          "left out;\nartifacts of skipped cases are reported skipped.\n",
          "Exit codes: as for `mira run`.\n\n"
          "Example:\n  mira score --artifacts artifacts/ --format md --out scores.md -- "
          "./build/examples/example_study\n"};
    case command::report:
      return {
          "mira report - show a saved run again, without the study\n\n"
          "Usage: mira report RUN_ID [FILTER] [options]\n\n"
          "  FILTER  only cases whose eval/sample@target[k=v] contains FILTER; without it the\n"
          "          run's report.json and report.html are rendered again\n",
          "Cases are shown in natural key order (case-2 before case-10). The table of a "
          "finished compact\nrun is made from the summary the run saved and lists its first "
          "10000 cases (--format csv\nlists them all). Run folders of either layout, and "
          "those of the Rust mira CLI, are read.\nExit codes: 0; 2 when "
          "there is no such run; 3 when some saved result cannot be read (each is\nnamed; the "
          "report of the rest is incomplete), none can, or --out or the run's report files "
          "cannot\nbe written.\n\n"
          "Example:\n  mira report 20261130T081502Z-3fa9\n"};
    case command::export_:
      return {
          "mira export - one ATIF trajectory document per case of a saved run\n\n"
          "Usage: mira export RUN_ID [FILTER] [options]\n\n"
          "  FILTER  only cases whose key contains FILTER\n",
          "Each document's extra.reward holds the verdict (pass, score, status, scorers) and "
          "extra.mira\nthe case identity (eval, sample, target, params, trial, run id, key). "
          "Skipped and cancelled\ncases are not exported. Exit codes: 0, or 2 when there is "
          "no such run or nothing to export.\n\n"
          "Example:\n  mira export 20261130T081502Z-3fa9 --artifacts artifacts/ --out -\n"};
    case command::store_convert:
      return {
          "mira store - manage how a saved run keeps its case records\n\n"
          "Usage: mira store convert RUN_ID --to per-case|compact [--results-dir DIR]\n",
          "The run is locked while it converts (a run in progress cannot be converted). "
          "Every record is\nwritten in the new layout and made durable before the old "
          "layout's files are removed, so an\ninterrupted conversion loses nothing and can "
          "be run again. Exit codes: 0; 2 no such run or a\nbad argument; 3 the run is in "
          "use or a record could not be converted.\n\n"
          "Example:\n  mira store convert 20261130T081502Z-3fa9 --to compact\n"};
    case command::serve:
      return {
          "mira serve - eval runs as a service: an HTTP API and a live dashboard\n\n"
          "Usage: mira serve --study NAME=CMD [--study ...] [--listen ADDR:PORT]\n"
          "                  [--token-file FILE] [--allow-host NAME ...] [--results-dir DIR]\n"
          "                  [--max-runs N] [--max-cases N] [--max-procs N]\n\n"
          "Runs are started, watched, cancelled and resumed through /v1 (see GET "
          "/v1/openapi.json);\nthe dashboard is at /. Runs are saved as mira run saves them, "
          "so mira report works on them.\n",
          "SIGTERM or Ctrl-C stops accepting, cancels the runs in flight, saves them (marked "
          "interrupted)\nand exits 0; after a restart they are listed and resumable. Exit "
          "codes: 0 stopped; 2 a bad\nargument; 3 cannot listen.\n\n"
          "Example:\n  mira serve --study demo='python3 study.py' --results-dir results\n"};
    case command::view:
      return {
          "mira view - look inside saved runs: a viewer in the browser\n\n"
          "Usage: mira view [RUN ...] [--results-dir DIR] [--port N] [--open]\n\n"
          "  RUN  a run folder, or a run id in --results-dir; the runs of one results folder\n",
          "Serves the runs of the results folder on 127.0.0.1 (read only) and prints the URL to "
          "open, with a\ntoken made for this viewer: the page asks for a run's cases a page at "
          "a time, and shows a case's\ninput, trajectory step by step, scores and events. With "
          "one RUN the URL opens that run.\nCtrl-C ends it. Exit codes: 0 stopped; 2 a bad "
          "argument; 3 cannot listen.\n\n"
          "Example:\n  mira view 20261130T081502Z-3fa9 --open\n"};
    case command::doctor:
      return {
          "mira doctor - check mira.toml, the study's listing and the results dir\n\n"
          "Usage: mira doctor [--fix] [--init] [--results-dir DIR] [STUDY]\n\n"
          "Checks mira.toml (syntax, types, unknown keys), what each launcher needs on PATH,\n"
          "the study's listing (duplicate names, keys that would collide, empty samples,\n"
          "targets or scorers, unavailable targets, presets and [targets] that name nothing)\n"
          "and the results dir (writable, runs in use or never finished, torn or unreadable\n"
          "files). The study is the one `mira run` would start; with none, its checks are left\n"
          "out.\n",
          "Each finding is printed as `error:`, `warning:` or `ok:` per section, then a summary.\n"
          "Exit codes: 0 no errors (warnings allowed), 1 some error, 2 usage error.\n\n"
          "Example:\n  mira doctor --fix --study study.py\n"};
    case command::merge:
      return {
          "mira merge - merge the shard runs of one plan into one run\n\n"
          "Usage: mira merge RUN... [--results-dir DIR] [--run-id ID] [--allow-partial]\n\n"
          "  RUN  a shard run (made by mira run --shard I/N): a path to its folder, or its run "
          "id\n       in --results-dir\n",
          "Every input must be a shard run of the same study (name and version), the same "
          "plan\n(fingerprint) and the same shard count; each index once, no case twice, and "
          "every index there\n(else the missing ones are listed). Otherwise nothing is "
          "written. The merged run holds every\ncase record, each shard's events and study "
          "stderr, meta.json with the shards and their timing,\nreport.json and report.html; "
          "the inputs are not changed. mira report, mira export and mira run\n--resume work "
          "on it. Exit codes: 0 merged; 2 bad input (nothing written); 3 the merged run "
          "could\nnot be written (nothing left behind); 4 merged with --allow-partial, cases "
          "not run.\n\n"
          "Example:\n  mira merge results/shards/0/* results/shards/1/* --run-id nightly\n"};
    case command::compare:
      return {
          "mira compare - compare two saved runs of one study, case by case\n\n"
          "Usage: mira compare BASE CANDIDATE [options]\n\n"
          "  BASE, CANDIDATE  run ids in --results-dir, or paths to run folders\n\n"
          "Cases are paired by logical key and trial. Pairs scored (passed or failed) in both "
          "runs give\nthe pass rates, their difference with a Newcombe hybrid score interval "
          "at 1 - alpha, and an\nexact McNemar test; the flips (passed -> failed or error, "
          "failed -> passed) are listed. Cases\nonly in one run, or N/A, skipped or cancelled "
          "in either (or errored other than after a pass),\nare counted and listed as "
          "unpaired, never silently dropped.\n\n"
          "The gate fails when a rule fires: missing (baseline cases missing from the "
          "candidate, or the\ncandidate stopped or never finished; --allow-missing accepts "
          "both), regressions (more than\n--max-regressions N), significant_drop (McNemar p < "
          "alpha), min_scored (fewer than\n--min-scored N, at least 1, cases scored in both "
          "runs). Every format says which fired.\ndocs/compare.md describes the statistics and "
          "the gate.\n",
          "Exit codes: 0 the gate passed, or none of --fail-on-regression, --max-regressions, "
          "--min-scored\nturned it on; 1 the gate failed; 2 bad input (no such run, runs of "
          "different studies, a bad\nflag); 3 --out cannot be written.\n\n"
          "Example:\n  mira compare 20261130T081502Z-3fa9 20261201T091200Z-77c1 "
          "--fail-on-regression --max-regressions 0\n"};
  }
  return {"", ""};
}

}  // namespace

std::string command_help(command cmd) {
  auto [head, tail] = text_of(cmd);
  return std::string(head) + '\n' + options_help(cmd) + '\n' + tail;
}

std::optional<command> command_named(std::string_view name) {
  static constexpr std::pair<std::string_view, command> names[] = {
      {"list", command::list},           {"plan", command::plan},     {"run", command::run},
      {"score", command::score},         {"report", command::report}, {"export", command::export_},
      {"store", command::store_convert}, {"merge", command::merge},   {"doctor", command::doctor},
      {"compare", command::compare},     {"serve", command::serve},   {"view", command::view}};
  for (auto& [n, c] : names)
    if (n == name) return c;
  return std::nullopt;
}

std::string full_help() {
  std::string out = main_help;
  for (auto name : {"list", "plan", "run", "score", "report", "export", "store", "merge", "doctor",
                    "compare"}) {
    out += "\n" + std::string(78, '-') + "\n";
    out += command_help(*command_named(name));
  }
  out += "\n" + std::string(78, '-') +
         "\nDocumentation: docs/cli.md (every command and flag, mira.toml, migrating from the "
         "Rust\nCLI), docs/performance.md, README.md.\n";
  return out;
}

}  // namespace mira::cli
