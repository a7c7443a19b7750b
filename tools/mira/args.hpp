// Command-line parsing for the `mira` commands: selection flags, run policy flags, and the
// `-- STUDY_CMD ...` tail. Every bad value is a usage_error naming the flag and the value.
#pragma once

#include <mira/config/launch.hpp>
#include <mira/report/escape.hpp>

#include <mira/plan/plan.hpp>
#include <mira/plan/shard.hpp>
#include <mira/pool.hpp>
#include <mira/schedule/run_plan.hpp>
#include <mira/store/run_meta.hpp>

#include <optional>
#include <string>
#include <vector>

namespace mira::cli {

using report::printable;

struct usage_error {
  std::string message;
};

/// How a run shows its progress on stderr (--progress): `automatic` is resolved to `tty` or
/// `plain` when the run starts (progress_for in console.hpp).
enum class progress_mode { automatic, tty, plain, none };

struct run_args {
  std::vector<std::string> study;  // the study's argv, once resolved (config_step.hpp)
  bool help = false;
  bool full = false;  // help --full
  bool fix = false;   // doctor --fix
  bool init = false;  // doctor --init
  // How to start the study: a --study* flag, --launcher, or the argv after `--`.
  config::launch_request launch;
  std::string preset;      // --preset NAME of mira.toml
  config::config project;  // the mira.toml in effect (the defaults when there is none)
  // From mira.toml: the environment block's switch and labels (run, score).
  bool environment_enabled = true;
  std::vector<std::pair<std::string, std::string>> environment_labels;
  // Study launch (every command).
  std::vector<std::string> study_env;  // KEY=VALUE, or KEY to pass the host's value
  bool study_env_clear = false;        // start from an empty environment
  schedule::duration init_timeout = std::chrono::seconds(60);
  schedule::duration idle_timeout{0};  // 0: off
  plan::selection selection;
  std::optional<plan::shard_spec> shard;  // --shard I/N, or auto (resolved from the environment)
  schedule::run_policy policy;
  /// Processes of the study (run, score): a pool when > 1. --procs auto: the CPU count.
  std::size_t procs = 1;
  int max_restarts = pool_options{}.max_restarts;  // per process
  std::string format = "table";  // table | json | jsonl | csv | junit | md (run, report)
  std::string out;               // write the format there (atomically); the table to stdout
  /// --out FORMAT:PATH, each a report of its own beside --format's (run, score, report).
  struct output {
    std::string format, path;
  };
  std::vector<output> outs;
  /// Gates (run, score, report): --check (report: exit as `mira run` would have), --min-scored.
  bool check = false;
  std::size_t min_scored = 0;
  std::string color = "auto";  // table badges: auto (a terminal) | always | never; NO_COLOR wins
  std::string group_by;
  bool json = false;  // list / plan --json
  // Saved runs (run).
  std::string results_dir = "results";  // --results-dir, else mira.toml's [results] dir
  bool results_dir_given = false;
  bool dry_run = false;
  store::layout store_layout = store::layout::per_case;  // --store per-case | compact
  std::string resume;                                    // run id
  bool retry_errors = false;
  bool retry_failed = false;
  bool allow_other_study = false;
  // Execute now, score later.
  bool execute_only = false;  // run: save ExecuteResults in `artifacts`, score nothing
  std::string artifacts;      // run --execute-only: where to; score: where from
  std::string run_id;         // report, export, store convert: the positional RUN_ID
  // merge: the shard runs (paths or ids), the merged run's id, and whether missing shards may be
  // reported as not run.
  std::vector<std::string> runs;
  std::string new_run_id;  // --run-id: run, score, merge (the merged run)
  bool allow_partial = false;
  std::optional<store::layout> convert_to;                  // store convert --to
  schedule::duration heartbeat = std::chrono::seconds(10);  // between plain progress lines
  progress_mode progress = progress_mode::automatic;        // --progress
  bool github = true;  // run, score: GitHub Actions output when GITHUB_ACTIONS=true (--no-github)
  // compare: BASE and CANDIDATE are `runs`; the significance level and the gate, which decides
  // the exit code when --fail-on-regression, --max-regressions or --min-scored is given.
  double alpha = 0.05;
  bool fail_on_regression = false;
  bool allow_missing = false;
  std::optional<std::size_t> max_regressions, min_scored_pairs;
  // run --experiment: the plan, and how many treatments run at once.
  std::string experiment;
  std::size_t experiment_parallel = 1;
  // serve: where to listen, the allow-listed studies (NAME=CMD), the bearer token's file, the
  // Host names allowed besides loopback, how many runs may go at once and how many cases one
  // may plan.
  std::string listen = "127.0.0.1:8750";
  std::vector<std::string> serve_studies;
  std::string token_file;
  std::vector<std::string> allowed_hosts;
  std::size_t max_runs = 4;
  std::size_t max_cases = 100000;
  std::size_t max_procs = 16;  // mira serve: options.procs of one run
  // view: the port (0: a free one) and whether to start the desktop's browser.
  unsigned short view_port = 0;
  bool open_browser = false;
};

enum class command {
  list,
  plan,
  run,
  score,
  report,
  export_,
  store_convert,
  merge,
  doctor,
  compare,
  serve,
  view
};

/// mira::split_command_line (mira/command_line.hpp has its rules) for --study-cmd; a usage_error
/// names the flag.
std::vector<std::string> split_command_line(std::string_view line);

/// The canonical name of a report format, whatever its case and alias (xml: junit, ndjson:
/// jsonl, markdown: md), or "" when it is none.
std::string canonical_format(std::string_view name);

/// Parses the arguments after the command name.
run_args parse_args(command cmd, const std::vector<std::string>& args);

}  // namespace mira::cli
