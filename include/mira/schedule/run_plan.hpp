// run_plan: a plan's cases through the processes of a study (a study_pool), as one awaitable
// pipeline. Global and per-provider caps with adaptive limits, retries with backoff, per-attempt
// deadlines, a whole-run deadline, fail-fast and cost/token budgets, with hooks for progress and
// each final result.
#pragma once

#include <mira/host.hpp>
#include <mira/plan/plan.hpp>
#include <mira/pool.hpp>
#include <mira/schedule/classify.hpp>
#include <mira/schedule/policy.hpp>
#include <mira/schedule/results.hpp>

#include <boost/asio/awaitable.hpp>

#include <functional>
#include <iosfwd>
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace mira::schedule {

/// What each attempt of a case sends to the study.
enum class operation {
  run,      // `run`: execute and score
  execute,  // `execute`: the case's result holds the ExecuteResult; it ends as `executed`
  score,    // `score`: the transcript comes from run_policy::transcript_for
};

struct run_policy {
  operation op = operation::run;
  /// operation::score: the transcript (as the study's `execute` returned it) for a case index.
  std::function<boost::json::object(std::size_t case_index)> transcript_for;
  concurrency_policy concurrency;
  retry_policy retry;
  std::optional<duration> case_timeout;  // per attempt
  /// When set, a case's per-attempt timeout (nullopt: none) in place of case_timeout, e.g. per
  /// target as mira.toml's `[targets.LABEL] timeout` gives it.
  std::function<std::optional<duration>(std::size_t case_index)> case_timeout_for;
  bool timeout_is_infra = false;       // a timeout is retried and ends N/A, not failed
  std::optional<duration> deadline;    // the whole run
  bool fail_fast = false;              // the first failed case stops the run
  std::optional<double> max_cost_usd;  // from transcript usage, every attempt counted
  std::optional<std::int64_t> max_tokens;
  rate_limit_classifier rate_limited;  // replaces is_rate_limited
  retry_predicate transient;           // replaces is_transient
  std::optional<std::uint64_t> jitter_seed;
  /// The report keeps the records of plan cases [0, kept_records) (run_report::cases); the
  /// others go to run_hooks::on_result and are dropped when it returns, so a run of millions of
  /// cases holds only those in flight.
  std::size_t kept_records = std::numeric_limits<std::size_t>::max();
};

struct run_hooks {
  std::function<void(std::size_t case_index)> on_start;                       // an attempt starts
  std::function<void(std::size_t case_index, const case_record&)> on_result;  // final
  /// An event/log notification the study correlated with an attempt of this case.
  std::function<void(std::size_t case_index, const notification&)> on_notification;
  /// Asked after each on_result: a message stops the run as fail-fast does
  /// (stop_reason::requested), e.g. when results can no longer be saved.
  std::function<std::optional<std::string>(std::size_t case_index, const case_record&)> stop_after;
  /// Called once when the timings prove that the study (a pool of one process) answers one
  /// request at a time while several wait (the rule: docs/pools.md): a pool of processes
  /// would run it in parallel.
  std::function<void()> on_sequential_study;
};

/// Runs every case of `p` (which must outlive the awaitable) through the processes of `pool`
/// (started and initialized; study_pool::start, with one process or more). A case whose process
/// died is retried on the others, or on the process the pool starts again in its place
/// (pool_options::max_restarts); a pool with none left stops the run
/// (stop_reason::study_failed). When abandoned requests (the study ignores `cancel`) hold every
/// slot with nothing running for the case timeout (else 30 s), the processes that hold them are
/// given up on and started again (study_pool::give_up_on_hung), or the run stops.
/// Never throws for a case's sake: every outcome is a case_record.
/// Cancelling the operation (terminal, e.g. a signal bound with bind_cancellation_slot) stops
/// the run like fail-fast does, with stop_reason::interrupted, and still completes with the
/// report: in-flight cases are cancelled (the study gets `cancel`), finished ones are kept.
/// The run's bookkeeping runs on a strand of the caller's executor, or on the executor itself
/// when it is an io_context made with concurrency hint 1 (one thread runs it, as in `mira`):
/// there attempts complete without a strand's hand-offs.
boost::asio::awaitable<run_report> run_plan(study_pool pool, const plan::plan& p, run_policy policy,
                                            run_hooks hooks = {});

/// The same over one process the caller started and initialized (study_pool::adopt): when it
/// dies, the run stops. To have a dead study started again, start it as a study_pool.
boost::asio::awaitable<run_report> run_plan(host_handle host, const plan::plan& p,
                                            run_policy policy, run_hooks hooks = {});

}  // namespace mira::schedule
