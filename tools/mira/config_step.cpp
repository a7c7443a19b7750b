// mira.toml applied to a command (see config_step.hpp).
#include "config_step.hpp"

#include <mira/store/run_store.hpp>

#include <cstdio>
#include <filesystem>
#include <map>
#include <set>

namespace mira::cli {

config::config load_project_config() {
  std::error_code ec;
  auto cwd = std::filesystem::current_path(ec);
  auto c = config::discover_config(ec ? std::filesystem::path(".") : cwd);
  if (!c) throw usage_error{c.error().to_string()};
  for (auto& w : c->warnings)
    std::fprintf(stderr, "mira: warning: %s\n", printable(w.to_string()).c_str());
  return std::move(*c);
}

void apply_config(command cmd, run_args& a, const config::config& c) {
  a.project = c;
  if (!a.results_dir_given) a.results_dir = c.results_dir.string();
  a.environment_enabled = c.environment_enabled;
  a.environment_labels = c.environment_labels;
  if (!a.preset.empty()) {
    auto p = c.find_preset(a.preset);
    if (!p) throw usage_error{"--preset: " + p.error().message()};
    a.selection = config::apply_preset(**p, std::move(a.selection));
  }
  const bool launches = cmd == command::list || cmd == command::plan || cmd == command::run ||
                        cmd == command::score || cmd == command::doctor;
  if (!launches) return;
  auto launch = config::resolve_launch(a.launch, c, config::system_probe::real());
  if (!launch) throw usage_error{launch.error().message()};
  a.study = std::move(launch->argv);
}

namespace {

// `latest` where a saved run is named: the run of the results directory started or resumed last
// (a folder of that name wins).
void resolve_latest(run_args& a) {
  auto resolve = [&](std::string& id) {
    std::error_code ec;
    if (id != "latest" || std::filesystem::exists(std::filesystem::path(a.results_dir) / id, ec))
      return;
    auto found = store::latest_run_id(a.results_dir);
    if (!found) throw usage_error{"latest: there is no saved run in " + printable(a.results_dir)};
    std::fprintf(stderr, "mira: latest is run %s\n", printable(*found).c_str());
    id = *found;
  };
  resolve(a.run_id);
  resolve(a.resume);
  for (auto& run : a.runs) resolve(run);
}

}  // namespace

void prepare(command cmd, run_args& a) {
  apply_config(cmd, a, load_project_config());
  resolve_latest(a);
}

planned_timeouts planned_timeout(const run_args& a, const config::config& c,
                                 const protocol::list_result& list, const plan::plan& p) {
  std::set<std::string, std::less<>> declared;
  for (auto& e : list.evals)
    for (auto& t : e.targets) declared.insert(t.label);
  for (auto& [label, settings] : c.targets)
    if (!declared.count(label))
      std::fprintf(stderr,
                   "mira: warning: %s:%zu: [targets] names \"%s\", which no eval of the "
                   "study declares\n",
                   printable(c.file.string()).c_str(), settings.where.line,
                   printable(label).c_str());
  planned_timeouts out;
  if (a.policy.case_timeout) {
    out.common = std::chrono::duration<double>(*a.policy.case_timeout).count();
    return out;
  }
  const config::preset* preset = nullptr;
  if (!a.preset.empty())
    if (auto found = c.find_preset(a.preset)) preset = *found;
  for (const auto& pc : p.cases)
    if (!out.by_target.count(pc.params.target))
      out.by_target.emplace(pc.params.target,
                            config::effective_timeout(c, preset, pc.params.target, std::nullopt));
  bool uniform = true;
  for (auto& [label, t] : out.by_target) uniform = uniform && t == out.by_target.begin()->second;
  if (uniform) {
    if (!out.by_target.empty()) out.common = out.by_target.begin()->second;
    out.by_target.clear();
  }
  return out;
}

}  // namespace mira::cli
