// The help text of every `mira` command.
#pragma once

namespace mira::cli {

inline constexpr const char* main_help = R"(mira - run Mira Eval Protocol studies

Usage:
  mira list [--json] -- STUDY_CMD [ARGS...]
  mira plan [FILTER] [selection] [--json] -- STUDY_CMD [ARGS...]
  mira run [FILTER] [selection] [run options] -- STUDY_CMD [ARGS...]
  mira run --execute-only --artifacts DIR [selection] [run options] -- STUDY_CMD [ARGS...]
  mira score --artifacts DIR [FILTER] [selection] [run options] -- STUDY_CMD [ARGS...]
  mira report RUN_ID [--results-dir DIR] [--format F] [--out PATH] [--group-by KEY]
  mira export RUN_ID --format atif [--results-dir DIR] [--artifacts DIR] [--out DIR|-]
  mira store convert RUN_ID --to per-case|compact [--results-dir DIR]
  mira merge RUN... [--results-dir DIR] [--run-id ID] [--allow-partial]
  mira --version

Everything after `--` is the study's command line, passed as is (no shell);
--study-cmd "CMD ARGS" gives it as one string instead, split like a shell would (quotes and
backslashes, no expansion).
Run `mira COMMAND --help` for a command's options.
)";

inline constexpr const char* list_help =
    R"(mira list - print the study's catalogue (every sample page)

Usage: mira list [--json] -- STUDY_CMD [ARGS...]

  --json   print the catalogue as one JSON object

Study launch (list, plan and run):
  --study-cmd "CMD ARGS"   the study's command line as one string (shell-like quoting)
  --study-env KEY[=VALUE]  set KEY for the study (KEY alone: the host's value); repeatable
  --study-env-clear        start the study with only the --study-env variables
  --init-timeout SECONDS   how long the study may take to answer initialize, and then to
                           list its evals (default 60 each)
  --idle-timeout SECONDS   kill a study that writes nothing this long while requests are
                           pending, as if it had crashed (default: off)

Example:
  mira list -- ./build/examples/example_study
)";

#define MIRA_LAUNCH_HELP                                                                         \
  "\nStudy launch:\n"                                                                            \
  "  --study-env KEY[=VALUE]  set KEY for the study (KEY alone: the host's value); repeatable\n" \
  "  --study-env-clear        start the study with only the --study-env variables\n"             \
  "  --init-timeout SECONDS   how long the study may take to answer initialize, and then to\n"   \
  "                           list its evals (default 60 each)\n"                                \
  "  --idle-timeout SECONDS   kill a study that writes nothing this long while requests are\n"   \
  "                           pending, as if it had crashed (default: off)\n"

#define MIRA_SELECTION_HELP                                                             \
  "Selection (globs: * ? [...]; comma-separated lists; each must match something):\n"   \
  "  FILTER                 keep cases whose eval/sample@target[k=v] contains FILTER\n" \
  "  --evals GLOBS          evals to run\n"                                             \
  "  --samples GLOBS        sample ids\n"                                               \
  "  --targets GLOBS        target labels\n"                                            \
  "  --tag TAG              samples with this tag (repeatable: any of them)\n"          \
  "  --axis NAME=V1,V2      axis values (repeatable; the same NAME twice intersects)\n" \
  "  --trials N             trials per case instead of the eval's (0 means 1)\n"        \
  "  --seed S               base seed instead of the eval's; trial t gets S + t\n"      \
  "  --shard I/N|auto       only shard I of N (0-based) of the plan; auto: from\n"      \
  "                         SLURM_ARRAY_TASK_ID/_COUNT or JOB_COMPLETION_INDEX with\n"  \
  "                         MIRA_SHARD_COUNT (merge the shards with mira merge)\n"

inline constexpr const char* plan_help =
    "mira plan - show what a selection would run, without running it\n\n"
    "Usage: mira plan [FILTER] [selection] [--json] -- STUDY_CMD [ARGS...]\n\n" MIRA_SELECTION_HELP
    "  --json                 print every planned case as JSON\n" MIRA_LAUNCH_HELP
    "\n"
    "Example:\n  mira plan --evals 'reason*' --axis effort=high -- "
    "./build/examples/example_study\n";

