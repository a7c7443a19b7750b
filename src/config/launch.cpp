// Study launch resolution (launch.hpp): request + mira.toml -> argv, and the single-file Rust
// study's crate.
#include <mira/config/launch.hpp>
#include "config/study_scripts.hpp"

#include <mira/command_line.hpp>

#include <toml++/toml.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

namespace mira::config {

namespace fs = std::filesystem;

namespace {

bool is_cargo(launch_mode m) {
  return m == launch_mode::bin || m == launch_mode::example;
}

tl::unexpected<error> fail(boost::system::error_code code, std::string text) {
  return tl::make_unexpected(error{code, std::move(text)});
}

// A path given to exec must contain a slash, or PATH would be searched for it.
std::string runnable(const fs::path& p) {
  auto s = p.string();
  return s.find('/') == std::string::npos ? "./" + s : s;
}

struct builder {
  const system_probe& probe;
  resolved_launch out;

  // The program, or an error naming what it is needed for.
  tl::expected<std::string, error> need(const std::string& program, const std::string& why) {
    if (!probe.find_program(program))
      return fail(errc::missing_program, program + " is not on PATH; it is needed to run " + why);
    out.programs.push_back(program);
    return program;
  }
};

const char* const study_kinds =
    "expected a .py file (python3, or uv run when it has inline script metadata), a .mjs or .js "
    "file (node), a .rs file (cargo), or an executable";

tl::expected<resolved_launch, error> build(launch_mode mode, const std::string& value,
                                           const std::string& package,
                                           const std::string& manifest_path, std::string origin,
                                           const system_probe& probe) {
  builder b{probe, {}};
  b.out.origin = std::move(origin);
  auto& argv = b.out.argv;
  auto words = [&]() -> tl::expected<std::vector<std::string>, error> {
    auto w = split_command_line(value);
    if (!w) return fail(errc::invalid, b.out.origin + ": " + w.error().message());
    if (w->empty()) return fail(errc::invalid, b.out.origin + " is empty");
    return std::move(*w);
  };
  if ((!package.empty() || !manifest_path.empty()) && !is_cargo(mode))
    return fail(errc::conflict,
                "--package and --manifest-path go with --study-bin or --study-example (cargo), "
                "not with " +
                    b.out.origin);
  switch (mode) {
    case launch_mode::study: {
      fs::path p = value;
      if (!probe.is_file(p))
        return fail(errc::not_found, b.out.origin + ": no such file: " + value);
      auto ext = p.extension().string();
      if (ext == ".py") {
        if (probe.find_program("uv") && has_inline_script_metadata(probe.head(p))) {
          b.out.programs.push_back("uv");
          argv = {"uv", "run", value};
        } else {
          auto py = b.need("python3", value);
          if (!py) return tl::make_unexpected(std::move(py.error()));
          argv = {*py, value};
        }
      } else if (ext == ".mjs" || ext == ".js" || ext == ".cjs") {
        auto node = b.need("node", value);
        if (!node) return tl::make_unexpected(std::move(node.error()));
        argv = {*node, value};
      } else if (ext == ".rs") {
        return build(launch_mode::script, value, package, manifest_path, b.out.origin, probe);
      } else if (probe.is_executable(p)) {
        argv = {runnable(p)};
      } else {
        return fail(errc::invalid,
                    "cannot tell how to run " + value + " (" + b.out.origin + "): " + study_kinds);
      }
      break;
    }
    case launch_mode::script: {
      fs::path p = value;
      if (!probe.is_file(p))
        return fail(errc::not_found, b.out.origin + ": no such file: " + value);
      auto cargo = b.need("cargo", value);
      if (!cargo) return tl::make_unexpected(std::move(cargo.error()));
      auto manifest = probe.cargo_script_crate(p);
      if (!manifest) return tl::make_unexpected(std::move(manifest.error()));
      argv = {*cargo,
              "run",
              "-q",
              "--manifest-path",
              manifest->string(),
              "--target-dir",
              (manifest->parent_path().parent_path() / "target").string()};
      break;
    }
    case launch_mode::python:
    case launch_mode::uv: {
      // python3 WORDS, or uv run WORDS.
      auto w = words();
      if (!w) return tl::make_unexpected(std::move(w.error()));
      auto program = b.need(mode == launch_mode::python ? "python3" : "uv", value);
      if (!program) return tl::make_unexpected(std::move(program.error()));
      argv = {*program};
      if (mode == launch_mode::uv) argv.emplace_back("run");
      argv.insert(argv.end(), w->begin(), w->end());
      break;
    }
    case launch_mode::bin:
    case launch_mode::example: {
      if (value.empty()) return fail(errc::invalid, b.out.origin + " needs a name");
      auto cargo = b.need("cargo", "cargo " + std::string(to_string(mode)) + " " + value);
      if (!cargo) return tl::make_unexpected(std::move(cargo.error()));
      argv = {*cargo, "run", "-q"};
      if (!package.empty()) argv.insert(argv.end(), {"-p", package});
      argv.insert(argv.end(), {mode == launch_mode::bin ? "--bin" : "--example", value});
      if (!manifest_path.empty()) argv.insert(argv.end(), {"--manifest-path", manifest_path});
      break;
    }
    case launch_mode::cmd: {
      auto w = words();
      if (!w) return tl::make_unexpected(std::move(w.error()));
      argv = std::move(*w);
      break;
    }
  }
  return std::move(b.out);
}

std::uint64_t fnv1a(std::string_view s) {
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

// Writes `text` to `p` unless it already holds exactly that (cargo would rebuild otherwise).
bool write_if_changed(const fs::path& p, const std::string& text) {
  {
    std::ifstream in(p, std::ios::binary);
    std::ostringstream old;
    if (in) {
      old << in.rdbuf();
      if (old.str() == text) return true;
    }
  }
  auto tmp = p;
  tmp += ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    if (!out.flush()) return false;
  }
  std::error_code ec;
  fs::rename(tmp, p, ec);
  return !ec;
}

tl::expected<fs::path, error> write_cargo_script_crate(const fs::path& script) {
  std::ifstream in(script, std::ios::binary);
  if (!in) return fail(errc::io, "cannot read " + script.string());
  std::ostringstream text;
  text << in.rdbuf();
  std::error_code ec;
  auto abs = fs::absolute(script, ec).lexically_normal();
  // A crate name: the file's stem with anything but [A-Za-z0-9_-] made '_'.
  std::string name = abs.stem().string();
  for (auto& ch : name)
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '_' && ch != '-') ch = '_';
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) name = "study_" + name;
  auto crate = make_cargo_script(text.str(), name, abs.parent_path());
  if (!crate) return fail(crate.error().code, script.string() + ":" + crate.error().message());
  const char* tmp = std::getenv("TMPDIR");
  fs::path root = fs::path(tmp && *tmp ? tmp : "/tmp") / "mira-script";
  char hash[17];
  std::snprintf(hash, sizeof hash, "%016llx", static_cast<unsigned long long>(fnv1a(abs.string())));
  auto dir = root / (name + "-" + hash);
  fs::create_directories(dir, ec);
  if (ec) return fail(errc::io, "cannot create " + dir.string() + ": " + ec.message());
  // In a shared TMPDIR another user could have made the folders first and put links in them:
  // the crate is written only into folders this user owns, which are then made its alone.
  for (const auto& d : {root, dir}) {
    struct ::stat st {};
    if (::lstat(d.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::geteuid() ||
        ::chmod(d.c_str(), S_IRWXU) != 0)
      return fail(errc::io, d.string() + " is not a folder of this user's; set TMPDIR to one");
  }
  if (!write_if_changed(dir / "Cargo.toml", crate->manifest) ||
      !write_if_changed(dir / "main.rs", crate->main_rs))
    return fail(errc::io, "cannot write the crate for " + script.string() + " in " + dir.string());
  return dir / "Cargo.toml";
}

}  // namespace

