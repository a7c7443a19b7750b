// What the `mira` commands share: exit codes, the study launch (spawn, initialize, list, plan,
// restart), progress and the study's stderr/notifications while a run goes, and report output.
#pragma once

#include "args.hpp"

#include <mira/host.hpp>
#include <mira/plan/plan.hpp>
#include <mira/pool.hpp>
#include <mira/protocol/codec.hpp>
#include <mira/report/render.hpp>
#include <mira/store/run_store.hpp>
#include <mira/version.hpp>

#include <boost/asio/awaitable.hpp>
#include <boost/json/object.hpp>

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <variant>

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

// Progress on stderr while a run goes: on a terminal a live line redrawn every half second
// (cleared around every other stderr line, so study output never garbles it); elsewhere a
// heartbeat line every --heartbeat seconds.
struct progress_line {
  bool tty = ::isatty(2) != 0;
  bool active = false;
  bool shown = false;
  std::size_t total = 0, done = 0, passed = 0, failed = 0, na = 0;
  std::size_t starts = 0, finished_attempts = 0;  // their difference: attempts under way
  std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();

  std::string text() const {
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    double rate = secs > 0 ? static_cast<double>(done) / secs : 0;
    char buf[200];
    std::snprintf(buf, sizeof buf,
                  "[%zu/%zu] %zu passed · %zu failed · %zu n/a · %zu in progress · %.1f/s · %.0f s",
                  done, total, passed, failed, na, starts - finished_attempts, rate, secs);
    std::string t = buf;
    if (rate > 0 && done < total) {
      std::snprintf(buf, sizeof buf, " · ETA %.0f s", static_cast<double>(total - done) / rate);
      t += buf;
    }
    return t;
  }
  void clear() {
    if (tty && shown) std::fputs("\r\x1b[K", stderr);
    shown = false;
  }
  void draw() {
    if (!active) return;
    if (tty) {
      std::fprintf(stderr, "\r\x1b[K%s", text().c_str());
      shown = true;
    } else {
      std::fprintf(stderr, "progress: %s\n", text().c_str());
    }
    std::fflush(stderr);
  }
};

progress_line& the_progress();

// Every line the CLI writes on stderr while a run goes passes here.
void stderr_line(const std::string& text);

// What a run folder keeps besides results: every notification, appended to events.ndjson as it
// comes (when a run store is open), and the study's stderr (the last MiB of each process: a
// flood must not grow the host, nor push out what another process of a pool said), appended to
// study.stderr.log when the session ends.
struct run_log {
  static constexpr std::size_t max_stderr = std::size_t{1} << 20;
  struct tail {
    std::deque<std::string> lines;
    std::size_t bytes = 0;
  };
  std::map<std::size_t, tail> stderr_tails;  // by slot: 0 for a single process, else 1..P
  store::run_store* store = nullptr;

  void stderr_line(std::string_view line, std::size_t slot = 0) {
    auto& t = stderr_tails[slot];
    t.lines.emplace_back(line);
    t.bytes += line.size() + 1;
    while (t.bytes > max_stderr && !t.lines.empty()) {
      t.bytes -= t.lines.front().size() + 1;
      t.lines.pop_front();
    }
  }
  void event(const std::string* key, const notification& n);
  /// Each process's tail in turn; a pool's lines start with "[study N] ".
  std::string stderr_text() const {
    std::string out;
    for (auto& [slot, t] : stderr_tails)
      for (auto& l : t.lines) {
        if (slot != 0) out += "[study " + std::to_string(slot) + "] ";
        (out += l) += '\n';
      }
    return out;
  }
};

run_log& the_log();

/// Host options of the CLI: study log lines and stderr shown (sanitised) and kept for the folder.
/// `slot`: the process's number in a pool (its stderr lines are shown as "[study N] ..."), or 0.
host_options cli_host_options(const run_args& a, std::size_t slot = 0);

/// The study of a command: one process, or a pool of them (--procs > 1).
struct study_processes {
  study_processes(host_handle h) : conn(std::move(h)) {}  // NOLINT: implicit by design
  study_processes(study_pool p) : conn(std::move(p)) {}   // NOLINT
  study_processes& operator=(host_handle h) {
    conn = std::move(h);
    return *this;
  }
  /// Every process: graceful, then SIGTERM, then SIGKILL (a pool's all at once).
  boost::asio::awaitable<void> shutdown();
  std::variant<host_handle, study_pool> conn;
};

/// run_plan over the command's study. A single process that answers one request at a time
/// while several wait gets the --procs advice, once.
boost::asio::awaitable<schedule::run_report> run_study(study_processes& study, const plan::plan& p,
                                                       schedule::run_policy policy,
                                                       schedule::run_hooks hooks);

/// Where the run happened: enough to tell two runs' conditions apart, nothing secret. `labels`
/// (mira.toml's [environment.labels]) are added as they are.
boost::json::object environment_json(
    const std::vector<std::pair<std::string, std::string>>& labels = {});

// Starts the study, initializes it and lists every page; prints what went wrong otherwise.
struct opened {
  study_processes host;
  protocol::initialize_result init;
  protocol::list_result list;
};

/// Starts the same study again for run_plan, refusing one that is not the same study.
boost::asio::awaitable<tl::expected<host_handle, error>> restart_study(
    const run_args& a, protocol::initialize_result original);

/// The study's command line and environment: the host's environment unless --study-env-clear,
/// plus each --study-env (KEY=VALUE, or KEY to pass the host's own value).
study_command command_for(const run_args& a);

/// Starts, initializes (within --init-timeout) and lists the study; prints what went wrong.
boost::asio::awaitable<std::optional<opened>> open_study(const run_args& a);

// Opens the study and plans the selection; on a planning error the study is shut down, the
// error printed and `rc` set to the usage exit code.
struct planned {
  opened study;
  plan::plan p;
};

boost::asio::awaitable<std::optional<planned>> open_and_plan(const run_args& a, int& rc);

/// Runs `body` (which sets the exit code) on a fresh io_context.
int run_io(std::function<boost::asio::awaitable<void>(int& rc)> body);

/// Colour on stdout only for a terminal (or --color always), and never with NO_COLOR set.
bool use_colour(const run_args& a);

/// The report in `format` written to `path` as it is rendered (store::output_file: a regular
/// file is replaced only when complete; a device, FIFO or "-" is written in place; a symbolic
/// link is written through).
boost::system::error_code write_report(const std::filesystem::path& path, const std::string& format,
                                       const plan::plan& p, const schedule::run_report& report,
                                       const aggregate::summary& s);

/// The finished report on stdout and, with --out, in a file (with `--out -`, the report on
/// stdout instead of the table). False when the file could not be written.
bool emit_report(const run_args& a, const plan::plan& p, const schedule::run_report& report,
                 const aggregate::summary& s, bool cases_already_streamed);

/// A saved run read back without the study (no lock): every readable case in natural key
/// order. Prints each unreadable file; nothing when the run cannot be opened (printed too).
std::optional<store::loaded_run> load_saved_run(const run_args& a);

}  // namespace mira::cli
