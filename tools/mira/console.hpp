// What the `mira` commands share: exit codes, how the study is started and shown (its stderr,
// notifications, progress while a run goes), and report output.
#pragma once

#include "args.hpp"

#include <mira/host.hpp>
#include <mira/plan/plan.hpp>
#include <mira/pool.hpp>
#include <mira/protocol/codec.hpp>
#include <mira/report/render.hpp>
#include <mira/session/session.hpp>
#include <mira/store/run_store.hpp>
#include <mira/version.hpp>

#include <boost/asio/awaitable.hpp>
#include <boost/json/object.hpp>

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <optional>
#include <string>

namespace mira::cli {

using aggregate::summary_json;
using report::print_table;
using report::render;

inline constexpr int exit_ok = 0;
inline constexpr int exit_failed = 1;
inline constexpr int exit_usage = 2;
inline constexpr int exit_host_error = 3;
inline constexpr int exit_stopped = 4;
inline constexpr int exit_interrupted = 130;

// A saved run that cannot be opened: a usage error when the request named something wrong (no
// such run, a bad id, another study), a host error when the run or the disk is the trouble (in
// use, unreadable, the file system refused).
inline int exit_for(const store::error& e) {
  using store::errc;
  return e.code == errc::in_use || e.code == errc::io || e.code == errc::corrupt ? exit_host_error
                                                                                 : exit_usage;
}

/// A session that could not run: a usage error when the request was wrong (the selection, the
/// study's capabilities, a saved run of another study), a host error otherwise.
int exit_for(const session_error& e);

/// The exit code of a run from how it ended: what `mira run` exits with, and what
/// `mira report --check` judges a saved run by. 130 interrupted; 3 the study failed, a result
/// was not saved or the run is `incomplete`; 4 stopped by a budget or the deadline; 1 a case
/// failed or errored, or fewer than `min_scored` cases were scored (said on stderr); else 0. A
/// run that scored nothing is warned about when no --min-scored was asked for.
int exit_code_for(const schedule::run_report& report, const aggregate::summary& s, bool incomplete,
                  std::size_t min_scored);

/// The environment as getenv reads it: nullptr for an unset variable.
using env_reader = std::function<const char*(const char*)>;
/// This process's environment.
const char* process_env(const char* name);

/// Whether what mira writes ends up in a log rather than before someone at a live terminal:
/// TERM unset, empty or `dumb` (a terminal that takes no escape codes), or CI set (to anything
/// but "" or "false"; GitHub, GitLab and most CI services set CI=true), whose log keeps every
/// redraw of a line.
bool output_is_a_log(const env_reader& env);

/// --progress as it applies: `automatic` is `tty` when stderr is a terminal and the output is
/// not a log, else `plain`; the others as asked.
progress_mode progress_for(const run_args& a, bool stderr_is_terminal, const env_reader& env);
/// progress_for() of this process's stderr and environment.
progress_mode progress_for(const run_args& a);

// Progress on stderr while a run goes: `tty`, a live line redrawn every half second (cleared
// around every other stderr line, so study output never garbles it); `plain`, a line every
// --heartbeat seconds, never a carriage return or an escape code; `none`, nothing.
struct progress_line {
  progress_mode mode = progress_mode::plain;  // never automatic
  bool active = false;
  bool shown = false;
  std::size_t total = 0, done = 0, passed = 0, failed = 0, na = 0;
  std::size_t starts = 0, finished_attempts = 0;  // their difference: attempts under way
  std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();

  std::string text() const;
  void clear();
  void draw();
};

/// Where a command writes on stderr while a run goes: every line passes here, so the progress
/// line is cleared around it. `prefix` starts every line (an experiment's treatment name).
struct console {
  progress_line progress;
  std::string prefix;