bool has_inline_script_metadata(std::string_view src) {
  // PEP 723: a line that is exactly "# /// script" opens the block.
  std::size_t start = 0;
  while (start <= src.size()) {
    auto end = src.find('\n', start);
    auto line =
        src.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line == "# /// script") return true;
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  return false;
}

tl::expected<cargo_script, error> make_cargo_script(std::string_view source,
                                                    const std::string& name,
                                                    const fs::path& script_dir) {
  std::vector<std::string_view> lines;
  for (std::size_t start = 0;;) {
    auto end = source.find('\n', start);
    lines.push_back(
        source.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start));
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  std::size_t i = 0;
  std::vector<bool> blank(lines.size(), false);
  // A `#!` line that is not an inner attribute (`#![...]`).
  if (!lines.empty() && lines[0].starts_with("#!") && !lines[0].starts_with("#!["))
    blank[i++] = true;
  while (i < lines.size() && lines[i].find_first_not_of(" \t\r") == std::string_view::npos) ++i;
  std::string front;
  std::size_t front_line = 0;
  if (i < lines.size() && lines[i].starts_with("---")) {
    front_line = i + 1;
    std::size_t close = i + 1;
    while (close < lines.size() && !lines[close].starts_with("---")) ++close;
    if (close >= lines.size())
      return fail(errc::invalid,
                  std::to_string(front_line) + ": the --- front matter is not closed");
    for (std::size_t k = i; k <= close; ++k) blank[k] = true;
    for (std::size_t k = i + 1; k < close; ++k) (front += lines[k]) += '\n';
  }
  toml::table manifest;
  try {
    manifest = toml::parse(front);
  } catch (const toml::parse_error& e) {
    return fail(errc::invalid, std::to_string(front_line + e.source().begin.line) + ":" +
                                   std::to_string(e.source().begin.column) + ": " +
                                   std::string(e.description()));
  }
  if (!manifest["package"].is_table()) manifest.insert_or_assign("package", toml::table{});
  auto& package = *manifest["package"].as_table();
  if (!package.contains("name")) package.insert("name", name);
  if (!package.contains("version")) package.insert("version", "0.0.0");
  if (!package.contains("edition")) package.insert("edition", "2024");
  for (auto* section : {"dependencies", "dev-dependencies", "build-dependencies"}) {
    auto* deps = manifest[section].as_table();
    if (!deps) continue;
    for (auto& [dep, spec] : *deps) {
      auto* t = spec.as_table();
      if (!t) continue;
      if (auto* path = t->get_as<std::string>("path"); path && fs::path(path->get()).is_relative())
        *path = (script_dir / path->get()).lexically_normal().string();
    }
  }
  auto bin_name = package["name"].value_or(name);
  manifest.insert_or_assign("bin",
                            toml::array{toml::table{{"name", bin_name}, {"path", "main.rs"}}});
  manifest.insert_or_assign("workspace", toml::table{});
  std::ostringstream m;
  m << "# Made by mira from a single-file Rust study; rewritten when the study changes.\n"
    << manifest << '\n';
  std::string body;
  for (std::size_t k = 0; k < lines.size(); ++k) {
    if (!blank[k]) body += lines[k];
    if (k + 1 < lines.size()) body += '\n';
  }
  return cargo_script{m.str(), std::move(body)};
}

