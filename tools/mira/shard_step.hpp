// The --shard step of `mira plan` and `mira run`: the shard to keep (given, or the one a resumed
// shard run was saved with) and what meta.json records about it.
#pragma once

#include "args.hpp"

#include <mira/plan/plan.hpp>
#include <mira/store/shard_meta.hpp>

#include <optional>

namespace mira::cli {

/// Cuts `p` (the whole plan) down to the shard's cases and sets `info` to what the run records;
/// leaves both alone for an unsharded run. A resumed shard run keeps its shard (--shard, when
/// given too, must name the same one) and its plan: a plan whose fingerprint changed since
/// is refused, since its shards could no longer be merged. Prints why and sets `rc` when it
/// refuses.
bool select_shard(const run_args& a, plan::plan& p, std::optional<store::shard_info>& info,
                  int& rc);

}  // namespace mira::cli
