// The checks of `mira doctor` (doctor.hpp).
#include <mira/config/doctor.hpp>
#include "config/concat.hpp"

#include <mira/plan/plan.hpp>
#include <mira/store/merge.hpp>
#include <mira/store/run_reader.hpp>
#include <mira/store/run_store.hpp>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

namespace mira::config {

namespace fs = std::filesystem;

namespace {

using detail::concat;

void add(std::vector<finding>& out, severity s, std::string message) {
  out.push_back({s, std::move(message)});
}

// Each name that occurs more than once, once, in first-seen order.
template <class Range, class Name>
std::vector<std::string> repeated(const Range& items, Name name) {
  std::map<std::string, int> seen;
  std::vector<std::string> out;
  for (const auto& item : items)  // a sample_list gives its samples as values
    if (++seen[std::string(name(item))] == 2) out.emplace_back(name(item));
  return out;
}

std::string in_quotes(std::string_view s) {
  return "\"" + std::string(s) + "\"";
}

// Who holds the run's lock, or "" when nobody does. The lock is an flock on the run folder
// itself (it dies with its holder, so a leftover .lock file is never stale by itself); .lock
// names the holder.
std::string lock_holder(const fs::path& run) {
  int fd = ::open(run.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return {};
  std::string holder;
  if (::flock(fd, LOCK_SH | LOCK_NB) != 0) {
    std::ifstream in(run / ".lock");
    std::getline(in, holder);
    if (holder.empty()) holder = "another process";
  } else {
    ::flock(fd, LOCK_UN);
  }
  ::close(fd);
  return holder;
}

bool is_temporary(const std::string& name) {
  // This host's atomic writes (".NAME.tmp-N") and the Rust host's ("result.json.tmp").
  return (name.starts_with(".") && name.find(".tmp-") != std::string::npos) ||
         name.ends_with(".tmp");
}

}  // namespace

std::vector<finding> check_config(const config& c, const system_probe& probe) {
  std::vector<finding> out;
  for (auto& w : c.warnings) add(out, severity::warning, w.to_string());
  // What each launcher needs, without writing a single-file study's crate.
  auto dry = probe;
  dry.cargo_script_crate = [](const fs::path& f) -> tl::expected<fs::path, error> {
    return f.parent_path() / "Cargo.toml";
  };
  for (auto& [name, l] : c.launchers) {
    launch_request r;
    r.launcher = name;
    auto got = resolve_launch(r, c, dry);
    if (got) continue;
    const bool is_default = name == c.default_launcher;
    add(out, is_default ? severity::error : severity::warning,
        "launcher " + in_quotes(name) + (is_default ? " (default_launcher)" : "") + ": " +
            got.error().message());
  }
  return out;
}

std::vector<finding> check_listing(const protocol::list_result& list, const config& c) {
  std::vector<finding> out;
  auto error = [&](std::string m) { add(out, severity::error, std::move(m)); };
  auto warn = [&](std::string m) { add(out, severity::warning, std::move(m)); };
  if (list.evals.empty()) error("the study lists no evals");
  for (auto& name : repeated(list.evals, [](auto& e) { return e.name; }))
    error("two evals are named " + in_quotes(name) + ": case keys collide");
  std::set<std::string, std::less<>> declared_targets;
  for (auto& e : list.evals) {
    auto in = "eval " + in_quotes(e.name) + ": ";
    for (auto& id : repeated(e.samples, [](auto& s) { return s.id; }))
      error(in + "sample " + in_quotes(id) + " is listed twice: case keys collide");
    for (auto& label : repeated(e.targets, [](auto& t) { return t.label; }))
      error(in + "target " + in_quotes(label) + " is listed twice: case keys collide");
    for (auto& axis : repeated(e.axes, [](auto& a) { return a.name; }))
      error(in + "axis " + in_quotes(axis) + " is declared twice: case keys collide");
    if (e.samples.empty()) warn(in + "no samples: it plans no case");
    if (e.targets.empty()) warn(in + "no targets: it plans no case");
    if (e.scorers.empty()) warn(in + "no scorers: its cases cannot pass");
    for (auto& t : e.targets) {
      declared_targets.insert(t.label);
      if (!t.available)
        warn(in + "target " + in_quotes(t.label) +
             " is unavailable: its cases are reported skipped");
    }
    for (auto& a : e.axes) {
      if (a.name == "target")
        error(in + "an axis is named \"target\", the name of the primary axis: case keys collide");
      if (a.values.empty())
        warn(in + "axis " + in_quotes(a.name) + " has no values: it is ignored");
      for (auto& v : repeated(a.values, [](auto& s) { return s; }))
        error(in + "axis " + in_quotes(a.name) + " lists " + in_quotes(v) +
              " twice: case keys collide");
    }
  }
  if (list.evals.empty()) return out;
  // What the planner refuses (names with key characters that collide) is an error too.
  if (auto p = plan::make_plan(list); !p) error(p.error().message());
  for (auto& [name, preset] : c.presets) {
    auto p = plan::make_plan(list, apply_preset(preset, {}));
    if (!p)
      warn("preset " + in_quotes(name) + " (line " + std::to_string(preset.where.line) +
           "): " + p.error().message());
    else if (p->cases.empty())
      warn("preset " + in_quotes(name) + " (line " + std::to_string(preset.where.line) +
           ") selects no case");
  }
  for (auto& [label, t] : c.targets)
    if (!declared_targets.count(label))
      warn("[targets] " + in_quotes(label) + " (line " + std::to_string(t.where.line) +
           "): no eval of the study declares this target");
  return out;
}

std::vector<finding> check_results_dir(const fs::path& dir) {
  std::vector<finding> out;
  std::error_code ec;
  auto st = fs::status(dir, ec);
  if (!fs::exists(st)) {
    add(out, severity::warning,
        dir.string() + " does not exist (the first run creates it; --fix creates it now)");
    return out;
  }
  if (!fs::is_directory(st)) {
    add(out, severity::error, dir.string() + " is not a directory: runs cannot be saved there");
    return out;
  }
  if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    add(out, severity::error, dir.string() + " is not writable: runs cannot be saved there");
  }
  std::vector<fs::path> runs;
  for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator();
       it.increment(ec))
    if (it->is_directory(ec) && it->path().filename().string().front() != '.')
      runs.push_back(it->path());
  for (auto& left : store::abandoned_merges(dir, false))
    add(out, severity::warning,
        concat({"leftover folder of a killed merge: ", left.string(),
                " (`mira doctor --fix` or the next `mira merge` removes it)"}));
  std::sort(runs.begin(), runs.end());
  for (auto& run : runs) {
    const auto id = run.filename().string();
    const auto in = "run " + id + ": ";
    if (!fs::exists(run / "meta.json", ec)) {
      add(out, severity::warning,
          in + "no meta.json (not a run folder, or one whose first write was interrupted)");
      continue;
    }
    auto holder = lock_holder(run);
    if (!holder.empty()) {
      add(out, severity::warning, concat({in, "in use by ", holder, " (its checks are left out)"}));
      continue;
    }
    auto reader = store::run_reader::open(dir, id);
    if (!reader) {
      // The folder has a meta.json (checked above): with a valid id, that file is what failed.
      const bool damaged_meta = !store::invalid_run_id(id);
      add(out, severity::error,
          concat({in, reader.error().message(),
                  damaged_meta ? " (`mira doctor --fix` rebuilds meta.json from the case records)"
                               : ""}));
      continue;
    }
    // Every record read once, one at a time: those that cannot be taken now are unreadable too.
    auto unreadable = reader->unreadable();
    for (auto& late : reader->visit([](std::size_t, const store::saved_case&) { return true; }))
      unreadable.push_back(std::move(late));
    for (auto& u : unreadable)
      add(out, severity::error, concat({in, "cannot read ", u, " (that case counts as not run)"}));
    for (auto& u : reader->superseded()) add(out, severity::warning, concat({in, u}));
    if (!reader->plan_keys_problem().empty())
      add(out, severity::warning,
          concat({in, reader->plan_keys_problem(), " (its missing cases are counted, not named)"}));
    auto& meta = reader->meta();
    const auto c = store::completeness_of(*reader);
    const auto resume =
        concat({"; resume it with `mira run --resume ", id, "` and the same study and selection"});
    const bool killed = !meta.sessions.empty() && meta.sessions.back().finished.empty();
    if (meta.finished.empty() || killed)
      add(out, severity::warning,
          concat({in,
                  "its last session did not finish (the host was killed, or could not write "
                  "the run's report)",
                  resume}));
    else if (c.stopped != schedule::stop_reason::none)
      add(out, severity::warning,
          concat({in, "stopped (", std::string(to_string(c.stopped)), ")",
                  c.stop_message.empty() ? "" : ": " + c.stop_message, "; ",
                  std::to_string(c.unfinished()), " of ", std::to_string(c.planned),
                  " planned case(s) not finished", c.unfinished() ? resume : ""}));
    else if (c.unfinished() > 0)
      add(out, severity::error, concat({in, c.stop_message, resume}));
    for (auto it = fs::recursive_directory_iterator(run, ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec))
      if (it->is_regular_file(ec) && is_temporary(it->path().filename().string()))
        add(out, severity::warning,
            concat(
                {in, "leftover temporary file ", it->path().string(),
                 " of an interrupted write (the saved file is whole; this one can be removed)"}));
  }
  return out;
}

}  // namespace mira::config
