// Noticing a study that answers strictly one request at a time (read a line, run the case,
// answer, read the next), so the CLI can say once that more processes would run it in parallel.
// Plain bookkeeping fed with send and answer times; no I/O. Private to the library: run_plan
// feeds it and calls run_hooks::on_sequential_study.
#pragma once

#include <mira/schedule/policy.hpp>

#include <cstdint>
#include <map>
#include <optional>

namespace mira::schedule {

/// What a study's answers must show before it is called one-at-a-time.
struct sequential_rules {
  /// Requests pending at every answer of the evidence (the one answered included): several
  /// queued, so a study that could work on them together had the chance to.
  std::size_t min_pending = 4;
  /// Answers with a gap before them, and how long they span: one slow case says nothing.
  std::size_t min_gaps = 8;
  duration window = std::chrono::seconds(2);
  /// A gap shorter than this share of the mean gap is two answers that came together: a study
  /// working on several at once answers cases that take about as long about together, however
  /// much the host's own timing wobbles.
  double together = 0.25;
};

/// The answers seen since the run of evidence began: each answer's gap is the time from the
/// previous answer (or from its own request, when that was written later) to it, which is the
/// whole time the study spent on it if it works on one at a time.
struct answer_evidence {
  bool out_of_order = false;  // an answer came before that of an older pending request
  std::size_t gaps = 0;
  duration total{};                     // their sum
  duration shortest = duration::max();  // the shortest
  duration span{};                      // from the run's first answer to its last
};

enum class study_shape {
  undecided,      // not enough evidence yet
  one_at_a_time,  // proven by the rules: say so
  concurrent      // seen working on more than one: never say so
};

/// The decision. `concurrent` as soon as an answer overtook an older request's (a study that
/// reads one line at a time cannot) or two answers came together; `one_at_a_time` once the
/// evidence is long enough with neither; else `undecided`.
study_shape judge_answers(const answer_evidence& e, const sequential_rules& rules = {});

/// Feeds judge_answers with a run's send and answer times. Evidence runs over consecutive
/// answers that each found `min_pending` requests pending; an answer with fewer, or a request
/// that ended without one, starts it again. A study once seen concurrent stays so.
class sequential_detector {
 public:
  explicit sequential_detector(sequential_rules rules = {});

  /// A request was written; `seq` grows with each one.
  void sent(std::uint64_t seq, time_point now);
  /// Its answer came. True the first time the study is proven one-at-a-time; false ever after.
  bool answered(std::uint64_t seq, time_point now);
  /// It ended without an answer (timeout, cancellation): the evidence so far is dropped.
  void dropped(std::uint64_t seq);

 private:
  void restart_evidence() {
    evidence_ = {};
    first_answer_.reset();
  }
  sequential_rules rules_;
  std::map<std::uint64_t, time_point> pending_;  // by seq: when each was written
  answer_evidence evidence_;
  std::optional<time_point> first_answer_;  // of the current evidence
  std::optional<time_point> last_answer_;
  bool decided_ = false;
};

}  // namespace mira::schedule
