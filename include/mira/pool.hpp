// mira::study_pool: P processes of one study behind one handle, so a study that answers one
// request at a time (the official Python and TypeScript SDKs do) still runs cases in parallel. A
// pool of one is how the library runs a single process too: the pool owns its restarts.
//
// The pool offers a host_handle's case operations (run, execute, score), list_all and shutdown,
// in the same shape: `op(params, [options], token)`, the token defaulting to mira::use_expected.
// Each request goes to the live process with the fewest requests in flight (its abandoned ones
// counted), under a per-process cap; when every process is at its cap the request waits in the
// pool, not behind a slow case in one process. The request is then a plain request of that
// process's host_handle: per-request cancellation sends `cancel` to the process that holds it,
// and notifications reach the request's own handler, by construction. A request cancelled while
// it waits in the pool is removed; nothing is sent.
//
// A process that dies is started again in its slot (pool_options::max_restarts per slot); its
// requests fail with errc::study_exited, and requests after it go to the others meanwhile (in a
// pool of one they wait for the new process). When no process is left and none is being
// restarted, requests fail with errc::study_exited, saying why the last one went.
// Lifetime as host_handle: copies share the pool; the last copy's end kills every process.
#pragma once

#include <mira/host.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/associated_allocator.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/post.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace mira {

/// How a pool starts its processes and starts them again: the one place a restart policy is
/// declared (study_launch carries it; run_plan follows the pool's).
///
/// Slots are numbered 1..processes in callbacks and messages; a pool of one calls its process
/// slot 0, "the study", as a lone process is named.
struct pool_options {
  /// How many processes (at least 1).
  std::size_t processes = 1;
  /// Requests in flight per process, abandoned ones counted; beyond it requests wait in the
  /// pool. 0: no cap. `mira run` uses ceil(j / P).
  std::size_t max_in_flight_per_process = 0;
  /// Host options of the process in `slot`. Default: host_options{} whose log is
  /// stderr_log_sink(log_level::warning, "study <slot>"): each stderr line shown as
  /// "[study <slot>] <line>". Called where the process is started: in start(), or on the pool's
  /// executor for a restart.
  std::function<host_options(std::size_t slot)> host_options_for = {};
  /// Every process must answer initialize within this (a restarted one too).
  std::chrono::milliseconds init_timeout{60000};
  /// How the caller's users name init_timeout (e.g. "--init-timeout"): a message about a missed
  /// limit ends with it in parentheses.
  std::string init_timeout_name = {};
  /// Restarts of a dead (or hung: give_up_on_hung) process, per slot.
  int max_restarts = 3;
  /// Wait before a slot's first restart; doubles with each further restart of that slot.
  std::chrono::milliseconds restart_backoff{500};
  /// Told when a slot's process is gone and is started again, and when it is not. In a pool of
  /// several, `what` follows "study <slot> ": "died (exit code 3); starting it again", "died
  /// (...); no restarts left for it", "could not be started again: ...". In a pool of one it is
  /// only told of a restart about to start, and `what` is why the study went (how it died, or
  /// how long it hung); when the study is gone for good its requests fail saying why. Runs
  /// where the request that found the process dead completes, or on the pool's executor.
  std::function<void(std::size_t slot, const std::string& what)> on_restart = {};
};

/// Per-call extras of a pool request.
struct pool_request {
  pool_request() = default;
  pool_request(request_options o) : options(std::move(o)) {}  // NOLINT: implicit by design
  request_options options;
  /// Called once the pool hands the request to a process (at once when one has room): a
  /// per-attempt timeout starts here, not while the request waits in the pool. Runs in the
  /// initiating call, or on the completion handler's executor after a wait.
  std::function<void()> on_dispatch = {};
};

