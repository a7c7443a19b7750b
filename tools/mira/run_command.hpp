// `mira run` and `mira score` as a coroutine, for the commands and for an experiment's
// treatments, which run as sessions in the same process.
#pragma once

#include "args.hpp"
#include "console.hpp"

#include <boost/asio/awaitable.hpp>

#include <string>
#include <vector>

namespace mira::cli {

/// An experiment's treatment: how its run is labelled (meta.json's extra.experiment and the
/// environment labels) and the plan archived in its folder.
struct treatment_label {
  std::string experiment_id;
  std::string treatment;
  bool baseline = false;
  std::string study;      // the plan's: a treatment whose study says otherwise is refused
  std::string plan_path;  // absolute
  std::string plan_source, plan_resolved;
};

/// How a run command ended.
struct run_outcome {
  int rc = 3;
  std::string run_id;  // when it saved a run
};

/// `mira run` (or `--execute-only`, or `mira score` when `scoring`) with prepared arguments,
/// its output on `out`. With `treatment`, the run is one of an experiment's: labelled, and its
/// report table goes to `out` instead of stdout.
boost::asio::awaitable<run_outcome> run_cases(const std::vector<std::string>& args, run_args a,
                                              bool scoring, console& out,
                                              const treatment_label* treatment = nullptr);

}  // namespace mira::cli
