// The help text of every `mira` command: the overview here, each command's in help.cpp.
#pragma once

#include "args.hpp"

#include <optional>
#include <string>
#include <string_view>

namespace mira::cli {

inline constexpr const char* main_help = R"(mira - run Mira Eval Protocol studies

Usage:
  mira list [--json] STUDY
  mira plan [FILTER] [selection] [--json] STUDY
  mira run [FILTER] [selection] [run options] STUDY
  mira run --execute-only --artifacts DIR [selection] [run options] STUDY
  mira score --artifacts DIR [FILTER] [selection] [run options] STUDY
  mira report RUN_ID [FILTER] [--results-dir DIR] [--format F] [--out PATH] [--group-by KEY]
  mira export RUN_ID --format atif [--results-dir DIR] [--artifacts DIR] [--out DIR|-]
  mira store convert RUN_ID --to per-case|compact [--results-dir DIR]
  mira merge RUN... [--results-dir DIR] [--run-id ID] [--allow-partial]
  mira compare BASE CANDIDATE [--group-by KEY] [--alpha A] [--fail-on-regression] [--format F]
  mira serve --study NAME=CMD [...] [--listen ADDR:PORT] [--token-file F] [--results-dir DIR]
  mira view [RUN ...] [--results-dir DIR] [--port N] [--open]
  mira doctor [--fix] [STUDY]
  mira help [--full | COMMAND]
  mira --version

STUDY is how to start the study, one of:
  -- STUDY_CMD [ARGS...]   the command line, passed as is (no shell)
  --study PATH             .py (python3, or uv run), .mjs/.js (node), .rs (cargo), an executable
  --study-cmd "CMD ARGS"   one string, split like a shell would (quotes, backslashes, no expansion)
  --study-python / --study-uv "SCRIPT ARGS", --study-bin / --study-example NAME (cargo),
  --study-script PATH (single-file Rust), --launcher NAME (mira.toml)
or nothing, when mira.toml sets default_launcher. mira.toml (the nearest one, walking up from the
working directory) also sets the results dir, presets (--preset), per-target timeouts and
environment labels.
Run `mira COMMAND --help` for a command's options, `mira help --full` for all of them.
)";

/// A command's whole `--help`: what it does and its usage, the options from the flag table
/// (flags.hpp), then its exit codes and examples.
std::string command_help(command cmd);

/// The overview, then every command's help: `mira help --full`.
std::string full_help();

/// The command of that name ("export" for command::export_, "store" for store_convert).
std::optional<command> command_named(std::string_view name);

}  // namespace mira::cli
