// Aggregation (see summary.hpp).
#include <mira/aggregate/summary.hpp>

#include <mira/protocol/json_text.hpp>
#include "plan/natural_order.hpp"

#include <algorithm>
#include <cmath>
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

double percentile_of_sorted(const std::vector<double>& values, double p) {
  if (values.empty()) return 0;
  double rank = p / 100.0 * static_cast<double>(values.size() - 1);
  auto lo = static_cast<std::size_t>(std::floor(rank));
  auto hi = std::min(lo + 1, values.size() - 1);
  return values[lo] + (values[hi] - values[lo]) * (rank - static_cast<double>(lo));
}

}  // namespace

double percentile(std::vector<double> values, double p) {
  std::sort(values.begin(), values.end());
  return percentile_of_sorted(values, p);
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
      for (auto& s : e.samples) samples.emplace(key(e.name, s.id), &s.metadata);
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

std::optional<std::string> group_value(const plan::planned_case& c,
                                       const std::optional<protocol::run_result>& result,
                                       const metadata_index& idx, const std::string& field) {
  if (auto it = c.params.params.find(field); it != c.params.params.end()) return it->second;
  if (auto* v = idx.find(idx.samples, c.params.eval, c.params.sample, field)) return display(*v);
  if (auto* v = idx.find(idx.targets, c.params.eval, c.params.target, field)) return display(*v);
  if (result) {
    auto metadata = result->transcript.metadata.get();
    if (auto* v = metadata.if_contains(field)) return display(*v);
  }
  return std::nullopt;
}

void count(rate& r, case_state s) {
  if (!scored(s)) return;
  ++r.scored;
  if (s == case_state::passed) ++r.passed;
}

}  // namespace

