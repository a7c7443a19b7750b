// mira::host_handle: one connection to a study (a child process or any pair of Asio byte
// streams), with every protocol call as an asynchronous operation.
//
// One name per operation (initialize, list, list_samples, list_all, run, execute, score, cancel,
// shutdown), each `op(params..., [request_options], token)`. All complete with
// `void(error_code, T)` and accept any completion token (use_awaitable, deferred, as_tuple(...),
// use_future, callbacks, mira::as_expected(token)); the default, mira::use_expected, makes
// `co_await host.run(c)` give tl::expected<run_result, error>. The work is serialized on a
// strand over the handle's executor, so a handle may be copied and used from many coroutines and
// threads at once. Completion handlers run on their own associated executor, never inline from
// the initiating call.
//
// Per-operation cancellation (run, execute, score, list, ...): the operation honours its
// associated cancellation slot.
//   - not yet written to the study: any cancellation type removes it; nothing is sent;
//   - written: `terminal` and `partial` complete it at once with operation_aborted and, for run,
//     execute and score when the study advertised `cancel`, send `cancel {"id": <its id>}`;
//     its late answer is dropped;
//     `total` is not honoured (the request already reached the study).
// So `co_await (host.run(c) || timer.async_wait(use_awaitable))`, a bound cancellation_signal
// and a fail-fast parallel_group all send `cancel` by themselves.
//
// Lifetime: the handle must be destroyed before its execution context; when the last copy goes
// away the study is killed and every pending operation completes with operation_aborted. Call
// shutdown() for a graceful exit. Destroying the io_context also kills the study.
#pragma once

#include <mira/as_expected.hpp>
#include <mira/detail/transport.hpp>
#include <mira/error.hpp>
#include <mira/log.hpp>
#include <mira/protocol/codec.hpp>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/awaitable.hpp>
#include <tl/expected.hpp>

#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

namespace boost::asio {
class io_context;
}