system_probe system_probe::real() {
  system_probe p;
  p.find_program = [](const std::string& program) -> std::optional<fs::path> {
    const char* path = std::getenv("PATH");
    std::string_view dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
    for (std::size_t start = 0;;) {
      auto end = dirs.find(':', start);
      auto dir =
          dirs.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start);
      auto candidate = fs::path(dir.empty() ? "." : std::string(dir)) / program;
      std::error_code ec;
      if (fs::is_regular_file(candidate, ec) && ::access(candidate.c_str(), X_OK) == 0)
        return candidate;
      if (end == std::string_view::npos) return std::nullopt;
      start = end + 1;
    }
  };
  p.is_file = [](const fs::path& f) {
    std::error_code ec;
    return fs::is_regular_file(f, ec);
  };
  p.is_executable = [](const fs::path& f) { return ::access(f.c_str(), X_OK) == 0; };
  p.head = [](const fs::path& f) {
    std::ifstream in(f, std::ios::binary);
    std::string buf(8192, '\0');
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    buf.resize(static_cast<std::size_t>(in.gcount()));
    return buf;
  };
  p.cargo_script_crate = write_cargo_script_crate;
  return p;
}

tl::expected<resolved_launch, error> resolve_launch(const launch_request& r, const config& c,
                                                    const system_probe& probe) {
  if (!r.argv.empty()) {
    if (!r.package.empty() || !r.manifest_path.empty())
      return fail(errc::conflict,
                  "--package and --manifest-path go with --study-bin or --study-example (cargo)");
    return resolved_launch{r.argv, "the command after --", {}};
  }
  const launcher* l = nullptr;
  std::string origin;
  if (!r.launcher.empty()) {
    auto found = c.find_launcher(r.launcher);
    if (!found) return tl::make_unexpected(found.error());
    l = *found;
    origin = "launcher \"" + l->name + "\" (--launcher)";
  } else if (!r.mode && !c.default_launcher.empty()) {
    auto found = c.find_launcher(c.default_launcher);
    if (!found) return tl::make_unexpected(found.error());
    l = *found;
    origin = "launcher \"" + l->name + "\" (default_launcher in " + c.file.string() + ")";
  }
  // --package and --manifest-path replace the launcher's; the launcher's still apply to an
  // explicit cargo mode (and are dropped for another explicit mode, which cannot use them).
  auto package = r.package;
  auto manifest = r.manifest_path;
  if (l && (!r.mode || is_cargo(*r.mode))) {
    if (package.empty()) package = l->package;
    if (manifest.empty()) manifest = l->manifest_path;
  }
  if (r.mode) {
    auto flag = "--study" + (*r.mode == launch_mode::study ? std::string()
                                                           : "-" + std::string(to_string(*r.mode)));
    return build(*r.mode, r.value, package, manifest, flag, probe);
  }
  if (l) return build(l->mode, l->value, package, manifest, origin, probe);
  return fail(
      errc::no_study,
      std::string(
          "no study to run: give --study PATH (or --study-cmd, --study-python, --study-uv, "
          "--study-bin, --study-example, --study-script), --launcher NAME, or the study's command "
          "after `--`; or set default_launcher in mira.toml"));
}

}  // namespace mira::config
