// Shards of a plan: which cases one of N machines runs. A shard is chosen from the plan's
// logical keys alone (never their listing order), so every machine that plans the same
// selection agrees on it, and all trials of a case land in the same shard.
#pragma once

#include <mira/plan/plan.hpp>

#include <tl/expected.hpp>

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace mira::plan {

/// Shard `index` of `count` (0-based, as Slurm array task ids and Kubernetes completion
/// indexes are).
struct shard_spec {
  std::size_t index = 0;
  std::size_t count = 1;
  friend bool operator==(const shard_spec&, const shard_spec&) = default;
};

/// "I/N" as text, e.g. "2/8".
std::string to_string(const shard_spec& s);

/// Parses "I/N" (decimal, 0 <= I < N). Fails with errc::invalid_shard naming the value and what
/// is wrong with it.
tl::expected<shard_spec, error> parse_shard(std::string_view text);

/// Reads the environment through `getenv` (returns nullptr for an unset variable):
/// SLURM_ARRAY_TASK_ID with SLURM_ARRAY_TASK_COUNT (the index counted from
/// SLURM_ARRAY_TASK_MIN when set), or with SLURM_ARRAY_TASK_MIN and SLURM_ARRAY_TASK_MAX;
/// else JOB_COMPLETION_INDEX (Kubernetes Indexed Jobs) with MIRA_SHARD_COUNT (Kubernetes
/// exports no count); else CI_NODE_INDEX (1-based: GitLab's parallel jobs) with CI_NODE_TOTAL.
/// Fails naming the variables: errc::no_shard_env when neither is there (or
/// one is without its count), errc::invalid_shard when a value is malformed or out of range.
tl::expected<shard_spec, error> shard_from_env(
    const std::function<const char*(const char*)>& getenv);

/// FNV-1a, 64 bits, of `text`, followed by a 64-bit finalizer (MurmurHash3's fmix64) so every
/// bit of the result depends on every byte. Stable across machines, builds and releases.
std::uint64_t stable_hash(std::string_view text);

/// For each case of `p`, its shard among `count`. The logical cases (trials grouped) are taken
/// largest first (most trials), then in the order of stable_hash(logical key) (ties by the
/// key), and each goes to the shard that has the fewest cases so far (the lowest index among
/// equals): shard sizes then differ by at most the largest number of trials of one case,
/// whatever the plan's size (by one case when every case has as many trials). The assignment
/// depends on the set of logical keys and their trial counts only, not on listing order; a
/// plain hash modulo N would leave shards uneven by chance (some sqrt(cases / N) cases).
std::vector<std::size_t> assign_shards(const plan& p, std::size_t count);

/// The cases of `p` in shard `s`, in plan order; `evals` counts what is left per eval.
plan select_shard(const plan& p, const shard_spec& s);

}  // namespace mira::plan
