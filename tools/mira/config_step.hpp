// mira.toml and the study launch applied to a command's arguments, between parsing and running:
// the results dir, the environment labels, --preset, the study's argv, and per-target timeouts.
#pragma once

#include "args.hpp"

#include <mira/config/mira_toml.hpp>

#include <map>
#include <optional>
#include <string>

namespace mira::cli {

/// The nearest mira.toml from the working directory (the defaults when there is none); its
/// warnings printed. A malformed file is a usage_error naming file, line and column.
config::config load_project_config();

/// Applies `c` to `a` for `cmd` (kept in a.project): [results] dir unless --results-dir, the
/// environment settings,
/// --preset (its fields under the command line's), and for the commands that start a study
/// the argv (config::resolve_launch). Throws usage_error naming what is wrong.
void apply_config(command cmd, run_args& a, const config::config& c);

/// load_project_config() then apply_config().
void prepare(command cmd, run_args& a);

/// The per-attempt timeouts of a planned run, in seconds: --timeout, else `[targets.LABEL]
/// timeout` of each planned target, else the preset's.
struct planned_timeouts {
  std::optional<double> common;  // every case's (by_target empty)
  /// Set when the planned targets' timeouts differ: each target's (nullopt: none).
  std::map<std::string, std::optional<double>, std::less<>> by_target;
};

/// The timeouts of plan `p`. Warns about `[targets]` labels the study does not declare.
planned_timeouts planned_timeout(const run_args& a, const config::config& c,
                                 const protocol::list_result& list, const plan::plan& p);

}  // namespace mira::cli
