// Scorers: what decides whether a case passed. A scorer reads a sample and the transcript its
// subject produced and gives one protocol::score. Most are plain functions (every scorer of
// scorers.hpp is); one that must wait for something, a model-graded judge, is a coroutine.
//
// The verdict of a case follows the N/A rule of Rust mira-eval: a case passes iff it has at
// least one applicable (non-N/A) score and every applicable score passes; its aggregate is the
// mean of the applicable values (0 when there is none).
#pragma once

#include <mira/protocol/types.hpp>
#include <mira/study/sample.hpp>

#include <boost/asio/awaitable.hpp>

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

namespace mira::study {

/// A case's verdict from its scores, by the N/A rule.
struct verdict {
  bool passed = false;
  double aggregate = 0.0;
  bool na = false;  ///< every score is N/A (and there is at least one): neither passed nor failed
};
verdict judge_scores(std::span<const protocol::score> scores);

/// Score builders, for scorers written by hand.
protocol::score pass(std::string scorer, std::string reason = {});
protocol::score fail(std::string scorer, std::string reason = {});
/// The scorer could not be evaluated (an unreachable judge): excluded from the verdict.
protocol::score not_applicable(std::string scorer, std::string reason = {});
/// A graded score: `value` clamped to 0..1 (NaN grades as 0), passing when it is at least
/// `threshold`.
protocol::score graded(std::string scorer, double value, double threshold, std::string reason = {});

/// One scorer: a name (what `list` advertises for the eval, e.g. `contains("42")`) and a
/// function of the sample and the transcript. Cheap to copy (copies share the function).
class scorer {
 public:
  using function = std::function<protocol::score(const sample&, const protocol::transcript&)>;
  using coroutine = std::function<boost::asio::awaitable<protocol::score>(
      const sample&, const protocol::transcript&)>;

  /// Throws std::invalid_argument for an empty function.
  scorer(std::string name, function f);
  scorer(std::string name, coroutine f);

  const std::string& name() const noexcept { return name_; }
  /// A coroutine scorer (or a combinator of one): score() may not be called, only co_score().
  bool is_coroutine() const noexcept;

  /// The score of a plain scorer. Throws std::logic_error for a coroutine scorer.
  protocol::score score(const sample& s, const protocol::transcript& t) const;
  /// The score of any scorer. `s` and `t` must outlive the awaitable; the scorer need not (the
  /// awaitable shares its function).
  boost::asio::awaitable<protocol::score> co_score(const sample& s,
                                                   const protocol::transcript& t) const;

 private:
  std::string name_;
  std::shared_ptr<const std::variant<function, coroutine>> fn_;
};

/// A scorer from a closure, named as `list` will show it: the escape hatch for anything the
/// built-in scorers do not say. `f` returns a protocol::score (made with pass/fail/graded/
/// not_applicable above, or by hand) or a bool (pass or fail, no reason).
template <class F>
scorer make_scorer(std::string name, F f) {
  using R = std::invoke_result_t<F&, const sample&, const protocol::transcript&>;
  if constexpr (std::is_same_v<R, bool>) {
    return scorer(name, scorer::function([n = name, f = std::move(f)](
                                             const sample& s, const protocol::transcript& t) {
                    return f(s, t) ? pass(n) : fail(n);
                  }));
  } else {
    return scorer(std::move(name), scorer::function(std::move(f)));
  }
}

}  // namespace mira::study
