// `mira run --experiment PLAN.toml` (see experiment.hpp). Each treatment runs as a child
// `mira run` of this executable, as in the Rust host, so a treatment is an ordinary saved run and
// one that crashes cannot take the others down; the parent only schedules the children, prefixes
// their output with the treatment's name, and compares the runs they saved.
#include "experiment.hpp"

#include "config_step.hpp"
#include "flags.hpp"
#include "session.hpp"

#include <mira/compare/compare.hpp>
#include <mira/store/files.hpp>
#include <mira/store/run_store.hpp>

#include <toml++/toml.h>

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

extern char** environ;

namespace mira::cli {

namespace fs = std::filesystem;
namespace json = boost::json;

namespace {

constexpr const char* env_id = "MIRA_EXPERIMENT_ID";
constexpr const char* env_treatment = "MIRA_EXPERIMENT_TREATMENT";
constexpr const char* env_study = "MIRA_EXPERIMENT_STUDY";
constexpr const char* env_plan = "MIRA_EXPERIMENT_PLAN";
constexpr const char* env_baseline = "MIRA_EXPERIMENT_BASELINE";

std::string where(const fs::path& file, const toml::source_region& at) {
  return file.string() + ":" + std::to_string(at.begin.line) + ":" +
         std::to_string(at.begin.column);
}

using errors = std::string;

// A string, or a message naming where the value is and what it should have been.
tl::expected<std::string, errors> string_of(const toml::node& n, const fs::path& file,
                                            std::string_view key) {
  if (auto s = n.value<std::string>(); s && n.is_string()) return *s;
  return tl::unexpected(where(file, n.source()) + ": " + std::string(key) + " must be a string");
}

// A string or an array of strings (a preset's style), one glob per element.
tl::expected<std::vector<std::string>, errors> strings_of(const toml::node& n, const fs::path& file,
                                                          std::string_view key) {
  std::vector<std::string> out;
  if (n.is_string()) {
    out.push_back(*n.value<std::string>());
    return out;
  }
  if (auto* arr = n.as_array()) {
    for (auto& e : *arr) {
      auto s = string_of(e, file, key);
      if (!s) return tl::unexpected(s.error());
      out.push_back(*s);
    }
    return out;
  }
  return tl::unexpected(where(file, n.source()) + ": " + std::string(key) +
                        " must be a string or an array of strings");
}

tl::expected<void, errors> only_keys(const toml::table& t, const fs::path& file,
                                     std::string_view table,
                                     std::initializer_list<std::string_view> allowed) {
  for (auto& [k, v] : t) {
    if (std::find(allowed.begin(), allowed.end(), k.str()) != allowed.end()) continue;
    std::string list;
    for (auto a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
    return tl::unexpected(where(file, v.source()) + ": unknown key '" + std::string(k.str()) +
                          "' in " + std::string(table) + " (expected: " + list + ")");
  }
  return {};
}

// "./x" and "../x" are relative to the plan's directory, as in the Rust host.
std::string resolve(const std::string& value, const fs::path& plan_dir) {
  if (value.rfind("./", 0) == 0 || value.rfind("../", 0) == 0)
    return (plan_dir / value).lexically_normal().string();
  return value;
}

// The shortest text that reads back as `v` ("0.05", "1e-05"): a TOML float for any `v` that
// is not a whole number.
std::string shortest_double(double v) {
  char buf[32];
  return {buf, std::to_chars(buf, buf + sizeof buf, v).ptr};
}

}  // namespace

tl::expected<experiment_plan, std::string> parse_experiment(std::string_view text,
                                                            const fs::path& file) {
  toml::table doc;
  try {
    doc = toml::parse(text, file.string());
  } catch (const toml::parse_error& e) {
    return tl::unexpected(where(file, e.source()) + ": " + std::string(e.description()));
  }
  if (auto ok = only_keys(doc, file, "the plan",
                          {"study", "launcher", "preset", "slice", "treatments", "compare"});
      !ok)
    return tl::unexpected(ok.error());
  const auto plan_dir = fs::absolute(file).parent_path();
  experiment_plan p;
  auto text_key = [&](std::string_view key, std::string& out) -> tl::expected<void, errors> {
    if (auto* n = doc.get(key)) {
      auto s = string_of(*n, file, key);
      if (!s) return tl::unexpected(s.error());
      if (s->empty())
        return tl::unexpected(where(file, n->source()) + ": " + std::string(key) + " is empty");
      out = *s;
    }
    return {};
  };
  for (auto [key, out] : {std::pair<std::string_view, std::string*>{"study", &p.study},
                          {"launcher", &p.launcher},
                          {"preset", &p.preset}})
    if (auto ok = text_key(key, *out); !ok) return tl::unexpected(ok.error());
  if (p.study.empty())
    return tl::unexpected(file.string() +
                          ": study = \"NAME\" is required (the name the study reports in "
                          "initialize)");

  if (auto* node = doc.get("slice")) {
    auto* slice = node->as_table();
    if (!slice) return tl::unexpected(where(file, node->source()) + ": slice must be a table");
    if (auto ok = only_keys(*slice, file, "[slice]", {"samples", "targets", "trials"}); !ok)
      return tl::unexpected(ok.error());
    for (auto [key, out] :
         {std::pair<std::string_view, std::vector<std::string>*>{"samples", &p.samples},
          {"targets", &p.targets}})
      if (auto* n = slice->get(key)) {
        auto v = strings_of(*n, file, key);
        if (!v) return tl::unexpected(v.error());
        *out = std::move(*v);
      }
    if (auto* n = slice->get("trials")) {
      auto t = n->value<std::int64_t>();
      if (!n->is_integer() || !t || *t < 1 || *t > 1000000)
        return tl::unexpected(where(file, n->source()) +
                              ": trials must be a whole number from 1 to 1000000");
      p.trials = *t;
    }
  }

  auto* treatments_node = doc.get("treatments");
  auto* treatments = treatments_node ? treatments_node->as_array() : nullptr;
  if (!treatments || treatments->empty())
    return tl::unexpected(file.string() +
                          ": at least one [[treatments]] table is required (name = \"...\")");
  std::set<std::string> names;
  for (auto& node : *treatments) {
    auto* t = node.as_table();
    if (!t) return tl::unexpected(where(file, node.source()) + ": treatments must be tables");
    if (auto ok = only_keys(*t, file, "[[treatments]]", {"name", "env"}); !ok)
      return tl::unexpected(ok.error());
    experiment_plan::treatment tr;
    auto* name = t->get("name");
    if (!name) return tl::unexpected(where(file, node.source()) + ": a treatment needs a name");
    auto n = string_of(*name, file, "name");
    if (!n) return tl::unexpected(n.error());
    if (n->empty() || n->find('/') != std::string::npos)
      return tl::unexpected(where(file, name->source()) +
                            ": a treatment's name must be non-empty, without '/'");
    if (!names.insert(*n).second)
      return tl::unexpected(where(file, name->source()) + ": treatment '" + *n + "' twice");
    tr.name = *n;
    if (auto* env_node = t->get("env")) {
      auto* env = env_node->as_table();
      if (!env) return tl::unexpected(where(file, env_node->source()) + ": env must be a table");
      for (auto& [k, v] : *env) {
        auto value = string_of(v, file, "env." + std::string(k.str()));
        if (!value) return tl::unexpected(value.error());
        if (k.str().empty() || k.str().find('=') != std::string_view::npos)
          return tl::unexpected(where(file, v.source()) + ": '" + std::string(k.str()) +
                                "' is not an environment variable name");
        tr.env.emplace_back(std::string(k.str()), resolve(*value, plan_dir));
      }
    }
    p.treatments.push_back(std::move(tr));
  }

  p.baseline = p.treatments.front().name;
  if (auto* node = doc.get("compare")) {
    auto* cmp = node->as_table();
    if (!cmp) return tl::unexpected(where(file, node->source()) + ": compare must be a table");
    if (auto ok = only_keys(*cmp, file, "[compare]", {"group_by", "baseline", "alpha"}); !ok)
      return tl::unexpected(ok.error());
    if (auto* n = cmp->get("group_by")) {
      auto g = string_of(*n, file, "group_by");
      if (!g) return tl::unexpected(g.error());
      p.group_by = *g;
    }
    if (auto* n = cmp->get("baseline")) {
      auto b = string_of(*n, file, "baseline");
      if (!b) return tl::unexpected(b.error());
      if (!names.count(*b))
        return tl::unexpected(where(file, n->source()) + ": baseline '" + *b +
                              "' is not a treatment of the plan");
      p.baseline = *b;
    }
    if (auto* n = cmp->get("alpha")) {
      auto a = n->value<double>();
      if (!a || !(*a > 0 && *a < 1))
        return tl::unexpected(where(file, n->source()) + ": alpha must be a number in (0, 1)");
      p.alpha = *a;
    }
  }
  return p;
}

std::string resolved_toml(const experiment_plan& p) {
  toml::table t;
  t.insert("study", p.study);
  if (!p.launcher.empty()) t.insert("launcher", p.launcher);
  if (!p.preset.empty()) t.insert("preset", p.preset);
  toml::table slice;
  for (auto [key, values] :
       {std::pair<const char*, const std::vector<std::string>*>{"samples", &p.samples},
        {"targets", &p.targets}})
    if (!values->empty()) {
      toml::array arr;
      for (auto& v : *values) arr.push_back(v);
      slice.insert(key, std::move(arr));
    }
  if (p.trials) slice.insert("trials", *p.trials);
  if (!slice.empty()) t.insert("slice", std::move(slice));
  toml::array treatments;
  for (auto& tr : p.treatments) {
    toml::table e;
    e.insert("name", tr.name);
    toml::table env;
    for (auto& [k, v] : tr.env) env.insert(k, v);
    e.insert("env", std::move(env));
    treatments.push_back(std::move(e));
  }
  t.insert("treatments", std::move(treatments));
  toml::table cmp;
  cmp.insert("group_by", p.group_by);
  cmp.insert("baseline", p.baseline);
  // toml++ writes a double with max_digits10 digits (0.05 as 0.050000000000000003), so alpha is
  // written here, the shortest way that reads back the same: [compare] goes last to take it.
  std::ostringstream os;
  os << t << "\n\n[compare]\n" << cmp << "\nalpha = " << shortest_double(p.alpha) << '\n';
  return os.str();
}

std::optional<std::string> experiment_study_mismatch(const std::string& study) {
  const char* want = std::getenv(env_study);
  if (!want || !std::getenv(env_id) || study == want) return std::nullopt;
  return "the experiment plan is for study '" + std::string(want) + "' but this study is '" +
         study + "'";
}

tl::expected<void, std::string> experiment_annotate(store::run_meta& meta,
                                                    const fs::path& run_folder) {
  const char* id = std::getenv(env_id);
  const char* treatment = std::getenv(env_treatment);
  const char* plan = std::getenv(env_plan);
  if (!id || !treatment || !plan) return {};
  const bool baseline =
      std::getenv(env_baseline) && std::string(std::getenv(env_baseline)) == "true";
  meta.extra["experiment"] =
      json::object{{"id", id}, {"treatment", treatment}, {"baseline", baseline}, {"plan", plan}};
  // The environment block is left out when mira.toml turns it off; the labels go with it.
  if (!meta.environment.empty()) {
    auto& labels = meta.environment["labels"];
    if (!labels.is_object()) labels = json::object{};
    labels.as_object()["experiment_id"] = id;
    labels.as_object()["treatment"] = treatment;
    labels.as_object()["experiment_baseline"] = baseline ? "true" : "false";
  }
  std::ifstream in(plan, std::ios::binary);
  std::stringstream source;
  source << in.rdbuf();
  if (!in) return tl::unexpected("cannot read the experiment plan " + std::string(plan));
  auto parsed = parse_experiment(source.str(), plan);
  if (!parsed) return tl::unexpected(parsed.error());
  for (auto [name, text] :
       {std::pair<const char*, std::string>{"experiment-source.toml", source.str()},
        {"experiment.toml", resolved_toml(*parsed)}})
    if (auto ec = store::write_file_atomic(run_folder / name, text))
      return tl::unexpected("cannot write " + (run_folder / name).string() + ": " + ec.message());
  return {};
}

namespace {

struct child {
  std::string treatment;
  pid_t pid = -1;
  int out = -1;         // the read end of its stdout and stderr
  std::string partial;  // output after the last newline
  int status = -1;      // exit code, or 128 + signal
};

// Writes whole lines of `c`'s output to stderr, each prefixed with the treatment's name.
void relay(child& c, std::string_view bytes, bool flush_all) {
  c.partial.append(bytes);
  std::size_t start = 0;
  for (auto nl = c.partial.find('\n'); nl != std::string::npos; nl = c.partial.find('\n', start)) {
    auto line = "[" + c.treatment + "] " + c.partial.substr(start, nl - start + 1);
    std::fwrite(line.data(), 1, line.size(), stderr);
    start = nl + 1;
  }
  c.partial.erase(0, start);
  if (flush_all && !c.partial.empty()) {
    auto line = "[" + c.treatment + "] " + c.partial + "\n";
    std::fwrite(line.data(), 1, line.size(), stderr);
    c.partial.clear();
  }
}

// The parent's arguments: its flags without the experiment's own, and the study command after
// `--` (with the `--`; empty when --study-cmd gave it or a launcher is to).
struct split_args {
  std::vector<std::string> flags, tail;
};

split_args split_parent(const std::vector<std::string>& args) {
  split_args out;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (!out.tail.empty() || args[i] == "--") {
      out.tail.push_back(args[i]);
      continue;
    }
    if (args[i] == "--experiment" || args[i] == "--experiment-parallel") {
      ++i;  // and its value
      continue;
    }
    out.flags.push_back(args[i]);
  }
  return out;
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (auto& x : v) s += (s.empty() ? "" : ",") + x;
  return s;
}

// What every treatment's `mira run` gets besides the parent's flags: the results directory, the
// plan's slice, launcher and preset as flags (so each child resolves them through mira.toml as
// any `mira run` does; a slice's globs are command-line selection, under which the preset fills
// the rest), and the study command after `--` when the command line gave one.
std::vector<std::string> shared_flags(const experiment_plan& p, const run_args& a) {
  std::vector<std::string> flags;
  if (!a.results_dir_given) flags.insert(flags.end(), {"--results-dir", a.results_dir});
  if (!p.samples.empty()) flags.insert(flags.end(), {"--samples", joined(p.samples)});
  if (!p.targets.empty()) flags.insert(flags.end(), {"--targets", joined(p.targets)});
  if (p.trials) flags.insert(flags.end(), {"--trials", std::to_string(*p.trials)});
  if (!p.launcher.empty()) flags.insert(flags.end(), {"--launcher", p.launcher});
  if (!p.preset.empty()) flags.insert(flags.end(), {"--preset", p.preset});
  return flags;
}

// Starts `exe run ARGS` with stdout and stderr on a pipe. Fails with errno's message.
tl::expected<child, std::string> spawn(const std::string& exe, const std::vector<std::string>& args,
                                       const std::vector<std::string>& env,
                                       const std::string& treatment) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return tl::unexpected(std::string(std::strerror(errno)));
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  // The parent ignores Ctrl-C while children run (they save and report first); they must not.
  sigset_t defaults;
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGINT);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF);
  std::vector<char*> argv{const_cast<char*>(exe.c_str()), const_cast<char*>("run")};
  for (auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  envp.reserve(env.size() + 1);
  for (auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  child c;
  c.treatment = treatment;
  int rc = ::posix_spawn(&c.pid, exe.c_str(), &fa, &attr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  ::close(fds[1]);
  if (rc != 0) {
    ::close(fds[0]);
    return tl::unexpected(std::string(std::strerror(rc)));
  }
  c.out = fds[0];
  return c;
}

std::vector<std::string> child_env(const experiment_plan& p, const std::string& id,
                                   const fs::path& plan_file, const std::string& treatment) {
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e)
    if (std::strncmp(*e, "MIRA_EXPERIMENT_", 16) != 0) env.emplace_back(*e);
  env.push_back(std::string(env_id) + "=" + id);
  env.push_back(std::string(env_treatment) + "=" + treatment);
  env.push_back(std::string(env_study) + "=" + p.study);
  env.push_back(std::string(env_plan) + "=" + plan_file.string());
  env.push_back(std::string(env_baseline) + "=" + (treatment == p.baseline ? "true" : "false"));
  return env;
}

// The runs of experiment `id` in `results_dir`, by treatment.
std::map<std::string, std::string> runs_of(const fs::path& results_dir, const std::string& id) {
  std::map<std::string, std::string> out;
  std::error_code ec;
  for (auto& e : fs::directory_iterator(results_dir, ec)) {
    if (!e.is_directory(ec)) continue;
    auto name = e.path().filename().string();
    if (name.empty() || name[0] == '.') continue;
    auto meta = store::load_run_meta(results_dir, name);
    if (!meta) continue;
    auto* x = meta->extra.if_contains("experiment");
    auto* o = x ? x->if_object() : nullptr;
    if (!o) continue;
    auto* xid = o->if_contains("id");
    auto* tr = o->if_contains("treatment");
    if (xid && xid->is_string() && xid->get_string() == id && tr && tr->is_string())
      out[std::string(tr->get_string())] = name;
  }
  return out;
}

}  // namespace

