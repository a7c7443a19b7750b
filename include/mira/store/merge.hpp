// Merging shard runs: the run folders of `mira run --shard I/N` (one per machine) become the one
// run a single process would have saved — the same case records, events and stderr of every
// shard, meta.json listing the shards and their timing, report.json and report.html. Inputs
// are read a case at a time (run_reader), so merging holds keys, not records. Every
// input is checked before anything is written, the new folder is built under a temporary name
// and renamed into place, and the inputs are only read.
#pragma once

#include <mira/store/run_reader.hpp>
#include <mira/store/run_store.hpp>
#include <mira/store/shard_meta.hpp>

#include <tl/expected.hpp>

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace mira::store {

struct merge_options {
  std::filesystem::path results_dir = "results";  // where the merged run goes
  std::string run_id;                             // empty: a new one (new_run_id)
  /// Merge what is there when shards are missing or unfinished; merge_outcome::complete()
  /// is then false. Refused otherwise.
  bool allow_partial = false;
  std::vector<std::string> argv;  // the merge command, for the merged run's session
  /// The merged run's report files over its cases, read back from the merged folder
  /// (report::saved_run_files); the store renders none itself. The files
  /// are written before the reader and the summary go. Empty: the merged run has none until
  /// `mira report` writes them.
  std::function<std::vector<report_file>(const run_reader& merged, const schedule::run_report& run,
                                         const aggregate::summary&)>
      report_files;
};

struct merge_error {
  enum class kind {
    bad_input,     // the inputs do not make one plan's shards; nothing was written
    cannot_write,  // writing the merged run failed; nothing was left behind
  };
  kind what = kind::bad_input;
  std::string message;
};

struct merge_outcome {
  std::string run_id;
  std::filesystem::path path;
  merged_info info;
  std::size_t cases = 0;                // records in the merged run
  std::vector<std::string> incomplete;  // "shard I (run ID): saved S of P case(s)"
  bool complete() const { return info.missing.empty() && info.not_run == 0; }
};

/// Merges the shard runs in `inputs` (run folders). Refused, naming the inputs concerned, when
/// one is not a shard run or cannot be read wholly, when two differ in study (name or
/// version), plan fingerprint or shard count, when an index appears twice or a case in two
/// inputs, when the merged run's id is taken; and, without allow_partial, when a shard is
/// missing (the message lists the missing indexes) or saved fewer cases than it planned.
tl::expected<merge_outcome, merge_error> merge_runs(
    const std::vector<std::filesystem::path>& inputs, const merge_options& options);

/// The temporary folders (".merging-*") that merges killed in `results_dir` left behind: those
/// no merge holds. With `remove`, each is removed under its lock (merge_runs does so before it
/// starts). Never a run: a merged run has its own name once it is whole.
std::vector<std::filesystem::path> abandoned_merges(const std::filesystem::path& results_dir,
                                                    bool remove);

}  // namespace mira::store
