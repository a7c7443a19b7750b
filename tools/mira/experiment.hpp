// `mira run --experiment PLAN.toml`: the plan format of the Rust mira CLI (study, launcher,
// preset, [slice], [[treatments]] with env, [compare]), each treatment an ordinary saved run
// made by a session in this process, and the comparison of every treatment against the baseline.
#pragma once

#include "args.hpp"

#include <tl/expected.hpp>

#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace mira::cli {

struct experiment_plan {
  struct treatment {
    std::string name;
    std::vector<std::pair<std::string, std::string>> env;  // in the plan's order, resolved
  };
  std::string study;  // must equal initialize.study
  std::string launcher, preset;
  std::vector<std::string> samples, targets;  // [slice]
  std::optional<std::int64_t> trials;
  std::vector<treatment> treatments;
  std::string group_by = "treatment";  // [compare]: "treatment", or a key to break each down by
  std::string baseline;                // [compare] baseline; default the first treatment
  double alpha = 0.05;                 // [compare] alpha
};

/// Parses a plan. `file` names it in errors ("plan.toml:3:5: ...") and anchors "./" and "../"
/// env values (resolved against its directory). Unknown keys are errors, as in the Rust host.
tl::expected<experiment_plan, std::string> parse_experiment(std::string_view text,
                                                            const std::filesystem::path& file);

/// The plan as resolved (paths made absolute, the baseline filled in), as TOML: archived in
/// each treatment's run folder beside the source.
std::string resolved_toml(const experiment_plan& p);

/// The parent: runs every treatment (up to `a.experiment_parallel` at once; one failing does
/// not stop the others), then compares each against the baseline. Exit 0; 1 when a treatment's
/// pass rate dropped significantly against the baseline; 2 for a bad plan or flags; 3 when a
/// treatment could not run or be compared.
int run_experiment(const std::vector<std::string>& args, const run_args& a);

}  // namespace mira::cli
