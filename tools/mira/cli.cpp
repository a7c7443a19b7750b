// The `mira` command line: a thin client of the library. `list` prints the catalogue, `plan`
// shows what a selection would run, `run` runs it through the scheduler and reports.
#include "cli.hpp"

#include "args.hpp"
#include "render.hpp"

#include <mira/aggregate/summary.hpp>
#include <mira/host.hpp>
#include <mira/plan/plan.hpp>
#include <mira/protocol/codec.hpp>
#include <mira/schedule/run_plan.hpp>
#include <mira/store/run_folder.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json/serialize.hpp>

#include <sys/utsname.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <ctime>
#include <deque>
#include <fstream>
#include <iostream>
#include <map>
#include <random>
#include <thread>

namespace mira::cli {

namespace asio = boost::asio;
namespace json = boost::json;
using namespace asio::experimental::awaitable_operators;
using schedule::case_state;

namespace {

constexpr std::string_view version = "0.1.0";

constexpr int exit_ok = 0;
constexpr int exit_failed = 1;
constexpr int exit_usage = 2;
constexpr int exit_host_error = 3;
constexpr int exit_stopped = 4;
constexpr int exit_interrupted = 130;

const char* const main_help = R"(mira - run Mira Eval Protocol studies

Usage:
  mira list [--json] -- STUDY_CMD [ARGS...]
  mira plan [FILTER] [selection] [--json] -- STUDY_CMD [ARGS...]
  mira run [FILTER] [selection] [run options] -- STUDY_CMD [ARGS...]
  mira report RUN_ID [--results-dir DIR] [--format table|jsonl] [--group-by KEY]
  mira --version

Everything after `--` is the study's command line, passed as is (no shell);
--study-cmd "CMD ARGS" gives it as one string instead, split like a shell would (quotes and
backslashes, no expansion).
Run `mira COMMAND --help` for a command's options.
)";

const char* const list_help = R"(mira list - print the study's catalogue (every sample page)

Usage: mira list [--json] -- STUDY_CMD [ARGS...]