summary summarize(const plan::plan& p, const std::vector<schedule::case_record>& cases,
                  const protocol::list_result* listing, std::string group_by) {
  summary out;
  out.group_by = std::move(group_by);
  metadata_index idx(out.group_by.empty() ? nullptr : listing);
  std::map<std::string, rate> groups;
  rate unset;
  std::unordered_map<std::string, std::size_t> trial_index;
  std::map<std::string, std::vector<double>> latencies, ttfts;
  std::map<std::string, std::pair<double, std::size_t>> metrics;
  std::vector<std::vector<double>> trial_scores;
  // Neighbouring cases mostly share their eval and target: the rates (and latencies) of the last
  // pair are kept at hand instead of four map lookups per case. std::map nodes do not move.
  const std::string* last_eval = nullptr;
  const std::string* last_target = nullptr;
  rate *eval_rate = nullptr, *target_rate = nullptr, *cell_rate = nullptr;
  std::vector<double>* target_latencies = nullptr;
  // Cases per target, so each target's latencies are allocated once: grown by doubling, the
  // vector would hold up to twice what it needs.
  std::map<std::string, std::size_t> cases_of_target;
  {
    const std::string* run_target = nullptr;
    std::size_t* run_count = nullptr;
    for (std::size_t i = 0; i < p.cases.size() && i < cases.size(); ++i) {
      const std::string& t = p.cases[i].params.target;
      if (!run_target || *run_target != t) {
        run_count = &cases_of_target[t];
        run_target = &t;
      }
      ++*run_count;
    }
  }

  out.case_scores.assign(p.cases.size(), summary::no_score);
  target_totals* target_sums = nullptr;
  for (std::size_t i = 0; i < p.cases.size() && i < cases.size(); ++i) {
    auto& c = p.cases[i];
    auto& r = cases[i];
    // Decoded once per case, from its text: the report phase's only decode of it.
    const auto result = r.result();
    if (result && (r.state == case_state::passed || r.state == case_state::failed))
      out.case_scores[i] = result->aggregate;
    if (result && r.state == case_state::failed && r.message.empty())
      for (auto& sc : result->scores)
        if (!sc.na && !sc.pass) {
          out.failure_notes.emplace_back(i, sc.scorer + ": " + sc.reason);
          break;
        }
    const std::string& eval = c.params.eval;
    const std::string& target = c.params.target;
    const bool same_eval = last_eval && *last_eval == eval;
    const bool same_target = last_target && *last_target == target;
    if (!same_eval) {
      if (!out.per_eval.count(eval)) out.eval_order.push_back(eval);
      eval_rate = &out.per_eval[eval];
      last_eval = &eval;
    }
    if (!same_target) {
      if (!out.per_target.count(target)) out.target_order.push_back(target);
      target_rate = &out.per_target[target];
      target_latencies = nullptr;  // made when the target has a latency: no empty entries
      target_sums = nullptr;
      last_target = &target;
    }
    if (!same_eval || !same_target) cell_rate = &out.matrix[{eval, target}];
    ++out.counts[static_cast<std::size_t>(r.state)];
    count(out.overall, r.state);
    count(*eval_rate, r.state);
    count(*target_rate, r.state);
    count(*cell_rate, r.state);
    if (!out.group_by.empty()) {
      auto v = group_value(c, result, idx, out.group_by);
      count(v ? groups[*v] : unset, r.state);
    }
    if (c.params.trials > 1) {
      auto [it, fresh] = trial_index.emplace(c.logical_key(), out.trials.size());
      if (fresh) {
        trial_summary t;
        t.logical_key = c.logical_key();
        t.trials = static_cast<std::size_t>(c.params.trials);
        out.trials.push_back(std::move(t));
        trial_scores.emplace_back();
      }
      auto& t = out.trials[it->second];
      if (scored(r.state)) {
        ++t.scored;
        if (r.state == case_state::passed) ++t.passed;
        trial_scores[it->second].push_back(result ? result->aggregate : 0.0);
      }
    }
    out.total.retries += r.retried.size();
    for (auto& e : r.retried) ++out.total.retry_causes[e.cause];
    if (r.attempts > 0 && r.state != case_state::cancelled) {
      if (!target_latencies) {
        target_latencies = &latencies[target];
        if (target_latencies->empty()) target_latencies->reserve(cases_of_target[target]);
      }
      target_latencies->push_back(r.latency_seconds);
    }
    if (!result) continue;
    if (!target_sums) target_sums = &out.totals_by_target[target];
    target_sums->cost_usd += result->transcript.usage.cost_usd;
    target_sums->tokens +=
        result->transcript.usage.input_tokens + result->transcript.usage.output_tokens;
    if (r.state == case_state::skipped) continue;
    auto& t = result->transcript;
    out.total.input_tokens += t.usage.input_tokens;
    out.total.output_tokens += t.usage.output_tokens;
    out.total.cache_read_tokens += t.usage.cache_read_tokens;
    out.total.reasoning_tokens += t.usage.reasoning_tokens;
    out.total.cost_usd += t.usage.cost_usd;
    out.total.tool_calls += t.tool_calls_count;
    if (t.timing.duration_ms) out.total.duration_ms += *t.timing.duration_ms;
    if (t.timing.time_to_first_token_ms)
      ttfts[target].push_back(static_cast<double>(*t.timing.time_to_first_token_ms));
    for (auto& [k, v] : t.metrics) {
      metrics[k].first += v;
      ++metrics[k].second;
    }
  }

  for (std::size_t i = 0; i < out.trials.size(); ++i) {
    auto& t = out.trials[i];
    for (std::size_t k = 1; k <= t.trials; ++k)
      t.pass_at.push_back(pass_at_k(t.scored, t.passed, k));
    auto& xs = trial_scores[i];
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
  }
  for (auto& [value, r] : groups) out.groups.emplace_back(value, r);
  std::sort(out.groups.begin(), out.groups.end(),
            [](auto& a, auto& b) { return plan::natural_less(a.first, b.first); });
  if (unset.scored > 0) out.groups.emplace_back("(unset)", unset);
  // Sorted in place, once: a copy per percentile would be 8 bytes per case each.
  for (auto& [target, xs] : latencies) {
    auto& l = out.latency_by_target[target];
    std::sort(xs.begin(), xs.end());
    l.n = xs.size();
    l.p50 = percentile_of_sorted(xs, 50);
    l.p95 = percentile_of_sorted(xs, 95);
    l.p99 = percentile_of_sorted(xs, 99);
  }
  for (auto& [target, xs] : ttfts) {
    auto& l = out.latency_by_target[target];
    std::sort(xs.begin(), xs.end());
    l.ttft_n = xs.size();
    l.ttft_p50_ms = percentile_of_sorted(xs, 50);
    l.ttft_p95_ms = percentile_of_sorted(xs, 95);
  }
  for (auto& [k, sn] : metrics)
    out.total.metric_means[k] = sn.first / static_cast<double>(sn.second);
  return out;
}

namespace {

json::object rate_json(const aggregate::rate& r) {
  auto ci = r.ci();
  return {{"passed", r.passed},
          {"scored", r.scored},
          {"rate", r.value()},
          {"ci95", json::array{ci.low, ci.high}}};
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
  json::object latency;
  for (auto& [target, l] : s.latency_by_target) {
    json::object lo{{"n", l.n}, {"p50_s", l.p50}, {"p95_s", l.p95}, {"p99_s", l.p99}};
    if (l.ttft_n) {
      lo["ttft_p50_ms"] = l.ttft_p50_ms;
      lo["ttft_p95_ms"] = l.ttft_p95_ms;
    }
    latency[target] = std::move(lo);
  }
  auto& t = s.total;
  json::object causes;
  for (auto& [c, n] : t.retry_causes) causes[c] = n;
  json::object metrics;
  for (auto& [k, v] : t.metric_means) metrics[k] = v;
  json::object per_eval, per_target;
  for (auto& [e, r] : s.per_eval) per_eval[e] = rate_json(r);
  for (auto& [target, r] : s.per_target) per_target[target] = rate_json(r);
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
      {"latency", std::move(latency)},
      {"seconds", report.seconds},
  };
  if (!s.group_by.empty())
    out["groups"] = json::object{{"by", s.group_by}, {"values", std::move(groups)}};
  if (report.stopped != schedule::stop_reason::none)
    out["stopped"] =
        json::object{{"reason", to_string(report.stopped)}, {"message", report.stop_message}};
  return out;
}

}  // namespace mira::aggregate
