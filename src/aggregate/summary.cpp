// Aggregation (see summary.hpp).
#include <mira/aggregate/summary.hpp>

#include <mira/protocol/json_text.hpp>
#include "plan/natural_order.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <unordered_map>

namespace mira::aggregate {

namespace json = boost::json;
using schedule::case_state;

std::optional<double> pass_at_k(std::size_t n, std::size_t c, std::size_t k) {
  if (n == 0 || k == 0 || k > n) return std::nullopt;
  c = std::min(c, n);
  if (n - c < k) return 1.0;
  // 1 - C(n-c, k) / C(n, k), as a product for numerical stability.
  double fail = 1.0;
  for (std::size_t i = n - c + 1; i <= n; ++i)
    fail *= 1.0 - static_cast<double>(k) / static_cast<double>(i);
  return 1.0 - fail;
}

interval wilson(std::size_t passed, std::size_t n, double z) {
  if (n == 0) return {0, 0};
  double nn = static_cast<double>(n);
  double p = static_cast<double>(passed) / nn;
  double z2 = z * z;
  double centre = (p + z2 / (2 * nn)) / (1 + z2 / nn);
  double half = z * std::sqrt(p * (1 - p) / nn + z2 / (4 * nn * nn)) / (1 + z2 / nn);
  return {std::max(0.0, centre - half), std::min(1.0, centre + half)};
}

namespace {

bool scored(case_state s) {
  return s == case_state::passed || s == case_state::failed || s == case_state::error;
}

std::string display(const boost::json::value& v) {
  if (auto* s = v.if_string()) return std::string(*s);
  return protocol::to_json_text(v);
}

// Sample and target metadata of the listing, by eval, for group-by lookups.
struct metadata_index {
  std::unordered_map<std::string, const boost::json::object*> samples, targets;
  static std::string key(std::string_view eval, std::string_view name) {
    std::string k(eval);
    k += '\0';
    k += name;
    return k;
  }
  explicit metadata_index(const protocol::list_result* listing) {
    if (!listing) return;
    for (auto& e : listing->evals) {
      for (std::size_t i = 0; i < e.samples.size(); ++i)
        samples.emplace(key(e.name, e.samples.id(i)), &e.samples.metadata(i));
      for (auto& t : e.targets) targets.emplace(key(e.name, t.label), &t.metadata);
    }
  }
  const boost::json::value* find(
      const std::unordered_map<std::string, const boost::json::object*>& m, std::string_view eval,
      std::string_view name, const std::string& field) const {
    auto it = m.find(key(eval, name));
    return it == m.end() ? nullptr : it->second->if_contains(field);
  }
};

void count(rate& r, case_state s) {
  if (!scored(s)) return;
  ++r.scored;
  if (s == case_state::passed) ++r.passed;
}

// A latency kept as a float read back as the double its shortest spelling names, so a report
// says 0.0003 and not 0.00030000001424923539.
double as_double(double v) {
  return v;
}
double as_double(float v) {
  char text[32];
  auto end = std::to_chars(text, text + sizeof text, v).ptr;
  return std::strtod(std::string(text, end).c_str(), nullptr);
}

template <class T>
double percentile_of_sorted(const std::vector<T>& values, double p) {
  if (values.empty()) return 0;
  double rank = p / 100.0 * static_cast<double>(values.size() - 1);
  auto lo = static_cast<std::size_t>(std::floor(rank));
  auto hi = std::min(lo + 1, values.size() - 1);
  double a = as_double(values[lo]), b = as_double(values[hi]);
  return a + (b - a) * (rank - static_cast<double>(lo));
}

constexpr std::uint8_t not_added = 0xff;

}  // namespace

double percentile(std::vector<double> values, double p) {
  std::sort(values.begin(), values.end());
  return percentile_of_sorted(values, p);
}

struct accumulator::state {
  static constexpr auto none = std::numeric_limits<std::size_t>::max();
  const plan::plan& p;
  std::string group_by;
  metadata_index idx;
  // Evals and targets by number: a plan row's number maps to its name's. Rows a growing plan
  // gains are mapped when a case of theirs is added.
  std::vector<std::uint32_t> eval_of_row, target_of_row;
  std::unordered_map<std::string, std::uint32_t> eval_ids, target_ids;
  std::vector<std::string> eval_names, target_names;  // by number
  std::vector<std::size_t> eval_first, target_first;  // first plan index: the order shown
  std::vector<rate> per_eval, per_target;
  std::vector<std::vector<rate>> cells;  // [eval][target]
  std::vector<std::vector<bool>> cell_planned;
  std::vector<std::vector<float>> latencies, ttfts;  // by target: exact percentiles at 4 bytes
  std::vector<bool> target_has_sums;
  std::vector<target_totals> target_sums;
  std::map<std::string, rate> groups;
  rate unset;
  std::map<std::string, std::pair<double, std::size_t>> metrics;
  summary out;
  // Only once a case has trials: each case's state and score, for pass@k and spread.
  std::vector<std::uint8_t> states;
  std::vector<double> scores;

