// The connection object behind every host_handle, private to src/host: its state and the
// declarations of its parts, which live in one file per concern (requests.cpp, io_loops.cpp,
// lifecycle.cpp), plus the per-request op type and the method table's shape (methods.cpp).
#pragma once

#include <mira/host.hpp>

#include "connection/multiplexer.hpp"
#include "framing/line_framer.hpp"

#include "study_process.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/execution_context.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <atomic>
#include <deque>
#include <list>
#include <memory>
#include <mutex>
#include <type_traits>
#include <utility>

namespace mira::detail {

namespace asio = boost::asio;
namespace json = boost::json;

class host_impl;

// Decodes a response's result: from its text where the type has a text decoder, else from
// the DOM that multiplexer::result_value() parses on demand.
template <class T>
using decoder = std::optional<protocol::decode_error> (*)(multiplexer&, inbound&, T& out);
// Checks a decoded result against the connection (initialize: the protocol major).
template <class T>
using validator = error_code (*)(host_impl&, T&, diagnostics&);

// One row of the method table (methods.cpp): what the host needs to know of a protocol method
// besides its types.
struct method_info {
  std::string_view name;
  std::string_view capability;  // empty: every study answers it
  bool cancellable = false;     // `cancel` is defined for it (run, execute, score only)
  bool before_initialize = false;
};

// The typed part of a row: how the answer is decoded and checked.
template <class T>
struct method {
  method_info info;
  decoder<T> decode = nullptr;
  validator<T> check = nullptr;
  // The multiplexer's hot path (pending_op::decode_unchecked): a reader that checks the text
  // as it decodes it. Null where the type has none: those results are always checked first.
  bool (*read_unchecked)(std::string_view, T&) = nullptr;
};

// Calls made in the order they were queued, one at a time, on an executor that may run
// handlers on several threads at once: posting each call there would lose their order (two
// handlers of a plain multi-threaded executor run concurrently) and let a completion overtake
// the notifications before it. One drain runs at a time and takes the calls in turn.
class ordered_calls : public std::enable_shared_from_this<ordered_calls> {
 public:
  // Drains run on `target`, reached through `via` (an erased handler's executor cannot be posted
  // to directly in Asio 1.26).
  ordered_calls(asio::any_io_executor via, asio::any_completion_executor target)
      : via_(std::move(via)), target_(std::move(target)) {}

  template <class F>
  void push(F f) {
    bool start = false;
    {
      std::lock_guard lock(mutex_);
      calls_.push_back(std::make_unique<call<F>>(std::move(f)));
      start = !std::exchange(draining_, true);
    }
    if (start)
      asio::post(via_,
                 asio::bind_executor(target_, [self = shared_from_this()] { self->drain(); }));
  }

 private:
  struct call_base {
    virtual ~call_base() = default;
    virtual void run() = 0;
  };
  template <class F>
  struct call final : call_base {
    explicit call(F fn) : f(std::move(fn)) {}
    void run() override { f(); }
    F f;
  };

  void drain() {
    for (;;) {
      std::unique_ptr<call_base> next;
      {
        std::lock_guard lock(mutex_);
        if (calls_.empty()) {
          draining_ = false;
          return;
        }
        next = std::move(calls_.front());
        calls_.pop_front();
      }
      next->run();
    }
  }

  asio::any_io_executor via_;
  asio::any_completion_executor target_;
  std::mutex mutex_;
  std::deque<std::unique_ptr<call_base>> calls_;
  bool draining_ = false;
};

// A request waiting in the multiplexer. Completion runs on the strand; the user's handler is
// then posted to its own executor, behind the request's notifications if it had any.
struct op_base : pending_op {
  std::int64_t id = 0;
  const method_info* info = nullptr;  // its row of the method table (static storage)
  request_options opts;
  asio::io_context* handler_context = nullptr;  // the io_context the handler runs on, if any
  // Made at the request's first notification: its notifications and then its completion, in
  // order on the handler's executor.
  std::shared_ptr<ordered_calls> delivery;
  std::optional<asio::steady_timer> deadline;  // request_options::deadline, armed on the strand
  std::string_view name() const { return info->name; }
  /// `response` (null when ec is set) is only valid during the call. `from_reader`: called by
  /// the reader (not inside any initiating function), so it may complete inline.
  virtual void complete(host_impl& host, error_code ec, inbound* response, diagnostics d,
                        bool from_reader) = 0;
  virtual void notify(host_impl& host, notification n) = 0;
};

// Keeps every live host of an execution context, so tearing the context down kills their
// studies and breaks the cycle "pending op -> coroutine frame -> handle -> host".
class host_registry final : public asio::execution_context::service {
 public:
  static inline asio::execution_context::id id;
  explicit host_registry(asio::execution_context& ctx) : service(ctx) {}
  void add(const std::shared_ptr<host_impl>& h);
  void remove(host_impl* h);
  void shutdown() override;

