// Shards of a plan (see shard.hpp).
#include <mira/plan/shard.hpp>

#include <algorithm>
#include <charconv>
#include <limits>
#include <queue>
#include <unordered_map>

namespace mira::plan {

std::string to_string(const shard_spec& s) {
  return std::to_string(s.index) + "/" + std::to_string(s.count);
}

namespace {

// A whole decimal number, all of `text`; nothing for anything else (signs, spaces, overflow).
std::optional<std::size_t> whole(std::string_view text) {
  if (text.empty() || text.size() > 9) return std::nullopt;  // up to 999 999 999 shards
  std::size_t n = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return n;
}

std::string quoted(std::string_view name, const char* value) {
  return std::string(name) + "='" + value + "'";
}

// Every shard error concerns the shard: its message begins with "shard".
tl::unexpected<error> fail(errc e, std::string_view rest) {
  return tl::make_unexpected(make_error(e, field::shard, rest));
}

}  // namespace

tl::expected<shard_spec, error> parse_shard(std::string_view text) {
  auto bad = [&](const std::string& why) {
    return fail(errc::invalid_shard, " '" + std::string(text) + "': " + why);
  };
  auto slash = text.find('/');
  if (slash == std::string_view::npos)
    return bad("expected I/N (shard I of N, 0-based), e.g. 0/4, or auto");
  auto index = whole(text.substr(0, slash));
  auto count = whole(text.substr(slash + 1));
  if (!index || !count) return bad("I and N must be whole numbers (I/N, e.g. 0/4)");
  if (*count == 0) return bad("N must be at least 1");
  if (*index >= *count)
    return bad("I must be less than N (shards are numbered 0 to " + std::to_string(*count - 1) +
               ")");
  return shard_spec{*index, *count};
}

tl::expected<shard_spec, error> shard_from_env(
    const std::function<const char*(const char*)>& getenv) {
  auto number = [&](const char* name) -> tl::expected<std::optional<std::size_t>, error> {
    const char* v = getenv(name);
    if (!v) return std::nullopt;
    auto n = whole(v);
    if (!n) return fail(errc::invalid_shard, ": " + quoted(name, v) + " is not a whole number");
    return n;
  };
  auto check = [](shard_spec s, const std::string& from) -> tl::expected<shard_spec, error> {
    if (s.count == 0) return fail(errc::invalid_shard, ": " + from + " gives 0 shards");
    if (s.index >= s.count)
      return fail(errc::invalid_shard, ": " + from + " gives shard " + std::to_string(s.index) +
                                           " of " + std::to_string(s.count) +
                                           " (the index must be less than the count)");
    return s;
  };
  if (getenv("SLURM_ARRAY_TASK_ID")) {
    auto id = number("SLURM_ARRAY_TASK_ID");
    auto count = number("SLURM_ARRAY_TASK_COUNT");
    auto min = number("SLURM_ARRAY_TASK_MIN");
    auto max = number("SLURM_ARRAY_TASK_MAX");
    for (auto* r : {&id, &count, &min, &max})
      if (!*r) return tl::make_unexpected(r->error());
    const auto first = min->value_or(0);
    const std::string from = quoted("SLURM_ARRAY_TASK_ID", getenv("SLURM_ARRAY_TASK_ID"));
    if (**id < first)
      return fail(errc::invalid_shard,
                  ": " + from + " is below SLURM_ARRAY_TASK_MIN=" + std::to_string(first));
    if (*count) return check({**id - first, **count}, from + " with SLURM_ARRAY_TASK_COUNT");
    if (*min && *max) {
      if (**max < **min)
        return fail(errc::invalid_shard, ": SLURM_ARRAY_TASK_MAX is below SLURM_ARRAY_TASK_MIN");
      return check({**id - first, **max - **min + 1}, from + " with SLURM_ARRAY_TASK_MIN/MAX");
    }
    return fail(errc::no_shard_env,
                ": SLURM_ARRAY_TASK_ID is set but neither SLURM_ARRAY_TASK_COUNT nor "
                "SLURM_ARRAY_TASK_MIN and SLURM_ARRAY_TASK_MAX are");
  }
  if (getenv("JOB_COMPLETION_INDEX")) {
    auto index = number("JOB_COMPLETION_INDEX");
    if (!index) return tl::make_unexpected(index.error());
    auto count = number("MIRA_SHARD_COUNT");
    if (!count) return tl::make_unexpected(count.error());
    if (!*count)
      return fail(errc::no_shard_env,
                  ": JOB_COMPLETION_INDEX is set but MIRA_SHARD_COUNT is not "
                  "(Kubernetes exports no count: set MIRA_SHARD_COUNT to the Job's completions)");
    return check(
        {**index, **count},
        quoted("JOB_COMPLETION_INDEX", getenv("JOB_COMPLETION_INDEX")) + " with MIRA_SHARD_COUNT");
  }
  if (getenv("CI_NODE_INDEX")) {
    // GitLab's `parallel:` jobs count from 1.
    auto index = number("CI_NODE_INDEX");
    auto total = number("CI_NODE_TOTAL");
    for (auto* r : {&index, &total})
      if (!*r) return tl::make_unexpected(r->error());
    const std::string from = quoted("CI_NODE_INDEX", getenv("CI_NODE_INDEX"));
    if (!*total) return fail(errc::no_shard_env, ": CI_NODE_INDEX is set but CI_NODE_TOTAL is not");
    if (**index == 0)
      return fail(errc::invalid_shard,
                  ": " + from + " is 0, but GitLab counts its parallel jobs from 1");
    return check({**index - 1, **total}, from + " with CI_NODE_TOTAL");
  }
  return fail(errc::no_shard_env,
              ": neither SLURM_ARRAY_TASK_ID (a Slurm job array), "
              "JOB_COMPLETION_INDEX (a Kubernetes Indexed Job) nor CI_NODE_INDEX (GitLab's "
              "parallel jobs) is set; name the shard as I/N");
}

std::uint64_t stable_hash(std::string_view text) {
  std::uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a 64 offset basis
  for (unsigned char c : text) {
    h ^= c;
    h *= 0x100000001b3ull;  // FNV-1a 64 prime
  }
  // fmix64: FNV's low bits mix poorly on their own.
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ull;
  h ^= h >> 33;
  return h;
}

std::vector<std::size_t> assign_shards(const plan& p, std::size_t count) {
  std::vector<std::size_t> out(p.cases.size(), 0);
  if (count <= 1) return out;
  // The logical cases, each with its trials' plan indices.
  struct logical {
    std::string key;
    std::uint64_t hash = 0;
    std::vector<std::size_t> cases;
  };
  std::vector<logical> cases;
  std::unordered_map<std::string, std::size_t> index;
  for (std::size_t i = 0; i < p.cases.size(); ++i) {
    auto key = p.cases.logical_key(i);
    auto [it, fresh] = index.try_emplace(key, cases.size());
    if (fresh) cases.push_back({key, stable_hash(key), {}});
    cases[it->second].cases.push_back(i);
  }
  // Largest first (cases with more trials), so the small ones even out what they leave; then
  // by hash, so which shard a case lands in does not follow the listing.
  std::sort(cases.begin(), cases.end(), [](const logical& a, const logical& b) {
    if (a.cases.size() != b.cases.size()) return a.cases.size() > b.cases.size();
    return a.hash != b.hash ? a.hash < b.hash : a.key < b.key;
  });
  // The least loaded shard next (ties: the lowest index).
  using load = std::pair<std::size_t, std::size_t>;  // cases so far, shard
  std::priority_queue<load, std::vector<load>, std::greater<>> shards;
  for (std::size_t s = 0; s < count; ++s) shards.push({0, s});
  for (auto& c : cases) {
    auto [n, s] = shards.top();
    shards.pop();
    for (auto i : c.cases) out[i] = s;
    shards.push({n + c.cases.size(), s});
  }
  return out;
}

plan select_shard(const plan& p, const shard_spec& s) {
  plan out;
  auto shard = assign_shards(p, s.count);
  std::unordered_map<std::string_view, std::size_t> kept;  // eval -> cases in the shard
  std::vector<std::size_t> in_shard;
  for (std::size_t i = 0; i < p.cases.size(); ++i)
    if (shard[i] == s.index) {
      in_shard.push_back(i);
      ++kept[p.cases.eval(i).str()];
    }
  out.cases = p.cases.subset(in_shard);
  for (auto e : p.evals) {
    auto it = kept.find(e.eval);
    e.cases = it == kept.end() ? 0 : it->second;
    out.evals.push_back(std::move(e));
  }
  return out;
}

}  // namespace mira::plan
