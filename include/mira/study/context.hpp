// What a subject is given for one case: the case (identity, sample, target), the request's
// cancellation, the host's deadline, notifications already carrying the request id, and a
// thread pool for blocking work.
//
// Cancellation. When the host sends `cancel` for the request (or closes the connection), the
// study:
//   - emits a terminal cancellation on the slot bound to the subject's coroutine, so the
//     asynchronous operation it is waiting on (a timer, a socket read, run_program) completes
//     with operation_aborted, and any later co_await of one throws it;
//   - requests a stop on stop_token(), for code that polls (a loop on a blocking thread).
// A subject that ends by throwing after a cancel is answered with errc::cancelled; one that
// still returns a transcript is answered with its result (cancellation is best effort).
#pragma once

#include <mira/protocol/types.hpp>
#include <mira/study/sample.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
#include <cstdint>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

namespace mira::study {

namespace detail {
class server;
struct case_control;
}  // namespace detail

class run_context {
 public:
  using clock = std::chrono::steady_clock;

  /// The case: eval, sample and target names, axis params, trial, trials and seed.
  const protocol::case_identity& id() const noexcept { return *id_; }
  /// The sample: its input and expected answer.
  const study::sample& sample() const noexcept { return *sample_; }
  /// The target the case runs against (its label, provider and metadata).
  const protocol::target_info& target() const noexcept { return *target_; }
  /// The id of the host's request, which the study's notifications carry.
  std::int64_t request_id() const noexcept { return request_id_; }
  /// The value of an axis for this case; empty when the case has no such axis.
  std::string_view param(std::string_view axis) const noexcept;
  /// The seed the host gave this trial (seed + trial), if any.
  std::optional<std::int64_t> seed() const noexcept { return id_->seed; }

  /// Whether the host has cancelled the request (or closed the connection).
  bool cancelled() const noexcept;
  /// Stopped when the request is cancelled: for blocking code, which no slot reaches.
  std::stop_token stop_token() const;
  /// When the host gives up on this case, if it said (the `timeout_ms` its run params carry
  /// when the host has a per-case timeout): a subject may plan its work to it. The host
  /// cancels the request then, whatever the subject does.
  std::optional<clock::time_point> deadline() const noexcept { return deadline_; }

  /// Sends an `event` notification about this case (request id, eval, sample, target and axis
  /// params filled in) of this kind, with `extra` members (turn, tool, text, or any other).
  /// May be called from any thread.
  void event(std::string_view kind, json::object extra = {}) const;
  void started() const { event("started"); }
  void turn(std::int64_t index) const { event("turn", {{"turn", index}}); }
  void tool_call(std::string_view tool) const { event("tool_call", {{"tool", tool}}); }
  void output(std::string_view text) const { event("output", {{"text", text}}); }
  void finished() const { event("finished"); }
  /// Sends a `log` notification carrying this request's id. May be called from any thread.
  void log(std::string_view message) const;

  /// The executor the subject runs on (the study's I/O thread).
  boost::asio::any_io_executor get_executor() const noexcept { return executor_; }

  /// Runs `f` on the study's thread pool (the I/O thread stays free for other cases) and
  /// resumes with its result. `f` takes a std::stop_token, stopped when the request is
  /// cancelled, or nothing. The coroutine waits for `f` to return even after a cancel: `f`
  /// is the one to stop early, and must not outlive what it references otherwise.
  template <class F>
  auto blocking(F f) const {
    using result = decltype(call_blocking(f, std::stop_token{}));
    return boost::asio::co_spawn(
        blocking_executor(),
        [f = std::move(f), st = stop_token()]() mutable -> boost::asio::awaitable<result> {
          co_return call_blocking(f, st);
        },
        boost::asio::use_awaitable);
  }

 private:
  friend class detail::server;
  run_context() = default;

  template <class F>
  static decltype(auto) call_blocking(F& f, const std::stop_token& st) {
    if constexpr (std::is_invocable_v<F&, std::stop_token>)
      return f(st);
    else
      return f();
  }
  boost::asio::any_io_executor blocking_executor() const;

  const protocol::case_identity* id_ = nullptr;
  const study::sample* sample_ = nullptr;
  const protocol::target_info* target_ = nullptr;
  std::int64_t request_id_ = 0;
  detail::case_control* control_ = nullptr;
  std::optional<clock::time_point> deadline_;
  boost::asio::any_io_executor executor_;
  detail::server* server_ = nullptr;
};

}  // namespace mira::study
