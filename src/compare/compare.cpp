// Comparing two saved runs (see compare.hpp): the statistics, then the pairing of cases. The
// statistics are plain functions of counts, so their tests check them against hand computations.
#include <mira/compare/compare.hpp>

#include <mira/protocol/codec.hpp>
#include <mira/store/records.hpp>
#include "plan/natural_order.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <string_view>

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

// Cases pair by the logical key and the trial, so a run of one trial (key without "#0") and a
// run of several pair their trial 0. Whether `p` is the pair of the cases with logical key
// `logical` and trial `trial`: its key is the logical key, or it with "#trial".
bool same_pair(const case_pair& p, std::string_view logical, std::int64_t trial) {
  std::string_view key = p.key;
  if (p.trial != trial || key.substr(0, logical.size()) != logical) return false;
  auto rest = key.substr(logical.size());
  return rest.empty() || rest == "#" + std::to_string(trial);
}

// Pairs cases by pairing key through a sorted table of (hash of the key, pair) rather than a map
// of the keys: 16 bytes a case, each key kept once, in its pair.
class pair_index {
 public:
  static std::uint64_t hash(std::string_view logical, std::int64_t trial) {
    return std::hash<std::string_view>{}(logical) ^
           (static_cast<std::uint64_t>(trial) * 0x9E3779B97F4A7C15ull);
  }
  void add(std::uint64_t hash, std::size_t pair) { rows_.emplace_back(hash, pair); }
  void sort() { std::sort(rows_.begin(), rows_.end()); }
  // The first pair (lowest position) of that logical key and trial among those added.
  std::optional<std::size_t> find(const std::vector<case_pair>& pairs, std::string_view logical,
                                  std::int64_t trial) const {
    const auto h = hash(logical, trial);
    auto it = std::lower_bound(rows_.begin(), rows_.end(), std::pair{h, std::size_t{0}});
    for (; it != rows_.end() && it->first == h; ++it)
      if (same_pair(pairs[it->second], logical, trial)) return it->second;
    return std::nullopt;
  }

 private:
  std::vector<std::pair<std::uint64_t, std::size_t>> rows_;
};

// One run as compare reads it: its meta, how many of its records cannot be read, and a visit of
// its cases (identity and state) in natural key order that returns how many more could not be.
struct run_side {
  const store::run_meta& meta;
  std::size_t size = 0;  // cases
  std::size_t unreadable = 0;
  std::function<std::size_t(const std::function<void(const plan::planned_case&, case_state)>&)>
      visit;
};

// What stop_of() says of a run whose last session has neither a stop reason nor an end.
constexpr std::string_view never_finished = "never finished";

// Why a run did not run to its end, or "" when it did: its last session's stop reason (or its
// summary's, which this host writes with it), else "never finished" when that session has no end
// time (its host was killed, or it is still running). A run of the Rust mira CLI has one session,
// made from its meta.json.
std::string stop_of(const store::run_meta& m) {
  if (!m.sessions.empty() && !m.sessions.back().stopped.empty()) return m.sessions.back().stopped;
  if (auto* stopped = m.summary ? m.summary->if_contains("stopped") : nullptr;
      stopped && stopped->is_object())
    if (auto* reason = stopped->as_object().if_contains("reason"); reason && reason->is_string())
      return std::string(reason->as_string());
  const auto& finished = m.sessions.empty() ? m.finished : m.sessions.back().finished;
  return finished.empty() ? std::string(never_finished) : "";
}

std::string number_text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

gate_check missing_rule(const comparison& c) {
  gate_check out{.rule = gate_rule::missing};
  std::string found;
  if (c.only_in_base > 0)
    found = std::to_string(c.only_in_base) + " baseline case(s) missing from the candidate";
  if (!c.candidate_stopped.empty())
    found += std::string(found.empty() ? "" : ", and ") +
             (c.candidate_stopped == never_finished
                  ? "the candidate run never finished: killed, or still running"
                  : "the candidate run stopped before its end: " + c.candidate_stopped);
  if (found.empty()) {
    out.detail = "every baseline case is in the candidate, which ran to its end";
  } else {
    out.fired = !c.opts.gate.allow_missing;
    out.detail =
        found + (out.fired ? " (--allow-missing to accept)" : ": accepted (--allow-missing)");
  }
  return out;
}

