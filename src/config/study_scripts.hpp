// What resolve_launch reads in a study script, private to the library: a Python file's inline
// script metadata (run through uv when it has some), and the crate cargo builds for a
// single-file Rust study (system_probe::real() writes it). Bodies in launch.cpp.
#pragma once

#include <mira/config/error.hpp>

#include <tl/expected.hpp>

#include <filesystem>
#include <string>
#include <string_view>

namespace mira::config {

/// Whether a Python file declares PEP 723 inline script metadata (`# /// script`).
bool has_inline_script_metadata(std::string_view python_source);

/// The crate for a single-file Rust study (cargo's script format: an optional `#!` line, an
/// optional `---` TOML front matter with [dependencies] and [package]): its Cargo.toml text,
/// and the body (front matter replaced by blank lines so compiler messages keep their line
/// numbers). `name` is the crate's name; relative `path` dependencies are made relative to
/// `script_dir`. Errors (errc::invalid: front matter not closed, or not TOML) name the script's
/// line.
struct cargo_script {
  std::string manifest;
  std::string main_rs;
};
tl::expected<cargo_script, error> make_cargo_script(std::string_view source,
                                                    const std::string& name,
                                                    const std::filesystem::path& script_dir);

}  // namespace mira::config