namespace mira {

/// How to start a study: an exact argv (no shell splitting).
struct study_command {
  std::vector<std::string> argv = {};  // argv[0] without a '/' is looked up on PATH
  std::optional<std::filesystem::path> working_directory = {};
  /// Full environment as "KEY=VALUE" entries; nullopt inherits the host's environment.
  std::optional<std::vector<std::string>> environment = {};
};

/// A notification from the study (`event` or `log`), as received.
struct notification {
  std::string method;
  std::int64_t request_id = 0;  // 0 = not correlated with a request
  boost::json::object params;
};

using notification_handler = std::function<void(const notification&)>;

struct host_options {
  std::string host_name = "mira-cpp";
  std::size_t max_line_bytes = std::size_t{64} << 20;
  /// The host's diagnostics, and the study's stderr lines when on_stderr_line is not set (as
  /// log_source::study_stderr records). Empty: dropped. Set, nothing of this host goes to the
  /// process's stderr. Runs on the handle's strand, one record at a time; must not block.
  log_sink log = stderr_log_sink();
  /// Each line the study writes on stderr. Default: a study_stderr record to `log`, which
  /// stderr_log_sink writes as "[study] <line>". Runs on the handle's strand, one line at a
  /// time; must not block (the study's output waits meanwhile).
  std::function<void(std::string_view)> on_stderr_line = {};
  std::size_t stderr_tail_lines = 20;  // kept for error diagnostics
  /// Notifications not correlated with a live request (request_id 0 or unknown). Runs on the
  /// handle's executor (not its strand), one at a time, in the order the study sent them.
  notification_handler on_notification = {};
  /// Graceful shutdown: after closing stdin, wait this long before SIGTERM ...
  std::chrono::milliseconds shutdown_grace{5000};
  /// ... and this long after SIGTERM before SIGKILL.
  std::chrono::milliseconds terminate_grace{2000};
  /// When the study closed stdout or exited, how long to wait for the rest (exit status,
  /// stderr tail) before failing the pending requests.
  std::chrono::milliseconds exit_wait{500};
  /// No output at all from the study for this long while requests are pending: it is treated
  /// as hung and killed, and the pending requests fail with errc::study_exited. 0: off.
  std::chrono::milliseconds idle_timeout{0};
};

/// Per-call extras.
struct request_options {
  /// Filled when the call fails (the study's error object, exit status, stderr tail).
  /// Must outlive the operation.
  diagnostics* diag = nullptr;
  /// event/log notifications correlated with this request, run on the completion handler's
  /// executor so a slow handler never blocks the connection's reader: in order, each before
  /// the completion, never two at once, whatever that executor is.
  notification_handler on_notification = {};
  /// Set to the request's id when the operation is initiated (before its frame is queued), so
  /// cancel(id) and correlation of logs work without the study echoing it. Written on
  /// the initiating thread; must outlive the initiation. Not set by list_all and shutdown,
  /// which are composed of several requests or none.
  std::int64_t* request_id = nullptr;
  /// When this passes before the answer, the request is cancelled as a dropped awaitable would
  /// be (removed if unsent; else abandoned, and `cancel` sent for run/execute/score when the
  /// study advertised it) and the operation completes with errc::timed_out.
  std::optional<std::chrono::steady_clock::time_point> deadline = {};
};

namespace detail {
class host_impl;
struct host_ref;

template <class T>
using handler_t = boost::asio::any_completion_handler<void(error_code, T)>;

/// A completion token rather than the operation's options: tells `op(params, token)` from
/// `op(params, options)` (and from `op(params, options, token)` with the default token).
template <class T, class Options>
concept completion_token_not = !std::is_convertible_v<T, Options>;

/// The params of initialize and list (initialize's come from host_options).
struct no_params {};
/// The composed operations, which are not one request of the method table.
struct list_all_call {};
struct shutdown_call {};

/// The io_context a completion handler runs on, read before the handler is type-erased:
/// asking the erased handler converts executors (two allocations per request). nullptr for
/// any other executor; those completions take the generic path.
boost::asio::io_context* io_context_of(const boost::asio::any_io_executor& ex) noexcept;
template <class Executor>
boost::asio::io_context* io_context_of(const Executor&) noexcept {
  return nullptr;
}

using impl_ptr = std::shared_ptr<host_impl>;
/// Starts one request. The (params, result) pair names its row of the method table
/// (src/host/methods.cpp), where it is instantiated for each protocol method.
/// `handler_context` is io_context_of(the handler's executor).
template <class Params, class Result>
void start(const impl_ptr&, Params, request_options, handler_t<Result>,
           boost::asio::io_context* handler_context);
void start_list_all(const impl_ptr&, request_options, handler_t<protocol::list_result>);
void start_shutdown(const impl_ptr&, handler_t<exit_status>);

void start_wait_abandoned(const impl_ptr&, std::size_t seen, handler_t<std::size_t>);

template <class Result>
struct initiate {
  impl_ptr impl;
  template <class Handler, class Call>
  void operator()(Handler&& h, Call call, request_options opts) const {
    if constexpr (std::is_same_v<Call, list_all_call>) {
      start_list_all(impl, std::move(opts), handler_t<Result>(std::forward<Handler>(h)));
    } else if constexpr (std::is_same_v<Call, shutdown_call>) {
      start_shutdown(impl, handler_t<Result>(std::forward<Handler>(h)));
    } else {
      auto* handler_context = io_context_of(boost::asio::get_associated_executor(h));
      start<Call, Result>(impl, std::move(call), std::move(opts),
                          handler_t<Result>(std::forward<Handler>(h)), handler_context);
    }
  }
};
}  // namespace detail

/// One connection to a study. Cheap to copy (copies share the connection); may be used from
/// many coroutines and threads at once. Every protocol call is an asynchronous operation
/// completing with `void(error_code, T)` for any completion token; with the default token it
/// is an awaitable of `tl::expected<T, error>`. The file comment above and docs/host-api.md
/// explain cancellation, executors and lifetimes; each operation repeats what applies to it.
class host_handle {
 public:
  using executor_type = boost::asio::any_io_executor;

  /// Starts the study (stdin/stdout piped, stderr drained into options.on_stderr_line).
  /// Any thread may call it, also while other threads run `ex`'s context: the study is started
  /// with posix_spawn, so the host process never forks (Asio forbids notify_fork while other
  /// threads use the context).
  static tl::expected<host_handle, error> spawn(executor_type ex, study_command cmd,
                                                host_options opts = {});

