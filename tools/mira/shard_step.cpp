// The --shard step (see shard_step.hpp).
#include "shard_step.hpp"

#include "console.hpp"

#include <mira/store/run_store.hpp>

#include <cstdio>

namespace mira::cli {

bool select_shard(const run_args& a, plan::plan& p, std::optional<store::shard_info>& info,
                  int& rc) {
  auto refuse = [&](const std::string& why) {
    std::fprintf(stderr, "mira: %s\n", printable(why).c_str());
    rc = exit_usage;
    return false;
  };
  std::optional<store::shard_info> saved;
  if (!a.resume.empty()) {
    // A run that cannot be read is reported by the step that opens it.
    if (auto meta = store::load_run_meta(a.results_dir, a.resume)) {
      auto s = store::shard_of(*meta);
      if (!s) return refuse("--resume: " + s.error().message());
      saved = *s;
      if (!saved && a.shard)
        return refuse("--resume: run " + a.resume + " is not a shard run; --shard " +
                      plan::to_string(*a.shard) + " does not apply to it");
      if (saved && a.shard && *a.shard != saved->spec)
        return refuse("--resume: run " + a.resume + " is shard " + plan::to_string(saved->spec) +
                      ", not " + plan::to_string(*a.shard) + " (a resumed shard keeps its shard)");
    }
  }
  if (!saved && !a.shard) return true;
  store::shard_info s;
  s.spec = saved ? saved->spec : *a.shard;
  s.fingerprint = store::plan_fingerprint(p, a.selection);
  s.plan_cases = p.cases.size();
  if (saved && saved->fingerprint != s.fingerprint)
    return refuse("--resume: the plan changed since shard run " + a.resume +
                  " was saved (another selection, or the study lists other cases): resumed, it "
                  "could no longer be merged with its other shards");
  p = plan::select_shard(p, s.spec);
  s.shard_cases = p.cases.size();
  std::fprintf(stderr, "shard %s: %zu of %zu case(s)\n", plan::to_string(s.spec).c_str(),
               s.shard_cases, s.plan_cases);
  info = std::move(s);
  return true;
}

}  // namespace mira::cli
