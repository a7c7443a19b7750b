// Aggregation of a run: per-case states into rates with confidence intervals, trials into
// pass@k and score spread, breakdowns per eval, per target, per eval x target and by any key,
// and totals (tokens, cost, latency percentiles, retries, custom metrics).
#pragma once

#include <mira/plan/plan.hpp>
#include <mira/schedule/results.hpp>

#include <boost/json/object.hpp>
#include <tl/expected.hpp>

#include <array>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace mira::aggregate {

/// Unbiased `pass@k` (Chen et al. 2021): the chance that at least one of k samples drawn from
/// n trials, c of them passing, passes. Undefined (nullopt) when k > n or n == 0.
std::optional<double> pass_at_k(std::size_t n, std::size_t c, std::size_t k);

struct interval {
  double low = 0;
  double high = 0;
};
/// The Wilson score interval for a proportion (95 % by default).
interval wilson(std::size_t passed, std::size_t n, double z = 1.959963984540054);

/// Linear-interpolated percentile (p in [0, 100]) of `values`; 0 for none.
double percentile(std::vector<double> values, double p);

/// Passed over scored; N/A, skipped and cancelled cases are not scored.
struct rate {
  std::size_t passed = 0;
  std::size_t scored = 0;
  double value() const {
    return scored ? static_cast<double>(passed) / static_cast<double>(scored) : 0;
  }
  interval ci() const { return wilson(passed, scored); }
};

struct trial_summary {
  std::string logical_key;
  std::size_t trials = 0;  // planned
  std::size_t scored = 0;
  std::size_t passed = 0;
  rate pass_rate() const { return {passed, scored}; }
  std::vector<std::optional<double>> pass_at;  // pass_at[k-1] = pass@k, k = 1..trials
  double mean = 0;                             // of `aggregate` over scored trials
  double stddev = 0;                           // sample standard deviation (n - 1); 0 below two
};

struct latency {
  std::size_t n = 0;
  double p50 = 0, p95 = 0, p99 = 0;           // host-measured seconds
  double min = 0, p25 = 0, p75 = 0, max = 0;  // the report's box plot
  std::size_t ttft_n = 0;
  double ttft_p50_ms = 0, ttft_p95_ms = 0;  // study-reported time to first token
};

struct totals {
  std::int64_t input_tokens = 0, output_tokens = 0, cache_read_tokens = 0, reasoning_tokens = 0;
  double cost_usd = 0;
  std::int64_t tool_calls = 0;
  std::int64_t duration_ms = 0;  // study-reported
  std::size_t retries = 0;
  std::map<std::string, std::size_t> retry_causes;
  std::map<std::string, double> metric_means;  // custom transcript metrics
};

/// Per target, what the charts of a report show beside its rates.
struct target_totals {
  double cost_usd = 0;
  std::int64_t tokens = 0;  // input + output
};

struct summary {
  std::array<std::size_t, schedule::case_state_count> counts{};  // indexed by case_state
  std::size_t count(schedule::case_state s) const { return counts[static_cast<std::size_t>(s)]; }
  rate overall;
  std::vector<std::string> eval_order, target_order;  // first seen in the plan
  std::map<std::string, rate> per_eval, per_target;
  std::map<std::pair<std::string, std::string>, rate> matrix;  // (eval, target)
  std::vector<trial_summary> trials;  // logical keys planned with more than one trial
  std::string group_by;
  std::vector<std::pair<std::string, rate>> groups;  // natural order of values, "(unset)" last
  totals total;
  std::map<std::string, latency> latency_by_target;
  std::map<std::string, target_totals> totals_by_target;
};

/// A run's summary, made as its cases end, in any order: each case's record is read once, when
/// it is added (its result decoded once), and what is kept of it is its latency (4 bytes), and
/// its state and score when its eval has several trials (pass-at-k, spread). So a run of ten
/// million cases is summarized without its records. The plan (and listing) must outlive it; the
/// plan may grow while cases are added (a run read back a case at a time: add case i once the
/// plan has it).
class accumulator {
 public:
  /// See summarize() for `listing` and `group_by`.
  explicit accumulator(const plan::plan& p, const protocol::list_result* listing = nullptr,
                       std::string group_by = {});
  accumulator(accumulator&&) noexcept;
  accumulator& operator=(accumulator&&) noexcept;
  ~accumulator();
  /// Plan case `i` ended with `r`. Each case once; a case never added counts nowhere.
  void add(std::size_t i, const schedule::case_record& r);
  /// The summary of what was added. Once.
  summary finish();

 private:
  struct state;
  std::unique_ptr<state> s_;
};

/// Aggregates a run. With `group_by`, each case's value is looked up in its axis params, then
/// its sample's metadata, then its target's metadata (both from `listing`, when given), then
/// its transcript metadata; a case with none is in "(unset)".
summary summarize(const plan::plan& p, const std::vector<schedule::case_record>& cases,
                  const protocol::list_result* listing = nullptr, std::string group_by = {});

/// The summary as JSON (counts, overall rate, matrix, trials with `pass@k`, groups, totals,
/// the run's seconds and why it stopped): what meta.json and report.json keep.
boost::json::object summary_json(const summary& s, const schedule::run_report& report);

/// A summary read back from its JSON (summary_json's, as meta.json keeps it), the whole of it:
/// the orders of evals and targets are its objects' orders. What it cannot read is named
/// ("summary.totals.retries is not a count"). A summary written before the latency box and the
/// per-target totals were kept has zeros there.
tl::expected<summary, std::string> summary_from_json(const boost::json::object& o);
/// Orders the evals and targets of `s` as the saved summary `saved` lists them (a run's own
/// summary lists them in its plan's order): a summary made again from a run's records then shows
/// them as the run did.
void order_as_saved(summary& s, const boost::json::object& saved);

}  // namespace mira::aggregate