  /// Speaks the protocol over one full-duplex stream: a connected socket (TCP, Unix), or any
  /// stream with `async_read_some`, `async_write_some`, `shutdown(socket_base::shutdown_send,
  /// ec)` and `close(ec)`. No process is managed: shutdown() half-closes the write side, lets
  /// the requests in flight be answered until the study closes its end (at most
  /// shutdown_grace), and completes with an exit_status whose `no_process` is set.
  template <class Stream>
  static host_handle connect(Stream stream, host_options opts = {}) {
    auto ex = stream.get_executor();
    return host_handle(ex, std::make_unique<detail::duplex_transport<Stream>>(std::move(stream)),
                       std::move(opts));
  }

  /// Speaks the protocol over `study_output` (read) and `study_input` (write), e.g. two
  /// pipes or test streams. No process is managed; shutdown() closes `study_input` and
  /// drains as above.
  template <class ReadStream, class WriteStream>
  static host_handle connect(ReadStream study_output, WriteStream study_input,
                             host_options opts = {}) {
    auto ex = study_output.get_executor();
    return host_handle(ex,
                       std::make_unique<detail::stream_transport<ReadStream, WriteStream>>(
                           std::move(study_output), std::move(study_input)),
                       std::move(opts));
  }

  executor_type get_executor() const;

  /// Result of initialize, once it has completed (capabilities, study name, ...).
  std::optional<protocol::initialize_result> study() const;

  /// Requests whose operation was cancelled but which the study has not answered yet (it may
  /// ignore `cancel`): work the study still does. Schedulers count them against concurrency.
  std::size_t abandoned() const;

  /// Waits until abandoned() differs from `seen` (a request was abandoned, or a late answer
  /// came), or the connection ended; completes at once if it differs already. So a scheduler
  /// learns of a freed slot when it happens instead of polling abandoned().
  ///
  /// @par Handler signature
  /// @code void(mira::error_code, std::size_t abandoned_now) @endcode
  ///
  /// @par Per-operation cancellation
  /// Every type: completes with `operation_aborted`. Nothing is sent to the study.
  ///
  /// @par Executor, object lifetimes
  /// As for the requests below; the handler never runs inside this call.
  template <class Token>
  auto async_wait_abandoned(std::size_t seen, Token&& token) {
    return boost::asio::async_initiate<Token, void(error_code, std::size_t)>(
        [impl = impl()](auto handler, std::size_t s) {
          detail::start_wait_abandoned(impl, s, detail::handler_t<std::size_t>(std::move(handler)));
        },
        token, seen);
  }

  // --- Operations: one name each, any completion token ----------------------------------------
  // Each completes with `void(error_code, T)` and takes the forms `op(params..., token)` and
  // `op(params..., request_options, token)`. The token defaults to mira::use_expected, so
  // `co_await host.run(c)` in an asio::awaitable gives tl::expected<T, error> and never throws;
  // asio::use_awaitable (throws system_error), callbacks, asio::deferred, as_tuple(...) and
  // mira::as_expected(token) (leading code plus the expected, for parallel_group) work as for
  // any Asio operation.

  /// Sends protocol_version "1.1" and the host name; fails with incompatible_protocol when the
  /// study's major differs. Records the capabilities (e.g. whether `cancel` frames are sent).
  ///
  /// @par Handler signature
  /// @code void(mira::error_code, protocol::initialize_result) @endcode
  ///
  /// @par Per-operation cancellation
  /// `terminal`, `partial`: completes at once with `operation_aborted`; no `cancel` is sent (the
  /// protocol defines it for run, execute and score only), and a late answer is dropped.
  /// `total`: only before the request is written (docs/cancellation.md has the table).
  ///
  /// @par Executor
  /// The handler runs on its associated executor (by default the handle's), never inside this
  /// call; the work itself runs on the handle's strand, so any thread may call this.
  ///
  /// @par Object lifetimes
  /// `o.diag`, when set, must outlive the operation. If the last copy of the handle goes while
  /// it is pending, it completes with `operation_aborted`.
  template <class Token = use_expected_t>
  auto initialize(request_options o, Token&& token = {}) {
    return async<protocol::initialize_result>(detail::no_params{}, std::move(o), token);
  }
  template <detail::completion_token_not<request_options> Token = use_expected_t>
  auto initialize(Token&& token = {}) {
    return initialize(request_options{}, std::forward<Token>(token));
  }

