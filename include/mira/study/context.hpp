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
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
#include <cstdint>
#include <exception>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

namespace mira::study {

namespace detail {
class request_loop;
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
  /// The eval's max_turns, when it set one (as `list` says): the most turns a dialogue takes.
  std::optional<std::int64_t> max_turns() const noexcept { return max_turns_; }

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
  auto blocking(F f) const -> boost::asio::awaitable<std::invoke_result_t<F&, std::stop_token>>
  requires std::is_invocable_v<F&, std::stop_token> {
    using result = std::invoke_result_t<F&, std::stop_token>;
    std::optional<std::conditional_t<std::is_void_v<result>, bool, result>> value;
    // Not co_spawn on the pool: that would carry the case's cancellation into the pool's
    // coroutine, and the wait here must last until `f` returns, cancelled or not.
    // Named, not a temporary inside the co_await expression: g++ 12 mishandles those
    // (docs/toolchain-notes.md).
    auto initiate = [&f, &value, st = stop_token(), pool = blocking_executor()](auto handler) {
      boost::asio::post(pool, [&f, &value, st, h = std::move(handler)]() mutable {
        std::exception_ptr e;
        try {
          if constexpr (std::is_void_v<result>) {
            f(st);
            value.emplace(true);
          } else {
            value.emplace(f(st));
          }
        } catch (...) {
          e = std::current_exception();
        }
        auto ex = boost::asio::get_associated_executor(h);
        boost::asio::dispatch(ex, [h = std::move(h), e]() mutable { std::move(h)(e); });
      });
    };
    auto done =
        boost::asio::async_initiate<const boost::asio::use_awaitable_t<>&,
                                    void(std::exception_ptr)>(initiate, boost::asio::use_awaitable);
    co_await std::move(done);
    if constexpr (!std::is_void_v<result>) co_return std::move(*value);
  }
  /// The same for a function of no arguments.
  template <class F>
  auto blocking(F f) const -> boost::asio::awaitable<std::invoke_result_t<F&>>
  requires(!std::is_invocable_v<F&, std::stop_token>) {
    return blocking([f = std::move(f)](const std::stop_token&) mutable { return f(); });
  }

 private:
  friend class detail::request_loop;
  run_context() = default;

  boost::asio::any_io_executor blocking_executor() const;

  const protocol::case_identity* id_ = nullptr;
  const study::sample* sample_ = nullptr;
  const protocol::target_info* target_ = nullptr;
  std::int64_t request_id_ = 0;
  detail::case_control* control_ = nullptr;
  std::optional<clock::time_point> deadline_;
  std::optional<std::int64_t> max_turns_;
  boost::asio::any_io_executor executor_;
  detail::request_loop* loop_ = nullptr;
};

}  // namespace mira::study