  state(const plan::plan& plan, const protocol::list_result* listing, std::string by)
      : p(plan), group_by(std::move(by)), idx(group_by.empty() ? nullptr : listing) {
    const auto& cases = p.cases;
    map_rows();
    // One pass over the plan: the order of evals and targets, the cases per target (so each
    // target's latencies are allocated once), and whether any case has trials.
    std::vector<std::size_t> per_target_cases(target_names.size());
    bool trials = false;
    for (std::size_t i = 0; i < cases.size(); ++i) {
      const auto t = planned(i);
      ++per_target_cases[t];
      trials = trials || cases.trials(i) > 1;
    }
    for (std::size_t t = 0; t < target_names.size(); ++t) latencies[t].reserve(per_target_cases[t]);
    if (trials) {
      states.assign(cases.size(), not_added);
      scores.assign(cases.size(), 0.0);
    }
  }

  void map_rows() {
    const auto& cases = p.cases;
    for (auto r = static_cast<std::uint32_t>(eval_of_row.size()); r < cases.eval_rows(); ++r) {
      auto [it, fresh] = eval_ids.try_emplace(cases.eval_name_of(r).str(),
                                              static_cast<std::uint32_t>(eval_names.size()));
      if (fresh) {
        eval_names.push_back(it->first);
        eval_first.push_back(none);
        per_eval.emplace_back();
        cells.emplace_back(target_names.size());
        cell_planned.emplace_back(target_names.size(), false);
      }
      eval_of_row.push_back(it->second);
    }
    for (auto r = static_cast<std::uint32_t>(target_of_row.size()); r < cases.target_rows(); ++r) {
      auto [it, fresh] = target_ids.try_emplace(cases.target_name_of(r).str(),
                                                static_cast<std::uint32_t>(target_names.size()));
      if (fresh) {
        target_names.push_back(it->first);
        target_first.push_back(none);
        per_target.emplace_back();
        latencies.emplace_back();
        ttfts.emplace_back();
        target_has_sums.push_back(false);
        target_sums.emplace_back();
        for (auto& row : cells) row.resize(target_names.size());
        for (auto& row : cell_planned) row.resize(target_names.size(), false);
      }
      target_of_row.push_back(it->second);
    }
  }

  // Plan case i's eval and target take their place in the summary; returns its target's number.
  std::uint32_t planned(std::size_t i) {
    const auto& cases = p.cases;
    if (cases.eval_row(i) >= eval_of_row.size() || cases.target_row(i) >= target_of_row.size())
      map_rows();
    const auto e = eval_of_row[cases.eval_row(i)], t = target_of_row[cases.target_row(i)];
    eval_first[e] = std::min(eval_first[e], i);
    target_first[t] = std::min(target_first[t], i);
    cell_planned[e][t] = true;
    return t;
  }

