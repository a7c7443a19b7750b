// Merging shard runs: the run folders of `mira run --shard I/N` (one per machine) become the one
// run a single process would have saved — the same case records, events and stderr of every
// shard, meta.json listing the shards and their timing, report.json and report.html. Inputs
// are read a case at a time (run_reader), so merging holds keys, not records. Every
// input is checked before anything is written, the new folder is built under a temporary name
// and renamed into place, and the inputs are only read.
#pragma once

#include <mira/store/error.hpp>
#include <mira/store/run_reader.hpp>
#include <mira/store/run_store.hpp>
#include <mira/store/shard_meta.hpp>

#include <boost/system/error_code.hpp>
#include <tl/expected.hpp>

#include <filesystem>
#include <functional>
#include <string>
#include <type_traits>
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

/// Why merge_runs() refused, besides the store's own codes (errc::not_found, in_use or corrupt
/// for an input that cannot be opened or read wholly; errc::invalid_id and exists for the merged
/// run's id). Nothing is written whatever the code; only cannot_write has tried.
enum class merge_errc {
  no_inputs = 1,  // no runs to merge
  not_a_shard,    // an input was not made as a shard (its meta.json has no "shard")
  mismatched,     // inputs of different studies (name or version), plans or shard counts
  duplicate,      // a shard index given twice, or a case in two inputs
  incomplete,     // a shard missing or unfinished, and merge_options::allow_partial not set
  cannot_write,   // writing the merged run failed; nothing was left behind
};

const boost::system::error_category& merge_category() noexcept;
boost::system::error_code make_error_code(merge_errc e) noexcept;

struct merge_outcome {
  std::string run_id;
  std::filesystem::path path;
  merged_info info;
  std::size_t cases = 0;                // records in the merged run
  std::vector<std::string> incomplete;  // "shard I (run ID): saved S of P case(s)"
  bool complete() const { return info.missing.empty() && info.not_run == 0; }
};

/// Merges the shard runs in `inputs` (run folders). Refused, naming the inputs concerned, when
/// one is not a shard run (merge_errc::not_a_shard) or cannot be read wholly (the store's code),
/// when two differ in study (name or version), plan fingerprint or shard count
/// (merge_errc::mismatched), when an index appears twice or a case in two inputs
/// (merge_errc::duplicate), when the merged run's id is not one or is taken (errc::invalid_id,
/// errc::exists); and, without allow_partial, when a shard is missing (the message lists the
/// missing indexes) or saved fewer cases than it planned (merge_errc::incomplete).
tl::expected<merge_outcome, error> merge_runs(const std::vector<std::filesystem::path>& inputs,
                                              const merge_options& options);

/// The temporary folders (".merging-*") that merges killed in `results_dir` left behind: those
/// no merge holds. With `remove`, each is removed under its lock (merge_runs does so before it
/// starts). Never a run: a merged run has its own name once it is whole.
std::vector<std::filesystem::path> abandoned_merges(const std::filesystem::path& results_dir,
                                                    bool remove);

}  // namespace mira::store

/// @cond
template <>
struct boost::system::is_error_code_enum<mira::store::merge_errc> : std::true_type {};
/// @endcond
