// `mira run --experiment PLAN.toml`: the plan format of the Rust mira CLI (study, launcher,
// preset, [slice], [[treatments]] with env, [compare]), each treatment an ordinary saved run
// made by a child `mira run`, and the comparison of every treatment against the baseline.
#pragma once

#include "args.hpp"

#include <mira/store/run_meta.hpp>

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

/// In a `mira run` an experiment started (MIRA_EXPERIMENT_* in its environment), why its study
/// is not the plan's; nothing otherwise.
std::optional<std::string> experiment_study_mismatch(const std::string& study);

/// In such a run: labels meta.json (extra.experiment {id, treatment, baseline} and the
/// environment labels experiment_id, treatment, experiment_baseline) and archives the plan in
/// the run folder as experiment-source.toml (verbatim) and experiment.toml (resolved). A no-op
/// outside an experiment.
tl::expected<void, std::string> experiment_annotate(store::run_meta& meta,
                                                    const std::filesystem::path& run_folder);

}  // namespace mira::cli
