// The config layer's errors (mira.toml's presets and launchers, launch resolution, single-file
// Rust studies): an error_code in the layer's own category, which callers decide on (nothing to
// launch is not a launcher that does not exist), and a message for people naming the flag, name
// or file and what is wrong.
#pragma once

#include <mira/coded_error.hpp>

#include <boost/system/error_code.hpp>

#include <string>
#include <type_traits>

namespace mira::config {

enum class errc {
  not_found = 1,    // no preset or launcher of that name, or no such study file
  invalid,          // a value that cannot be used: a command line that does not split or is
                    // empty, a cargo mode with no name, a file of a kind with no runner, a
                    // single-file study whose front matter is not closed or not TOML
  conflict,         // options that do not go together (--package with a mode other than cargo)
  missing_program,  // a program the study needs is not on PATH (python3, uv, node, cargo)
  no_study,         // nothing names a study: no --study*, --launcher, `--` or default_launcher
  io,               // the file system refused (reading a study, writing its crate)
};

const boost::system::error_category& category() noexcept;
boost::system::error_code make_error_code(errc e) noexcept;

/// Makes config::error a type of its own.
struct error_tag;
/// A config failure: its kind, and one line for people (the flag, name or file, and what is
/// wrong with it).
using error = coded_error<error_tag>;

}  // namespace mira::config

/// @cond
template <>
struct boost::system::is_error_code_enum<mira::config::errc> : std::true_type {};
/// @endcond