 private:
  std::mutex mutex_;
  std::vector<std::weak_ptr<host_impl>> hosts_;
};

class host_impl : public std::enable_shared_from_this<host_impl> {
 public:
  host_impl(asio::any_io_executor ex, std::unique_ptr<transport> io,
            std::unique_ptr<study_process> proc, host_options opts)
      : strand_(asio::make_strand(ex)),
        io_(std::move(io)),
        proc_(std::move(proc)),
        opts_(std::move(opts)),
        framer_(opts_.max_line_bytes),
        err_framer_(std::size_t{64} << 10, std::size_t{64} << 10),
        close_timer_(strand_),
        exit_event_(strand_),
        idle_timer_(strand_) {
    if (!opts_.log) opts_.log = [](const log_record&) {};
  }

  ~host_impl() {
    if (registry_) registry_->remove(this);
  }

  void start();

  // --- requests (initiation runs in the caller's context) ------------------------------------

  // Starts one request of the method table (methods.cpp): allocates its id, hooks its
  // cancellation slot and hands it to the strand.
  template <class T>
  void request(const method<T>& m, std::string params, request_options o, handler_t<T> h,
               asio::io_context* handler_context);
  void submit(const std::string& params, std::unique_ptr<op_base> op);
  void cancel_request(std::int64_t id, asio::cancellation_type_t type,
                      error_code ec = asio::error::operation_aborted, diagnostics d = {});

  // How a completion reaches its handler, on the handler's own executor:
  //  - `post`: always queued. Used from the initiating call chain (a request refused at once)
  //    and wherever the caller might be inside an initiating function.
  //  - `dispatch`: runs at once when this thread already runs the handler's executor. Only
  //    used from the reader, which is never inside an initiating function; there it lets the
  //    awaiting coroutine resume and issue its next request without a round trip through the
  //    scheduler. (asio::append is avoided: it would copy the any_completion_handler into a new
  //    one, recursively, in 1.81.)
  enum class completion { post, dispatch };

  template <class T>
  void deliver(handler_t<T> h, error_code ec, std::type_identity_t<T>&& value,
               completion how = completion::post, asio::io_context* handler_context = nullptr) {
    // The handler's io_context runs in this thread: what dispatch would do, without asking the
    // erased handler for its executor or wrapping it and its value into a function object.
    if (how == completion::dispatch && handler_context &&
        handler_context->get_executor().running_in_this_thread())
      return std::move(h)(ec, std::move(value));
    auto ex = asio::get_associated_executor(h, strand_.get_inner_executor());
    auto call = [h = std::move(h), ec, v = std::move(value)]() mutable {
      std::move(h)(ec, std::move(v));
    };
    if (how == completion::dispatch)
      asio::dispatch(ex, std::move(call));
    else
      asio::post(strand_.get_inner_executor(), asio::bind_executor(ex, std::move(call)));
  }

  void fail(std::unique_ptr<op_base> op, error_code ec, diagnostics d) {
    op->complete(*this, ec, nullptr, std::move(d), false);
  }

  void uncorrelated(notification n);

  void set_initialized(const protocol::initialize_result& r);

  std::optional<protocol::initialize_result> initialized() const;

  const host_options& options() const { return opts_; }
  multiplexer& mux() { return mux_; }

  void log(log_level level, std::string_view message, std::optional<std::int64_t> id = {},
           std::string_view method = {}, std::string_view excerpt = {});

  // --- shutdown ------------------------------------------------------------------------------

  asio::awaitable<exit_status> shutdown();

  // The last handle went away: stop everything now.
  void release();

  // The execution context is being torn down: no handler can run any more.
  void abandon();

  // Completes `h` with the abandoned count once it differs from `seen` (at once if it does
  // already), or when the connection ends. On the strand; `key` is from next_waiter_key_, and
  // h's cancellation slot (assigned by the initiation) drops it.
  void wait_abandoned(std::size_t seen, std::uint64_t key, handler_t<std::size_t> h);
  void drop_abandoned_waiter(std::uint64_t key);

  asio::strand<asio::any_io_executor> strand_;
  std::atomic<std::int64_t> next_id_{1};
  std::atomic<std::size_t> abandoned_{0};          // mux_.abandoned(), readable from any thread
  std::atomic<std::uint64_t> next_waiter_key_{1};  // async_wait_abandoned's, from any thread

