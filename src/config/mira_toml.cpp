// mira.toml: discovery, parsing with toml++ and checking into the plain model (mira_toml.hpp).
#include <mira/config/mira_toml.hpp>
#include "config/concat.hpp"

#include <toml++/toml.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <tuple>

namespace mira::config {

namespace fs = std::filesystem;

namespace {

using detail::concat;

// A check that stops the file loading; caught at the top of parse_config.
struct failure {
  diagnostic d;
};

class checker {
 public:
  explicit checker(fs::path file) : file_(std::move(file)) {}

  location at(const toml::node& n) const {
    auto& b = n.source().begin;
    return {file_, static_cast<std::size_t>(b.line), static_cast<std::size_t>(b.column)};
  }
  [[noreturn]] void fail(const toml::node& n, std::string message) const {
    throw failure{{at(n), std::move(message)}};
  }
  void warn(const toml::node& n, std::string message) {
    warnings.push_back({at(n), std::move(message)});
  }

  // Records every key of `t` outside `known`, naming `where` ("[results]"): a warning when the
  // file loads, or the first words of its failure when it does not.
  void known_keys(const toml::table& t, std::string_view where,
                  const std::vector<std::string>& known) {
    for (auto& [k, v] : t) {
      std::string key(k.str());
      if (std::find(known.begin(), known.end(), key) != known.end()) continue;
      std::string msg = "unknown key '" + key + "' in " + std::string(where);
      auto near = did_you_mean(key, known);
      msg += near.empty() ? " (known: " + join(known) + ")" : "; did you mean '" + near + "'?";
      unknown.push_back({at(v), std::move(msg)});
    }
  }

  const toml::table& table(const toml::node& n, std::string_view what) const {
    if (auto* t = n.as_table()) return *t;
    fail(n, std::string(what) + " must be a table");
  }
  std::string string(const toml::node& n, std::string_view what) const {
    if (auto* s = n.as_string()) return s->get();
    fail(n, std::string(what) + " must be a string");
  }
  bool boolean(const toml::node& n, std::string_view what) const {
    if (auto* b = n.as_boolean()) return b->get();
    fail(n, std::string(what) + " must be true or false");
  }
  double seconds(const toml::node& n, std::string_view what) const {
    double d = 0;
    if (auto* i = n.as_integer())
      d = static_cast<double>(i->get());
    else if (auto* f = n.as_floating_point())
      d = f->get();
    else
      fail(n, std::string(what) + " must be a number of seconds");
    if (!(d > 0) || d > 1e9) fail(n, std::string(what) + " must be a positive number of seconds");
    return d;
  }
  // A string, or an array of strings.
  std::vector<std::string> strings(const toml::node& n, std::string_view what) const {
    if (auto* s = n.as_string()) return {s->get()};
    auto* a = n.as_array();
    if (!a) fail(n, std::string(what) + " must be a string or an array of strings");
    std::vector<std::string> out;
    for (auto& e : *a) {
      auto* s = e.as_string();
      if (!s) fail(e, std::string(what) + " must be a string or an array of strings");
      out.push_back(s->get());
    }
    return out;
  }

  static std::string join(const std::vector<std::string>& v) {
    std::string out;
    for (auto& s : v) out += (out.empty() ? "" : ", ") + s;
    return out;
  }

  std::vector<diagnostic> warnings;
  std::vector<diagnostic> unknown;  // unknown keys: warnings, or the first words of a failure