  std::optional<std::string> group_value(std::size_t i,
                                         const std::optional<protocol::run_result>& result) const {
    const auto& cases = p.cases;
    const auto& axes = cases.axes(i);
    if (auto it = axes.find(group_by); it != axes.end()) return it->second;
    const std::string& eval = cases.eval(i);
    if (auto* v = idx.find(idx.samples, eval, cases.sample(i), group_by)) return display(*v);
    if (auto* v = idx.find(idx.targets, eval, cases.target(i).str(), group_by)) return display(*v);
    if (result) {
      auto metadata = result->transcript.metadata.get();
      if (auto* v = metadata.if_contains(group_by)) return display(*v);
    }
    return std::nullopt;
  }
};

accumulator::accumulator(const plan::plan& p, const protocol::list_result* listing,
                         std::string group_by)
    : s_(std::make_unique<state>(p, listing, std::move(group_by))) {}
accumulator::accumulator(accumulator&&) noexcept = default;
accumulator& accumulator::operator=(accumulator&&) noexcept = default;
accumulator::~accumulator() = default;

void accumulator::add(std::size_t i, const schedule::case_record& r) {
  auto& st = *s_;
  auto& out = st.out;
  const auto& cases = st.p.cases;
  // A plan read back a case at a time grows as its cases are added.
  const auto t = st.planned(i);
  const auto e = st.eval_of_row[cases.eval_row(i)];
  // Decoded once per case, from its text: the summary's only decode of it.
  const auto result = r.result();
  ++out.counts[static_cast<std::size_t>(r.state)];
  count(out.overall, r.state);
  count(st.per_eval[e], r.state);
  count(st.per_target[t], r.state);
  count(st.cells[e][t], r.state);
  if (!st.group_by.empty()) {
    auto v = st.group_value(i, result);
    count(v ? st.groups[*v] : st.unset, r.state);
  }
  if (cases.trials(i) > 1 && st.states.size() <= i) {
    st.states.resize(std::max(i + 1, cases.size()), not_added);
    st.scores.resize(st.states.size(), 0.0);
  }
  if (i < st.states.size()) {
    st.states[i] = static_cast<std::uint8_t>(r.state);
    st.scores[i] = result ? result->aggregate : 0.0;
  }
  out.total.retries += r.retried.size();
  for (auto& a : r.retried) ++out.total.retry_causes[a.cause];
  // To the microsecond, as a record keeps it: the summary made again from a run's records is
  // the one the run made.
  if (r.attempts > 0 && r.state != case_state::cancelled)
    st.latencies[t].push_back(static_cast<float>(std::round(r.latency_seconds * 1e6) / 1e6));
  if (!result) return;
  st.target_has_sums[t] = true;
  auto& sums = st.target_sums[t];
  auto& tr = result->transcript;
  sums.cost_usd += tr.usage.cost_usd;
  sums.tokens += tr.usage.input_tokens + tr.usage.output_tokens;
  if (r.state == case_state::skipped) return;
  out.total.input_tokens += tr.usage.input_tokens;
  out.total.output_tokens += tr.usage.output_tokens;
  out.total.cache_read_tokens += tr.usage.cache_read_tokens;
  out.total.reasoning_tokens += tr.usage.reasoning_tokens;
  out.total.cost_usd += tr.usage.cost_usd;
  out.total.tool_calls += tr.tool_calls_count;
  if (tr.timing.duration_ms) out.total.duration_ms += *tr.timing.duration_ms;
  if (tr.timing.time_to_first_token_ms)
    st.ttfts[t].push_back(static_cast<float>(*tr.timing.time_to_first_token_ms));
  for (auto& [k, v] : tr.metrics) {
    st.metrics[k].first += v;
    ++st.metrics[k].second;
  }
}

namespace {

// The trials of each logical case, from the per-case states and scores: runs of consecutive
// plan cases of one logical case, joined with any other run of the same one (a plan cut and
// put together again may split them), in the order of their first case.
std::vector<trial_summary> trials_of(const plan::case_list& cases,
                                     const std::vector<std::uint8_t>& states,
                                     const std::vector<double>& scores) {
  struct run {
    std::size_t first, end;
    std::uint64_t hash;
  };
  std::vector<run> runs;
  for (std::size_t i = 0; i < cases.size(); ++i) {
    if (cases.trials(i) <= 1) continue;
    if (!runs.empty() && runs.back().end == i && cases.same_logical_case(runs.back().first, i)) {
      runs.back().end = i + 1;
      continue;
    }
    runs.push_back({i, i + 1, std::hash<std::string>{}(cases.logical_key(i))});
  }
  // Runs of one logical case side by side: equal hashes, then equal keys.
  std::vector<std::uint32_t> order(runs.size());
  for (std::size_t n = 0; n < order.size(); ++n) order[n] = static_cast<std::uint32_t>(n);
  std::sort(order.begin(), order.end(), [&](auto a, auto b) {
    return runs[a].hash != runs[b].hash ? runs[a].hash < runs[b].hash : a < b;
  });
  std::vector<std::vector<std::uint32_t>> joined;  // runs of one logical case, first run first
  for (std::size_t n = 0; n < order.size();) {
    std::size_t m = n + 1;
    while (m < order.size() && runs[order[m]].hash == runs[order[n]].hash) ++m;
    if (m == n + 1) {
      joined.push_back({order[n]});
    } else {
      // The same hash: grouped by key (rare beyond one logical case).
      std::vector<std::pair<std::string, std::uint32_t>> keyed;
      for (auto k = n; k < m; ++k)
        keyed.emplace_back(cases.logical_key(runs[order[k]].first), order[k]);
      std::stable_sort(keyed.begin(), keyed.end(),
                       [](auto& a, auto& b) { return a.first < b.first; });
      for (std::size_t k = 0; k < keyed.size(); ++k) {
        if (k == 0 || keyed[k].first != keyed[k - 1].first) joined.emplace_back();
        joined.back().push_back(keyed[k].second);
      }
      for (auto& j : joined) std::sort(j.begin(), j.end());
    }
    n = m;
  }
  std::sort(joined.begin(), joined.end(), [](auto& a, auto& b) { return a.front() < b.front(); });
  std::vector<trial_summary> out;
  out.reserve(joined.size());
  std::vector<double> xs;
  for (auto& group : joined) {
    trial_summary t;
    const auto first = runs[group.front()].first;
    t.logical_key = cases.logical_key(first);
    t.trials = static_cast<std::size_t>(cases.trials(first));
    xs.clear();
    for (auto r : group)
      for (auto i = runs[r].first; i < runs[r].end; ++i) {
        if (states[i] == not_added) continue;
        const auto st = static_cast<case_state>(states[i]);
        if (!scored(st)) continue;
        ++t.scored;
        if (st == case_state::passed) ++t.passed;
        xs.push_back(scores[i]);
      }
    for (std::size_t k = 1; k <= t.trials; ++k)
      t.pass_at.push_back(pass_at_k(t.scored, t.passed, k));
    if (!xs.empty()) {
      double sum = 0;
      for (double x : xs) sum += x;
      t.mean = sum / static_cast<double>(xs.size());
      if (xs.size() > 1) {
        double sq = 0;
        for (double x : xs) sq += (x - t.mean) * (x - t.mean);
        t.stddev = std::sqrt(sq / static_cast<double>(xs.size() - 1));
      }
    }
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace

summary accumulator::finish() {
  auto& st = *s_;
  summary out = std::move(st.out);
  out.group_by = st.group_by;
  const auto nt = st.target_names.size();
  std::vector<std::uint32_t> evals(st.eval_names.size()), targets(nt);
  for (std::uint32_t n = 0; n < evals.size(); ++n) evals[n] = n;
  for (std::uint32_t n = 0; n < targets.size(); ++n) targets[n] = n;
  std::sort(evals.begin(), evals.end(),
            [&](auto a, auto b) { return st.eval_first[a] < st.eval_first[b]; });
  std::sort(targets.begin(), targets.end(),
            [&](auto a, auto b) { return st.target_first[a] < st.target_first[b]; });
  constexpr auto none = state::none;
  for (auto e : evals) {
    if (st.eval_first[e] == none) continue;  // a row no kept case has
    out.eval_order.push_back(st.eval_names[e]);
    out.per_eval[st.eval_names[e]] = st.per_eval[e];
    for (std::size_t t = 0; t < nt; ++t)
      if (st.cell_planned[e][t])
        out.matrix[{st.eval_names[e], st.target_names[t]}] = st.cells[e][t];
  }
  for (auto t : targets) {
    if (st.target_first[t] == none) continue;
    const auto& name = st.target_names[t];
    out.target_order.push_back(name);
    out.per_target[name] = st.per_target[t];
    if (st.target_has_sums[t]) out.totals_by_target[name] = st.target_sums[t];
    // Sorted in place, once: a copy per percentile would be 4 bytes per case each.
    auto& xs = st.latencies[t];
    if (!xs.empty()) {
      std::sort(xs.begin(), xs.end());
      auto& l = out.latency_by_target[name];
      l.n = xs.size();
      l.min = as_double(xs.front());
      l.p25 = percentile_of_sorted(xs, 25);
      l.p50 = percentile_of_sorted(xs, 50);
      l.p75 = percentile_of_sorted(xs, 75);
      l.p95 = percentile_of_sorted(xs, 95);
      l.p99 = percentile_of_sorted(xs, 99);
      l.max = as_double(xs.back());
      std::vector<float>().swap(xs);
    }
    auto& ts = st.ttfts[t];
    if (!ts.empty()) {
      std::sort(ts.begin(), ts.end());
      auto& l = out.latency_by_target[name];
      l.ttft_n = ts.size();
      l.ttft_p50_ms = percentile_of_sorted(ts, 50);
      l.ttft_p95_ms = percentile_of_sorted(ts, 95);
    }
  }
  if (!st.states.empty()) {
    st.states.resize(st.p.cases.size(), not_added);
    st.scores.resize(st.p.cases.size(), 0.0);
    out.trials = trials_of(st.p.cases, st.states, st.scores);
  }
  for (auto& [value, r] : st.groups) out.groups.emplace_back(value, r);
  std::sort(out.groups.begin(), out.groups.end(),
            [](auto& a, auto& b) { return plan::natural_less(a.first, b.first); });
  if (st.unset.scored > 0) out.groups.emplace_back("(unset)", st.unset);
  for (auto& [k, sn] : st.metrics)
    out.total.metric_means[k] = sn.first / static_cast<double>(sn.second);
  return out;
}

summary summarize(const plan::plan& p, const std::vector<schedule::case_record>& cases,
                  const protocol::list_result* listing, std::string group_by) {
  accumulator a(p, listing, std::move(group_by));
  for (std::size_t i = 0; i < p.cases.size() && i < cases.size(); ++i) a.add(i, cases[i]);
  return a.finish();
}

namespace {

// A rate of nothing scored is no rate: null, as compare writes it, not a 0 a reader would take
// for "every case failed".
json::object rate_json(const aggregate::rate& r) {
  auto ci = r.ci();
  return {{"passed", r.passed},
          {"scored", r.scored},
          {"rate", r.scored ? json::value(r.value()) : json::value(nullptr)},
          {"ci95", r.scored ? json::value(json::array{ci.low, ci.high}) : json::value(nullptr)}};
}

// Per target: its latencies (percentiles, the box, time to first token).
json::object latency_json(const summary& s) {
  json::object latency;
  for (auto& [target, l] : s.latency_by_target) {
    json::object lo{{"n", l.n},       {"p50_s", l.p50}, {"p95_s", l.p95}, {"p99_s", l.p99},
                    {"min_s", l.min}, {"p25_s", l.p25}, {"p75_s", l.p75}, {"max_s", l.max}};
    if (l.ttft_n) {
      lo["ttft_n"] = l.ttft_n;
      lo["ttft_p50_ms"] = l.ttft_p50_ms;
      lo["ttft_p95_ms"] = l.ttft_p95_ms;
    }
    latency[target] = std::move(lo);
  }
  return latency;
}

}  // namespace

json::object summary_json(const summary& s, const schedule::run_report& report) {
  json::object counts;
  for (auto st : schedule::all_case_states) counts[to_string(st)] = s.count(st);
  json::object matrix;
  for (auto& [key, r] : s.matrix) {
    auto& row = matrix[key.first];
    if (!row.is_object()) row = json::object{};
    row.as_object()[key.second] = rate_json(r);
  }
  json::array trials;
  for (auto& t : s.trials) {
    json::object pass_at;
    for (std::size_t k = 0; k < t.pass_at.size(); ++k)
      pass_at[std::to_string(k + 1)] =
          t.pass_at[k] ? json::value(*t.pass_at[k]) : json::value(nullptr);
    trials.push_back(json::object{{"key", t.logical_key},
                                  {"trials", t.trials},
                                  {"scored", t.scored},
                                  {"passed", t.passed},
                                  {"pass_rate", t.pass_rate().value()},
                                  {"pass_at_k", std::move(pass_at)},
                                  {"mean", t.mean},
                                  {"stddev", t.stddev}});
  }
  json::object groups;
  for (auto& [v, r] : s.groups) groups[v] = rate_json(r);
  json::object by_target;
  for (auto& [target, tt] : s.totals_by_target)
    by_target[target] = json::object{{"cost_usd", tt.cost_usd}, {"tokens", tt.tokens}};
  auto& t = s.total;
  json::object causes;
  for (auto& [c, n] : t.retry_causes) causes[c] = n;
  json::object metrics;
  for (auto& [k, v] : t.metric_means) metrics[k] = v;
  // In the plan's order (first seen), which summary_from_json reads back as the order.
  auto in_order = [](const std::vector<std::string>& order, const std::map<std::string, rate>& m) {
    json::object out;
    for (auto& name : order)
      if (auto it = m.find(name); it != m.end()) out[name] = rate_json(it->second);
    for (auto& [name, r] : m)
      if (!out.contains(name)) out[name] = rate_json(r);
    return out;
  };
  auto per_eval = in_order(s.eval_order, s.per_eval);
  auto per_target = in_order(s.target_order, s.per_target);
  json::object out{
      {"counts", std::move(counts)},
      {"overall", rate_json(s.overall)},
      {"per_eval", std::move(per_eval)},
      {"per_target", std::move(per_target)},
      {"matrix", std::move(matrix)},
      {"trials", std::move(trials)},
      {"totals", json::object{{"input_tokens", t.input_tokens},
                              {"output_tokens", t.output_tokens},
                              {"cache_read_tokens", t.cache_read_tokens},
                              {"reasoning_tokens", t.reasoning_tokens},
                              {"cost_usd", t.cost_usd},
                              {"tool_calls", t.tool_calls},
                              {"duration_ms", t.duration_ms},
                              {"retries", t.retries},
                              {"retry_causes", std::move(causes)},
                              {"metric_means", std::move(metrics)}}},
      {"latency", latency_json(s)},
      {"totals_by_target", std::move(by_target)},
      {"seconds", report.seconds},
      // Planned cases without a verdict (the cancelled ones): 0 for a run that finished.
      {"unfinished", s.count(schedule::case_state::cancelled)},
  };
  if (!report.run_id.empty()) out["run_id"] = report.run_id;
  if (!report.study.empty()) out["study"] = report.study;
  if (!report.started.empty()) out["started"] = report.started;
  if (!s.group_by.empty())
    out["groups"] = json::object{{"by", s.group_by}, {"values", std::move(groups)}};
  if (report.stopped != schedule::stop_reason::none)
    out["stopped"] =
        json::object{{"reason", to_string(report.stopped)}, {"message", report.stop_message}};
  return out;
}

namespace {

// Reading a summary's JSON back: each member where summary_json writes it, or why not.
struct summary_reader {
  std::string problem;

  const json::value* at(const json::object& o, std::string_view name, std::string_view where) {
    auto* v = o.if_contains(name);
    if (!v && problem.empty())
      problem = std::string(where) + "." + std::string(name) + " is missing";
    return v;
  }
  const json::object* object(const json::object& o, std::string_view name, std::string_view where) {
    auto* v = at(o, name, where);
    if (v && !v->is_object() && problem.empty())
      problem = std::string(where) + "." + std::string(name) + " is not an object";
    return v && v->is_object() ? &v->get_object() : nullptr;
  }
  double number(const json::object& o, std::string_view name, std::string_view where) {
    auto* v = at(o, name, where);
    if (v && v->is_number()) return v->to_number<double>();
    if (v && problem.empty())
      problem = std::string(where) + "." + std::string(name) + " is not a number";
    return 0;
  }
  std::size_t count(const json::object& o, std::string_view name, std::string_view where) {
    const double d = number(o, name, where);
    if (!(d >= 0 && d < 9.0e15) || d != static_cast<double>(static_cast<std::size_t>(d))) {
      if (problem.empty())
        problem = std::string(where) + "." + std::string(name) + " is not a count";
      return 0;
    }
    return static_cast<std::size_t>(d);
  }
  rate rate_of(const json::value& v, std::string_view where) {
    if (!v.is_object()) {
      if (problem.empty()) problem = std::string(where) + " is not a rate";
      return {};
    }
    rate r{count(v.get_object(), "passed", where), count(v.get_object(), "scored", where)};
    if (r.passed > r.scored && problem.empty()) problem = std::string(where) + ": passed > scored";
    return r;
  }
  // An object of rates, in its order.
  void rates(const json::object& o, std::string_view name, std::map<std::string, rate>& out,
             std::vector<std::string>* order) {
    auto* m = object(o, name, "summary");
    if (!m) return;
    for (auto& [k, v] : *m) {
      out[std::string(k)] = rate_of(v, std::string(name) + "." + std::string(k));
      if (order) order->emplace_back(k);
    }
  }
};

void read_trials(summary_reader& in, const json::object& o, summary& s) {
  auto* v = in.at(o, "trials", "summary");
  if (!v) return;
  if (!v->is_array()) {
    if (in.problem.empty()) in.problem = "summary.trials is not an array";
    return;
  }
  for (auto& item : v->get_array()) {
    if (!item.is_object()) {
      if (in.problem.empty()) in.problem = "summary.trials holds a non-object";
      return;
    }
    auto& t = item.get_object();
    trial_summary ts;
    auto* key = in.at(t, "key", "summary.trials[]");
    if (key && key->is_string()) ts.logical_key = key->get_string();
    ts.trials = in.count(t, "trials", "summary.trials[]");
    ts.scored = in.count(t, "scored", "summary.trials[]");
    ts.passed = in.count(t, "passed", "summary.trials[]");
    ts.mean = in.number(t, "mean", "summary.trials[]");
    ts.stddev = in.number(t, "stddev", "summary.trials[]");
    if (auto* pk = in.object(t, "pass_at_k", "summary.trials[]")) {
      for (std::size_t k = 1; k <= ts.trials && k <= pk->size(); ++k) {
        auto* p = pk->if_contains(std::to_string(k));
        ts.pass_at.push_back(p && p->is_number() ? std::optional(p->to_number<double>())
                                                 : std::nullopt);
      }
    }
    s.trials.push_back(std::move(ts));
  }
}

void read_totals(summary_reader& in, const json::object& o, summary& s) {
  auto* t = in.object(o, "totals", "summary");
  if (!t) return;
  auto integer = [&](std::string_view name) {
    return static_cast<std::int64_t>(in.number(*t, name, "summary.totals"));
  };
  s.total.input_tokens = integer("input_tokens");
  s.total.output_tokens = integer("output_tokens");
  s.total.cache_read_tokens = integer("cache_read_tokens");
  s.total.reasoning_tokens = integer("reasoning_tokens");
  s.total.cost_usd = in.number(*t, "cost_usd", "summary.totals");
  s.total.tool_calls = integer("tool_calls");
  s.total.duration_ms = integer("duration_ms");
  s.total.retries = in.count(*t, "retries", "summary.totals");
  if (auto* causes = in.object(*t, "retry_causes", "summary.totals"))
    for (auto& [k, v] : *causes)
      s.total.retry_causes[std::string(k)] = in.count(*causes, k, "summary.totals.retry_causes");
  if (auto* metrics = in.object(*t, "metric_means", "summary.totals"))
    for (auto& [k, v] : *metrics)
      s.total.metric_means[std::string(k)] = in.number(*metrics, k, "summary.totals.metric_means");
}

void read_latency(summary_reader& in, const json::object& o, summary& s) {
  auto* lat = in.object(o, "latency", "summary");
  if (!lat) return;
  for (auto& [target, v] : *lat) {
    if (!v.is_object()) {
      if (in.problem.empty())
        in.problem = "summary.latency." + std::string(target) + " is not an object";
      return;
    }
    auto& lo = v.get_object();
    auto& l = s.latency_by_target[std::string(target)];
    const std::string where = "summary.latency";
    l.n = in.count(lo, "n", where);
    l.p50 = in.number(lo, "p50_s", where);
    l.p95 = in.number(lo, "p95_s", where);
    l.p99 = in.number(lo, "p99_s", where);
    // The box only since summaries kept it: an older one draws none.
    auto box = [&](std::string_view name) {
      return lo.contains(name) ? in.number(lo, name, where) : 0.0;
    };
    l.min = box("min_s");
    l.p25 = box("p25_s");
    l.p75 = box("p75_s");
    l.max = box("max_s");
    if (lo.contains("ttft_n")) {
      l.ttft_n = in.count(lo, "ttft_n", where);
      l.ttft_p50_ms = in.number(lo, "ttft_p50_ms", where);
      l.ttft_p95_ms = in.number(lo, "ttft_p95_ms", where);
    }
  }
}

}  // namespace

tl::expected<summary, std::string> summary_from_json(const json::object& o) {
  summary_reader in;
  summary s;
  if (auto* counts = in.object(o, "counts", "summary"))
    for (auto st : schedule::all_case_states)
      s.counts[static_cast<std::size_t>(st)] = in.count(*counts, to_string(st), "summary.counts");
  if (auto* overall = in.at(o, "overall", "summary")) s.overall = in.rate_of(*overall, "overall");
  in.rates(o, "per_eval", s.per_eval, &s.eval_order);
  in.rates(o, "per_target", s.per_target, &s.target_order);
  if (auto* m = in.object(o, "matrix", "summary"))
    for (auto& [eval, row] : *m) {
      if (!row.is_object()) {
        if (in.problem.empty())
          in.problem = "summary.matrix." + std::string(eval) + " is not an object";
        break;
      }
      for (auto& [target, r] : row.get_object())
        s.matrix[{std::string(eval), std::string(target)}] =
            in.rate_of(r, "matrix." + std::string(eval) + "." + std::string(target));
    }
  read_trials(in, o, s);
  if (auto* g = o.if_contains("groups"); g && g->is_object()) {
    auto& groups = g->get_object();
    if (auto* by = groups.if_contains("by"); by && by->is_string()) s.group_by = by->get_string();
    if (auto* values = in.object(groups, "values", "summary.groups"))
      for (auto& [v, r] : *values)
        s.groups.emplace_back(std::string(v), in.rate_of(r, "groups.values." + std::string(v)));
  }
  read_totals(in, o, s);
  read_latency(in, o, s);
  // Kept since summaries say it: an older summary has no per-target totals.
  if (auto* bt = o.if_contains("totals_by_target"); bt && bt->is_object())
    for (auto& [target, v] : bt->get_object())
      if (v.is_object()) {
        auto& tt = s.totals_by_target[std::string(target)];
        tt.cost_usd = in.number(v.get_object(), "cost_usd", "summary.totals_by_target");
        tt.tokens = static_cast<std::int64_t>(
            in.number(v.get_object(), "tokens", "summary.totals_by_target"));
      }
  if (!in.problem.empty()) return tl::unexpected(std::move(in.problem));
  return s;
}

namespace {

// `order` rearranged as `saved`'s members are: the names it lists first, in its order, then the
// others as they were.
void order_by(std::vector<std::string>& order, const json::value* saved) {
  if (!saved || !saved->is_object()) return;
  std::vector<std::string> out;
  out.reserve(order.size());
  for (auto& [name, v] : saved->get_object())
    if (std::find(order.begin(), order.end(), name) != order.end()) out.emplace_back(name);
  for (auto& name : order)
    if (std::find(out.begin(), out.end(), name) == out.end()) out.push_back(name);
  order = std::move(out);
}

}  // namespace

void order_as_saved(summary& s, const json::object& saved) {
  order_by(s.eval_order, saved.if_contains("per_eval"));
  order_by(s.target_order, saved.if_contains("per_target"));
}

}  // namespace mira::aggregate
