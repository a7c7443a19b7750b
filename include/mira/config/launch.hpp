// From "how to start the study" (a --study* flag, a launcher of mira.toml, or an argv after
// `--`) to the argv to spawn, the way the Rust `mira` CLI resolves it: `.py` through python3
// (or `uv run` when uv is installed and the file carries inline script metadata), `.mjs`/`.js`
// through node, an executable as itself, cargo for bins, examples and single-file Rust studies.
// The file system and PATH are reached through a probe, so resolution is tested without them.
#pragma once

#include <mira/config/error.hpp>
#include <mira/config/mira_toml.hpp>

#include <tl/expected.hpp>

#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mira::config {

/// What the command line asked for. At most one of `mode` and `argv` is set (the parser's job).
/// The command lines of cmd, python and uv are split by mira::split_command_line.
struct launch_request {
  std::optional<launch_mode> mode;  // --study, --study-script, --study-python, ...
  std::string value;                // that flag's value
  std::vector<std::string> argv;    // after `--`, or --study-cmd split
  std::string launcher;             // --launcher NAME
  std::string package;              // --package (cargo modes)
  std::string manifest_path;        // --manifest-path (cargo modes)
};

/// What resolution may ask of the system.
struct system_probe {
  /// The program's full path when it is on PATH.
  std::function<std::optional<std::filesystem::path>(const std::string& program)> find_program;
  std::function<bool(const std::filesystem::path&)> is_file;
  std::function<bool(const std::filesystem::path&)> is_executable;
  /// The first bytes of a file ("" when unreadable): enough to see inline script metadata.
  std::function<std::string(const std::filesystem::path&)> head;
  /// Writes the cargo crate that runs a single-file Rust study; returns its Cargo.toml, or
  /// errc::io (the study cannot be read, the crate cannot be written) or errc::invalid (its
  /// front matter, from make_cargo_script).
  std::function<tl::expected<std::filesystem::path, error>(const std::filesystem::path&)>
      cargo_script_crate;

  /// PATH, the real file system, and cargo_script_crate writing under $TMPDIR/mira-script.
  static system_probe real();
};

struct resolved_launch {
  std::vector<std::string> argv;
  std::string origin;                 // "--study", "launcher \"py\" (mira.toml)", "--", ...
  std::vector<std::string> programs;  // what must be on PATH: "python3", "node", "cargo", ...
};

/// The argv for a request: an explicit mode or argv wins; else --launcher NAME; else
/// `default_launcher`; a launcher's mode is replaced by an explicit one, and --package /
/// --manifest-path overlay its own. Errors say what is missing: errc::not_found for an unknown
/// launcher (the message lists the known ones) or a file that does not exist; errc::invalid for
/// a kind of file with no runner (listing the kinds), a command line that does not split or is
/// empty, a cargo mode with no name; errc::conflict for --package or --manifest-path with a
/// mode other than cargo's; errc::missing_program for a program not on PATH (cargo, node,
/// python3, uv); errc::no_study when nothing names a study at all; errc::io when a single-file
/// study's crate cannot be written.
tl::expected<resolved_launch, error> resolve_launch(const launch_request& r, const config& c,
                                                    const system_probe& probe);

}  // namespace mira::config