  /// The catalogue as sent (first sample page of each eval).
  ///
  /// @par Handler signature
  /// @code void(mira::error_code, protocol::list_result) @endcode
  ///
  /// @par Per-operation cancellation, executor, object lifetimes
  /// As for initialize.
  template <class Token = use_expected_t>
  auto list(request_options o, Token&& token = {}) {
    return async<protocol::list_result>(detail::no_params{}, std::move(o), token);
  }
  template <detail::completion_token_not<request_options> Token = use_expected_t>
  auto list(Token&& token = {}) {
    return list(request_options{}, std::forward<Token>(token));
  }

  /// One further page of an eval's samples.
  ///
  /// @par Handler signature
  /// @code void(mira::error_code, protocol::list_samples_result) @endcode
  ///
  /// @par Per-operation cancellation, executor, object lifetimes
  /// As for initialize; the params are taken by value.
  template <class Token = use_expected_t>
  auto list_samples(protocol::list_samples_params p, request_options o, Token&& token = {}) {
    return async<protocol::list_samples_result>(std::move(p), std::move(o), token);
  }
  template <detail::completion_token_not<request_options> Token = use_expected_t>
  auto list_samples(protocol::list_samples_params p, Token&& token = {}) {
    return list_samples(std::move(p), request_options{}, std::forward<Token>(token));
  }

  /// The whole catalogue: `list`, then `list_samples` for every eval until its cursor ends.
  /// Fails with cursor_loop when a cursor repeats.
  ///
  /// @par Handler signature
  /// @code void(mira::error_code, protocol::list_result) @endcode
  ///
  /// @par Per-operation cancellation
  /// A composed operation: the signal reaches the `list` or `list_samples` request in flight,
  /// which is cancelled by the rules of a single request, and the whole operation completes
  /// with `operation_aborted`.
  ///
  /// @par Executor, object lifetimes
  /// As for initialize.
  template <class Token = use_expected_t>
  auto list_all(request_options o, Token&& token = {}) {
    return async<protocol::list_result>(detail::list_all_call{}, std::move(o), token);
  }
  template <detail::completion_token_not<request_options> Token = use_expected_t>
  auto list_all(Token&& token = {}) {
    return list_all(request_options{}, std::forward<Token>(token));
  }

  /// Runs and scores one case.
  ///
  /// @par Handler signature
  /// @code void(mira::error_code, protocol::run_result) @endcode
  ///
  /// @par Per-operation cancellation
  /// `terminal`, `partial`: completes at once with `operation_aborted`; once the request was
  /// written, `cancel {"id": N}` is sent when the study advertised `cancel`. `total`: only
  /// before the request is written (docs/cancellation.md has the table). So a dropped
  /// awaitable (`host.run(c) || timer`) or a request_options::deadline sends `cancel`.
  ///
  /// @par Executor
  /// The handler runs on its associated executor (by default the handle's), never inside this
  /// call; the work itself runs on the handle's strand, so any thread may call this.
  ///
  /// @par Object lifetimes
  /// The params are taken by value; `o.diag`, when set, must outlive the operation. If the last
  /// copy of the handle goes while it is pending, it completes with `operation_aborted`.
  template <class Token = use_expected_t>
  auto run(protocol::run_params p, request_options o, Token&& token = {}) {
    return async<protocol::run_result>(std::move(p), std::move(o), token);
  }
  template <detail::completion_token_not<request_options> Token = use_expected_t>
  auto run(protocol::run_params p, Token&& token = {}) {
    return run(std::move(p), request_options{}, std::forward<Token>(token));
  }