  --json   print the catalogue as one JSON object

Study launch (list, plan and run):
  --study-cmd "CMD ARGS"   the study's command line as one string (shell-like quoting)
  --study-env KEY[=VALUE]  set KEY for the study (KEY alone: the host's value); repeatable
  --study-env-clear        start the study with only the --study-env variables
  --init-timeout SECONDS   how long the study may take to answer initialize (default 60)

Example:
  mira list -- ./build/examples/example_study
)";

#define MIRA_LAUNCH_HELP                                                                         \
  "\nStudy launch:\n"                                                                            \
  "  --study-env KEY[=VALUE]  set KEY for the study (KEY alone: the host's value); repeatable\n" \
  "  --study-env-clear        start the study with only the --study-env variables\n"             \
  "  --init-timeout SECONDS   how long the study may take to answer initialize (default 60)\n"

#define MIRA_SELECTION_HELP                                                             \
  "Selection (globs: * ? [...]; comma-separated lists; each must match something):\n"   \
  "  FILTER                 keep cases whose eval/sample@target[k=v] contains FILTER\n" \
  "  --evals GLOBS          evals to run\n"                                             \
  "  --samples GLOBS        sample ids\n"                                               \
  "  --targets GLOBS        target labels\n"                                            \
  "  --tag TAG              samples with this tag (repeatable: any of them)\n"          \
  "  --axis NAME=V1,V2      axis values (repeatable; the same NAME twice intersects)\n" \
  "  --trials N             trials per case instead of the eval's (0 means 1)\n"        \
  "  --seed S               base seed instead of the eval's; trial t gets S + t\n"

const char* const plan_help =
    "mira plan - show what a selection would run, without running it\n\n"
    "Usage: mira plan [FILTER] [selection] [--json] -- STUDY_CMD [ARGS...]\n\n" MIRA_SELECTION_HELP
    "  --json                 print every planned case as JSON\n" MIRA_LAUNCH_HELP
    "\n"
    "Example:\n  mira plan --evals 'reason*' --axis effort=high -- "
    "./build/examples/example_study\n";

const char* const run_help =
    "mira run - run the selected cases and report\n\n"
    "Usage: mira run [FILTER] [selection] [options] -- STUDY_CMD [ARGS...]\n\n" MIRA_SELECTION_HELP
    "\nScheduling:\n"
    "  -j, --max-concurrent N        cases in flight at once (default 8)\n"
    "  --provider-concurrency p=N,.. per-provider caps (provider from the target's listing)\n"
    "  --no-adaptive                 no adaptive per-provider limits and no rate-limit backoff\n"
    "  --max-retries N               retries of rate limits, retryable errors, infra errors and\n"
    "                                cases whose study died (default 4); then the case is N/A\n"
    "  --max-restarts N              start a study that died again, up to N times (default 3);\n"
    "                                the cases it was running are retried on the new one\n"
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
    "  --out PATH                    write the --format report to PATH; the table to stdout\n"
    "  --color WHEN                  colour the table: auto (on a terminal), always or never;\n"
    "                                never when NO_COLOR is set\n"
    "  --heartbeat SECONDS           progress line interval when stderr is not a terminal (10)\n"
    "\nSaved runs:\n"
    "  --results-dir DIR             where run folders go (default ./results)\n"
    "  --dry-run                     save nothing\n"
    "  --resume RUN_ID               run only what the saved run lacks; report the whole plan\n"
    "  --retry-errors, --retry-failed  with --resume: also re-run errors and N/A, or failures\n"
    "  --allow-other-study           with --resume: accept a study of another "
    "name\n" MIRA_LAUNCH_HELP
    "\nExit codes: 0 every scored case passed, 1 some case failed, 2 usage error, 3 host or\n"
    "study error, 4 stopped by a budget or the deadline, 130 interrupted (Ctrl-C: the first\n"
    "press cancels what is in flight, saves and reports; the second quits at once).\n"
    "\nExample:\n  mira run -j 16 --timeout 30 --group-by effort -- "
    "./build/examples/example_study\n";

#undef MIRA_SELECTION_HELP
#undef MIRA_LAUNCH_HELP

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

// What a run folder keeps besides results, written when the run ends: the study's stderr
// (its last MiB: a flood must not grow the host) and every notification, as NDJSON.
struct run_log {
  static constexpr std::size_t max_stderr = std::size_t{1} << 20;
  std::deque<std::string> stderr_lines;
  std::size_t stderr_bytes = 0;
  std::string events;