namespace detail {

struct pool_state;

/// A request's place in the pool: the process it went to and that slot's generation.
struct pool_lease {
  host_handle host;
  std::size_t slot = 0;
  std::uint64_t generation = 0;
  std::size_t pool_size = 1;
};

using pool_state_ptr = std::shared_ptr<pool_state>;

/// A process with room, counted as taken; nullopt when none has room.
std::optional<pool_lease> pool_acquire(const pool_state_ptr& s);
/// A request of `lease` completed: frees its place, notices a dead process (and starts it again),
/// and hands waiting requests to processes with room. Adds the slot to diag's message when set.
void pool_release(const pool_state_ptr& s, const pool_lease& lease, error_code ec,
                  diagnostics* diag);

/// A request waiting for a process with room.
struct pool_waiting {
  virtual ~pool_waiting() = default;
  /// Any thread: hands the request to `lease`'s process on the handler's executor, or completes
  /// it with operation_aborted there if it was cancelled meanwhile.
  virtual void dispatch(pool_lease lease) = 0;
  /// Completes the request with `ec`; `why`, when not empty, becomes its diagnostics' message.
  virtual void fail(error_code ec, std::string why) = 0;
  virtual boost::asio::cancellation_slot cancellation_slot() = 0;
  /// Set by the handler's cancellation slot while the request waits (on the emitter's thread):
  /// a cancellation that comes after drain() took it from the queue still reaches it.
  std::shared_ptr<std::atomic<bool>> cancelled = std::make_shared<std::atomic<bool>>(false);
};
/// Queues `w` (or dispatches it at once when a process has room by now).
void pool_enqueue(const pool_state_ptr& s, std::unique_ptr<pool_waiting> w);
void start_pool_wait_abandoned(const pool_state_ptr& s, std::size_t seen, handler_t<std::size_t> h);
/// list_all on a live process, or errc::study_exited when there is none.
void start_pool_list_all(const pool_state_ptr& s, request_options o,
                         handler_t<protocol::list_result> h);
void start_pool_shutdown(const pool_state_ptr& s,
                         boost::asio::any_completion_handler<void(error_code)> h);
boost::asio::any_io_executor pool_executor(const pool_state_ptr& s);

// The user's handler, with the pool told when it completes. Its executor, cancellation slot
// and allocator are the handler's (the associator below), so the process's host sees the
// request as its own.
template <class Handler, class Result>
struct pool_tracked {
  Handler handler;
  pool_state_ptr state;
  pool_lease lease;
  diagnostics* diag;

  void operator()(error_code ec, Result r) {
    pool_release(state, lease, ec, diag);
    std::move(handler)(ec, std::move(r));
  }
};

/// Tells execute from run in the pool's forwarding (both take run_params).
struct execute_call {
  protocol::run_params params;
};

template <class H>
void pool_forward(host_handle& h, protocol::run_params p, request_options o, H&& handler) {
  h.run(std::move(p), std::move(o), std::forward<H>(handler));
}
template <class H>
void pool_forward(host_handle& h, execute_call c, request_options o, H&& handler) {
  h.execute(std::move(c.params), std::move(o), std::forward<H>(handler));
}
template <class H>
void pool_forward(host_handle& h, protocol::score_params p, request_options o, H&& handler) {
  h.score(std::move(p), std::move(o), std::forward<H>(handler));
}

template <class Result, class Handler, class Call>
void pool_send(const pool_state_ptr& s, pool_lease lease, Call call, pool_request r, Handler&& h) {
  if (r.on_dispatch) r.on_dispatch();
  auto* diag = r.options.diag;
  auto host = lease.host;
  pool_forward(host, std::move(call), std::move(r.options),
               pool_tracked<std::decay_t<Handler>, Result>{std::forward<Handler>(h), s,
                                                           std::move(lease), diag});
}

template <class Result, class Call>
struct pool_waiting_call final : pool_waiting {
  handler_t<Result> handler;
  Call call;
  pool_request request;
  pool_state_ptr state;

  pool_waiting_call(handler_t<Result> h, Call c, pool_request r, pool_state_ptr s)
      : handler(std::move(h)), call(std::move(c)), request(std::move(r)), state(std::move(s)) {}
  void dispatch(pool_lease lease) override {
    // On the handler's executor, where its cancellation slot is emitted: sending reassigns that
    // slot to the process's request, which must not happen beside an emit on another thread.
    // (Through the pool's executor: an erased handler's executor cannot be posted to.)
    auto ex = boost::asio::get_associated_executor(handler, pool_executor(state));
    boost::asio::post(
        pool_executor(state),
        boost::asio::bind_executor(
            ex, [h = std::move(handler), c = std::move(call), r = std::move(request), s = state,
                 lease = std::move(lease), flag = cancelled]() mutable {
              if (flag->load()) {
                pool_release(s, lease, boost::asio::error::operation_aborted, nullptr);
                return std::move(h)(boost::asio::error::operation_aborted, Result{});
              }
              pool_send<Result>(s, std::move(lease), std::move(c), std::move(r), std::move(h));
            }));
  }
  void fail(error_code ec, std::string why) override {
    // Written before the post, which orders it before the handler reads it.
    if (!why.empty() && request.options.diag) request.options.diag->message = std::move(why);
    // Never inline: this may run inside the initiating call.
    auto ex = boost::asio::get_associated_executor(handler, pool_executor(state));
    boost::asio::post(pool_executor(state),
                      boost::asio::bind_executor(ex, [h = std::move(handler), ec]() mutable {
                        std::move(h)(ec, Result{});
                      }));
  }
  boost::asio::cancellation_slot cancellation_slot() override {
    return boost::asio::get_associated_cancellation_slot(handler);
  }
};

template <class Result>
struct pool_initiate {
  pool_state_ptr state;
  template <class Handler, class Call>
  void operator()(Handler&& h, Call call, pool_request r) const {
    if (auto lease = pool_acquire(state))
      return pool_send<Result>(state, std::move(*lease), std::move(call), std::move(r),
                               std::forward<Handler>(h));
    pool_enqueue(state, std::make_unique<pool_waiting_call<Result, Call>>(
                            handler_t<Result>(std::forward<Handler>(h)), std::move(call),
                            std::move(r), state));
  }
};

struct pool_ref;

}  // namespace detail

}  // namespace mira

