// Comparing two saved runs of one study: cases paired by logical key and trial, the flips
// between them, pass-rate deltas overall, per eval, per target and by a chosen key, each with a
// confidence interval for the paired difference and an exact McNemar test, and the gate a CI job
// stops on. A library component: the CLI's `mira compare` and an experiment's closing comparison
// are thin clients of it.
#pragma once

#include <mira/aggregate/summary.hpp>
#include <mira/compare/error.hpp>
#include <mira/schedule/results.hpp>
#include <mira/store/run_reader.hpp>
#include <mira/store/run_store.hpp>

#include <boost/system/error_code.hpp>
#include <tl/expected.hpp>

#include <cstddef>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mira::compare {

/// Two-sided exact McNemar test: the exact binomial test of `regressed` against `fixed` (the
/// discordant pairs) with success probability 1/2, p = min(1, 2 P(X <= min(b, c))) for
/// X ~ Bin(b + c, 1/2). 1 when there is no discordant pair.
double mcnemar_exact_p(std::size_t regressed, std::size_t fixed);

/// The 2 x 2 table of the pairs scored (passed or failed) in both runs, and of the cases that
/// passed in the base and errored in the candidate (as regressions).
struct paired_table {
  std::size_t both_pass = 0;  // a
  std::size_t regressed = 0;  // b: passed in the base, failed or errored in the candidate
  std::size_t fixed = 0;      // c: failed in the base, passed in the candidate
  std::size_t both_fail = 0;  // d
  std::size_t n() const { return both_pass + regressed + fixed + both_fail; }
  double base_rate() const;       // (a + b) / n; 0 when n == 0
  double candidate_rate() const;  // (a + c) / n
  double delta() const;           // candidate - base = (c - b) / n
};

/// Newcombe's hybrid score interval for the difference of paired proportions (Newcombe 1998,
/// method 10), for candidate - base, at `confidence` (0.95 for 95 %). Nothing when n == 0.
std::optional<aggregate::interval> paired_difference_interval(const paired_table& t,
                                                              double confidence);

/// z such that P(-z < Z < z) = confidence for a standard normal Z.
double two_sided_z(double confidence);

/// How a case stands in one run: a scored verdict, another final state, or not there.
struct side {
  std::optional<schedule::case_state> state;  // nothing: the run has no such case
  bool scored() const {
    return state == schedule::case_state::passed || state == schedule::case_state::failed;
  }
};

enum class change {
  regressed,  // passed -> failed, or passed -> error
  fixed,      // failed -> passed
  same,       // passed both times, or failed both times
  unpaired,   // missing from a run, or not scored (N/A, error, skipped, cancelled) in one
};

/// One case of either run, paired by logical key and trial. A comparison keeps one per case of
/// either run: its names are shared with its neighbours' (plan::shared_name), and what it says
/// of itself is computed when asked.
struct case_pair {
  std::string key;  // the base's case key (the candidate's when only it has the case)
  plan::shared_name eval;
  std::string sample;
  plan::shared_name target;
  plan::shared_axes params;
  std::int64_t trial = 0;
  side base, candidate;
  change what = change::unpaired;
  /// For an unpaired case: "only in the base", "only in the candidate", or the states; for a
  /// regression to an error "passed -> error"; empty for the other paired ones.
  std::string why() const;
};

/// The comparison of one group of pairs (the whole run, an eval, a target, a group value).
struct group_delta {
  std::string name;
  paired_table table;
  std::size_t unpaired = 0;               // cases of the group left out of the table
  std::optional<aggregate::interval> ci;  // of the delta, at 1 - alpha
  double p_value = 1;                     // exact McNemar
  bool significant_drop = false;          // delta < 0 and p_value < alpha
  bool significant_gain = false;          // delta > 0 and p_value < alpha
};

/// The rules of the gate (docs/compare.md, "Gates"): the candidate passes when none fires.
enum class gate_rule {
  missing,           // baseline cases missing from the candidate, or a candidate that stopped
  regressions,       // more regressions than gate_options::max_regressions
  significant_drop,  // the overall pass rate dropped significantly (exact McNemar, p < alpha)
  min_scored,        // fewer cases scored in both runs than gate_options::min_scored
};
std::string_view to_string(gate_rule r);