inline constexpr const char* run_help =
    "mira run - run the selected cases and report\n\n"
    "Usage: mira run [FILTER] [selection] [options] -- STUDY_CMD [ARGS...]\n\n" MIRA_SELECTION_HELP
    "\nScheduling:\n"
    "  -j, --max-concurrent N        cases in flight at once (default 8)\n"
    "  --provider-concurrency p=N,.. per-provider caps (provider from the target's listing)\n"
    "  --no-adaptive                 no adaptive per-provider limits and no rate-limit backoff\n"
    "  --max-retries N               retries of rate limits, retryable errors, infra errors and\n"
    "                                cases whose study died (default 4); then the case is N/A\n"
    "  -P, --procs N|auto            run N processes of the study (auto: one per CPU), for\n"
    "                                studies that answer one request at a time; each takes at\n"
    "                                most ceil(j / N) cases at once (default 1)\n"
    "  --max-restarts N              start a study that died again, up to N times (default 3;\n"
    "                                with --procs: per process); the cases it was running are\n"
    "                                retried on the new one (with --procs: on the others)\n"
    "  --timeout SECONDS             per-attempt deadline (fractional allowed); the study is\n"
    "                                sent `cancel`; counts as a failure unless --timeout-is-infra\n"
    "  --timeout-is-infra            retry timeouts, and report them N/A when retries run out\n"
    "  --deadline SECONDS            whole-run deadline: then in-flight cases are cancelled\n"
    "  --fail-fast                   the first failed case cancels the rest\n"
    "  --max-cost USD                stop when transcript costs exceed USD\n"
    "  --max-tokens N                stop when transcript tokens (in + out) exceed N\n"
    "\nReport:\n"
    "  --group-by KEY                pass rate by KEY: axis param, sample, target or transcript\n"
    "                                metadata\n"
    "  --format F                    table (default); json, jsonl (one line per case as it ends,\n"
    "                                then the summary), csv, junit, md or html (one\n"
    "                                self-contained page with charts)\n"
    "  --out PATH                    write the --format report to PATH (a file is replaced\n"
    "                                whole; a device, FIFO or symlink target is written\n"
    "                                through); the table to stdout; - for the report on stdout\n"
    "  --color WHEN                  colour the table: auto (on a terminal), always or never;\n"
    "                                never when NO_COLOR is set\n"
    "  --heartbeat SECONDS           progress line interval when stderr is not a terminal (10)\n"
    "\nSaved runs:\n"
    "  --results-dir DIR             where run folders go (default ./results)\n"
    "  --dry-run                     save nothing\n"
    "  --store LAYOUT                per-case (default: a folder and result.json per case,\n"
    "                                as the Rust mira CLI keeps them) or compact (checksummed\n"
    "                                append-only segments, for large runs)\n"
    "  --resume RUN_ID               run only what the saved run lacks; report the whole plan\n"
    "  --retry-errors, --retry-failed  with --resume: also re-run errors and N/A, or failures\n"
    "  --allow-other-study           with --resume: accept a study of another "
    "name\n"
    "\nExecute now, score later:\n"
    "  --execute-only                send `execute` instead of `run`: save each case's full\n"
    "                                transcript, score nothing; needs --artifacts\n"
    "  --artifacts DIR               where --execute-only saves one ExecuteResult per case;\n"
    "                                cases that already have one are not executed "
    "again\n" MIRA_LAUNCH_HELP
    "\nExit codes: 0 every scored case passed, 1 some case failed, 2 usage error, 3 host or\n"
    "study error, 4 stopped by a budget or the deadline, 130 interrupted (Ctrl-C: the first\n"
    "press cancels what is in flight, saves and reports; the second quits at once).\n"
    "\nExamples:\n  mira run -j 16 --timeout 30 --group-by effort -- "
    "./build/examples/example_study\n"
    "  mira run --execute-only --artifacts artifacts/ -- ./build/examples/example_study\n";

inline constexpr const char* score_help =
    "mira score - score saved execute artifacts again, without re-running the subject\n\n"
    "Usage: mira score --artifacts DIR [FILTER] [selection] [options] -- STUDY_CMD [ARGS...]\n\n"
    "Sends `score` with each artifact's transcript (the study must advertise `score`) and saves\n"
    "a new run, as `mira run` would: the same selection, scheduling, report and saved-run\n"
    "options apply (see `mira run --help`). Planned cases without an artifact are left out;\n"
    "artifacts of skipped cases are reported skipped.\n\n"
    "  --artifacts DIR   the directory `mira run --execute-only --artifacts DIR` filled\n"
    "\nExample:\n  mira score --artifacts artifacts/ --format md --out scores.md -- "
    "./build/examples/example_study\n";