template <template <class, class> class Associator, class Handler, class Result,
          class DefaultCandidate>
struct boost::asio::associator<Associator, mira::detail::pool_tracked<Handler, Result>,
                               DefaultCandidate> : Associator<Handler, DefaultCandidate> {
  static typename Associator<Handler, DefaultCandidate>::type get(
      const mira::detail::pool_tracked<Handler, Result>& h) noexcept {
    return Associator<Handler, DefaultCandidate>::get(h.handler);
  }
  static auto get(const mira::detail::pool_tracked<Handler, Result>& h,
                  const DefaultCandidate& c) noexcept {
    return Associator<Handler, DefaultCandidate>::get(h.handler, c);
  }
};

namespace mira {

class study_pool {
 public:
  using executor_type = boost::asio::any_io_executor;

  /// Starts options.processes copies of the study at once, initializes each (all within
  /// init_timeout) and checks that every one reports the same study name and study version
  /// (initialize already refuses a protocol major other than the host's, so they share that
  /// too); otherwise fails with errc::incompatible_protocol naming the difference (and the
  /// processes are killed). Any thread may call it: the processes start with posix_spawn.
  static boost::asio::awaitable<tl::expected<study_pool, error>> start(executor_type ex,
                                                                       study_command cmd,
                                                                       pool_options opts);
  /// A pool of one over a process the caller started and initialized (host.study() is set).
  /// It has no command to start the study again: when the process dies, the pool is gone.
  static study_pool adopt(host_handle host);

  executor_type get_executor() const;
  /// What the first process answered to initialize (all of them agree on name and version).
  const protocol::initialize_result& study() const;
  std::size_t size() const;
  /// Processes that take requests now.
  std::size_t live() const;
  /// A live process, or one being restarted: a request may still succeed.
  bool serviceable() const;
  /// The most requests (abandoned ones counted) the processes that are live or being
  /// restarted can hold at once: max_in_flight_per_process times their number; SIZE_MAX
  /// without a per-process cap. A scheduler over the pool keeps no more than this in flight,
  /// or requests would wait in the pool for room that may never come.
  std::size_t capacity() const;
  /// Processes started again after dying, over all slots.
  int restarts() const;
  /// Abandoned requests over every process (see host_handle::abandoned).
  std::size_t abandoned() const;
  /// Waits until abandoned() differs from `seen` (a request was abandoned, or a late answer
  /// came, on any process), or the pool was shut down; completes at once if it differs
  /// already. As host_handle::async_wait_abandoned: a scheduler over a pool learns of a freed
  /// slot when it happens instead of polling abandoned(). When the last copy of the pool goes
  /// away without shutdown(), a pending wait's handler is destroyed without running, as at a
  /// host_handle's end.
  ///
  /// @par Handler signature
  /// @code void(mira::error_code, std::size_t abandoned_now) @endcode
  ///
  /// @par Per-operation cancellation
  /// Every type: completes with `operation_aborted`.
  ///
  /// @par Executor
  /// The handler's associated executor (else the pool's); never inside this call.
  template <class Token>
  auto async_wait_abandoned(std::size_t seen, Token&& token) {
    return boost::asio::async_initiate<Token, void(error_code, std::size_t)>(
        [state = state()](auto handler, std::size_t s) {
          detail::start_pool_wait_abandoned(state, s,
                                            detail::handler_t<std::size_t>(std::move(handler)));
        },
        token, seen);
  }
  /// The study never answered `cancel` and its abandoned requests hold every slot: every live
  /// process holding abandoned requests is given up on (killed when its new process replaces
  /// it) and started again, as a dead one is, `why` told to on_restart. True when a process is
  /// (still) being started again; false when none can be, and the pool serves no more
  /// requests.
  bool give_up_on_hung(const std::string& why);
  /// Requests in flight per slot (0-based), abandoned ones counted.
  std::vector<std::size_t> loads() const;
  /// The host handle in `slot` (0-based) now, e.g. for list or list_samples.
  host_handle process(std::size_t slot) const;