struct gate_options {
  /// Accept baseline cases missing from the candidate, and a candidate that did not run to its
  /// end (stopped, interrupted, never finished).
  bool allow_missing = false;
  /// More regressions than this fails the gate; nothing: no limit (the test still applies).
  std::optional<std::size_t> max_regressions = std::nullopt;
  /// Fewer cases scored in both runs fails the gate; 0 counts as 1: nothing compared is no pass.
  std::size_t min_scored = 1;
};

/// One rule of the gate, checked.
struct gate_check {
  gate_rule rule = gate_rule::missing;
  bool fired = false;
  std::string detail = {};  // what was found, in words: why it fired, or why not
};

/// The gate over a comparison: every rule, checked.
struct gate_verdict {
  std::vector<gate_check> checks;  // one per rule, in the order of gate_rule
  bool passed() const;
  /// "passed", or "failed: " and the detail of each rule that fired, joined by "; ".
  std::string summary() const;
};

struct options {
  /// eval, target, sample or an axis name; empty: no extra breakdown.
  std::string group_by;
  double alpha = 0.05;  // significance level; intervals are at 1 - alpha
  gate_options gate = {};
};

/// Two runs compared.
struct comparison {
  std::string base_run, candidate_run, study;
  options opts;
  group_delta overall;
  std::vector<group_delta> per_eval, per_target, groups;  // natural order of names
  /// Every case of either run in natural key order, paired.
  std::vector<case_pair> cases;
  std::size_t only_in_base = 0, only_in_candidate = 0, not_scored = 0;
  /// Study version or eval fingerprints that differ, unreadable records: the comparison stands
  /// but may not compare like with like.
  std::vector<std::string> warnings;
  /// Why the candidate did not run to its end: its last session's stop reason ("budget",
  /// "interrupted", ...) or "never finished" (killed, or still running); empty when it did.
  std::string candidate_stopped;
  /// Every rule of the gate, checked with opts.gate.
  gate_verdict gate;

  /// The overall pass rate dropped significantly at alpha (one rule of the gate).
  bool regression() const { return overall.significant_drop; }
  std::size_t count(change c) const;
};

/// Compares `candidate` against `base`. Fails with errc::other_study when the runs are of
/// different studies, errc::invalid_alpha when alpha is not in (0, 1), errc::unknown_group when
/// `group_by` names a key no case of either run has.
tl::expected<comparison, error> compare_runs(const store::loaded_run& base,
                                             const store::loaded_run& candidate,
                                             const options& o = {});
/// The same over runs read back a case at a time (each is read once): what is kept is the
/// comparison's pairs, not the runs' records. Records that could be read when a run was opened
/// but not now count as unreadable (a warning) and their cases as missing.
tl::expected<comparison, error> compare_runs(const store::run_reader& base,
                                             const store::run_reader& candidate,
                                             const options& o = {});

/// Loads a run named by id in `results_dir`, or by a path to its folder (an argument with a
/// '/'); the message names the run when there is none.
tl::expected<store::loaded_run, store::error> load(const std::filesystem::path& results_dir,
                                                   const std::string& run);
/// The same run opened for reading a case at a time.
tl::expected<store::run_reader, store::error> open(const std::filesystem::path& results_dir,
                                                   const std::string& run);

/// Where rendered text goes, piece by piece.
using text_sink = std::function<void(std::string_view)>;

/// The comparison in a format: table (terminal text; study names made printable), json, md,
/// html (one self-contained page with a chart of per-eval deltas and their intervals), junit
/// (one testcase per paired case, each regression a failure, plus one per rule of the gate).
/// Fails on an unknown format.
bool render(const comparison& c, std::string_view format, const text_sink& out);
std::string render(const comparison& c, std::string_view format);

/// render() into a file the user named, through store::output_file (a regular file is replaced
/// atomically; "-" is standard output).
boost::system::error_code write(const comparison& c, std::string_view format,
                                const std::filesystem::path& path);

/// The formats render() takes.
inline constexpr std::string_view formats[] = {"table", "json", "md", "html", "junit"};

}  // namespace mira::compare
