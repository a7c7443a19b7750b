// Comparing two saved runs (see compare.hpp): the statistics, then the pairing of cases. The
// statistics are plain functions of counts, so their tests check them against hand computations.
#include <mira/compare/compare.hpp>
#include "plan/natural_order.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

namespace mira::compare {

namespace fs = std::filesystem;
using schedule::case_state;

double mcnemar_exact_p(std::size_t regressed, std::size_t fixed) {
  const std::size_t n = regressed + fixed;
  if (n == 0) return 1;
  const std::size_t k = std::min(regressed, fixed);
  // P(X <= k) for X ~ Bin(n, 1/2), each term C(n, i) / 2^n computed in logs: n may be in the
  // hundreds of thousands, where C(n, i) and 2^n overflow a double.
  const double log_half_n = static_cast<double>(n) * std::log(0.5);
  const double lg_n1 = std::lgamma(static_cast<double>(n) + 1);
  double tail = 0;
  for (std::size_t i = 0; i <= k; ++i)
    tail += std::exp(lg_n1 - std::lgamma(static_cast<double>(i) + 1) -
                     std::lgamma(static_cast<double>(n - i) + 1) + log_half_n);
  return std::min(1.0, 2 * tail);
}

double paired_table::base_rate() const {
  return n() ? static_cast<double>(both_pass + regressed) / static_cast<double>(n()) : 0;
}
double paired_table::candidate_rate() const {
  return n() ? static_cast<double>(both_pass + fixed) / static_cast<double>(n()) : 0;
}
double paired_table::delta() const {
  return candidate_rate() - base_rate();
}

double two_sided_z(double confidence) {
  // Bisection on the normal tail, erfc being exact to the last bits: 200 halvings of [0, 40]
  // are far below double resolution, and this is computed once per comparison.
  const double tail = (1 - confidence) / 2;
  double lo = 0, hi = 40;
  for (int i = 0; i < 200; ++i) {
    double mid = (lo + hi) / 2;
    if (0.5 * std::erfc(mid / std::sqrt(2.0)) > tail)
      lo = mid;
    else
      hi = mid;
  }
  return (lo + hi) / 2;
}

std::optional<aggregate::interval> paired_difference_interval(const paired_table& t,
                                                              double confidence) {
  if (t.n() == 0) return std::nullopt;
  // Newcombe (1998), method 10, for theta = p1 - p2 with p1 the base's rate and p2 the
  // candidate's; the result is negated at the end to give candidate - base. Cells as Newcombe's:
  // a both pass, b base only, c candidate only, d neither.
  const double a = static_cast<double>(t.both_pass), b = static_cast<double>(t.regressed),
               c = static_cast<double>(t.fixed), d = static_cast<double>(t.both_fail);
  const double n = a + b + c + d;
  const double z = two_sided_z(confidence);
  const double p1 = (a + b) / n, p2 = (a + c) / n;
  const auto w1 = aggregate::wilson(t.both_pass + t.regressed, t.n(), z);
  const auto w2 = aggregate::wilson(t.both_pass + t.fixed, t.n(), z);
  // The correlation estimate, with Newcombe's correction: a positive ad - bc is reduced by n/2
  // (to no less than 0); 0 when a margin is empty.
  double phi = 0;
  const double margins = (a + b) * (c + d) * (a + c) * (b + d);
  if (margins > 0) {
    double num = a * d - b * c;
    num = num > n / 2 ? num - n / 2 : (num < 0 ? num : 0);
    phi = num / std::sqrt(margins);
  }
  const double theta = p1 - p2;
  const double dl = std::sqrt(std::max(0.0, (p1 - w1.low) * (p1 - w1.low) -
                                                2 * phi * (p1 - w1.low) * (w2.high - p2) +
                                                (w2.high - p2) * (w2.high - p2)));
  const double du = std::sqrt(std::max(0.0, (p2 - w2.low) * (p2 - w2.low) -
                                                2 * phi * (p2 - w2.low) * (w1.high - p1) +
                                                (w1.high - p1) * (w1.high - p1)));
  const double low = std::max(-1.0, theta - dl), high = std::min(1.0, theta + du);
  return aggregate::interval{-high, -low};
}

std::size_t comparison::count(change c) const {
  return static_cast<std::size_t>(
      std::count_if(cases.begin(), cases.end(), [c](const case_pair& p) { return p.what == c; }));
}

namespace {

std::string state_name(const side& s) {
  return s.state ? std::string(to_string(*s.state)) : std::string("missing");
}

void add(group_delta& g, const case_pair& p) {
  switch (p.what) {
    case change::regressed:
      ++g.table.regressed;
      break;
    case change::fixed:
      ++g.table.fixed;
      break;
    case change::same:
      if (p.base.state == case_state::passed)
        ++g.table.both_pass;
      else
        ++g.table.both_fail;
      break;
    case change::unpaired:
      ++g.unpaired;
      break;
  }
}

void finish(group_delta& g, double alpha) {
  g.ci = paired_difference_interval(g.table, 1 - alpha);
  g.p_value = mcnemar_exact_p(g.table.regressed, g.table.fixed);
  g.significant_drop = g.table.regressed > g.table.fixed && g.p_value < alpha;
  g.significant_gain = g.table.fixed > g.table.regressed && g.p_value < alpha;
}

// Groups by `name_of`, in natural order of the names.
std::vector<group_delta> breakdown(const std::vector<case_pair>& cases, double alpha,
                                   const std::function<std::string(const case_pair&)>& name_of) {
  std::map<std::string, group_delta, decltype(&plan::natural_less)> groups(&plan::natural_less);
  for (auto& p : cases) {
    auto name = name_of(p);
    auto& g = groups[name];
    g.name = name;
    add(g, p);
  }
  std::vector<group_delta> out;
  for (auto& [name, g] : groups) {
    finish(g, alpha);
    out.push_back(std::move(g));
  }
  return out;
}

// The pairing key: the logical key and the trial, so a run of one trial (key without "#0") and a
// run of several pair their trial 0.
std::string pair_key(const plan::planned_case& c) {
  return std::string(c.logical_key()) + "#" + std::to_string(c.params.trial);
}

}  // namespace

tl::expected<comparison, compare_error> compare_runs(const store::loaded_run& base,
                                                     const store::loaded_run& candidate,
                                                     const options& o) {
  if (!(o.alpha > 0 && o.alpha < 1))
    return tl::unexpected(
        compare_error{"alpha must be between 0 and 1, got " + std::to_string(o.alpha)});
  if (base.meta.study != candidate.meta.study)
    return tl::unexpected(compare_error{"run " + base.meta.run_id + " is of study '" +
                                        base.meta.study + "' but run " + candidate.meta.run_id +
                                        " is of study '" + candidate.meta.study +
                                        "': only runs of one study can be compared"});
  comparison out;
  out.base_run = base.meta.run_id;
  out.candidate_run = candidate.meta.run_id;
  out.study = base.meta.study;
  out.opts = o;
  if (base.meta.study_version != candidate.meta.study_version)
    out.warnings.push_back("the study's version differs: " + base.meta.study_version + " (base), " +
                           candidate.meta.study_version + " (candidate)");
  for (auto& [eval, fp] : base.meta.fingerprints) {
    auto* other = candidate.meta.fingerprints.if_contains(eval);
    if (other && *other != fp)
      out.warnings.push_back("eval '" + std::string(eval) +
                             "' is defined differently in the two runs (its listing changed)");
  }
  for (auto* run : {&base, &candidate})
    if (!run->unreadable.empty())
      out.warnings.push_back(std::to_string(run->unreadable.size()) + " saved result(s) of run " +
                             run->meta.run_id + " cannot be read; their cases count as missing");

  std::map<std::string, std::size_t> index;  // pair key -> position in out.cases
  auto take = [&](const store::loaded_run& run, bool is_base) {
    auto [p, report] = run.as_report();
    for (std::size_t i = 0; i < p.cases.size(); ++i) {
      const auto c = p.cases[i];
      auto [it, inserted] = index.emplace(pair_key(c), out.cases.size());
      if (inserted) {
        case_pair pair;
        pair.key = c.key;
        pair.eval = c.params.eval;
        pair.sample = c.params.sample;
        pair.target = c.params.target;
        pair.params = c.params.params;
        pair.trial = c.params.trial;
        out.cases.push_back(std::move(pair));
      }
      auto& pair = out.cases[it->second];
      (is_base ? pair.base : pair.candidate).state = report.cases[i].state;
    }
  };
  take(base, true);
  take(candidate, false);

  for (auto& p : out.cases) {
    if (!p.base.state) {
      ++out.only_in_candidate;
      p.why = "only in the candidate";
    } else if (!p.candidate.state) {
      ++out.only_in_base;
      p.why = "only in the base";
    } else if (!p.base.scored() || !p.candidate.scored()) {
      ++out.not_scored;
      p.why = state_name(p.base) + " -> " + state_name(p.candidate);
    } else if (*p.base.state == *p.candidate.state) {
      p.what = change::same;
      continue;
    } else {
      p.what = *p.base.state == case_state::passed ? change::regressed : change::fixed;
      continue;
    }
    p.what = change::unpaired;
  }
  std::stable_sort(out.cases.begin(), out.cases.end(), [](const case_pair& x, const case_pair& y) {
    if (x.key != y.key) return plan::natural_less(x.key, y.key);
    return x.trial < y.trial;
  });

  out.overall.name = "overall";
  for (auto& p : out.cases) add(out.overall, p);
  finish(out.overall, o.alpha);
  out.per_eval = breakdown(out.cases, o.alpha, [](const case_pair& p) { return p.eval; });
  out.per_target = breakdown(out.cases, o.alpha, [](const case_pair& p) { return p.target; });
  if (!o.group_by.empty()) {
    const auto& key = o.group_by;
    if (key != "eval" && key != "target" && key != "sample" &&
        std::none_of(out.cases.begin(), out.cases.end(),
                     [&](const case_pair& p) { return p.params.count(key) > 0; }))
      return tl::unexpected(compare_error{
          "--group-by '" + key +
          "': no case of either run has an axis of that name (eval, target, sample or an axis)"});
    out.groups = breakdown(out.cases, o.alpha, [&](const case_pair& p) -> std::string {
      if (key == "eval") return p.eval;
      if (key == "target") return p.target;
      if (key == "sample") return p.sample;
      auto it = p.params.find(key);
      return it == p.params.end() ? "(unset)" : it->second;
    });
  }
  return out;
}

tl::expected<store::loaded_run, store::error> load(const fs::path& results_dir,
                                                   const std::string& run) {
  if (run.find('/') == std::string::npos) return store::load_run(results_dir, run);
  fs::path folder = fs::path(run).lexically_normal();
  if (folder.filename().empty()) folder = folder.parent_path();
  return store::load_run(folder.parent_path().empty() ? fs::path(".") : folder.parent_path(),
                         folder.filename().string());
}

}  // namespace mira::compare