  // --- Operations: as host_handle's, one name each, any completion token ----------------------
  // `op(params, [pool_request], token)`; the token defaults to mira::use_expected, so
  // `co_await pool.run(c)` gives tl::expected<run_result, error>. A pool_request converts from
  // request_options. Cancellation: a request waiting in the pool is removed (nothing is sent);
  // one handed to a process is cancelled as that host_handle's request is.

  /// As host_handle::run, on the least loaded process with room.
  ///
  /// @par Handler signature
  /// @code void(mira::error_code, protocol::run_result) @endcode
  template <class Token = use_expected_t>
  auto run(protocol::run_params p, pool_request r, Token&& token = {}) {
    return async<protocol::run_result>(std::move(p), std::move(r), token);
  }
  template <detail::completion_token_not<pool_request> Token = use_expected_t>
  auto run(protocol::run_params p, Token&& token = {}) {
    return run(std::move(p), pool_request{}, std::forward<Token>(token));
  }
  /// As host_handle::execute.
  ///
  /// @par Handler signature
  /// @code void(mira::error_code, protocol::execute_result) @endcode
  template <class Token = use_expected_t>
  auto execute(protocol::run_params p, pool_request r, Token&& token = {}) {
    return async<protocol::execute_result>(detail::execute_call{std::move(p)}, std::move(r), token);
  }
  template <detail::completion_token_not<pool_request> Token = use_expected_t>
  auto execute(protocol::run_params p, Token&& token = {}) {
    return execute(std::move(p), pool_request{}, std::forward<Token>(token));
  }
  /// As host_handle::score.
  ///
  /// @par Handler signature
  /// @code void(mira::error_code, protocol::run_result) @endcode
  template <class Token = use_expected_t>
  auto score(protocol::score_params p, pool_request r, Token&& token = {}) {
    return async<protocol::run_result>(std::move(p), std::move(r), token);
  }
  template <detail::completion_token_not<pool_request> Token = use_expected_t>
  auto score(protocol::score_params p, Token&& token = {}) {
    return score(std::move(p), pool_request{}, std::forward<Token>(token));
  }

  /// The whole catalogue, from one live process (host_handle::list_all); errc::study_exited
  /// when none is live.
  ///
  /// @par Handler signature
  /// @code void(mira::error_code, protocol::list_result) @endcode
  template <class Token = use_expected_t>
  auto list_all(request_options o, Token&& token = {}) {
    return boost::asio::async_initiate<Token, void(error_code, protocol::list_result)>(
        [state = state()](auto handler, request_options opts) {
          detail::start_pool_list_all(state, std::move(opts),
                                      detail::handler_t<protocol::list_result>(std::move(handler)));
        },
        token, std::move(o));
  }
  template <detail::completion_token_not<request_options> Token = use_expected_t>
  auto list_all(Token&& token = {}) {
    return list_all(request_options{}, std::forward<Token>(token));
  }

  /// Every process shut down at once (graceful, then SIGTERM, then SIGKILL); no restarts after
  /// it. Requests still waiting in the pool fail with errc::study_exited.
  ///
  /// @par Handler signature
  /// @code void(mira::error_code) @endcode (with the default token: tl::expected<void, error>)
  ///
  /// @par Per-operation cancellation
  /// `terminal`: stops waiting for the processes and completes with `operation_aborted`; what
  /// was done (stdin closed, signals sent, the pool closed) is not undone.
  ///
  /// @par Executor
  /// The handler's associated executor (else the pool's); never inside this call.
  template <class Token = use_expected_t>
  auto shutdown(Token&& token = {}) {
    return boost::asio::async_initiate<Token, void(error_code)>(
        [state = state()](auto handler) {
          detail::start_pool_shutdown(
              state, boost::asio::any_completion_handler<void(error_code)>(std::move(handler)));
        },
        token);
  }

 private:
  explicit study_pool(std::shared_ptr<detail::pool_ref> ref);
  const detail::pool_state_ptr& state() const;

  template <class Result, class Call, class Token>
  auto async(Call call, pool_request r, Token& token) {
    return boost::asio::async_initiate<Token, void(error_code, Result)>(
        detail::pool_initiate<Result>{state()}, token, std::move(call), std::move(r));
  }

  std::shared_ptr<detail::pool_ref> ref_;
};

}  // namespace mira
