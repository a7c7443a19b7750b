// The planner: the grid of cases (samples x targets x axis combinations x trials) that a
// listing defines after selection, and the case keys that name them. Pure functions over the
// listing; every selection is validated against it.
#pragma once

#include <mira/protocol/types.hpp>

#include <tl/expected.hpp>

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace mira::plan {

struct planned_case {
  protocol::run_params params;
  std::string key;        // eval/sample@target[k=v,...]#trial (#trial only when trials > 1)
  std::string provider;   // the target's provider ("" buckets provider-less targets)
  bool available = true;  // false: the study cannot run it; reported as skipped, never sent

  /// The key without `#trial`: groups the trials of one case. A view of `key`, not a second
  /// string per case.
  std::string_view logical_key() const;
};

/// What to run. Globs understand `*`, `?`, `[...]` (with `!` or `^` to negate, `a-z`) and
/// `{a,b}` alternatives (nestable).
struct selection {
  std::string filter;              // substring of the logical key
  std::vector<std::string> evals;  // any of these globs
  std::vector<std::string> samples;
  std::vector<std::string> targets;
  std::vector<std::string> tags;  // samples carrying any of these tags
  /// One entry per --axis flag: NAME and its value globs. Entries for the same NAME
  /// intersect (a value must match a glob of each).
  std::vector<std::pair<std::string, std::vector<std::string>>> axes;
  std::optional<std::int64_t> trials;  // overrides each eval's trials (0 means 1)
  std::optional<std::int64_t> seed;    // overrides each eval's base seed
};

struct eval_counts {
  std::string eval;
  std::size_t samples = 0;
  std::size_t targets = 0;
  std::size_t axis_combinations = 0;
  std::size_t trials = 0;
  std::size_t cases = 0;  // after the filter
};

struct plan {
  std::vector<planned_case> cases;  // listing order: eval, sample, target, axis combination, trial
  std::vector<eval_counts> evals;   // the evals that contribute, in listing order
};

struct plan_error {
  std::string message;
};

/// `eval/sample@target` plus a sorted `[k=v,...]` suffix when the case has axis params.
std::string logical_key(const protocol::run_params& p);
/// The logical key plus `#trial` when the case is one of several trials.
std::string case_key(const protocol::run_params& p);

/// Glob match of the whole of `text`.
bool glob_match(std::string_view pattern, std::string_view text);

/// Plans the selection. Fails naming the offending flag and value when a glob matches nothing
/// it could match (an eval, sample, target, tag, axis or axis value), and when two cases would
/// have the same key (names containing / @ [ ] , = #).
tl::expected<plan, plan_error> make_plan(const protocol::list_result& list,
                                         const selection& sel = {});

}  // namespace mira::plan
