// What a study defines: its evals, each with samples, targets, axes, trials, scorers and the
// subject that runs one case; everything `list` says comes from here. Built once, before
// serve(); read-only while serving.
#pragma once

#include <mira/protocol/types.hpp>
#include <mira/study/sample.hpp>
#include <mira/study/scorer.hpp>

#include <boost/asio/awaitable.hpp>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace mira::study {

class run_context;
class dataset;

/// The code under evaluation for one case: a coroutine given the case's context, returning its
/// transcript. A subject that fails for a reason that is not the model's (a provider outage, a
/// rate limit) sets transcript.error and error_kind infra: the case is then scored N/A and the
/// host retries it. One that throws request_error answers with that error; anything else it
/// throws is answered as errc::subject_failed. See run_context for cancellation.
using subject = std::function<boost::asio::awaitable<protocol::transcript>(run_context&)>;

/// Samples made on demand, for a dataset too large (or too slow) to build at once: `list`
/// pages through it by index (the cursor is the index of the next sample), and `run` finds a
/// sample by its id without making the others.
struct sample_generator {
  std::size_t count = 0;
  /// The sample at `index` (0 <= index < count).
  std::function<study::sample(std::size_t index)> make;
  /// The index of the sample with this id, or nullopt when there is none.
  std::function<std::optional<std::size_t>(std::string_view id)> index_of;
};

/// One eval. Its builder functions return *this, to be chained.
class eval {
 public:
  explicit eval(std::string name) : name_(std::move(name)) { info_.name = name_; }

  eval& description(std::string text);
  eval& add_sample(study::sample s);
  /// The fixed sample list (replaces any before).
  eval& samples(std::vector<study::sample> list);
  /// A generated dataset (replaces any fixed list).
  eval& samples(sample_generator generator);
  /// A dataset read from a file (dataset.hpp): its samples, made as they are asked for (replaces
  /// any fixed list).
  eval& dataset(const study::dataset& d);
  /// A target; one marked `available = false` is listed (the host skips it) but never run.
  eval& add_target(protocol::target_info target);
  /// An available target of this label and provider.
  eval& add_target(std::string label, std::string provider = {});
  eval& axis(std::string name, std::vector<std::string> values);
  /// How many times the host should run each case (for pass-at-k); trial t gets seed + t.
  eval& trials(std::int64_t n);
  eval& seed(std::int64_t base);
  eval& max_turns(std::int64_t n);
  eval& metadata(json::object m);
  /// Adds a scorer: each case's transcript is scored by every scorer, in order.
  eval& score_with(study::scorer s);
  eval& subject(study::subject s);

  const std::string& name() const noexcept { return name_; }
  /// The eval as `list` describes it, without samples.
  const protocol::eval_info& info() const noexcept { return info_; }
  const std::vector<study::scorer>& scorers() const noexcept { return scorers_; }
  const study::subject& run_subject() const noexcept { return subject_; }

  std::size_t sample_count() const noexcept;
  /// The sample at `index` < sample_count(): from the list, or made by the generator.
  study::sample sample_at(std::size_t index) const;
  /// The sample with this id, or nullopt when the eval has none.
  std::optional<study::sample> find_sample(std::string_view id) const;
  /// The sample with this id when the eval has a fixed list (no copy), else nullptr.
  const study::sample* listed_sample(std::string_view id) const;
  /// The target with this label, or nullptr.
  const protocol::target_info* find_target(std::string_view label) const;

 private:
  friend class registry;
  struct hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const noexcept {
      return std::hash<std::string_view>{}(s);
    }
  };
  std::string name_;
  protocol::eval_info info_;  // samples left empty: they are in samples_ or generator_
  std::vector<study::sample> samples_;
  std::unordered_map<std::string, std::size_t, hash, std::equal_to<>> sample_index_;
  std::optional<sample_generator> generator_;
  std::vector<study::scorer> scorers_;
  study::subject subject_;
};

/// A study: its name and version, its evals, and what it declares of itself for `initialize`.
class registry {
 public:
  explicit registry(std::string study_name, std::string study_version = {});

  /// A new eval of this name; the reference stays valid as more are added. Its targets, if it
  /// is given none, are the registry's default targets.
  eval& add(std::string name);
  /// A target for every eval that names none of its own.
  registry& default_target(protocol::target_info target);
  /// Declares the `event` kinds subjects emit (started, turn, tool_call, output, finished...):
  /// the study then advertises the `events` capability with these kinds.
  registry& emits_events(std::vector<std::string> kinds);
  /// Declares that subjects attach ATIF trajectories: the `trajectory` capability (ATIF 1.7).
  registry& emits_trajectories();
  /// An entry of initialize's capability_params (e.g. "modalities").
  registry& capability_param(std::string token, json::value params);

  const std::string& name() const noexcept { return name_; }
  const std::string& version() const noexcept { return version_; }
  const std::deque<eval>& evals() const noexcept { return evals_; }
  /// The eval of this name, or nullptr.
  const eval* find(std::string_view name) const;
  /// The targets of `e`: its own, or the registry's default ones.
  const std::vector<protocol::target_info>& targets_of(const eval& e) const noexcept;
  /// What `initialize` answers: the protocol version, the study, and the capabilities it has:
  /// usage, execute, score and trials always (the SDK measures each case's duration, serves
  /// both halves of `run`, and hands every subject its seed); axes when an eval has one;
  /// paginate when a sample list is longer than `page_size`; cancel when `cancel`; events when
  /// declared or when `case_events` (serve_options::case_events: the kinds started and finished
  /// join the declared ones); trajectory when declared.
  protocol::initialize_result describe(std::size_t page_size, bool cancel,
                                       bool case_events = false) const;

  /// Checks what a host would refuse or misread: an eval without a subject, two evals (samples
  /// of one eval, targets, axes) with one name, an eval without targets. The message names
  /// the first problem; empty when there is none.
  std::string check() const;

 private:
  std::string name_;
  std::string version_;
  std::deque<eval> evals_;
  std::vector<protocol::target_info> default_targets_;
  std::vector<std::string> event_kinds_;
  bool trajectories_ = false;
  json::object capability_params_;
};

}  // namespace mira::study