 private:
  // The count changed (a cancellation, a late answer, the end): wake whoever waits for that.
  void abandoned_changed();

  error_code closed_code() const {
    return close_code_ ? close_code_ : make_error_code(errc::study_exited);
  }

  // --- writing -------------------------------------------------------------------------------

  // Writing is deferred to the end of the strand's current burst, so every request submitted
  // in it (typically one per answer of the last read) goes out in one gathered write instead of
  // one system call (and one wake-up of the study) each.
  void schedule_write();
  void kick_writer();

  void on_written(error_code ec);

  // --- idle timeout --------------------------------------------------------------------------

  // While requests are pending, the study must write something at least every idle_timeout.
  void arm_idle();
  void on_idle(error_code ec);

  // --- reading stdout ------------------------------------------------------------------------

  void read_stdout();
  void on_stdout(error_code ec, std::size_t n);

  void on_frame(const line_framer::frame& f);
  void on_line(std::string_view line);

  // --- stderr and exit -----------------------------------------------------------------------

  void read_stderr();
  void on_stderr(error_code ec, std::size_t n);

  void stderr_line(std::string_view line);
  void on_exit(error_code ec, exit_status st);

  asio::awaitable<bool> wait_exit(std::chrono::steady_clock::duration d);

  // Both outputs ended (stderr only exists with a process).
  bool outputs_closed() const { return stdout_eof_ && (stderr_eof_ || !proc_); }

  asio::awaitable<void> wait_closed(std::chrono::steady_clock::duration d);

  // shutdown()'s steps, run by one caller at a time.
  asio::awaitable<exit_status> shut_down();

  // Until what was queued before shutdown() (requests, `cancel` frames) is written whole, the
  // write fails, or `d` passes.
  asio::awaitable<void> flush_writes(std::chrono::steady_clock::duration d);

  // The study is going (output closed, input broken or process exited): fail what waits once
  // the rest has arrived (exit status, last stderr lines), or after exit_wait at the latest.
  void maybe_finish();
  std::string gone_why() const;
  void finish_close(error_code ec, std::string why);

  std::unique_ptr<transport> io_;
  std::unique_ptr<study_process> proc_;
  host_options opts_;
  multiplexer mux_;
  line_framer framer_;
  line_framer err_framer_;
  std::deque<std::string> tail_;
  asio::steady_timer close_timer_;
  asio::steady_timer exit_event_;  // cancelled when the process exits
  asio::steady_timer idle_timer_;
  std::chrono::steady_clock::time_point idle_since_ = std::chrono::steady_clock::now();
  bool idle_armed_ = false;

  std::optional<asio::steady_timer> close_wait_;
  std::optional<asio::steady_timer> flush_wait_;
  std::optional<asio::steady_timer> shutdown_done_;  // cancelled when a shutdown() ends
  std::optional<exit_status> shutdown_status_;       // what the one that finished answered
  // host_options::on_notification's calls, in the order the study sent them (made at the
  // first): on the inner executor, not the strand, so a slow callback does not hold up the
  // connection.
  std::shared_ptr<ordered_calls> uncorrelated_;
  bool shutdown_running_ = false;
  host_registry* registry_ = nullptr;

  mutable std::mutex init_mutex_;  // init_ is read from user threads
  std::optional<protocol::initialize_result> init_;
  std::string study_name_;
  // A list: Boost 1.81's any_completion_handler recurses without end when move-assigned,
  // which erasing from the middle of a vector does.
  std::list<std::pair<std::uint64_t, handler_t<std::size_t>>> abandoned_waiters_;
  bool initialized_ = false;  // on the strand: initialize succeeded

  bool stdout_eof_ = false;
  bool stderr_eof_ = false;
  bool exited_ = false;
  bool output_broken_ = false;
  bool output_closed_ = false;  // shutting down or released: no new requests
  bool output_shut_ = false;    // the study's input is closed: nothing more can be written
  bool close_timer_armed_ = false;
  bool write_scheduled_ = false;
  bool finished_ = false;
  std::optional<exit_status> exit_;
  std::string gone_reason_;
  // gone_reason_ is how the host noticed (a broken pipe, the end of the output), not why: once
  // the exit status is known, that is the reason.
  bool gone_noticed_only_ = false;
  error_code close_code_;
  diagnostics close_diag_;
};

template <class T>
struct typed_op final : op_base {
  // Move-constructed only: Asio 1.26's any_completion_handler move *assignment* copies the
  // handler into a new wrapper of itself and recurses until the stack overflows.
  explicit typed_op(handler_t<T> h) : handler(std::move(h)) {}
  handler_t<T> handler;
  const method<T>* m = nullptr;
  T out{};               // decoded in place: a run result is large, and each move of it costs
  bool decoded = false;  // by decode_unchecked, before the response reached complete()

