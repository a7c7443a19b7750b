// The shared parts of the `mira` commands (see console.hpp).
#include "console.hpp"

#include "flags.hpp"

#include <mira/protocol/json_text.hpp>
#include <mira/store/files.hpp>
#include <mira/store/run_store.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json/serialize.hpp>

#include <sys/utsname.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <iostream>
#include <thread>

namespace mira::cli {

namespace asio = boost::asio;
namespace json = boost::json;

int exit_for(const session_error& e) {
  if (e.code.category() == store::category()) return exit_for(store::error{e.code, e.text});
  if (e.code == session_errc::invalid_selection || e.code == session_errc::study_incapable ||
      e.code == session_errc::too_many_cases || e.code == session_errc::nothing_to_run ||
      e.code == session_errc::refused)
    return exit_usage;
  return exit_host_error;
}

std::string progress_line::text() const {
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

const char* process_env(const char* name) {
  return std::getenv(name);
}

bool output_is_a_log(const env_reader& env) {
  const char* term = env("TERM");
  if (!term || !*term || std::string_view(term) == "dumb") return true;
  const char* ci = env("CI");
  return ci && *ci && std::string_view(ci) != "false";
}

progress_mode progress_for(const run_args& a, bool stderr_is_terminal, const env_reader& env) {
  if (a.progress != progress_mode::automatic) return a.progress;
  return stderr_is_terminal && !output_is_a_log(env) ? progress_mode::tty : progress_mode::plain;
}

progress_mode progress_for(const run_args& a) {
  return progress_for(a, ::isatty(2) != 0, process_env);
}

void progress_line::clear() {
  if (mode == progress_mode::tty && shown) std::fputs("\r\x1b[K", stderr);
  shown = false;
}

void progress_line::draw() {
  if (!active || mode == progress_mode::none) return;
  if (mode == progress_mode::tty) {
    std::fprintf(stderr, "\r\x1b[K%s", text().c_str());
    shown = true;
  } else {
    std::fprintf(stderr, "progress: %s\n", text().c_str());
  }
  std::fflush(stderr);
}

void console::line(const std::string& text) {
  progress.clear();
  std::fprintf(stderr, "%s%s\n", prefix.c_str(), text.c_str());
  if (progress.mode == progress_mode::tty && progress.active) progress.draw();
}

host_options cli_host_options(const run_args& a) {
  host_options o;
  o.idle_timeout = std::chrono::duration_cast<std::chrono::milliseconds>(a.idle_timeout);
  o.host_name = "mira-cpp";
  return o;
}

study_launch launch_of(const run_args& a) {
  study_launch l;
  l.command = command_for(a);
  auto& p = l.pool;
  p.processes = a.procs;
  auto j = a.policy.concurrency.max_concurrent;
  p.max_in_flight_per_process = (j + a.procs - 1) / a.procs;
  p.host_options_for = [o = cli_host_options(a)](std::size_t) { return o; };
  p.init_timeout = std::chrono::ceil<std::chrono::milliseconds>(a.init_timeout);
  p.init_timeout_name = "--init-timeout";
  p.max_restarts = a.max_restarts;
  return l;
}

namespace {

void print_study(console& out, const protocol::initialize_result& init, std::size_t procs) {
  auto line = "study " + printable(init.study) + (init.study_version.empty() ? "" : " ") +
              printable(init.study_version) + " · protocol " + printable(init.protocol_version) +
              " · " + std::to_string(init.evals) + " evals";
  if (procs > 1) line += " · " + std::to_string(procs) + " processes";
  out.line(line);
}

}  // namespace

session_hooks shown_on(console& out, std::size_t procs) {
  session_hooks h;
  h.on_study = [&out](const protocol::initialize_result& init, std::size_t n) {
    print_study(out, init, n);
  };
  h.on_warning = [&out](const std::string& w) { out.line("mira: warning: " + printable(w)); };
  h.on_notification = [&out](const std::string* key, const notification& n) {
    if (n.method != "log") return;
    auto* m = n.params.if_contains("message");
    if (!m || !m->is_string()) return;
    out.line(key ? "  study [" + printable(*key) + "]: " + printable(m->get_string())
                 : "  study: " + printable(m->get_string()));
  };
  h.on_stderr_line = [&out](std::size_t slot, std::string_view line) {
    out.line((slot == 0 ? std::string("[study] ") : "[study " + std::to_string(slot) + "] ") +
             printable(line));
  };
  // Why the study goes (how it died, or how long it hung), not just that it did.
  h.on_restart = [&out](std::size_t slot, const std::string& why) {
    out.line(slot == 0 ? "mira: starting the study again: " + printable(why)
                       : "mira: study " + std::to_string(slot) + " " + printable(why));
  };
  if (procs <= 1)
    h.on_sequential_study = [&out] {
      out.line(
          "mira: the study answers one request at a time; --procs N runs N copies of it "
          "(e.g. --procs " +
          std::to_string(std::max(2u, std::thread::hardware_concurrency())) + ")");
    };
  return h;
}

std::string first_line_of(const std::string& command) {
  std::string out;
  if (FILE* p = ::popen(command.c_str(), "r")) {
    char buf[512];
    if (std::fgets(buf, sizeof buf, p)) out = buf;
    ::pclose(p);
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return out;
}

// Where the run happened: enough to tell two runs' conditions apart, nothing secret.
json::object environment_json(const std::vector<std::pair<std::string, std::string>>& labels) {
  json::object env;
  utsname u{};
  if (::uname(&u) == 0) {
    env["os"] = std::string(u.sysname) + " " + u.release;
    env["arch"] = u.machine;
  }
  // As the Rust host finds it: $HOSTNAME (set by the shell, and what a container may override),
  // else the kernel's name.
  if (const char* h = std::getenv("HOSTNAME"); h && *h)
    env["hostname"] = h;
  else if (u.nodename[0])
    env["hostname"] = u.nodename;
  env["cpus"] = std::thread::hardware_concurrency();
  std::ifstream meminfo("/proc/meminfo");
  for (std::string line; std::getline(meminfo, line);)
    if (line.rfind("MemTotal:", 0) == 0)
      env["memory_mib"] = std::strtoll(line.c_str() + 9, nullptr, 10) / 1024;
  auto commit = first_line_of("git rev-parse HEAD 2>/dev/null");
  if (!commit.empty()) {
    json::object git{{"commit", commit}};
    auto branch = first_line_of("git rev-parse --abbrev-ref HEAD 2>/dev/null");
    if (!branch.empty() && branch != "HEAD") git["branch"] = branch;
    git["dirty"] = !first_line_of("git status --porcelain 2>/dev/null").empty();
    env["git"] = std::move(git);
  }
  json::object ci;
  for (auto* var : {"CI", "CI_PROVIDER", "GITHUB_WORKFLOW", "GITHUB_RUN_ID", "GITHUB_RUN_ATTEMPT",
                    "GITHUB_ACTOR", "CI_PIPELINE_ID", "CI_JOB_URL"})
    if (const char* v = std::getenv(var)) ci[var] = v;
  if (!ci.empty()) env["ci"] = std::move(ci);
  if (!labels.empty()) {
    json::object l;
    for (auto& [k, v] : labels) l[k] = v;
    env["labels"] = std::move(l);
  }
  return env;
}

// The study's command line and environment: the host's environment unless --study-env-clear,
// plus each --study-env (KEY=VALUE, or KEY to pass the host's own value).
study_command command_for(const run_args& a) {
  study_command cmd;
  cmd.argv = a.study;
  if (!a.study_env_clear && a.study_env.empty()) return cmd;
  std::map<std::string, std::string> env;
  if (!a.study_env_clear)
    for (char** e = ::environ; *e; ++e) {
      std::string_view kv(*e);
      auto eq = kv.find('=');
      if (eq != std::string_view::npos) env[std::string(kv.substr(0, eq))] = kv.substr(eq + 1);
    }
  for (auto& entry : a.study_env) {
    auto eq = entry.find('=');
    if (eq != std::string::npos) {
      env[entry.substr(0, eq)] = entry.substr(eq + 1);
    } else if (const char* v = std::getenv(entry.c_str())) {
      env[entry] = v;
    }
  }
  std::vector<std::string> flat;
  for (auto& [k, v] : env) flat.push_back(k + "=" + v);
  cmd.environment = std::move(flat);
  return cmd;
}

asio::awaitable<std::optional<started_study>> start_listed_study(const run_args& a, console& out) {
  auto hooks = shown_on(out, a.procs);
  auto launch = launch_of(a);
  // Without a session, the study's own output is shown straight from its host options.
  launch.pool.host_options_for = [&a, hooks](std::size_t slot) {
    auto o = cli_host_options(a);
    o.on_stderr_line = [hooks, slot](std::string_view l) { hooks.on_stderr_line(slot, l); };
    o.on_notification = [hooks](const notification& n) { hooks.on_notification(nullptr, n); };
    return o;
  };
  launch.pool.on_restart = hooks.on_restart;
  auto started = co_await start_study(std::move(launch));
  if (!started) {
    auto& e = started.error();
    out.line("mira: " + printable(e.code == errc::timed_out ? e.diag.message : e.message()));
    for (auto& l : e.diag.stderr_tail) out.line("  | " + printable(l));
    co_return std::nullopt;
  }
  print_study(out, started->connection.study(), started->connection.processes());
  co_return std::move(*started);
}

asio::awaitable<std::optional<study_with_plan>> start_and_plan(const run_args& a, console& out,
                                                               int& rc) {
  auto study = co_await start_listed_study(a, out);
  if (!study) co_return std::nullopt;
  auto p = plan::make_plan(study->listing, a.selection);
  if (!p) {
    // A glob may come from the preset rather than from the flag the message names.
    auto from = a.preset.empty() ? std::string()
                                 : " (--preset " + a.preset +
                                       " gives the selection flags the command line leaves out)";
    out.line("mira: " + printable(in_flag_words(p.error().message(), p.error().field)) +
             printable(from));
    co_await study->connection.shutdown();
    rc = exit_usage;
    co_return std::nullopt;
  }
  co_return study_with_plan{std::move(*study), std::move(*p)};
}

int run_io(std::function<asio::awaitable<void>(int& rc)> body) {
  asio::io_context ctx{1};  // run by this thread alone (writer threads only post to it)
  int rc = exit_host_error;
  asio::co_spawn(ctx, body(rc), asio::detached);
  ctx.run();
  return rc;
}

bool colour_for(const run_args& a, bool stdout_is_terminal, const env_reader& env) {
  const char* no_color = env("NO_COLOR");
  if (no_color && *no_color) return false;
  if (a.color != "auto") return a.color == "always";
  return stdout_is_terminal && !output_is_a_log(env) && a.progress != progress_mode::plain;
}

bool use_colour(const run_args& a) {
  return colour_for(a, ::isatty(1) != 0, process_env);
}

std::optional<std::string> out_path_problem(const std::filesystem::path& path) {
  namespace fs = std::filesystem;
  if (path.empty() || path == "-") return std::nullopt;
  auto cannot = [](std::string what) {
    return std::optional<std::string>(std::move(what) + ": " + std::strerror(errno));
  };
  std::error_code ec;
  auto st = fs::status(path, ec);
  if (fs::is_directory(st)) return "it is a folder";
  // A device or FIFO is written in place; a regular file is replaced beside itself.
  if (fs::exists(st) && !fs::is_regular_file(st))
    return ::access(path.c_str(), W_OK) == 0 ? std::nullopt : cannot("it cannot be written");
  auto parent = path.parent_path();
  if (parent.empty()) parent = ".";
  if (!fs::is_directory(parent, ec)) return "the folder " + parent.string() + " does not exist";
  if (::access(parent.c_str(), W_OK | X_OK) != 0)
    return cannot("the folder " + parent.string() + " cannot be written to");
  return std::nullopt;
}

// The finished report on stdout and, with --out, in a file. Returns false when the file could
// not be written.
boost::system::error_code write_report(const std::filesystem::path& path, const std::string& format,
                                       const report::case_source& cases,
                                       const schedule::run_report& report,
                                       const aggregate::summary& s) {
  auto file = store::output_file::open(path);
  if (!file) return file.error();
  render(format, cases, report, s, [&](std::string_view piece) { file->write(piece); });
  return file->commit();
}

bool emit_report(const run_args& a, const plan::plan& p, const schedule::run_report& report,
                 const aggregate::summary& s, bool cases_already_streamed) {
  return emit_report(a, report::memory_cases(p, report), report, s, cases_already_streamed);
}

bool emit_report(const run_args& a, const report::case_source& cases,
                 const schedule::run_report& report, const aggregate::summary& s,
                 bool cases_already_streamed, const report::case_source* table_cases) {
  const auto& listed = table_cases ? *table_cases : cases;
  bool written = true;
  auto write_to = [&](const std::string& path, const std::string& format) {
    if (auto ec = write_report(path, format, cases, report, s)) {
      std::fprintf(stderr, "mira: cannot write %s: %s\n", printable(path).c_str(),
                   ec.message().c_str());
      written = false;
    } else if (path != "-") {
      std::fprintf(stderr, "wrote %s (%s)\n", printable(path).c_str(), format.c_str());
    }
  };
  // stdout: the --format report, or the table when it goes to a file (or a FORMAT:- takes it).
  bool stdout_taken = a.out == "-";
  for (auto& o : a.outs) stdout_taken = stdout_taken || o.path == "-";
  if (!a.out.empty()) {
    if (!stdout_taken) print_table(stdout, listed, report, s, use_colour(a));
    write_to(a.out, a.format);
  } else if (a.format == "table") {
    if (!stdout_taken) print_table(stdout, listed, report, s, use_colour(a));
  } else if (a.format == "jsonl" && cases_already_streamed) {
    std::cout << protocol::to_json_text(json::object{{"summary", summary_json(s, report)}}) << '\n';
  } else {
    render(a.format, cases, report, s, [](std::string_view piece) { std::cout << piece; });
  }
  std::cout << std::flush;
  for (auto& o : a.outs) write_to(o.path, o.format);
  return written;
}

int exit_code_for(const schedule::run_report& report, const aggregate::summary& s, bool incomplete,
                  std::size_t min_scored) {
  using schedule::stop_reason;
  if (report.stopped == stop_reason::interrupted) return exit_interrupted;
  if (incomplete || report.stopped == stop_reason::study_failed ||
      report.stopped == stop_reason::requested)
    return exit_host_error;
  if (report.stopped == stop_reason::budget || report.stopped == stop_reason::deadline)
    return exit_stopped;
  const bool failed = s.count(schedule::case_state::failed) + s.count(schedule::case_state::error);
  if (s.overall.scored < min_scored) {
    std::fprintf(stderr, "mira: gate failed: %zu case(s) scored, --min-scored asks for %zu\n",
                 s.overall.scored, min_scored);
    return exit_failed;
  }
  std::size_t cases = 0;
  for (auto n : s.counts) cases += n;
  if (s.overall.scored == 0 && min_scored == 0 && cases > s.count(schedule::case_state::executed))
    std::fprintf(stderr,
                 "mira: warning: no case was scored (each was n/a, skipped or not run); "
                 "--min-scored 1 makes that a failure\n");
  return failed ? exit_failed : exit_ok;
}

bool refuse_outs(const run_args& a) {
  bool refused = false;
  auto check = [&](const std::string& path, const std::string& shown) {
    if (auto why = out_path_problem(path)) {
      std::fprintf(stderr, "mira: --out %s: %s\n", printable(shown).c_str(),
                   printable(*why).c_str());
      refused = true;
    }
  };
  check(a.out, a.out);
  for (auto& o : a.outs) check(o.path, o.format + ":" + o.path);
  return refused;
}

std::filesystem::path run_folder_of(const std::string& arg,
                                    const std::filesystem::path& results_dir) {
  std::error_code ec;
  auto f =
      arg.find('/') == std::string::npos && std::filesystem::is_directory(results_dir / arg, ec)
          ? results_dir / arg
          : std::filesystem::path(arg).lexically_normal();
  if (f.filename().empty()) f = f.parent_path();
  return f;
}

std::optional<store::run_reader> open_saved_run(const run_args& a, int& rc) {
  auto run = store::run_reader::open(a.results_dir, a.run_id);
  if (!run) {
    std::fprintf(stderr, "mira: %s\n", printable(run.error().message()).c_str());
    rc = exit_for(run.error());
    return std::nullopt;
  }
  for (auto& u : run->unreadable())
    std::fprintf(stderr, "mira: warning: cannot read %s\n", printable(u).c_str());
  for (auto& u : run->superseded())
    std::fprintf(stderr, "mira: warning: %s\n", printable(u).c_str());
  return std::move(*run);
}

std::optional<store::loaded_run> load_saved_run(const run_args& a) {
  auto run = store::load_run(a.results_dir, a.run_id);
  if (!run) {
    std::fprintf(stderr, "mira: %s\n", printable(run.error().message()).c_str());
    return std::nullopt;
  }
  for (auto& u : run->unreadable)
    std::fprintf(stderr, "mira: warning: cannot read %s\n", printable(u).c_str());
  for (auto& u : run->superseded) std::fprintf(stderr, "mira: warning: %s\n", printable(u).c_str());
  return std::move(*run);
}

}  // namespace mira::cli
