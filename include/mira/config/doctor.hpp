// The checks behind `mira doctor`, as plain functions returning findings, so a service can run
// them too: mira.toml and its launchers, a study's listing against itself and mira.toml, and a
// results directory. None of them changes anything.
#pragma once

#include <mira/config/launch.hpp>
#include <mira/config/mira_toml.hpp>
#include <mira/protocol/types.hpp>

#include <filesystem>
#include <string>
#include <vector>

namespace mira::config {

enum class severity { warning, error };

struct finding {
  severity level = severity::warning;
  std::string message;
};

/// mira.toml's warnings, and each launcher's needs: its file, and the programs it runs on PATH
/// (an error for default_launcher, which a bare `mira run` uses; a warning for the others).
std::vector<finding> check_config(const config& c, const system_probe& probe);

/// The listing: no evals, two evals/samples/targets/axes of one name, an axis named `target`,
/// an axis value twice, and names whose case keys would collide (errors); evals without
/// samples, targets or scorers, empty axes, unavailable targets, presets whose globs select
/// nothing and `[targets]` labels no eval declares (warnings).
std::vector<finding> check_listing(const protocol::list_result& list, const config& c);

/// The results directory: missing (a warning: the first run creates it), not a directory or not
/// writable (errors); each run folder: meta.json missing or unreadable, unreadable or torn case
/// records (errors), a session that never finished and leftover temporary files of interrupted
/// writes (warnings), in use by a running host (noted as a warning naming the holder).
std::vector<finding> check_results_dir(const std::filesystem::path& dir);

}  // namespace mira::config