  void stderr_line(std::string_view line) {
    stderr_lines.emplace_back(line);
    stderr_bytes += line.size() + 1;
    while (stderr_bytes > max_stderr && !stderr_lines.empty()) {
      stderr_bytes -= stderr_lines.front().size() + 1;
      stderr_lines.pop_front();
    }
  }
  void event(const std::string* key, const notification& n) {
    json::object o{{"key", key ? json::value(*key) : json::value(nullptr)},
                   {"method", n.method},
                   {"params", n.params}};
    events += json::serialize(o);
    events += '\n';
  }
  std::string stderr_text() const {
    std::string out;
    for (auto& l : stderr_lines) (out += l) += '\n';
    return out;
  }
};

run_log& the_log() {
  static run_log log;
  return log;
}

host_options cli_host_options() {
  host_options o;
  o.host_name = "mira-cpp";
  o.on_notification = [](const notification& n) {
    the_log().event(nullptr, n);
    if (n.method != "log") return;
    auto* m = n.params.if_contains("message");
    if (m && m->is_string()) stderr_line("  study: " + printable(m->get_string()));
  };
  o.on_stderr_line = [](std::string_view line) {
    the_log().stderr_line(line);
    stderr_line("[study] " + printable(line));
  };
  return o;
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
json::object environment_json() {
  json::object env;
  utsname u{};
  if (::uname(&u) == 0) {
    env["os"] = std::string(u.sysname) + " " + u.release;
    env["arch"] = u.machine;
  }
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
  return env;
}

// SHA-256 of each eval's canonical listing entry: a resumed run can tell what changed.
json::object fingerprints(const protocol::list_result& list) {
  json::object out;
  for (auto& e : list.evals)
    out[e.name] = store::sha256_hex(store::canonical_json(json::value(protocol::encode(e))));
  return out;
}

// Starts the study, initializes it and lists every page; prints what went wrong otherwise.
struct opened {
  host_handle host;
  protocol::initialize_result init;
  protocol::list_result list;
};

// Starts the same study again for run_plan, refusing one that is not the same study.
asio::awaitable<tl::expected<host_handle, error>> restart_study(
    study_command cmd, protocol::initialize_result original) {
  std::fprintf(stderr, "mira: the study died; starting it again\n");
  auto host = host_handle::spawn(co_await asio::this_coro::executor, cmd, cli_host_options());
  if (!host) co_return tl::unexpected(host.error());
  auto init = co_await host->initialize();
  if (!init) co_return tl::unexpected(init.error());
  if (init->study != original.study || protocol::version_major(init->protocol_version) !=
                                           protocol::version_major(original.protocol_version)) {
    error e{make_error_code(errc::incompatible_protocol), {}};
    e.diag.message = "the restarted study is '" + init->study + "' (protocol " +
                     init->protocol_version + "), not '" + original.study + "' (protocol " +
                     original.protocol_version + ")";
    co_return tl::unexpected(std::move(e));
  }
  co_return std::move(*host);
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

asio::awaitable<std::optional<opened>> open_study(const run_args& a) {
  auto ex = co_await asio::this_coro::executor;
  auto host = host_handle::spawn(ex, command_for(a), cli_host_options());
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
  std::fprintf(stderr, "study %s%s%s · protocol %s · %lld evals\n", printable(init->study).c_str(),
               init->study_version.empty() ? "" : " ", printable(init->study_version).c_str(),
               printable(init->protocol_version).c_str(), static_cast<long long>(init->evals));
  auto list = co_await host->list_all();
  if (!list) {
    std::fprintf(stderr, "mira: list failed: %s\n", list.error().message().c_str());
    co_return std::nullopt;
  }
  co_return opened{std::move(*host), std::move(*init), std::move(*list)};
}

void print_list(const protocol::list_result& list) {
  for (auto& e : list.evals) {
    std::printf("%s%s%s", printable(e.name).c_str(), e.description.empty() ? "" : " — ",
                printable(e.description).c_str());
    std::printf("  (%zu samples", e.samples.size());
    if (e.trials > 1) std::printf(", trials=%lld", static_cast<long long>(e.trials));
    if (e.seed) std::printf(", seed=%lld", static_cast<long long>(*e.seed));
    if (e.max_turns) std::printf(", max_turns=%lld", static_cast<long long>(*e.max_turns));
    std::printf(")\n");
    std::string samples;
    for (std::size_t i = 0; i < e.samples.size() && i < 10; ++i) {
      if (i) samples += ", ";
      samples += printable(e.samples[i].id);
      if (!e.samples[i].tags.empty()) {
        samples += " [";
        for (std::size_t t = 0; t < e.samples[i].tags.size(); ++t)
          samples += (t ? "," : "") + printable(e.samples[i].tags[t]);
        samples += "]";
      }
    }
    if (e.samples.size() > 10) samples += ", … " + std::to_string(e.samples.size() - 10) + " more";
    std::printf("  samples: %s\n", samples.c_str());
    std::string scorers;
    for (auto& s : e.scorers) scorers += (scorers.empty() ? "" : ", ") + printable(s);
    std::printf("  scorers: %s\n", scorers.c_str());
    std::string targets;
    for (auto& t : e.targets) {
      targets += (targets.empty() ? "" : ", ") + printable(t.label);
      if (!t.available) targets += " (unavailable)";
    }
    std::printf("  targets: %s\n", targets.c_str());
    if (!e.axes.empty()) {
      std::string axes;
      for (auto& a : e.axes) {
        axes += (axes.empty() ? "" : ", ") + printable(a.name) + "=[";
        for (std::size_t v = 0; v < a.values.size(); ++v)
          axes += (v ? "," : "") + printable(a.values[v]);
        axes += "]";
      }
      std::printf("  axes:    %s\n", axes.c_str());
    }
  }
}

void print_plan(const plan::plan& p, bool as_json) {
  if (as_json) {
    for (auto& c : p.cases) {
      auto o = protocol::encode(c.params);
      o["key"] = c.key;
      if (!c.provider.empty()) o["provider"] = c.provider;
      if (!c.available) o["available"] = false;
      std::cout << json::serialize(o) << '\n';
    }
    return;
  }
  std::size_t total = 0;
  for (auto& e : p.evals) {
    std::printf(
        "%s: %zu sample(s) x %zu target(s) x %zu axis combination(s) x %zu trial(s) = %zu "
        "case(s)\n",
        printable(e.eval).c_str(), e.samples, e.targets, e.axis_combinations, e.trials, e.cases);
    total += e.cases;
  }
  std::size_t unavailable = 0;
  for (auto& c : p.cases) unavailable += !c.available;
  std::printf("total: %zu case(s)", total);
  if (unavailable) std::printf(", %zu on unavailable targets (reported as skipped)", unavailable);
  std::printf("\n");
}

// Runs `body` (which sets the exit code) on a fresh io_context.
template <class F>
int run_io(F body) {
  asio::io_context ctx;
  int rc = exit_host_error;
  asio::co_spawn(ctx, body(rc), asio::detached);
  ctx.run();
  return rc;
}

int cmd_list(const std::vector<std::string>& args) {
  auto a = parse_args(command::list, args);
  if (a.help) return std::fputs(list_help, stdout), exit_ok;
  return run_io([&](int& rc) -> asio::awaitable<void> {
    auto study = co_await open_study(a);
    if (!study) co_return;
    if (a.json)
      std::cout << json::serialize(protocol::encode(study->list)) << '\n';
    else
      print_list(study->list);
    co_await study->host.shutdown();
    rc = exit_ok;
  });
}

// Opens the study and plans the selection; on a planning error the study is shut down, the
// error printed and `rc` set to the usage exit code.
struct planned {
  opened study;
  plan::plan p;
};

asio::awaitable<std::optional<planned>> open_and_plan(const run_args& a, int& rc) {
  auto study = co_await open_study(a);
  if (!study) co_return std::nullopt;
  auto p = plan::make_plan(study->list, a.selection);
  if (!p) {
    std::fprintf(stderr, "mira: %s\n", printable(p.error().message).c_str());
    co_await study->host.shutdown();
    rc = exit_usage;
    co_return std::nullopt;
  }
  co_return planned{std::move(*study), std::move(*p)};
}

int cmd_plan(const std::vector<std::string>& args) {
  auto a = parse_args(command::plan, args);
  if (a.help) return std::fputs(plan_help, stdout), exit_ok;
  return run_io([&](int& rc) -> asio::awaitable<void> {
    auto pl = co_await open_and_plan(a, rc);
    if (!pl) co_return;
    co_await pl->study.host.shutdown();
    print_plan(pl->p, a.json);
    rc = exit_ok;
  });
}

// The run folder of this run: a new one, the one being resumed, or none for --dry-run.
// Prints why and sets rc when it cannot be had.
std::optional<store::run_folder> run_folder_for(const run_args& a, const opened& study, bool& ok) {
  ok = true;
  if (a.dry_run) return std::nullopt;
  if (!a.resume.empty()) {
    auto f = store::run_folder::open(a.results_dir, a.resume);
    if (!f) {
      std::fprintf(stderr, "mira: --resume: %s\n", printable(f.error()).c_str());
      ok = false;
      return std::nullopt;
    }
    if (auto meta = f->load_meta()) {
      auto* s = meta->if_contains("study");
      auto* name = s && s->is_object() ? s->get_object().if_contains("study") : nullptr;
      if (name && name->is_string() && name->get_string() != study.init.study) {
        std::fprintf(stderr,
                     "mira: --resume: run %s was made by study '%s', this is '%s' "
                     "(--allow-other-study resumes anyway)\n",
                     a.resume.c_str(), printable(name->get_string()).c_str(),
                     printable(study.init.study).c_str());
        if (!a.allow_other_study) {
          ok = false;
          return std::nullopt;
        }
      }
      auto* study_version =
          s && s->is_object() ? s->get_object().if_contains("study_version") : nullptr;
      if (study_version && study_version->is_string() &&
          study_version->get_string() != study.init.study_version)
        std::fprintf(stderr, "mira: warning: run %s was made by study version %s, this is %s\n",
                     a.resume.c_str(), printable(study_version->get_string()).c_str(),
                     printable(study.init.study_version).c_str());
      auto* saved = meta->if_contains("fingerprints");
      auto now = fingerprints(study.list);
      if (saved && saved->is_object())
        for (auto& [eval, hash] : now)
          if (auto* old = saved->get_object().if_contains(eval); old && *old != hash)
            std::fprintf(stderr, "mira: warning: eval '%s' changed since run %s was saved\n",
                         printable(eval).c_str(), a.resume.c_str());
    }
    return std::move(*f);
  }
  std::random_device rd;
  auto id = store::new_run_id(std::chrono::system_clock::now(),
                              static_cast<std::uint16_t>(rd() & 0xffff));
  auto f = store::run_folder::create(a.results_dir, id);
  if (!f) {
    std::fprintf(stderr, "mira: %s\n", printable(f.error()).c_str());
    ok = false;
    return std::nullopt;
  }
  return std::move(*f);
}

json::object meta_json(const run_args& a, const opened& study, const std::string& run_id,
                       const std::string& started) {
  json::array argv;
  for (auto& s : a.study) argv.emplace_back(s);
  // Names only: values (API keys) never reach a run folder.
  json::array env_names;
  for (auto& entry : a.study_env) env_names.emplace_back(entry.substr(0, entry.find('=')));
  return {
      {"format", 1},
      {"run_id", run_id},
      {"started", started},
      {"host", json::object{{"name", "mira-cpp"}, {"version", version}}},
      {"study", study.init.raw},
      {"study_command", std::move(argv)},
      {"study_env", json::object{{"cleared", a.study_env_clear}, {"passed", std::move(env_names)}}},
      {"environment", environment_json()},
      {"fingerprints", fingerprints(study.list)}};
}

std::string utc_now() {
  auto t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm utc{};
  ::gmtime_r(&t, &utc);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return buf;
}

// Colour on stdout only for a terminal (or --color always), and never with NO_COLOR set.
bool use_colour(const run_args& a) {
  const char* no_color = std::getenv("NO_COLOR");
  if (no_color && *no_color) return false;
  return a.color == "always" || (a.color == "auto" && ::isatty(1));
}

// The finished report on stdout and, with --out, in a file. Returns false when the file could
// not be written.
bool emit_report(const run_args& a, const plan::plan& p, const schedule::run_report& report,
                 const aggregate::summary& s, bool cases_already_streamed) {
  if (!a.out.empty()) {
    print_table(stdout, p, report, s, use_colour(a));
    if (auto ec = store::write_file_atomic(a.out, render(a.format, p, report, s))) {
      std::fprintf(stderr, "mira: cannot write %s: %s\n", printable(a.out).c_str(),
                   ec.message().c_str());
      return false;
    }
    std::fprintf(stderr, "wrote %s (%s)\n", printable(a.out).c_str(), a.format.c_str());
    return true;
  }
  if (a.format == "table")
    print_table(stdout, p, report, s, use_colour(a));
  else if (a.format == "jsonl" && cases_already_streamed)
    std::cout << json::serialize(json::object{{"summary", summary_json(s, report)}}) << '\n';
  else
    std::cout << render(a.format, p, report, s);
  return true;
}

int cmd_run(const std::vector<std::string>& args) {
  auto a = parse_args(command::run, args);
  if (a.help) return std::fputs(run_help, stdout), exit_ok;
  return run_io([&](int& rc) -> asio::awaitable<void> {
    auto pl = co_await open_and_plan(a, rc);
    if (!pl) co_return;
    auto* study = &pl->study;
    auto* p = &pl->p;
    if (p->cases.empty()) std::fprintf(stderr, "mira: no cases matched the selection\n");
    bool folder_ok = true;
    auto folder = run_folder_for(a, *study, folder_ok);
    if (!folder_ok) {
      co_await study->host.shutdown();
      rc = a.resume.empty() ? exit_host_error : exit_usage;
      co_return;
    }

    // jsonl on stdout streams each case as it ends; to a file it is written at the end.
    const bool stream_jsonl = a.format == "jsonl" && a.out.empty();
    // Resume: what is saved is not run again (unless asked to), and counts in the report.
    std::vector<schedule::case_record> records(p->cases.size());
    plan::plan todo;
    std::vector<std::size_t> full_index;
    std::size_t reused = 0;
    std::map<std::string, json::object> saved;
    if (!a.resume.empty()) {
      std::vector<std::string> unreadable;
      saved = folder->load_cases(&unreadable);
      for (auto& u : unreadable)
        std::fprintf(stderr, "mira: warning: cannot read %s; that case runs again\n",
                     printable(u).c_str());
    }
    for (std::size_t i = 0; i < p->cases.size(); ++i) {
      if (auto it = saved.find(p->cases[i].key); it != saved.end()) {
        auto rec = case_from_json(it->second);
        bool again =
            (a.retry_errors && (rec.state == case_state::error || rec.state == case_state::na)) ||
            (a.retry_failed && rec.state == case_state::failed) ||
            rec.state == case_state::cancelled;
        if (!again) {
          records[i] = std::move(rec);
          ++reused;
          if (stream_jsonl) std::cout << json::serialize(it->second) << '\n';
          continue;
        }
      }
      todo.cases.push_back(p->cases[i]);
      full_index.push_back(i);
    }
    if (!a.resume.empty())
      std::fprintf(stderr, "resuming run %s: %zu of %zu case(s) already saved\n", a.resume.c_str(),
                   reused, p->cases.size());
    // Kept in memory from here: written now, completed when the run ends.
    json::object meta;
    if (folder) {
      meta = folder->load_meta().value_or(meta_json(a, *study, folder->id(), utc_now()));
      meta["study"] = study->init.raw;
      if (auto ec = folder->save_meta(meta))
        std::fprintf(stderr, "mira: warning: cannot write meta.json: %s\n", ec.message().c_str());
    }

    a.policy.respawn = [&]() -> asio::awaitable<tl::expected<host_handle, error>> {
      auto h = co_await restart_study(command_for(a), study->init);
      if (h) study->host = *h;  // so the final shutdown reaches the live one
      co_return h;
    };
    std::size_t unsaved = 0;
    schedule::run_hooks hooks;
    hooks.on_notification = [&](std::size_t j, const notification& n) {
      the_log().event(&p->cases[full_index[j]].key, n);
    };
    auto& progress = the_progress();
    progress.total = todo.cases.size();
    hooks.on_start = [&](std::size_t) { ++progress.starts; };
    hooks.on_result = [&](std::size_t j, const schedule::case_record& r) {
      progress.finished_attempts += static_cast<std::size_t>(r.attempts);
      ++progress.done;
      progress.passed += r.state == case_state::passed;
      progress.failed += r.state == case_state::failed || r.state == case_state::error;
      progress.na += r.state == case_state::na;
      auto& c = p->cases[full_index[j]];
      auto record = case_json(c, r);
      // A cancelled case is not finished: a resumed run runs it.
      if (folder && r.state != case_state::cancelled)
        if (auto ec = folder->save_case(c.key, record)) {
          ++unsaved;
          stderr_line("mira: error: cannot save " + printable(c.key) + ": " + ec.message());
        }
      if (stream_jsonl) std::cout << json::serialize(record) << '\n' << std::flush;
    };
    // Ctrl-C (or SIGTERM): the first stops the run (in-flight cases are sent `cancel`, finished
    // ones are saved and reported, the resume command is printed); the second quits at once.
    asio::cancellation_signal interrupt;
    asio::signal_set signals(co_await asio::this_coro::executor, SIGINT, SIGTERM);
    int presses = 0;
    std::function<void()> arm = [&] {
      signals.async_wait([&](boost::system::error_code ec, int) {
        if (ec) return;
        if (++presses > 1) std::_Exit(exit_interrupted);
        std::fprintf(
            stderr,
            "\nmira: interrupted: cancelling the cases in flight (again to quit at once)\n");
        interrupt.emit(asio::cancellation_type::terminal);
        arm();
      });
    };
    arm();
    // The progress ticker runs until the run ends.
    progress.t0 = std::chrono::steady_clock::now();
    progress.active = true;
    asio::steady_timer ticker(co_await asio::this_coro::executor);
    auto period =
        progress.tty
            ? std::chrono::duration_cast<schedule::duration>(std::chrono::milliseconds(500))
            : a.heartbeat;
    std::function<void()> tick = [&] {
      ticker.expires_after(period);
      ticker.async_wait([&](boost::system::error_code ec) {
        if (ec || !progress.active) return;
        progress.draw();
        tick();
      });
    };
    tick();
    auto part = co_await asio::co_spawn(
        co_await asio::this_coro::executor, schedule::run_plan(study->host, todo, a.policy, hooks),
        asio::bind_cancellation_slot(interrupt.slot(), asio::use_awaitable));
    signals.cancel();
    progress.active = false;
    progress.clear();
    ticker.cancel();
    schedule::run_report report;
    report.stopped = part.stopped;
    report.stop_message = part.stop_message;
    report.seconds = part.seconds;
    report.restarts = part.restarts;
    for (std::size_t j = 0; j < part.cases.size(); ++j)
      records[full_index[j]] = std::move(part.cases[j]);
    report.cases = std::move(records);

    auto s = aggregate::summarize(*p, report.cases, &study->list, a.group_by);
    bool written = emit_report(a, *p, report, s, stream_jsonl);
    co_await study->host.shutdown();
    if (folder) {
      json::array cases;
      for (std::size_t i = 0; i < p->cases.size(); ++i)
        cases.push_back(case_json(p->cases[i], report.cases[i]));
      auto summary = summary_json(s, report);
      json::object report_file{{"summary", summary}, {"cases", std::move(cases)}};
      auto report_text = json::serialize(report_file) + "\n";
      auto stderr_text = the_log().stderr_text();
      for (auto [name, text] :
           {std::pair<const char*, std::string_view>{"report.json", report_text},
            {"events.ndjson", the_log().events},
            {"study.stderr.log", stderr_text}})
        if (auto ec = store::write_file_atomic(folder->path() / name, text))
          std::fprintf(stderr, "mira: warning: cannot write %s: %s\n", name, ec.message().c_str());
      meta["finished"] = utc_now();
      meta["summary"] = std::move(summary);
      if (auto ec = folder->save_meta(meta))
        std::fprintf(stderr, "mira: warning: cannot write meta.json: %s\n", ec.message().c_str());
      std::fprintf(stderr, "saved run %s to %s\n", folder->id().c_str(), folder->path().c_str());
      if (report.stopped != schedule::stop_reason::none || s.count(case_state::cancelled) > 0)
        std::fprintf(stderr, "resume with: mira run --resume %s --results-dir %s -- ...\n",
                     folder->id().c_str(), a.results_dir.c_str());
    }
    if (report.stopped == schedule::stop_reason::interrupted)
      rc = exit_interrupted;
    else if (unsaved > 0 || !written)
      rc = exit_host_error;
    else if (report.stopped == schedule::stop_reason::study_failed)
      rc = exit_host_error;
    else if (report.stopped == schedule::stop_reason::budget ||
             report.stopped == schedule::stop_reason::deadline)
      rc = exit_stopped;
    else if (s.count(case_state::failed) + s.count(case_state::error) > 0)
      rc = exit_failed;
    else
      rc = exit_ok;
  });
}

const char* const report_help = R"(mira report - show a saved run again, without the study

Usage: mira report RUN_ID [--results-dir DIR] [--format F] [--out PATH] [--group-by KEY]

  --results-dir DIR      where run folders are (default ./results)
  --format F             table, json, jsonl, csv, junit, md or html, as for `mira run`
  --out PATH             write that format to PATH, the table to stdout
  --color WHEN           auto (default: on a terminal), always or never; NO_COLOR turns it off
  --group-by KEY         pass rate by an axis param or transcript metadata key

Cases are shown in key order. Exit codes: 0, or 2 when there is no such run.

Example:
  mira report 20261130T081502Z-3fa9
)";

int cmd_report(const std::vector<std::string>& args) {
  auto a = parse_args(command::report, args);
  if (a.help) return std::fputs(report_help, stdout), exit_ok;
  auto folder = store::run_folder::open(a.results_dir, a.run_id);
  if (!folder) {
    std::fprintf(stderr, "mira: %s\n", printable(folder.error()).c_str());
    return exit_usage;
  }
  std::vector<std::string> unreadable;
  auto saved = folder->load_cases(&unreadable);
  for (auto& u : unreadable)
    std::fprintf(stderr, "mira: warning: cannot read %s\n", printable(u).c_str());
  plan::plan p;
  schedule::run_report report;
  for (auto& [key, record] : saved) {
    auto params = protocol::decode_run_params(record);
    if (!params) {
      std::fprintf(stderr, "mira: warning: the saved case %s has no case identity: %s\n",
                   printable(key).c_str(), params.error().message().c_str());
      continue;
    }
    plan::planned_case c;
    c.params = std::move(*params);
    c.key = key;
    c.logical_key = plan::logical_key(c.params);
    p.cases.push_back(std::move(c));
    report.cases.push_back(case_from_json(record));
  }
  if (auto meta = folder->load_meta()) {
    auto* summary = meta->if_contains("summary");
    auto* secs =
        summary && summary->is_object() ? summary->get_object().if_contains("seconds") : nullptr;
    if (secs && secs->is_number()) report.seconds = secs->to_number<double>();
  }
  auto s = aggregate::summarize(p, report.cases, nullptr, a.group_by);
  return emit_report(a, p, report, s, false) ? exit_ok : exit_host_error;
}

}  // namespace

int main(const std::vector<std::string>& args) {
  try {
    if (args.empty() || args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
      std::fputs(main_help, args.empty() ? stderr : stdout);
      return args.empty() ? exit_usage : exit_ok;
    }
    if (args[0] == "--version") {
      std::printf("mira %s (protocol %s)\n", std::string(version).c_str(),
                  std::string(protocol::protocol_version).c_str());
      return exit_ok;
    }
    std::vector<std::string> rest(args.begin() + 1, args.end());
    if (args[0] == "list") return cmd_list(rest);
    if (args[0] == "plan") return cmd_plan(rest);
    if (args[0] == "run") return cmd_run(rest);
    if (args[0] == "report") return cmd_report(rest);
    throw usage_error{"unknown command '" + printable(args[0]) +
                      "' (commands: list, plan, run, report)"};
  } catch (const usage_error& e) {
    std::fprintf(stderr, "mira: %s\nRun `mira --help` for usage.\n", e.message.c_str());
    return exit_usage;
  }
}

}  // namespace mira::cli