int run_experiment(const std::vector<std::string>& args, const run_args& a) {
  const fs::path plan_file = fs::absolute(a.experiment).lexically_normal();
  std::ifstream in(plan_file, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "mira: --experiment: cannot read %s\n",
                 printable(plan_file.string()).c_str());
    return exit_usage;
  }
  std::stringstream text;
  text << in.rdbuf();
  auto plan = parse_experiment(text.str(), plan_file);
  if (!plan) {
    std::fprintf(stderr, "mira: --experiment: %s\n", printable(plan.error()).c_str());
    return exit_usage;
  }
  auto& p = *plan;
  for (auto [set, flag] : {std::pair<bool, const char*>{!a.resume.empty(), "--resume"},
                           {a.dry_run, "--dry-run"},
                           {a.execute_only, "--execute-only"},
                           {a.shard.has_value(), "--shard"},
                           {!a.out.empty(), "--out"}})
    if (set) {
      std::fprintf(stderr,
                   "mira: --experiment: %s does not apply (each treatment is a new saved run, "
                   "compared at the end)\n",
                   flag);
      return exit_usage;
    }
  // The plan's launcher and preset resolved here as each treatment will resolve them, so a
  // mistake (no such launcher or preset, the study given twice) stops the experiment before
  // anything runs, and the results dir is the one the treatments save to.
  if (!p.launcher.empty() &&
      (a.launch.mode || !a.launch.argv.empty() || !a.launch.launcher.empty()))
    throw usage_error{"--experiment: the plan names launcher '" + p.launcher +
                      "' and the command line gives the study too: give one of them"};
  if (!p.preset.empty() && !a.preset.empty() && a.preset != p.preset)
    throw usage_error{"--experiment: the plan names preset '" + p.preset +
                      "' and the command line --preset '" + a.preset + "': give one of them"};
  run_args resolved = a;
  if (!p.launcher.empty()) resolved.launch.launcher = p.launcher;
  if (!p.preset.empty()) resolved.preset = p.preset;
  prepare(command::run, resolved);
  const fs::path results_dir = resolved.results_dir;
  const auto parent = split_parent(args);
  const auto shared = shared_flags(p, resolved);
  char self[4096];
  auto len = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (len <= 0) {
    std::fprintf(stderr, "mira: --experiment: cannot find this executable: %s\n",
                 std::strerror(errno));
    return exit_host_error;
  }
  const std::string exe(self, static_cast<std::size_t>(len));
  const auto id = "exp-" +
                  std::to_string(std::chrono::duration_cast<std::chrono::seconds>(
                                     std::chrono::system_clock::now().time_since_epoch())
                                     .count()) +
                  "-" + std::to_string(::getpid());
  const std::size_t parallel = std::max<std::size_t>(1, a.experiment_parallel);
  std::fprintf(stderr, "experiment %s: %zu treatment(s), baseline %s, up to %zu at once\n",
               id.c_str(), p.treatments.size(), printable(p.baseline).c_str(), parallel);

  // Ctrl-C reaches the children (one process group): they stop, save and report; the parent
  // waits for them and compares what was saved.
  auto old_int = std::signal(SIGINT, SIG_IGN);
  std::vector<child> running;
  std::map<std::string, int> exit_codes;
  std::size_t next = 0;
  while (next < p.treatments.size() || !running.empty()) {
    while (next < p.treatments.size() && running.size() < parallel) {
      auto& t = p.treatments[next++];
      auto child_argv = parent.flags;
      child_argv.insert(child_argv.end(), shared.begin(), shared.end());
      for (auto& [k, v] : t.env) {
        child_argv.emplace_back("--study-env");
        child_argv.push_back(k);
        child_argv.back().append("=").append(v);
      }
      child_argv.insert(child_argv.end(), parent.tail.begin(), parent.tail.end());
      auto c = spawn(exe, child_argv, child_env(p, id, plan_file, t.name), t.name);
      if (!c) {
        std::fprintf(stderr, "mira: treatment %s could not start: %s\n", printable(t.name).c_str(),
                     c.error().c_str());
        exit_codes[t.name] = exit_host_error;
        continue;
      }
      std::fprintf(stderr, "treatment %s: started\n", printable(t.name).c_str());
      running.push_back(std::move(*c));
    }
    if (running.empty()) break;
    std::vector<pollfd> fds;
    fds.reserve(running.size());
    for (auto& c : running) fds.push_back({c.out, POLLIN, 0});
    if (::poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (std::size_t i = 0; i < running.size(); ++i) {
      if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char buf[65536];
      auto n = ::read(running[i].out, buf, sizeof buf);
      if (n > 0) {
        relay(running[i], {buf, static_cast<std::size_t>(n)}, false);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      // End of its output: it has exited or is about to.
      auto& c = running[i];
      relay(c, {}, true);
      ::close(c.out);
      c.out = -1;
      int status = 0;
      while (::waitpid(c.pid, &status, 0) < 0 && errno == EINTR) {
      }
      c.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      exit_codes[c.treatment] = c.status;
      std::fprintf(stderr, "treatment %s: exit %d\n", printable(c.treatment).c_str(), c.status);
    }
    running.erase(
        std::remove_if(running.begin(), running.end(), [](const child& c) { return c.out < 0; }),
        running.end());
  }
  std::signal(SIGINT, old_int);

  // A treatment ran when its child exited 0 (every case passed) or 1 (some failed): anything
  // else is a treatment that did not run to the end, reported and left out of the comparison.
  auto runs = runs_of(results_dir, id);
  bool failed = false;
  for (auto& t : p.treatments) {
    int code = exit_codes.count(t.name) ? exit_codes[t.name] : exit_host_error;
    if ((code != exit_ok && code != exit_failed) || !runs.count(t.name)) {
      failed = true;
      std::fprintf(stderr, "mira: treatment %s failed (exit %d%s)\n", printable(t.name).c_str(),
                   code, runs.count(t.name) ? "" : ", no saved run");
      runs.erase(t.name);
    }
  }
  if (!runs.count(p.baseline)) {
    std::fprintf(stderr,
                 "mira: experiment %s: the baseline %s has no complete run; nothing "
                 "compared\n",
                 id.c_str(), printable(p.baseline).c_str());
    return exit_host_error;
  }
  auto base = store::load_run(results_dir, runs[p.baseline]);
  if (!base) {
    std::fprintf(stderr, "mira: %s\n", printable(base.error().message()).c_str());
    return exit_host_error;
  }
  compare::options o{p.group_by == "treatment" ? std::string() : p.group_by, p.alpha};
  std::vector<std::string> regressed;
  for (auto& t : p.treatments) {
    if (t.name == p.baseline || !runs.count(t.name)) continue;
    auto cand = store::load_run(results_dir, runs[t.name]);
    if (!cand) {
      std::fprintf(stderr, "mira: %s\n", printable(cand.error().message()).c_str());
      failed = true;
      continue;
    }
    auto c = compare::compare_runs(*base, *cand, o);
    if (!c) {
      std::fprintf(stderr, "mira: treatment %s: %s\n", printable(t.name).c_str(),
                   printable(c.error().message).c_str());
      failed = true;
      continue;
    }
    std::printf("== treatment %s (run %s) against baseline %s (run %s) ==\n",
                printable(t.name).c_str(), runs[t.name].c_str(), printable(p.baseline).c_str(),
                runs[p.baseline].c_str());
    compare::render(*c, "table",
                    [](std::string_view s) { std::fwrite(s.data(), 1, s.size(), stdout); });
    std::printf("\n");
    if (c->regression()) regressed.push_back(t.name);
  }
  std::fflush(stdout);
  std::string list;
  for (auto& r : regressed) list += (list.empty() ? "" : ", ") + printable(r);
  std::fprintf(stderr, "experiment %s: %s\n", id.c_str(),
               regressed.empty() ? "no treatment dropped significantly against the baseline"
                                 : ("significantly worse than the baseline: " + list).c_str());
  if (failed) return exit_host_error;
  return regressed.empty() ? exit_ok : exit_failed;
}

}  // namespace mira::cli