gate_check regressions_rule(const comparison& c) {
  const auto n = c.overall.table.regressed;
  const auto& max = c.opts.gate.max_regressions;
  gate_check out{.rule = gate_rule::regressions, .fired = max && n > *max};
  out.detail = std::to_string(n) + " regression(s) (passed -> failed or error)";
  if (!max)
    out.detail += ", no limit set (--max-regressions)";
  else
    out.detail += (out.fired ? ", more than --max-regressions " : ", at most --max-regressions ") +
                  std::to_string(*max);
  return out;
}

gate_check drop_rule(const comparison& c) {
  const auto& g = c.overall;
  gate_check out{.rule = gate_rule::significant_drop, .fired = g.significant_drop};
  const auto test = std::to_string(g.table.regressed) + " regressed against " +
                    std::to_string(g.table.fixed) +
                    " fixed, McNemar exact p = " + number_text(g.p_value);
  out.detail = (out.fired ? "the pass rate dropped significantly: " + test + ", below alpha "
                          : "no significant drop: " + test + ", alpha ") +
               number_text(c.opts.alpha);
  return out;
}

gate_check min_scored_rule(const comparison& c) {
  const auto n = c.overall.table.n();
  const auto min = std::max<std::size_t>(1, c.opts.gate.min_scored);
  gate_check out{.rule = gate_rule::min_scored, .fired = n < min};
  if (n == 0)
    out.detail = "no case was scored (passed or failed) in both runs: nothing was compared";
  else
    out.detail = std::to_string(n) + " case(s) scored in both runs, " +
                 (out.fired ? "fewer than --min-scored " : "at least ") + std::to_string(min);
  return out;
}

gate_verdict check_gate(const comparison& c) {
  return {{missing_rule(c), regressions_rule(c), drop_rule(c), min_scored_rule(c)}};
}

// A new pair for `c` at the end of `cases`, its names shared with the pair before it where they
// are the same.
case_pair& new_pair(std::vector<case_pair>& cases, const plan::planned_case& c) {
  case_pair pair;
  pair.key = c.key;
  const case_pair* before = cases.empty() ? nullptr : &cases.back();
  pair.eval = before && before->eval == c.params.eval ? before->eval : c.params.eval;
  pair.sample = c.params.sample;
  pair.target = before && before->target == c.params.target ? before->target : c.params.target;
  pair.params = before && before->params == c.params.params ? before->params : c.params.params;
  pair.trial = c.params.trial;
  cases.push_back(std::move(pair));
  return cases.back();
}

// A second case of a pairing key in one run (a run of one trial resumed with several has "k" and
// "k#0") is folded into the first one's pair, its state standing: the pairs from `from` on are
// one run's, indexed by `index`, each with its logical key's size.
void fold(std::vector<case_pair>& cases, std::size_t from, const pair_index& index,
          const std::vector<std::uint32_t>& logical_size, bool is_base, std::vector<bool>& folded) {
  folded.resize(cases.size(), false);
  for (std::size_t i = from; i < cases.size(); ++i) {
    auto& p = cases[i];
    auto logical = std::string_view(p.key).substr(0, logical_size[i - from]);
    auto first = index.find(cases, logical, p.trial);
    if (first && *first < i) {
      auto& into = cases[*first];
      (is_base ? into.base : into.candidate).state = (is_base ? p.base : p.candidate).state;
      folded[i] = true;
    }
  }
}

