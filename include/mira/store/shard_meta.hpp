// What a run folder records about sharding: a shard run (`mira run --shard I/N`) keeps its index,
// the count and the plan fingerprint in meta.json, so `mira merge` can tell shards of one plan
// from folders of another; a merged run keeps the list of shards it was made from.
#pragma once

#include <mira/plan/plan.hpp>
#include <mira/plan/shard.hpp>
#include <mira/store/error.hpp>
#include <mira/store/run_meta.hpp>

#include <boost/json/object.hpp>

#include <optional>
#include <string>
#include <vector>

namespace mira::store {

/// meta.json "shard" of a shard run.
struct shard_info {
  plan::shard_spec spec;
  std::string fingerprint;      // plan_fingerprint() of the whole plan
  std::size_t plan_cases = 0;   // cases in the whole plan (every shard)
  std::size_t shard_cases = 0;  // cases in this shard

  boost::json::object to_json() const;
};

/// SHA-256 (hex) over the whole plan's case keys, sorted, one per line, then the selection that
/// made it (its canonical JSON: filter, globs, tags, axes, trials, seed). Two shards have the
/// same fingerprint only when they come from the same plan of the same selection.
std::string plan_fingerprint(const plan::plan& whole, const plan::selection& sel);

/// The selection as JSON (what the fingerprint and a session's configuration record).
boost::json::object selection_json(const plan::selection& sel);

/// The run's shard, when it is a shard run; errc::corrupt when meta.json's "shard" is malformed.
tl::expected<std::optional<shard_info>, error> shard_of(const run_meta& meta);
void set_shard(run_meta& meta, const shard_info& s);

/// One input of a merged run, as meta.json "merged"."shards" lists it.
struct merged_shard {
  std::size_t index = 0;
  std::string run_id;
  std::string started, finished;       // first session's start, last session's end
  std::vector<std::string> hostnames;  // where its sessions ran
  double seconds = 0;                  // run time over its sessions
  std::size_t cases = 0;               // records taken from it
};

/// meta.json "merged" of a run made by merge_runs.
struct merged_info {
  std::size_t count = 0;
  std::string fingerprint;
  std::size_t plan_cases = 0;
  std::vector<merged_shard> shards;  // by index
  std::vector<std::size_t> missing;  // indexes not merged (--allow-partial)
  std::size_t not_run = 0;           // cases of the plan no input saved

  boost::json::object to_json() const;
};

}  // namespace mira::store
