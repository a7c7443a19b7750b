// mira.toml and the study launch applied to a command's arguments, between parsing and running:
// the results dir, the environment labels, --preset, the study's argv, and per-target timeouts.
#pragma once

#include "args.hpp"

#include <mira/config/mira_toml.hpp>

#include <optional>

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

/// The per-attempt timeout of a planned run: --timeout, else `[targets.LABEL] timeout` of the
/// planned targets, else the preset's. One run has one per-attempt timeout, so targets whose
/// timeouts differ are an error naming them (select them apart, or give --timeout). Warns about
/// `[targets]` labels the study does not declare.
tl::expected<std::optional<double>, std::string> planned_timeout(const run_args& a,
                                                                 const config::config& c,
                                                                 const protocol::list_result& list,
                                                                 const plan::plan& p);

}  // namespace mira::cli