// The pairs of both runs' cases in out.cases: the base's first, then the candidate's that have
// no pair in the base, each part in natural key order. Returns where the candidate's own begin;
// warns of the records that cannot be read.
std::size_t pair_cases(const run_side& base, const run_side& candidate, comparison& out) {
  // Room for every case of both runs at once: a vector that grows by doubling would hold its old
  // and its new block together, and pages of the room never used are never touched.
  out.cases.reserve(base.size + candidate.size);
  pair_index base_index, candidate_index;
  std::vector<std::uint32_t> logical_size;  // of each new pair's key, until the folding
  std::vector<bool> folded;
  std::size_t unreadable[2] = {base.unreadable, candidate.unreadable};
  unreadable[0] += base.visit([&](const plan::planned_case& c, case_state state) {
    new_pair(out.cases, c).base.state = state;
    const auto logical = c.logical_key();
    base_index.add(pair_index::hash(logical, c.params.trial), out.cases.size() - 1);
    logical_size.push_back(static_cast<std::uint32_t>(logical.size()));
  });
  base_index.sort();
  fold(out.cases, 0, base_index, logical_size, true, folded);
  const std::size_t base_pairs = out.cases.size();
  logical_size.clear();
  // Two runs of one plan are in one order: the base's pair after the last one found is tried
  // first (an unfolded pair is the first of its pairing key, as the index finds it).
  std::size_t next = 0;
  unreadable[1] += candidate.visit([&](const plan::planned_case& c, case_state state) {
    const auto logical = c.logical_key();
    auto found =
        next < base_pairs && !folded[next] && same_pair(out.cases[next], logical, c.params.trial)
            ? std::optional(next)
            : base_index.find(out.cases, logical, c.params.trial);
    if (found) {
      out.cases[*found].candidate.state = state;
      next = *found + 1;
      return;
    }
    new_pair(out.cases, c).candidate.state = state;
    candidate_index.add(pair_index::hash(logical, c.params.trial), out.cases.size() - 1);
    logical_size.push_back(static_cast<std::uint32_t>(logical.size()));
  });
  candidate_index.sort();
  fold(out.cases, base_pairs, candidate_index, logical_size, false, folded);
  logical_size = {};
  const auto folded_base = static_cast<std::size_t>(
      std::count(folded.begin(), folded.begin() + static_cast<std::ptrdiff_t>(base_pairs), true));
  std::size_t kept = 0;
  for (std::size_t i = 0; i < out.cases.size(); ++i)
    if (!folded[i]) {
      if (kept != i) out.cases[kept] = std::move(out.cases[i]);
      ++kept;
    }
  out.cases.resize(kept);
  const store::run_meta* metas[2] = {&base.meta, &candidate.meta};
  for (int k = 0; k < 2; ++k)
    if (unreadable[k] > 0)
      out.warnings.push_back(std::to_string(unreadable[k]) + " saved result(s) of run " +
                             metas[k]->run_id + " cannot be read; their cases count as missing");
  return base_pairs - folded_base;
}

// What each pair says of the change, and the counts of the cases that cannot be compared.
void classify(comparison& out) {
  for (auto& p : out.cases) {
    if (!p.base.state) {
      ++out.only_in_candidate;
    } else if (!p.candidate.state) {
      ++out.only_in_base;
    } else if (p.base.state == case_state::passed && p.candidate.state == case_state::error) {
      // A case the candidate lost, whatever made it error: left unpaired, a run whose every
      // case errors would pass the gate. The reverse (error -> passed) stays unpaired, so a
      // base's errors never offset the candidate's regressions.
      p.what = change::regressed;
      continue;
    } else if (!p.base.scored() || !p.candidate.scored()) {
      ++out.not_scored;
    } else if (*p.base.state == *p.candidate.state) {
      p.what = change::same;
      continue;
    } else {
      p.what = *p.base.state == case_state::passed ? change::regressed : change::fixed;
      continue;
    }
    p.what = change::unpaired;
  }
}

// The base's pairs and then the candidate's own (from `middle_at`), each already in natural key
// order: merged, rather than sorted with a buffer as large as the comparison.
void sort_pairs(std::vector<case_pair>& cases, std::size_t middle_at) {
  auto in_order = [](const case_pair& x, const case_pair& y) {
    if (x.key != y.key) return plan::natural_less(x.key, y.key);
    return x.trial < y.trial;
  };
  const auto middle = cases.begin() + static_cast<std::ptrdiff_t>(middle_at);
  if (std::is_sorted(cases.begin(), middle, in_order) &&
      std::is_sorted(middle, cases.end(), in_order))
    std::inplace_merge(cases.begin(), middle, cases.end(), in_order);
  else
    std::stable_sort(cases.begin(), cases.end(), in_order);
}

// The statistics overall, per eval, per target and per value of --group-by.
std::optional<error> add_statistics(comparison& out, const options& o) {
  out.overall.name = "overall";
  for (auto& p : out.cases) add(out.overall, p);
  finish(out.overall, o.alpha);
  out.per_eval = breakdown(out.cases, o.alpha, [](const case_pair& p) { return p.eval.str(); });
  out.per_target = breakdown(out.cases, o.alpha, [](const case_pair& p) { return p.target.str(); });
  if (o.group_by.empty()) return std::nullopt;
  const auto& key = o.group_by;
  if (key != "eval" && key != "target" && key != "sample" &&
      std::none_of(out.cases.begin(), out.cases.end(),
                   [&](const case_pair& p) { return p.params.count(key) > 0; }))
    return error{make_error_code(errc::unknown_group),
                 "group_by '" + key +
                     "': no case of either run has an axis of that name (eval, target, sample or "
                     "an axis)"};
  out.groups = breakdown(out.cases, o.alpha, [&](const case_pair& p) -> std::string {
    if (key == "eval") return p.eval;
    if (key == "target") return p.target;
    if (key == "sample") return p.sample;
    auto it = p.params.find(key);
    return it == p.params.end() ? "(unset)" : it->second;
  });
  return std::nullopt;
}