  /// Runs one case without scoring; the full transcript comes back, its flat fields projected
  /// from the ATIF trajectory where the study left them unset. Needs the `execute` capability.
  ///
  /// @par Handler signature
  /// @code void(mira::error_code, protocol::execute_result) @endcode
  ///
  /// @par Per-operation cancellation, executor, object lifetimes
  /// As for run.
  template <class Token = use_expected_t>
  auto execute(protocol::run_params p, request_options o, Token&& token = {}) {
    return async<protocol::execute_result>(std::move(p), std::move(o), token);
  }
  template <detail::completion_token_not<request_options> Token = use_expected_t>
  auto execute(protocol::run_params p, Token&& token = {}) {
    return execute(std::move(p), request_options{}, std::forward<Token>(token));
  }

  /// Scores a supplied transcript. Needs the `score` capability.
  ///
  /// @par Handler signature
  /// @code void(mira::error_code, protocol::run_result) @endcode
  ///
  /// @par Per-operation cancellation, executor, object lifetimes
  /// As for run.
  template <class Token = use_expected_t>
  auto score(protocol::score_params p, request_options o, Token&& token = {}) {
    return async<protocol::run_result>(std::move(p), std::move(o), token);
  }
  template <detail::completion_token_not<request_options> Token = use_expected_t>
  auto score(protocol::score_params p, Token&& token = {}) {
    return score(std::move(p), request_options{}, std::forward<Token>(token));
  }

  /// Explicit `cancel {id}`; completes with whether the study found the request in flight.
  /// Needs the `cancel` capability.
  ///
  /// @par Handler signature
  /// @code void(mira::error_code, bool) @endcode
  ///
  /// @par Per-operation cancellation, executor, object lifetimes
  /// As for initialize.
  template <class Token = use_expected_t>
  auto cancel(std::int64_t request_id, request_options o, Token&& token = {}) {
    return async<bool>(protocol::cancel_params{request_id}, std::move(o), token);
  }
  template <detail::completion_token_not<request_options> Token = use_expected_t>
  auto cancel(std::int64_t request_id, Token&& token = {}) {
    return cancel(request_id, request_options{}, std::forward<Token>(token));
  }

  /// Graceful exit: no new requests; what was already queued (requests, `cancel` frames) is
  /// written whole, then stdin closed; SIGTERM when the study is still there shutdown_grace
  /// after the call, SIGKILL terminate_grace later. Pending requests complete with
  /// study_exited once the study is gone.
  ///
  /// @par Handler signature
  /// @code void(mira::error_code, exit_status) @endcode
  ///
  /// @par Per-operation cancellation
  /// A composed operation: the slot is forwarded to it, and a cancelled shutdown completes
  /// with `operation_aborted`. What it has done (stdin closed, a signal sent) is not undone.
  ///
  /// @par Executor
  /// The handler runs on its associated executor (by default the handle's), never inside this
  /// call; the work itself runs on the handle's strand, so any thread may call this.
  ///
  /// @par Object lifetimes
  /// If the last copy of the handle goes while it is pending, the study is killed at once.
  template <class Token = use_expected_t>
  auto shutdown(Token&& token = {}) {
    return async<exit_status>(detail::shutdown_call{}, request_options{}, token);
  }

 private:
  host_handle(executor_type ex, std::unique_ptr<detail::transport> io, host_options opts);
  explicit host_handle(std::shared_ptr<detail::host_ref> ref);

  template <class Result, class Call, class Token>
  auto async(Call call, request_options o, Token& token) {
    return boost::asio::async_initiate<Token, void(error_code, Result)>(
        detail::initiate<Result>{impl()}, token, std::move(call), std::move(o));
  }
  const detail::impl_ptr& impl() const;

  std::shared_ptr<detail::host_ref> ref_;
};

/// A study that died, started again: `cmd` spawned with `options` on the calling coroutine's
/// executor, initialized within `init_timeout` (errc::timed_out, the message naming the limit),
/// and refused with errc::incompatible_protocol unless it is the study `original` describes:
/// the same name and study version (initialize itself refuses another protocol major version).
/// How a study_pool starts a process in its slot again, after the one there died or was given
/// up on as hung.
boost::asio::awaitable<tl::expected<host_handle, error>> restart_study(
    study_command cmd, host_options options, protocol::initialize_result original,
    std::chrono::milliseconds init_timeout);

/// The name the Rust host and its users write; `host_handle` is primary (the library's names
/// are snake_case), and this alias keeps code written against the Rust spelling compiling.
using HostHandle = host_handle;

}  // namespace mira