  bool decode_unchecked(std::string_view result_text) override {
    decoded = m->read_unchecked && m->read_unchecked(result_text, out);
    return decoded;
  }

  void complete(host_impl& host, error_code ec, inbound* response, diagnostics d,
                bool from_reader) override {
    if (!ec && response) {
      auto e = decoded ? std::nullopt : m->decode(host.mux(), *response, out);
      if (e) {
        out = T{};
        ec = make_error_code(errc::bad_response);
        d.message = "the result of '" + std::string(name()) + "' does not decode: " + e->message();
        host.log(log_level::warning, d.message, id, name());
      } else if (m->check) {
        ec = m->check(host, out, d);
      }
    }
    if (opts.diag) *opts.diag = ec ? std::move(d) : diagnostics{};
    if (delivery) {
      // Behind the notifications still queued for this request.
      return delivery->push([h = std::move(handler), ec, v = std::move(out)]() mutable {
        std::move(h)(ec, std::move(v));
      });
    }
    host.deliver(std::move(handler), ec, std::move(out),
                 from_reader ? host_impl::completion::dispatch : host_impl::completion::post,
                 handler_context);
  }

  void notify(host_impl& host, notification n) override {
    if (!opts.on_notification) return host.uncorrelated(std::move(n));
    // Run it where the requester's completion runs, not on the connection's strand.
    if (!delivery) {
      auto inner = host.strand_.get_inner_executor();
      delivery =
          std::make_shared<ordered_calls>(inner, asio::get_associated_executor(handler, inner));
    }
    delivery->push([cb = opts.on_notification, n = std::move(n)] { cb(n); });
  }
};

template <class T>
void host_impl::request(const method<T>& m, std::string params, request_options o, handler_t<T> h,
                        asio::io_context* handler_context) {
  auto id = next_id_.fetch_add(1);
  if (o.request_id) *o.request_id = id;
  // Type-erased first, then the slot: any_completion_handler replaces a handler assigned to
  // the slot before it was built.
  auto slot = asio::get_associated_cancellation_slot(h);
  if (slot.is_connected()) {
    slot.assign([w = weak_from_this(), id](asio::cancellation_type_t type) {
      if (auto self = w.lock())
        asio::post(self->strand_, [self, id, type] { self->cancel_request(id, type); });
    });
  }
  auto op = std::make_unique<typed_op<T>>(std::move(h));
  op->id = id;
  op->info = &m.info;
  op->m = &m;
  op->opts = std::move(o);
  op->handler_context = handler_context;
  // Typically a completion's handler asking for the next case, on the strand already: what
  // dispatch would do, without wrapping the call and converting executors on the way.
  if (strand_.running_in_this_thread()) return submit(params, std::move(op));
  asio::dispatch(strand_, [self = shared_from_this(), params = std::move(params),
                           op = std::move(op)]() mutable { self->submit(params, std::move(op)); });
}

// A host-side coroutine's result, for spawn_op.
template <class T>
struct outcome {
  error_code ec;
  T value{};
};

// Builds the awaitable outside any coroutine: g++ 12 mis-destroys temporaries built inside a
// co_await full-expression (seen as a double release of the shared_ptr under ASan).
template <class T, class Call>
auto async_call(impl_ptr impl, Call call, request_options o) {
  auto tok = asio::as_tuple(asio::use_awaitable);
  return asio::async_initiate<decltype(tok), void(error_code, T)>(initiate<T>{std::move(impl)}, tok,
                                                                  std::move(call), std::move(o));
}

// Runs a host-side coroutine as one operation: the handler's cancellation slot reaches the
// coroutine, and the handler completes on its own executor.
template <class T, class Outcome>
void spawn_op(const impl_ptr& impl, asio::awaitable<Outcome> coro, handler_t<T> h,
              diagnostics* diag) {
  auto slot = asio::get_associated_cancellation_slot(h);
  asio::co_spawn(
      impl->strand_, std::move(coro),
      asio::bind_cancellation_slot(
          slot, [impl, h = std::move(h), diag](std::exception_ptr ep, Outcome out) mutable {
            if (ep) {
              out = Outcome{};
              out.ec = asio::error::operation_aborted;
              if (diag) diag->clear();
            }
            impl->deliver(std::move(h), out.ec, std::move(out.value));
          }));
}

}  // namespace mira::detail