tl::expected<comparison, error> compare_sides(const run_side& base, const run_side& candidate,
                                              const options& o) {
  if (!(o.alpha > 0 && o.alpha < 1))
    return tl::unexpected(error{make_error_code(errc::invalid_alpha),
                                "alpha must be between 0 and 1, got " + std::to_string(o.alpha)});
  if (base.meta.study != candidate.meta.study)
    return tl::unexpected(error{make_error_code(errc::other_study),
                                "run " + base.meta.run_id + " is of study '" + base.meta.study +
                                    "' but run " + candidate.meta.run_id + " is of study '" +
                                    candidate.meta.study +
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
  const auto candidate_own = pair_cases(base, candidate, out);
  classify(out);
  sort_pairs(out.cases, candidate_own);
  if (auto e = add_statistics(out, o)) return tl::unexpected(std::move(*e));
  out.candidate_stopped = stop_of(candidate.meta);
  out.gate = check_gate(out);
  return out;
}

}  // namespace

std::string_view to_string(gate_rule r) {
  switch (r) {
    case gate_rule::missing:
      return "missing";
    case gate_rule::regressions:
      return "regressions";
    case gate_rule::significant_drop:
      return "significant_drop";
    case gate_rule::min_scored:
      return "min_scored";
  }
  return {};
}

bool gate_verdict::passed() const {
  return std::none_of(checks.begin(), checks.end(), [](const gate_check& g) { return g.fired; });
}

std::string gate_verdict::summary() const {
  std::string fired;
  for (auto& g : checks)
    if (g.fired) fired += (fired.empty() ? "" : "; ") + g.detail;
  return fired.empty() ? "passed" : "failed: " + fired;
}

std::string case_pair::why() const {
  if (what == change::regressed && candidate.state == case_state::error) return "passed -> error";
  if (what != change::unpaired) return {};
  if (!base.state) return "only in the candidate";
  if (!candidate.state) return "only in the base";
  return state_name(base) + " -> " + state_name(candidate);
}

tl::expected<comparison, error> compare_runs(const store::loaded_run& base,
                                             const store::loaded_run& candidate, const options& o) {
  auto side_of = [](const store::loaded_run& run) {
    return run_side{run.meta, run.cases.size(), run.unreadable.size(), [&run](const auto& take) {
                      for (auto& c : run.cases)
                        take(store::planned_case_of(c), store::decode_case_record(c.record).state);
                      return std::size_t{0};
                    }};
  };
  return compare_sides(side_of(base), side_of(candidate), o);
}

tl::expected<comparison, error> compare_runs(const store::run_reader& base,
                                             const store::run_reader& candidate, const options& o) {
  auto side_of = [](const store::run_reader& run) {
    // A case's identity and state, as planned_case_of and decode_case_record read them, from
    // its line: a compact record is not parsed into a DOM, nor its result decoded.
    return run_side{run.meta(), run.size(), run.unreadable().size(), [&run](const auto& take) {
                      plan::planned_case c;
                      auto late = run.visit_lines([&](std::size_t, std::string_view key,
                                                      std::string_view line, case_state state) {
                        auto params = protocol::decode_run_params_text(line);
                        c.params = params ? plan::case_params(*params) : plan::case_params{};
                        c.key.assign(key);
                        take(c, state);
                        return true;
                      });
                      return late.size();
                    }};
  };
  return compare_sides(side_of(base), side_of(candidate), o);
}

namespace {

// A run argument: an id in `results_dir`, or a path to a run folder (with a '/').
std::pair<fs::path, std::string> where(const fs::path& results_dir, const std::string& run) {
  if (run.find('/') == std::string::npos) return {results_dir, run};
  fs::path folder = fs::path(run).lexically_normal();
  if (folder.filename().empty()) folder = folder.parent_path();
  return {folder.parent_path().empty() ? fs::path(".") : folder.parent_path(),
          folder.filename().string()};
}

}  // namespace

tl::expected<store::run_reader, store::error> open(const fs::path& results_dir,
                                                   const std::string& run) {
  auto [dir, id] = where(results_dir, run);
  return store::run_reader::open(dir, id);
}

tl::expected<store::loaded_run, store::error> load(const fs::path& results_dir,
                                                   const std::string& run) {
  auto [dir, id] = where(results_dir, run);
  return store::load_run(dir, id);
}

}  // namespace mira::compare
