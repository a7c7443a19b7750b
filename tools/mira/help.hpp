// The help text of every `mira` command: the overview here, each command's in help.cpp.
#pragma once

#include "args.hpp"

#include <string>

namespace mira::cli {

inline constexpr const char* main_help = R"(mira - run Mira Eval Protocol studies

Usage:
  mira list [--json] -- STUDY_CMD [ARGS...]
  mira plan [FILTER] [selection] [--json] -- STUDY_CMD [ARGS...]
  mira run [FILTER] [selection] [run options] -- STUDY_CMD [ARGS...]
  mira run --execute-only --artifacts DIR [selection] [run options] -- STUDY_CMD [ARGS...]
  mira score --artifacts DIR [FILTER] [selection] [run options] -- STUDY_CMD [ARGS...]
  mira report RUN_ID [--results-dir DIR] [--format F] [--out PATH] [--group-by KEY]
  mira export RUN_ID --format atif [--results-dir DIR] [--artifacts DIR] [--out DIR|-]
  mira store convert RUN_ID --to per-case|compact [--results-dir DIR]
  mira merge RUN... [--results-dir DIR] [--run-id ID] [--allow-partial]
  mira serve --study NAME=CMD [...] [--listen ADDR:PORT] [--token-file F] [--results-dir DIR]
  mira --version

Everything after `--` is the study's command line, passed as is (no shell);
--study-cmd "CMD ARGS" gives it as one string instead, split like a shell would (quotes and
backslashes, no expansion).
Run `mira COMMAND --help` for a command's options.
)";

/// A command's whole `--help`: what it does and its usage, the options from the flag table
/// (flags.hpp), then its exit codes and examples.
std::string command_help(command cmd);

}  // namespace mira::cli