  void line(const std::string& text);
};

/// Host options of the CLI (--idle-timeout), without output of their own: the session's hooks
/// show the study's stderr and notifications.
host_options cli_host_options(const run_args& a);

/// How the command starts its study: --procs, --init-timeout, the restart limits, the study's
/// command line and environment (command_for).
study_launch launch_of(const run_args& a);

/// The session hooks that show the study on `out`: its banner, stderr lines ("[study] ..."),
/// log notifications, restarts, the --procs advice and warnings.
session_hooks shown_on(console& out, std::size_t procs);

/// Starts, initializes (within --init-timeout) and lists the study, its output shown on `out`;
/// prints what went wrong.
boost::asio::awaitable<std::optional<started_study>> start_listed_study(const run_args& a,
                                                                        console& out);

/// A started study and the plan of the command's selection.
struct study_with_plan {
  started_study study;
  plan::plan plan;
};

/// Starts the study and plans the selection; on a planning error the study is shut down, the
/// error printed and `rc` set to the usage exit code.
boost::asio::awaitable<std::optional<study_with_plan>> start_and_plan(const run_args& a,
                                                                      console& out, int& rc);

/// The study's command line and environment: the host's environment unless --study-env-clear,
/// plus each --study-env (KEY=VALUE, or KEY to pass the host's own value).
study_command command_for(const run_args& a);

/// Where the run happened: enough to tell two runs' conditions apart, nothing secret. `labels`
/// (mira.toml's [environment.labels]) are added as they are.
boost::json::object environment_json(
    const std::vector<std::pair<std::string, std::string>>& labels = {});

/// Runs `body` (which sets the exit code) on a fresh io_context.
int run_io(std::function<boost::asio::awaitable<void>(int& rc)> body);

/// The table's colour: --color always; auto when stdout is a terminal, the output is not a log
/// (output_is_a_log) and --progress is not plain (asked for on a terminal, it says the terminal
/// is a log); never with NO_COLOR set (non-empty).
bool colour_for(const run_args& a, bool stdout_is_terminal, const env_reader& env);
/// colour_for() of this process's stdout and environment.
bool use_colour(const run_args& a);

/// Every --out path that cannot be written, each said on stderr before anything runs. True
/// when one was.
bool refuse_outs(const run_args& a);

/// Why --out `path` could not be written, looked at before anything runs (a run must not end
/// with its report refused): a folder, a missing or unwritable parent folder, a device or FIFO
/// that cannot be written. Nothing is opened: a FIFO would block. nullopt for none, or "-".
std::optional<std::string> out_path_problem(const std::filesystem::path& path);

/// The report in `format` written to `path` as it is rendered (store::output_file: a regular
/// file is replaced only when complete; a device, FIFO or "-" is written in place; a symbolic
/// link is written through).
boost::system::error_code write_report(const std::filesystem::path& path, const std::string& format,
                                       const report::case_source& cases,
                                       const schedule::run_report& report,
                                       const aggregate::summary& s);

/// The finished report on stdout and, with --out, in a file (with `--out -`, the report on
/// stdout instead of the table), and each --out FORMAT:PATH. False when a file could not be
/// written (the others still are).
bool emit_report(const run_args& a, const plan::plan& p, const schedule::run_report& report,
                 const aggregate::summary& s, bool cases_already_streamed);
/// emit_report() over any case source; `report` gives the run's seconds and how it stopped. The
/// table lists `table_cases` when given (the first of a big run), else `cases`.
bool emit_report(const run_args& a, const report::case_source& cases,
                 const schedule::run_report& report, const aggregate::summary& s,
                 bool cases_already_streamed, const report::case_source* table_cases = nullptr);

/// A saved run read back without the study (no lock): every readable case in natural key
/// order. Prints each unreadable file; nothing when the run cannot be opened (printed too).
std::optional<store::loaded_run> load_saved_run(const run_args& a);
/// The same run opened for reading a case at a time (store::run_reader): prints the same.
/// Without it, `rc` is the exit code: 2 for no such run, 3 for a run that cannot be read.
std::optional<store::run_reader> open_saved_run(const run_args& a, int& rc);

/// A RUN argument (mira merge, mira view): a path to a run folder ("run/" names the folder
/// "run"), or a run id in the results directory.
std::filesystem::path run_folder_of(const std::string& arg,
                                    const std::filesystem::path& results_dir);

}  // namespace mira::cli
