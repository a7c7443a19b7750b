// The shared parts of the `mira` commands (see session.hpp).
#include "session.hpp"

#include <mira/protocol/json_text.hpp>
#include <mira/store/files.hpp>
#include <mira/store/run_store.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json/serialize.hpp>

#include <sys/utsname.h>

#include <fstream>
#include <iostream>
#include <thread>

namespace mira::cli {

namespace asio = boost::asio;
namespace json = boost::json;
using namespace asio::experimental::awaitable_operators;

progress_line& the_progress() {
  static progress_line p;
  return p;
}

// Every line the CLI writes on stderr while a run goes passes here.
void stderr_line(const std::string& text) {
  auto& p = the_progress();
  p.clear();
  std::fprintf(stderr, "%s\n", text.c_str());
  if (p.tty && p.active) p.draw();
}

void run_log::event(const std::string* key, const notification& n) {
  if (!store) return;
  json::object o{{"key", key ? json::value(*key) : json::value(nullptr)},
                 {"method", n.method},
                 {"params", n.params}};
  store->append_event(protocol::to_json_text(o));
}

run_log& the_log() {
  static run_log log;
  return log;
}

host_options cli_host_options(const run_args& a, std::size_t slot) {
  host_options o;
  o.idle_timeout = std::chrono::duration_cast<std::chrono::milliseconds>(a.idle_timeout);
  o.host_name = "mira-cpp";
  o.on_notification = [](const notification& n) {
    the_log().event(nullptr, n);
    if (n.method != "log") return;
    auto* m = n.params.if_contains("message");
    if (m && m->is_string()) stderr_line("  study: " + printable(m->get_string()));
  };
  auto prefix = slot == 0 ? std::string("[study] ") : "[study " + std::to_string(slot) + "] ";
  o.on_stderr_line = [slot, prefix](std::string_view line) {
    the_log().stderr_line(line, slot);
    stderr_line(prefix + printable(line));
  };
  return o;
}

asio::awaitable<void> study_processes::shutdown() {
  if (auto* pool = std::get_if<study_pool>(&conn))
    co_await pool->shutdown();
  else
    co_await std::get<host_handle>(conn).shutdown();
}

asio::awaitable<schedule::run_report> run_study(study_processes& study, const plan::plan& p,
                                                schedule::run_policy policy,
                                                schedule::run_hooks hooks) {
  if (auto* pool = std::get_if<study_pool>(&study.conn))
    co_return co_await schedule::run_plan(*pool, p, std::move(policy), std::move(hooks));
  hooks.on_sequential_study = [] {
    stderr_line(
        "mira: the study answers one request at a time; --procs N runs N copies of it "
        "(e.g. --procs " +
        std::to_string(std::max(2u, std::thread::hardware_concurrency())) + ")");
  };
  // Why the study goes (how it died, or how long it hung), not just that it did.
  hooks.on_restart = [](const std::string& why) {
    stderr_line("mira: starting the study again: " + printable(why));
  };
  co_return co_await schedule::run_plan(std::get<host_handle>(study.conn), p, std::move(policy),
                                        std::move(hooks));
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

// Starts the same study again for run_plan, refusing one that is not the same study.
asio::awaitable<tl::expected<host_handle, error>> restart_study(
    const run_args& a, protocol::initialize_result original) {
  auto limit = std::chrono::ceil<std::chrono::milliseconds>(a.init_timeout);
  auto host =
      co_await mira::restart_study(command_for(a), cli_host_options(a), std::move(original), limit);
  if (!host && host.error().code == errc::timed_out)
    host.error().diag.message += " (--init-timeout)";
  co_return host;
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

namespace {

void print_study(const protocol::initialize_result& init, std::size_t procs) {
  std::fprintf(stderr, "study %s%s%s · protocol %s · %lld evals", printable(init.study).c_str(),
               init.study_version.empty() ? "" : " ", printable(init.study_version).c_str(),
               printable(init.protocol_version).c_str(), static_cast<long long>(init.evals));
  if (procs > 1) std::fprintf(stderr, " · %zu processes", procs);
  std::fprintf(stderr, "\n");
}

// Every page of the listing (from a handle or a pool) within --init-timeout; prints what went
// wrong otherwise.
template <class Study>
asio::awaitable<std::optional<protocol::list_result>> list_within(Study& study, const run_args& a) {
  asio::steady_timer timer(co_await asio::this_coro::executor, a.init_timeout);
  auto listed =
      co_await (study.list_all() || timer.async_wait(asio::as_tuple(asio::use_awaitable)));
  if (listed.index() == 1) {
    std::fprintf(stderr,
                 "mira: the study did not finish listing its evals within %g s (--init-timeout)\n",
                 std::chrono::duration<double>(a.init_timeout).count());
    co_return std::nullopt;
  }
  auto list = std::move(std::get<0>(listed));
  if (!list) {
    std::fprintf(stderr, "mira: list failed: %s\n", list.error().message().c_str());
    co_return std::nullopt;
  }
  co_return std::move(*list);
}

// --procs N > 1: N processes started and initialized at once, listed once.
asio::awaitable<std::optional<opened>> open_pool(const run_args& a) {
  auto ex = co_await asio::this_coro::executor;
  pool_options o;
  o.processes = a.procs;
  auto j = a.policy.concurrency.max_concurrent;
  o.max_in_flight_per_process = (j + a.procs - 1) / a.procs;
  o.host_options_for = [&a](std::size_t slot) { return cli_host_options(a, slot); };
  o.init_timeout = std::chrono::duration_cast<std::chrono::milliseconds>(a.init_timeout);
  o.max_restarts = a.policy.max_restarts;
  o.restart_backoff =
      std::chrono::duration_cast<std::chrono::milliseconds>(a.policy.restart_backoff);
  o.on_restart = [](std::size_t slot, const std::string& what) {
    stderr_line("mira: study " + std::to_string(slot) + " " + printable(what));
  };
  auto pool = co_await study_pool::start(ex, command_for(a), std::move(o));
  if (!pool) {
    std::fprintf(stderr, "mira: starting %zu study processes failed: %s\n", a.procs,
                 pool.error().message().c_str());
    for (auto& l : pool.error().diag.stderr_tail)
      std::fprintf(stderr, "  | %s\n", printable(l).c_str());
    co_return std::nullopt;
  }
  auto init = pool->study();
  print_study(init, a.procs);
  auto list = co_await list_within(*pool, a);
  if (!list) {
    co_await pool->shutdown();
    co_return std::nullopt;
  }
  co_return opened{std::move(*pool), std::move(init), std::move(*list)};
}

}  // namespace

asio::awaitable<std::optional<opened>> open_study(const run_args& a) {
  if (a.procs > 1) co_return co_await open_pool(a);
  auto ex = co_await asio::this_coro::executor;
  auto host = host_handle::spawn(ex, command_for(a), cli_host_options(a));
  if (!host) {
    std::fprintf(stderr, "mira: %s\n", host.error().message().c_str());
    co_return std::nullopt;
  }
  // A study that never answers (a build that hangs, a blocked import) must not hang the host.
  asio::steady_timer timer(ex, a.init_timeout);
  auto raced =
      co_await (host->initialize() || timer.async_wait(asio::as_tuple(asio::use_awaitable)));
  if (raced.index() == 1) {
    std::fprintf(stderr, "mira: the study did not answer initialize within %g s (--init-timeout)\n",
                 std::chrono::duration<double>(a.init_timeout).count());
    co_return std::nullopt;
  }
  auto init = std::move(std::get<0>(raced));
  if (!init) {
    std::fprintf(stderr, "mira: initialize failed: %s\n", init.error().message().c_str());
    for (auto& l : init.error().diag.stderr_tail)
      std::fprintf(stderr, "  | %s\n", printable(l).c_str());
    co_return std::nullopt;
  }
  print_study(*init, 1);
  auto list = co_await list_within(*host, a);
  if (!list) co_return std::nullopt;
  co_return opened{std::move(*host), std::move(*init), std::move(*list)};
}

asio::awaitable<std::optional<planned>> open_and_plan(const run_args& a, int& rc) {
  auto study = co_await open_study(a);
  if (!study) co_return std::nullopt;
  auto p = plan::make_plan(study->list, a.selection);
  if (!p) {
    // A glob may come from the preset rather than from the flag the message names.
    auto from = a.preset.empty() ? std::string()
                                 : " (--preset " + a.preset +
                                       " gives the selection flags the command line leaves out)";
    std::fprintf(stderr, "mira: %s%s\n", printable(p.error().message).c_str(),
                 printable(from).c_str());
    co_await study->host.shutdown();
    rc = exit_usage;
    co_return std::nullopt;
  }
  co_return planned{std::move(*study), std::move(*p)};
}

int run_io(std::function<asio::awaitable<void>(int& rc)> body) {
  asio::io_context ctx{1};  // run by this thread alone (writer threads only post to it)
  int rc = exit_host_error;
  asio::co_spawn(ctx, body(rc), asio::detached);
  ctx.run();
  return rc;
}

// Colour on stdout only for a terminal (or --color always), and never with NO_COLOR set.
bool use_colour(const run_args& a) {
  const char* no_color = std::getenv("NO_COLOR");
  if (no_color && *no_color) return false;
  return a.color == "always" || (a.color == "auto" && ::isatty(1));
}

// The finished report on stdout and, with --out, in a file. Returns false when the file could
// not be written.
boost::system::error_code write_report(const std::filesystem::path& path, const std::string& format,
                                       const plan::plan& p, const schedule::run_report& report,
                                       const aggregate::summary& s) {
  auto file = store::output_file::open(path);
  if (!file) return file.error();
  render(format, p, report, s, [&](std::string_view piece) { file->write(piece); });
  return file->commit();
}

bool emit_report(const run_args& a, const plan::plan& p, const schedule::run_report& report,
                 const aggregate::summary& s, bool cases_already_streamed) {
  if (!a.out.empty()) {
    const bool to_stdout = a.out == "-";  // the report instead of the table
    if (!to_stdout) print_table(stdout, p, report, s, use_colour(a));
    if (auto ec = write_report(a.out, a.format, p, report, s)) {
      std::fprintf(stderr, "mira: cannot write %s: %s\n", printable(a.out).c_str(),
                   ec.message().c_str());
      return false;
    }
    if (!to_stdout)
      std::fprintf(stderr, "wrote %s (%s)\n", printable(a.out).c_str(), a.format.c_str());
    return true;
  }
  if (a.format == "table")
    print_table(stdout, p, report, s, use_colour(a));
  else if (a.format == "jsonl" && cases_already_streamed)
    std::cout << protocol::to_json_text(json::object{{"summary", summary_json(s, report)}}) << '\n';
  else
    render(a.format, p, report, s, [](std::string_view piece) { std::cout << piece; });
  return true;
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
