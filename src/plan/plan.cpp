// The planner (see plan.hpp).
#include <mira/plan/plan.hpp>

namespace mira::plan {

std::string logical_key(const protocol::run_params& p) {
  std::string k = p.eval;
  k += '/';
  k += p.sample;
  k += '@';
  k += p.target;
  if (!p.params.empty()) {
    k += '[';
    bool first = true;
    for (auto& [name, value] : p.params) {  // std::map: sorted by name
      if (!first) k += ',';
      first = false;
      k += name;
      k += '=';
      k += value;
    }
    k += ']';
  }
  return k;
}

std::string case_key(const protocol::run_params& p) {
  auto k = logical_key(p);
  if (p.trials > 1) k += '#' + std::to_string(p.trial);
  return k;
}

namespace {

// Cross-product of the axes' values; axes without values take no part.
std::vector<protocol::axis_params> combinations(const std::vector<protocol::axis_info>& axes) {
  std::vector<protocol::axis_params> out(1);
  for (auto& axis : axes) {
    if (axis.values.empty()) continue;
    std::vector<protocol::axis_params> next;
    next.reserve(out.size() * axis.values.size());
    for (auto& base : out)
      for (auto& v : axis.values) {
        auto c = base;
        c[axis.name] = v;
        next.push_back(std::move(c));
      }
    out = std::move(next);
  }
  return out;
}

}  // namespace

std::vector<planned_case> plan_all(const protocol::list_result& list) {
  std::vector<planned_case> cases;
  for (auto& eval : list.evals) {
    auto combos = combinations(eval.axes);
    auto trials = eval.trials < 1 ? 1 : eval.trials;
    for (auto& sample : eval.samples)
      for (auto& target : eval.targets)
        for (auto& combo : combos)
          for (std::int64_t t = 0; t < trials; ++t) {
            planned_case c;
            c.params.eval = eval.name;
            c.params.sample = sample.id;
            c.params.target = target.label;
            c.params.params = combo;
            c.params.trial = t;
            c.params.trials = trials;
            if (eval.seed) c.params.seed = *eval.seed + t;
            c.logical_key = logical_key(c.params);
            c.key = case_key(c.params);
            c.provider = target.provider;
            c.available = target.available;
            cases.push_back(std::move(c));
          }
  }
  return cases;
}

}  // namespace mira::plan
