// `mira run --experiment PLAN.toml` (see experiment.hpp). Each treatment is a session in this
// process, made from the arguments a `mira run` of it would get, so a treatment is an ordinary
// saved run; they run side by side on one io_context, each line they write prefixed with the
// treatment's name, and the runs they saved are compared at the end.
#include "experiment.hpp"

#include "config_step.hpp"
#include "console.hpp"
#include "flags.hpp"
#include "run_command.hpp"

#include <mira/compare/compare.hpp>
#include <mira/store/files.hpp>
#include <mira/store/run_store.hpp>

#include <toml++/toml.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/this_coro.hpp>

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

namespace mira::cli {

namespace asio = boost::asio;
namespace fs = std::filesystem;
namespace json = boost::json;

namespace {

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

// The plan's study, launcher and preset: non-empty strings, the study required.
tl::expected<void, errors> read_names(const toml::table& doc, const fs::path& file,
                                      experiment_plan& p) {
  for (auto [key, out] : {std::pair<std::string_view, std::string*>{"study", &p.study},
                          {"launcher", &p.launcher},
                          {"preset", &p.preset}})
    if (auto* n = doc.get(key)) {
      auto s = string_of(*n, file, key);
      if (!s) return tl::unexpected(s.error());
      if (s->empty())
        return tl::unexpected(where(file, n->source()) + ": " + std::string(key) + " is empty");
      *out = *s;
    }
  if (p.study.empty())
    return tl::unexpected(file.string() +
                          ": study = \"NAME\" is required (the name the study reports in "
                          "initialize)");
  return {};
}

// [slice]: the samples' and targets' globs, the trials.
tl::expected<void, errors> read_slice(const toml::node& node, const fs::path& file,
                                      experiment_plan& p) {
  auto* slice = node.as_table();
  if (!slice) return tl::unexpected(where(file, node.source()) + ": slice must be a table");
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
  return {};
}

// A [[treatments]] table: a name the others do not have (it names a folder, so no '/'), and
// its env, "./" and "../" values resolved against the plan's directory.
tl::expected<experiment_plan::treatment, errors> read_treatment(const toml::node& node,
                                                                const fs::path& file,
                                                                const fs::path& plan_dir,
                                                                std::set<std::string>& names) {
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
  auto* env_node = t->get("env");
  if (!env_node) return tr;
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
  return tr;
}

// [compare]: what to break each comparison down by, the baseline (one of `names`, the
// treatments'), alpha.
tl::expected<void, errors> read_compare(const toml::node& node, const fs::path& file,
                                        const std::set<std::string>& names, experiment_plan& p) {
  auto* cmp = node.as_table();
  if (!cmp) return tl::unexpected(where(file, node.source()) + ": compare must be a table");
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
  return {};
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
  if (auto ok = read_names(doc, file, p); !ok) return tl::unexpected(ok.error());
  if (auto* slice = doc.get("slice"))
    if (auto ok = read_slice(*slice, file, p); !ok) return tl::unexpected(ok.error());
  auto* treatments_node = doc.get("treatments");
  auto* treatments = treatments_node ? treatments_node->as_array() : nullptr;
  if (!treatments || treatments->empty())
    return tl::unexpected(file.string() +
                          ": at least one [[treatments]] table is required (name = \"...\")");
  std::set<std::string> names;
  for (auto& node : *treatments) {
    auto tr = read_treatment(node, file, plan_dir, names);
    if (!tr) return tl::unexpected(tr.error());
    p.treatments.push_back(std::move(*tr));
  }
  p.baseline = p.treatments.front().name;
  if (auto* cmp = doc.get("compare"))
    if (auto ok = read_compare(*cmp, file, names, p); !ok) return tl::unexpected(ok.error());
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

namespace {

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
// plan's slice, launcher and preset as flags (so each treatment resolves them through mira.toml as
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

// The plan file's text and the plan read from it: what each treatment archives, and what runs.
struct plan_read {
  std::string source;
  experiment_plan plan;
};

// nullopt when the plan cannot be read or parsed (said on stderr).
std::optional<plan_read> read_plan(const fs::path& plan_file) {
  std::ifstream in(plan_file, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "mira: --experiment: cannot read %s\n",
                 printable(plan_file.string()).c_str());
    return std::nullopt;
  }
  std::stringstream text;
  text << in.rdbuf();
  auto plan = parse_experiment(text.str(), plan_file);
  if (!plan) {
    std::fprintf(stderr, "mira: --experiment: %s\n", printable(plan.error()).c_str());
    return std::nullopt;
  }
  return plan_read{text.str(), std::move(*plan)};
}

// The parent's flags that an experiment cannot pass on, said on stderr: true when one is given.
bool refuse_flags(const run_args& a) {
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
      return true;
    }
  return false;
}

// The plan's launcher and preset resolved here as each treatment will resolve them, so a
// mistake (no such launcher or preset, the study given twice) stops the experiment before
// anything runs, and the results dir is the one the treatments save to.
run_args resolve_plan(const experiment_plan& p, const run_args& a) {
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
  return resolved;
}

// exp-SECONDS-PID: the label that ties the treatments' runs together.
std::string new_experiment_id() {
  return "exp-" +
         std::to_string(std::chrono::duration_cast<std::chrono::seconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count()) +
         "-" + std::to_string(::getpid());
}

// The treatments as they run, shared by the workers that take them in turn, and what they
// leave for the comparison: each one's exit code and saved run.
struct treatments_run {
  const experiment_plan& p;
  std::string id;
  const fs::path& plan_file;
  const std::string& plan_source;
  std::string plan_resolved;
  split_args parent;
  std::vector<std::string> shared;
  std::size_t next = 0;  // the treatment the next free worker takes
  std::map<std::string, int> exit_codes = {};
  std::map<std::string, std::string> runs = {};
};

// The arguments a treatment's own `mira run` would get: the parent's flags, those every
// treatment gets, its env as --study-env, and the study command after `--`.
std::vector<std::string> treatment_args(const treatments_run& e,
                                        const experiment_plan::treatment& t) {
  auto args = e.parent.flags;
  args.insert(args.end(), e.shared.begin(), e.shared.end());
  for (auto& [k, v] : t.env) {
    args.emplace_back("--study-env");
    args.push_back(k + "=" + v);
  }
  args.insert(args.end(), e.parent.tail.begin(), e.parent.tail.end());
  return args;
}

// One treatment: its arguments parsed and prepared as its `mira run` does them, then run as a
// session here, every line it writes prefixed with its name.
asio::awaitable<void> run_treatment(treatments_run& e, const experiment_plan::treatment& t) {
  auto args = treatment_args(e, t);
  console out;
  out.prefix = "[" + t.name + "] ";
  run_args ta;
  try {
    ta = parse_args(command::run, args);
    prepare(command::run, ta);
  } catch (const usage_error& err) {
    out.line("mira: " + printable(err.message));
    e.exit_codes[t.name] = exit_usage;
    co_return;
  }
  // Lines of several treatments interleave: heartbeats only, unless none are wanted.
  out.progress.mode =
      ta.progress == progress_mode::none ? progress_mode::none : progress_mode::plain;
  treatment_label label{.experiment_id = e.id,
                        .treatment = t.name,
                        .baseline = t.name == e.p.baseline,
                        .study = e.p.study,
                        .plan_path = e.plan_file.string(),
                        .plan_source = e.plan_source,
                        .plan_resolved = e.plan_resolved};
  std::fprintf(stderr, "treatment %s: started\n", printable(t.name).c_str());
  auto done = co_await run_cases(args, std::move(ta), false, out, &label);
  e.exit_codes[t.name] = done.rc;
  if (!done.run_id.empty()) e.runs[t.name] = done.run_id;
  std::fprintf(stderr, "treatment %s: exit %d\n", printable(t.name).c_str(), done.rc);
}

// A worker: takes the next treatment until none is left.
asio::awaitable<void> take_treatments(treatments_run& e) {
  while (e.next < e.p.treatments.size()) co_await run_treatment(e, e.p.treatments[e.next++]);
}

// A treatment ran when it ended 0 (every case passed) or 1 (some failed): anything else is a
// treatment that did not run to the end, reported and left out of the comparison. True when
// one was.
bool drop_failed(treatments_run& e) {
  bool failed = false;
  for (auto& t : e.p.treatments) {
    int code = e.exit_codes.count(t.name) ? e.exit_codes[t.name] : exit_host_error;
    if ((code != exit_ok && code != exit_failed) || !e.runs.count(t.name)) {
      failed = true;
      std::fprintf(stderr, "mira: treatment %s failed (exit %d%s)\n", printable(t.name).c_str(),
                   code, e.runs.count(t.name) ? "" : ", no saved run");
      e.runs.erase(t.name);
    }
  }
  return failed;
}

// One treatment's run against the baseline's, its table on stdout: whether it dropped
// significantly, or nullopt when it could not be compared (said on stderr).
std::optional<bool> compare_treatment(const treatments_run& e, const std::string& name,
                                      const fs::path& results_dir, const store::loaded_run& base,
                                      const compare::options& o) {
  auto cand = store::load_run(results_dir, e.runs.at(name));
  if (!cand) {
    std::fprintf(stderr, "mira: %s\n", printable(cand.error().message()).c_str());
    return std::nullopt;
  }
  auto c = compare::compare_runs(base, *cand, o);
  if (!c) {
    std::fprintf(stderr, "mira: treatment %s: %s\n", printable(name).c_str(),
                 printable(c.error().message()).c_str());
    return std::nullopt;
  }
  std::printf("== treatment %s (run %s) against baseline %s (run %s) ==\n", printable(name).c_str(),
              e.runs.at(name).c_str(), printable(e.p.baseline).c_str(),
              e.runs.at(e.p.baseline).c_str());
  compare::render(*c, "table",
                  [](std::string_view s) { std::fwrite(s.data(), 1, s.size(), stdout); });
  std::printf("\n");
  return c->regression();
}

// Every treatment that ran against the baseline, and the experiment's verdict on stderr: the
// exit code (`failed`: a treatment did not run, which a failed comparison adds to).
int compare_treatments(const treatments_run& e, const fs::path& results_dir, bool failed) {
  auto& p = e.p;
  if (!e.runs.count(p.baseline)) {
    std::fprintf(stderr,
                 "mira: experiment %s: the baseline %s has no complete run; nothing "
                 "compared\n",
                 e.id.c_str(), printable(p.baseline).c_str());
    return exit_host_error;
  }
  auto base = store::load_run(results_dir, e.runs.at(p.baseline));
  if (!base) {
    std::fprintf(stderr, "mira: %s\n", printable(base.error().message()).c_str());
    return exit_host_error;
  }
  compare::options o{.group_by = p.group_by == "treatment" ? std::string() : p.group_by,
                     .alpha = p.alpha};
  std::vector<std::string> regressed;
  for (auto& t : p.treatments) {
    if (t.name == p.baseline || !e.runs.count(t.name)) continue;
    auto dropped = compare_treatment(e, t.name, results_dir, *base, o);
    if (!dropped)
      failed = true;
    else if (*dropped)
      regressed.push_back(t.name);
  }
  std::fflush(stdout);
  std::string list;
  for (auto& r : regressed) list += (list.empty() ? "" : ", ") + printable(r);
  std::fprintf(stderr, "experiment %s: %s\n", e.id.c_str(),
               regressed.empty() ? "no treatment dropped significantly against the baseline"
                                 : ("significantly worse than the baseline: " + list).c_str());
  if (failed) return exit_host_error;
  return regressed.empty() ? exit_ok : exit_failed;
}

}  // namespace

int run_experiment(const std::vector<std::string>& args, const run_args& a) {
  const fs::path plan_file = fs::absolute(a.experiment).lexically_normal();
  auto read = read_plan(plan_file);
  if (!read) return exit_usage;
  auto& p = read->plan;
  if (refuse_flags(a)) return exit_usage;
  const run_args resolved = resolve_plan(p, a);
  treatments_run e{.p = p,
                   .id = new_experiment_id(),
                   .plan_file = plan_file,
                   .plan_source = read->source,
                   .plan_resolved = resolved_toml(p),
                   .parent = split_parent(args),
                   .shared = shared_flags(p, resolved)};
  const std::size_t parallel = std::max<std::size_t>(1, a.experiment_parallel);
  std::fprintf(stderr, "experiment %s: %zu treatment(s), baseline %s, up to %zu at once\n",
               e.id.c_str(), p.treatments.size(), printable(p.baseline).c_str(), parallel);
  // Each treatment is run as a session here; `parallel` workers take them in turn.
  run_io([&](int& rc) -> asio::awaitable<void> {
    auto ex = co_await asio::this_coro::executor;
    for (std::size_t i = 0; i < std::min(parallel, p.treatments.size()); ++i)
      asio::co_spawn(ex, take_treatments(e), asio::detached);
    rc = exit_ok;
  });
  const bool failed = drop_failed(e);
  return compare_treatments(e, resolved.results_dir, failed);
}

}  // namespace mira::cli