 private:
  fs::path file_;
};

// A key as it is written in a table header: bare when it can be.
std::string table_key(std::string_view name) {
  bool bare = !name.empty() && std::all_of(name.begin(), name.end(), [](char ch) {
    return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '-';
  });
  return bare ? std::string(name) : "\"" + std::string(name) + "\"";
}

preset read_preset(checker& ck, const std::string& name, const toml::node& n) {
  auto where = "[presets." + table_key(name) + "]";
  auto& t = ck.table(n, where);
  preset p;
  p.name = name;
  p.where = ck.at(n);
  if (auto* v = t.get("evals")) p.evals = ck.strings(*v, where + " evals");
  if (auto* v = t.get("samples")) p.samples = ck.strings(*v, where + " samples");
  if (auto* v = t.get("targets")) p.targets = ck.strings(*v, where + " targets");
  if (auto* v = t.get("tag")) p.tags = ck.strings(*v, where + " tag");
  if (auto* v = t.get("timeout")) p.timeout_s = ck.seconds(*v, where + " timeout");
  if (auto* v = t.get("axes")) {
    auto& axes = ck.table(*v, where + " axes");
    for (auto& [axis, globs] : axes) {
      auto values = ck.strings(globs, where + " axes." + std::string(axis.str()));
      if (values.empty())
        ck.warn(globs, where + " axes." + std::string(axis.str()) +
                           " is empty: it would select nothing, so it is ignored");
      else
        p.axes.emplace_back(std::string(axis.str()), std::move(values));
    }
  }
  return p;
}

const std::vector<std::string> mode_keys = {"bin",   "example", "cmd",    "script",
                                            "study", "uv",      "python", "python3"};

// Every table's unknown keys, before any value is checked: a misspelt key (`cmnd` for `cmd`) is
// what a reader must hear about first, not the failure it leads to ("has no mode").
void check_keys(checker& ck, const toml::table& root) {
  ck.known_keys(root, "mira.toml",
                {"results", "environment", "presets", "launchers", "default_launcher", "targets"});
  if (auto* t = root.get_as<toml::table>("results")) ck.known_keys(*t, "[results]", {"dir"});
  if (auto* t = root.get_as<toml::table>("environment"))
    ck.known_keys(*t, "[environment]", {"enabled", "labels"});
  auto launcher_keys = mode_keys;
  launcher_keys.insert(launcher_keys.end(), {"package", "manifest_path"});
  const std::tuple<const char*, std::vector<std::string>> named[] = {
      {"presets", {"evals", "samples", "targets", "tag", "axes", "timeout"}},
      {"launchers", launcher_keys},
      {"targets", {"timeout"}}};
  for (auto& [table, known] : named)
    if (auto* all = root.get_as<toml::table>(table))
      for (auto& [name, v] : *all)
        if (auto* t = v.as_table())
          ck.known_keys(*t, "[" + std::string(table) + "." + table_key(name.str()) + "]", known);
}

launch_mode mode_of(std::string_view key) {
  if (key == "bin") return launch_mode::bin;
  if (key == "example") return launch_mode::example;
  if (key == "script") return launch_mode::script;
  if (key == "study") return launch_mode::study;
  if (key == "uv") return launch_mode::uv;
  if (key == "python" || key == "python3") return launch_mode::python;
  return launch_mode::cmd;
}

launcher read_launcher(checker& ck, const std::string& name, const toml::node& n,
                       const fs::path& dir) {
  auto where = "[launchers." + table_key(name) + "]";
  auto& t = ck.table(n, where);
  launcher l;
  l.name = name;
  l.where = ck.at(n);
  const toml::node* mode_node = nullptr;
  std::string mode_key;
  for (auto& key : mode_keys) {
    auto* v = t.get(key);
    if (!v) continue;
    if (mode_node)
      ck.fail(*v,
              concat({where, " sets both ", mode_key, " and ", key, "; a launcher has one mode"}));
    mode_node = v;
    mode_key = key;
  }
  if (!mode_node)
    ck.fail(n, where + " has no mode: set one of bin, example, cmd, script, study, uv, python");
  l.mode = mode_of(mode_key);
  l.value = ck.string(*mode_node, where + " " + mode_key);
  if (l.value.empty()) ck.fail(*mode_node, where + " " + mode_key + " is empty");
  if (l.mode == launch_mode::study || l.mode == launch_mode::script)
    l.value = (dir / l.value).lexically_normal().string();
  const bool cargo = l.mode == launch_mode::bin || l.mode == launch_mode::example;
  if (auto* v = t.get("package")) {
    auto package = ck.string(*v, where + " package");
    if (cargo)
      l.package = std::move(package);
    else
      ck.warn(*v, where + " package applies to bin and example only; it is ignored");
  }
  if (auto* v = t.get("manifest_path")) {
    auto manifest = ck.string(*v, where + " manifest_path");
    if (cargo)
      l.manifest_path = (dir / manifest).lexically_normal().string();
    else
      ck.warn(*v, where + " manifest_path applies to bin and example only; it is ignored");
  }
  return l;
}

config read_config(checker& ck, const toml::table& root, const fs::path& file) {
  config c;
  c.file = file;
  const auto dir = file.parent_path().empty() ? fs::path(".") : file.parent_path();
  c.results_dir = (dir / "results").lexically_normal();
  if (auto* n = root.get("results")) {
    auto& t = ck.table(*n, "[results]");
    if (auto* d = t.get("dir")) {
      auto s = ck.string(*d, "[results] dir");
      if (s.empty()) ck.fail(*d, "[results] dir is empty");
      c.results_dir = (dir / s).lexically_normal();
    }
  }
  if (auto* n = root.get("environment")) {
    auto& t = ck.table(*n, "[environment]");
    if (auto* e = t.get("enabled")) c.environment_enabled = ck.boolean(*e, "[environment] enabled");
    if (auto* l = t.get("labels")) {
      // toml++ keeps keys sorted; the file's order is the one a reader expects back.
      std::vector<std::pair<const toml::key*, const toml::node*>> labels;
      for (auto& [k, v] : ck.table(*l, "[environment.labels]")) labels.emplace_back(&k, &v);
      std::stable_sort(labels.begin(), labels.end(), [](auto& x, auto& y) {
        return x.first->source().begin < y.first->source().begin;
      });
      for (auto [k, v] : labels)
        c.environment_labels.emplace_back(
            std::string(k->str()), ck.string(*v, "[environment.labels] " + std::string(k->str())));
    }
  }
  if (auto* n = root.get("presets"))
    for (auto& [name, v] : ck.table(*n, "[presets]")) {
      std::string key(name.str());
      c.presets.emplace(key, read_preset(ck, key, v));
    }
  if (auto* n = root.get("launchers"))
    for (auto& [name, v] : ck.table(*n, "[launchers]")) {
      std::string key(name.str());
      c.launchers.emplace(key, read_launcher(ck, key, v, dir));
    }
  if (auto* n = root.get("default_launcher")) {
    c.default_launcher = ck.string(*n, "default_launcher");
    if (!c.launchers.count(c.default_launcher)) {
      std::vector<std::string> names;
      for (auto& [name, l] : c.launchers) names.push_back(name);
      auto near = did_you_mean(c.default_launcher, names);
      ck.fail(*n, "default_launcher names \"" + c.default_launcher +
                      "\", which is not in [launchers]" +
                      (near.empty() ? names.empty() ? std::string(" (there are none)")
                                                    : " (known: " + checker::join(names) + ")"
                                    : "; did you mean \"" + near + "\"?"));
    }
  }
  if (auto* n = root.get("targets"))
    for (auto& [label, v] : ck.table(*n, "[targets]")) {
      std::string key(label.str());
      auto where = "[targets." + table_key(key) + "]";
      auto& t = ck.table(v, where);
      target_settings s;
      s.where = ck.at(v);
      if (auto* to = t.get("timeout")) s.timeout_s = ck.seconds(*to, where + " timeout");
      c.targets.emplace(key, s);
    }
  return c;
}

std::string known_names(const auto& map) {
  std::string out;
  for (auto& [name, v] : map) out += (out.empty() ? "" : ", ") + name;
  return out.empty() ? "none are defined" : "known: " + out;
}

bool before(const diagnostic& x, const diagnostic& y) {
  return std::tie(x.where.line, x.where.column) < std::tie(y.where.line, y.where.column);
}

// A failure in a file with unknown keys: those first (the likely cause), then the failure.
diagnostic unknown_keys_first(std::vector<diagnostic> unknown, const diagnostic& failed) {
  if (unknown.empty()) return failed;
  std::stable_sort(unknown.begin(), unknown.end(), before);
  diagnostic out = unknown.front();
  for (std::size_t i = 1; i < unknown.size(); ++i)
    out.message += "; line " + std::to_string(unknown[i].where.line) + ": " + unknown[i].message;
  out.message += "; then line " + std::to_string(failed.where.line) + ": " + failed.message;
  return out;
}

}  // namespace

std::string diagnostic::to_string() const {
  std::string out = where.file.string();
  if (where.line) out += ":" + std::to_string(where.line) + ":" + std::to_string(where.column);
  return out + ": " + message;
}

std::string_view to_string(launch_mode m) {
  switch (m) {
    case launch_mode::study:
      return "study";
    case launch_mode::script:
      return "script";
    case launch_mode::python:
      return "python";
    case launch_mode::uv:
      return "uv";
    case launch_mode::bin:
      return "bin";
    case launch_mode::example:
      return "example";
    case launch_mode::cmd:
      return "cmd";
  }
  return "cmd";
}

tl::expected<const preset*, error> config::find_preset(std::string_view name) const {
  auto it = presets.find(name);
  if (it != presets.end()) return &it->second;
  return tl::unexpected(
      error{make_error_code(errc::not_found),
            "unknown preset \"" + std::string(name) + "\" (" + known_names(presets) +
                (file.empty() ? "; no mira.toml was found" : " in " + file.string()) + ")"});
}

tl::expected<const launcher*, error> config::find_launcher(std::string_view name) const {
  auto it = launchers.find(name);
  if (it != launchers.end()) return &it->second;
  return tl::unexpected(
      error{make_error_code(errc::not_found),
            "unknown launcher \"" + std::string(name) + "\" (" + known_names(launchers) +
                (file.empty() ? "; no mira.toml was found" : " in " + file.string()) + ")"});
}

std::optional<fs::path> find_config(const fs::path& dir) {
  std::error_code ec;
  auto d = fs::absolute(dir, ec);
  if (ec) return std::nullopt;
  for (;;) {
    auto candidate = d / "mira.toml";
    if (fs::is_regular_file(candidate, ec)) return candidate;
    if (!d.has_relative_path()) return std::nullopt;
    d = d.parent_path();
  }
}

tl::expected<config, diagnostic> parse_config(std::string_view text, const fs::path& file) {
  checker ck(file);
  try {
    auto root = toml::parse(text, file.string());
    check_keys(ck, root);
    auto c = read_config(ck, root, file);
    c.warnings = std::move(ck.warnings);
    c.warnings.insert(c.warnings.end(), ck.unknown.begin(), ck.unknown.end());
    // In file order (toml++ visits keys sorted).
    std::stable_sort(c.warnings.begin(), c.warnings.end(), before);
    return c;
  } catch (const toml::parse_error& e) {
    auto& b = e.source().begin;
    return tl::unexpected(
        diagnostic{{file, static_cast<std::size_t>(b.line), static_cast<std::size_t>(b.column)},
                   std::string(e.description())});
  } catch (const failure& f) {
    return tl::unexpected(unknown_keys_first(std::move(ck.unknown), f.d));
  }
}

tl::expected<config, diagnostic> load_config(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return tl::unexpected(diagnostic{{file, 0, 0}, "cannot read the file"});
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return tl::unexpected(diagnostic{{file, 0, 0}, "cannot read the file"});
  return parse_config(text.str(), file);
}

tl::expected<config, diagnostic> discover_config(const fs::path& dir) {
  auto file = find_config(dir);
  if (!file) return config{};
  return load_config(*file);
}

plan::selection apply_preset(const preset& p, plan::selection s) {
  if (s.evals.empty()) s.evals = p.evals;
  if (s.samples.empty()) s.samples = p.samples;
  if (s.targets.empty()) s.targets = p.targets;
  if (s.tags.empty()) s.tags = p.tags;
  for (auto& axis : p.axes) {
    bool given = std::any_of(s.axes.begin(), s.axes.end(),
                             [&](auto& entry) { return entry.first == axis.first; });
    if (!given) s.axes.push_back(axis);
  }
  return s;
}

std::optional<double> effective_timeout(const config& c, const preset* p,
                                        std::string_view target_label,
                                        std::optional<double> from_command_line) {
  if (from_command_line) return from_command_line;
  if (auto it = c.targets.find(target_label); it != c.targets.end() && it->second.timeout_s)
    return it->second.timeout_s;
  if (p && p->timeout_s) return p->timeout_s;
  return std::nullopt;
}

std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates) {
  // Edit distance counting a swap of neighbours as one edit (the commonest typo); a suggestion
  // only within a third of the word's length (at least 1).
  auto distance = [](std::string_view a, std::string_view b) {
    std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
    for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
    for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
    for (std::size_t i = 1; i <= a.size(); ++i)
      for (std::size_t j = 1; j <= b.size(); ++j) {
        d[i][j] = std::min(
            {d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
        if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
          d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    return d[a.size()][b.size()];
  };
  std::string best;
  std::size_t best_d = std::max<std::size_t>(1, word.size() / 3) + 1;
  for (auto& c : candidates) {
    auto d = distance(word, c);
    if (d < best_d) {
      best_d = d;
      best = c;
    }
  }
  return best;
}

std::string starter_config() {
  return R"(# mira.toml: read by `mira` (this C++ host and the Rust CLI) in this directory and below.
# See docs/cli.md, "mira.toml", for every key.

# Where run folders go, relative to this file.
[results]
dir = "results"

# The environment block of each run's meta.json (git commit, OS, hostname, CI variables).
[environment]
enabled = true
# [environment.labels]
# team = "evals"

# How to start the study when no --study* flag is given.
# default_launcher = "study"
# [launchers.study]
# study = "study.py"          # .py: python3 (or uv run); .mjs/.js: node; an executable: itself
# cmd = "./build/my_study --fast"
# bin = "my-study"            # cargo run -q --bin my-study (also: example, package, manifest_path)

# Named selections: mira run --preset smoke
# [presets.smoke]
# evals = ["reason*"]
# samples = ["case-{1,2}"]
# targets = "mock"
# tag = "fast"
# timeout = 30
# [presets.smoke.axes]
# effort = ["low"]

# Per-target timeouts (seconds per attempt); --timeout overrides them.
# [targets."gpt-large"]
# timeout = 120
)";
}

}  // namespace mira::config
