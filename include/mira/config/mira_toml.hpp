// mira.toml, the project configuration the Rust `mira` CLI reads, as a plain model: where run
// folders go, the environment block's labels, named selections (presets), named study launchers
// and per-target timeouts. Found as the Rust host finds it (the nearest one walking up from the
// working directory); unlike the Rust host, a malformed file is an error naming file, line and
// column rather than a silent fall-back to defaults, and unknown keys are warned about with a
// did-you-mean. The TOML parser stays inside the library: nothing here exposes it.
#pragma once

#include <mira/config/error.hpp>
#include <mira/plan/plan.hpp>

#include <tl/expected.hpp>

#include <cstddef>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mira::config {

/// A place in a file: 1-based line and column, 0 when unknown (a file that cannot be read).
struct location {
  std::filesystem::path file;
  std::size_t line = 0;
  std::size_t column = 0;
};

/// A problem with a place: "FILE:LINE:COLUMN: message" (FILE: message without a line).
struct diagnostic {
  location where;
  std::string message;
  std::string to_string() const;
};

/// `[presets.NAME]`: a named selection. Each list is a set of globs (a string is a list of one;
/// commas inside a value are not separators, so `{a,b}` works).
struct preset {
  std::string name;
  std::vector<std::string> evals;
  std::vector<std::string> samples;
  std::vector<std::string> targets;
  std::vector<std::string> tags;  // `tag`: samples carrying any of these
  std::vector<std::pair<std::string, std::vector<std::string>>> axes;  // `[presets.N.axes]`
  std::optional<double> timeout_s;                                     // per attempt, seconds
  location where;
};

/// How a launcher (or the command line) starts the study.
enum class launch_mode {
  study,    // a file whose kind picks the runner (.py, .mjs/.js, .rs, an executable)
  script,   // a single-file Rust study, run through cargo
  python,   // "SCRIPT ARGS" for python3
  uv,       // "SCRIPT ARGS" for `uv run`
  bin,      // `cargo run -q --bin NAME`
  example,  // `cargo run -q --example NAME`
  cmd,      // a whole command line (shell-like quoting, no expansion)
};

/// The mira.toml key (and the `--study-*` flag's suffix) of a mode: "study", "script", ...
std::string_view to_string(launch_mode m);

/// `[launchers.NAME]`: exactly one mode key (bin, example, cmd, script, study, uv, python or
/// python3 — the last two both run python3) plus, for the cargo modes, package/manifest_path.
/// `study`, `script` and `manifest_path` are relative to mira.toml's directory; the command
/// lines of cmd, python and uv run from the working directory, as typed.
struct launcher {
  std::string name;
  launch_mode mode = launch_mode::cmd;
  std::string value;
  std::string package;
  std::string manifest_path;
  location where;
};

/// `[targets."LABEL"]`.
struct target_settings {
  std::optional<double> timeout_s;
  location where;
};

/// A loaded mira.toml (or the defaults, when there is none: `file` empty).
struct config {
  std::filesystem::path file;
  /// `[results] dir`, made relative to mira.toml's directory (default: `results` there; with
  /// no file, `results` in the working directory).
  std::filesystem::path results_dir = "results";
  bool environment_enabled = true;                                      // `[environment] enabled`
  std::vector<std::pair<std::string, std::string>> environment_labels;  // file order
  std::map<std::string, preset, std::less<>> presets;
  std::map<std::string, launcher, std::less<>> launchers;
  std::string default_launcher;  // names an entry of `launchers`, or empty
  std::map<std::string, target_settings, std::less<>> targets;
  /// Unknown keys (with a did-you-mean) and dubious values that do not stop the file loading.
  std::vector<diagnostic> warnings;

  /// The preset of that name; errc::not_found, whose message lists the known ones.
  tl::expected<const preset*, error> find_preset(std::string_view name) const;
  /// The launcher of that name; errc::not_found, whose message lists the known ones.
  tl::expected<const launcher*, error> find_launcher(std::string_view name) const;
};

/// The nearest mira.toml: in `dir`, else in each parent up to the root. nullopt: none.
std::optional<std::filesystem::path> find_config(const std::filesystem::path& dir);

/// Reads and checks one mira.toml. Errors (syntax, wrong types, a launcher with no or two
/// modes, `default_launcher` naming none, a non-positive timeout) name the file, line and column.
tl::expected<config, diagnostic> load_config(const std::filesystem::path& file);

/// The same over text already read; `file` names it in diagnostics and anchors relative paths.
tl::expected<config, diagnostic> parse_config(std::string_view text,
                                              const std::filesystem::path& file);

/// find_config from `dir`, then load_config; the defaults when there is no file.
tl::expected<config, diagnostic> discover_config(const std::filesystem::path& dir);

/// The preset's fields under the command line's: each of evals, samples, targets and tags is
/// taken from the preset only when the command line gave none; axes by name likewise.
plan::selection apply_preset(const preset& p, plan::selection from_command_line);

/// A case's per-attempt timeout: the command line's, else `[targets.LABEL]`'s, else the
/// preset's (nullptr: none), else none.
std::optional<double> effective_timeout(const config& c, const preset* p,
                                        std::string_view target_label,
                                        std::optional<double> from_command_line);

/// The candidate nearest `word` by edit distance, when near enough to be a likely typo; else "".
std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates);

/// A commented mira.toml for a new project (what `mira doctor --fix` writes).
std::string starter_config();

}  // namespace mira::config
