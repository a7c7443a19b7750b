// The planner: the grid of cases (samples x targets x axis combinations x trials) that a
// listing defines, and the case keys that name them. Pure functions over the listing.
#pragma once

#include <mira/protocol/types.hpp>

#include <string>
#include <vector>

namespace mira::plan {

struct planned_case {
  protocol::run_params params;
  std::string key;          // eval/sample@target[k=v,...]#trial (#trial only when trials > 1)
  std::string logical_key;  // the key without #trial: groups the trials of one case
  std::string provider;     // the target's provider ("" buckets provider-less targets)
  bool available = true;    // false: the study cannot run it; reported as skipped, never sent
};

/// eval/sample@target plus a sorted [k=v,...] suffix when the case has axis params.
std::string logical_key(const protocol::run_params& p);
/// The logical key plus #trial when the case is one of several trials.
std::string case_key(const protocol::run_params& p);

/// Every case of every eval, in listing order: samples, then targets, then axis combinations
/// (in axis declaration order), then trials. Trial t gets seed + t when the eval has a seed.
std::vector<planned_case> plan_all(const protocol::list_result& list);

}  // namespace mira::plan
