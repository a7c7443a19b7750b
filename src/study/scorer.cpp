// The scorer type, the score builders and the N/A rule (see scorer.hpp).
#include <mira/study/scorer.hpp>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <utility>

namespace mira::study {

verdict judge_scores(std::span<const protocol::score> scores) {
  verdict v;
  std::size_t applicable = 0;
  bool all_pass = true;
  double sum = 0.0;
  for (const auto& s : scores) {
    if (s.na) continue;
    ++applicable;
    all_pass = all_pass && s.pass;
    sum += s.value;
  }
  v.passed = applicable > 0 && all_pass;
  v.aggregate = applicable > 0 ? sum / static_cast<double>(applicable) : 0.0;
  v.na = !scores.empty() && applicable == 0;
  return v;
}

protocol::score pass(std::string scorer, std::string reason) {
  return {std::move(scorer), 1.0, true, false, std::move(reason)};
}

protocol::score fail(std::string scorer, std::string reason) {
  return {std::move(scorer), 0.0, false, false, std::move(reason)};
}

protocol::score not_applicable(std::string scorer, std::string reason) {
  return {std::move(scorer), 0.0, false, true, std::move(reason)};
}

protocol::score graded(std::string scorer, double value, double threshold, std::string reason) {
  // NaN has no place in 0..1 and JSON cannot carry it: it grades as 0.
  value = std::isnan(value) ? 0.0 : std::clamp(value, 0.0, 1.0);
  return {std::move(scorer), value, value >= threshold, false, std::move(reason)};
}

namespace {

using variant = std::variant<scorer::function, scorer::coroutine>;

template <class F>
std::shared_ptr<const variant> hold(F f) {
  if (!f) throw std::invalid_argument("mira::study::scorer: an empty function");
  return std::make_shared<const variant>(std::move(f));
}

// The function is held by the frame (not reached through a scorer that may be gone by the time
// the awaitable runs): a caller may co_await scorer_value.co_score(...) on a temporary.
boost::asio::awaitable<protocol::score> run(std::shared_ptr<const variant> fn, const sample& s,
                                            const protocol::transcript& t) {
  if (const auto* plain = std::get_if<scorer::function>(fn.get())) co_return (*plain)(s, t);
  co_return co_await std::get<scorer::coroutine> (*fn)(s, t);
}

}  // namespace

scorer::scorer(std::string name, function f) : name_(std::move(name)), fn_(hold(std::move(f))) {}

scorer::scorer(std::string name, coroutine f) : name_(std::move(name)), fn_(hold(std::move(f))) {}

bool scorer::is_coroutine() const noexcept {
  return fn_->index() == 1;
}

protocol::score scorer::score(const sample& s, const protocol::transcript& t) const {
  const auto* plain = std::get_if<function>(fn_.get());
  if (!plain)
    throw std::logic_error("mira::study::scorer: " + name_ + " is a coroutine: use co_score");
  return (*plain)(s, t);
}

boost::asio::awaitable<protocol::score> scorer::co_score(const sample& s,
                                                         const protocol::transcript& t) const {
  return run(fn_, s, t);
}

}  // namespace mira::study