#undef MIRA_SELECTION_HELP
#undef MIRA_LAUNCH_HELP

inline constexpr const char* report_help =
    R"(mira report - show a saved run again, without the study

Usage: mira report RUN_ID [--results-dir DIR] [--format F] [--out PATH] [--group-by KEY]

  --results-dir DIR      where run folders are (default ./results)
  --format F             table, json, jsonl, csv, junit, md or html, as for `mira run`
  --out PATH             write that format to PATH (as for `mira run`), the table to stdout;
                         - for the report on stdout instead of the table
  --color WHEN           auto (default: on a terminal), always or never; NO_COLOR turns it off
  --group-by KEY         pass rate by an axis param or transcript metadata key

Cases are shown in natural key order (case-2 before case-10). Run folders of either layout,
and those of the Rust mira CLI, are read. Exit codes: 0; 2 when there is no such run; 3 when some
saved result cannot be read (each is named; the report of the rest is incomplete), none can,
or --out cannot be written.

Example:
  mira report 20261130T081502Z-3fa9
)";

inline constexpr const char* store_help =
    R"(mira store - manage how a saved run keeps its case records

Usage: mira store convert RUN_ID --to per-case|compact [--results-dir DIR]

  --to LAYOUT          per-case: a folder and result.json per case (what the Rust mira CLI
                       reads); compact: checksummed append-only segments (fast, small)
  --results-dir DIR    where run folders are (default ./results)

The run is locked while it converts (a run in progress cannot be converted). Every record is
written in the new layout and made durable before the old layout's files are removed, so an
interrupted conversion loses nothing and can be run again. Exit codes: 0; 2 no such run or a
bad argument; 3 the run is in use or a record could not be converted.

Example:
  mira store convert 20261130T081502Z-3fa9 --to compact
)";

inline constexpr const char* merge_help =
    R"(mira merge - merge the shard runs of one plan into one run

Usage: mira merge RUN... [--results-dir DIR] [--run-id ID] [--allow-partial]

  RUN                  a shard run (made by mira run --shard I/N): a path to its folder, or
                       its run id in --results-dir
  --results-dir DIR    where run ids are looked up and the merged run goes (default ./results)
  --run-id ID          the merged run's id (default: a new one); it must not exist
  --allow-partial      merge even when shards are missing or unfinished: their cases are
                       reported as not run, exit 4; `mira run --resume ID` runs them

Every input must be a shard run of the same study (name and version), the same plan
(fingerprint) and the same shard count; each index once, no case twice, and every index there
(else the missing ones are listed). Otherwise nothing is written. The merged run holds every
case record, each shard's events and study stderr, meta.json with the shards and their timing,
report.json and report.html; the inputs are not changed. mira report, mira export and mira run
--resume work on it. Exit codes: 0 merged; 2 bad input (nothing written); 3 the merged run could
not be written (nothing left behind); 4 merged with --allow-partial, cases not run.

Example:
  mira merge results/shards/0/* results/shards/1/* --run-id nightly
)";

inline constexpr const char* export_help =
    R"(mira export - one ATIF trajectory document per case of a saved run

Usage: mira export RUN_ID [FILTER] [--format atif] [--results-dir DIR] [--artifacts DIR]
                   [--out DIR|-]

  FILTER              only cases whose key contains FILTER
  --format atif       the only format (ATIF-v1.7), and the default
  --results-dir DIR   where run folders are (default ./results)
  --artifacts DIR     execute artifacts: a case whose artifact carries the study's own
                      trajectory exports that one; the others get one made from the saved
                      transcript summary (default: the artifacts a `mira score` run scored)
  --out DIR|-         where <encoded key>.atif.json files go (default RUN_FOLDER/export);
                      - writes one document per line on stdout

Each document's extra.reward holds the verdict (pass, score, status, scorers) and extra.mira
the case identity (eval, sample, target, params, trial, run id, key). Skipped and cancelled
cases are not exported. Exit codes: 0, or 2 when there is no such run or nothing to export.

Example:
  mira export 20261130T081502Z-3fa9 --artifacts artifacts/ --out -
)";

}  // namespace mira::cli
