// The coroutine/callback shell around the sans-I/O multiplexer: moves bytes between the
// transport and the core, completes handlers on their own executors, watches the study process
// and turns its death into errors for every waiting request.
#include <mira/host.hpp>
#include <mira/protocol/json_text.hpp>
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
#include <csignal>
#include <cstdio>
#include <deque>
#include <mutex>
#include <unordered_set>

namespace mira::detail {

namespace asio = boost::asio;
namespace json = boost::json;

class host_impl;

// A request waiting in the multiplexer. Completion runs on the strand; the user's handler is
// then posted to its own executor.
struct op_base : pending_op {
  std::int64_t id = 0;
  std::string_view method;
  request_options opts;
  home_t home = nullptr;  // the io_context the handler runs on, if it is one
  bool notified = false;  // notifications were posted to its handler: completion must follow them
  /// `response` (null when ec is set) is only valid during the call. `from_reader`: called by
  /// the reader (not inside any initiating function), so it may complete inline.
  virtual void complete(host_impl& host, error_code ec, inbound* response, diagnostics d,
                        bool from_reader) = 0;
  virtual void notify(host_impl& host, notification n) = 0;
};

// Decodes a response's result: from its text where the type has a text decoder, else from
// the DOM that multiplexer::result_value() parses on demand.
template <class T>
using decoder = std::optional<protocol::decode_error> (*)(multiplexer&, inbound&, T& out);
template <class T>
using validator = error_code (*)(host_impl&, T&, diagnostics&);

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

  void start() {
    registry_ = &asio::use_service<host_registry>(
        asio::query(strand_.get_inner_executor(), asio::execution::context));
    registry_->add(shared_from_this());
    asio::dispatch(strand_, [self = shared_from_this()] {
      self->read_stdout();
      if (self->proc_) {
        self->read_stderr();
        self->proc_->async_wait_exit(asio::bind_executor(
            self->strand_, [self](error_code ec, exit_status st) { self->on_exit(ec, st); }));
      }
    });
  }

  // --- requests (initiation runs in the caller's context) ------------------------------------

  template <class T>
  void request(std::string_view method, std::string params, request_options o, handler_t<T> h,
               home_t home, decoder<T> dec, validator<T> check = nullptr);

  void submit(const std::string& params, std::unique_ptr<op_base> op) {
    auto id = op->id;
    auto method = op->method;
    if (finished_ || output_closed_) return fail(std::move(op), closed_code(), close_diag_);
    if (auto need = required_capability(method); !need.empty()) {
      std::lock_guard lock(init_mutex_);
      if (init_ && !init_->has_capability(need)) {
        diagnostics d;
        d.message = "the study does not advertise the '" + std::string(need) + "' capability";
        return fail(std::move(op), make_error_code(errc::not_supported), std::move(d));
      }
    }
    if (auto back = mux_.add_request(id, method, params, std::move(op)))
      return fail(std::unique_ptr<op_base>(static_cast<op_base*>(back.release())), closed_code(),
                  close_diag_);
    // Requests are written at the end of the burst that made them (one write, one wake-up of
    // the study), unless the study has run dry: when every request it holds may already be
    // answered in the lines not yet processed, it gets what has built up once that is as much
    // as is left to process, so it works on one half while the host does the other.
    auto unprocessed = framer_.lines_buffered();
    if (unprocessed >= mux_.outstanding() && mux_.queued() >= unprocessed) return kick_writer();
    schedule_write();
  }

  void cancel_request(std::int64_t id, asio::cancellation_type_t type) {
    auto out = mux_.cancel(id, type, next_id_.fetch_add(1));
    abandoned_ = mux_.abandoned();
    if (out.op) {
      auto* op = static_cast<op_base*>(out.op.release());
      log(log_level::debug,
          out.kind == cancel_kind::removed_unsent ? "request cancelled before it was sent"
                                                  : "request cancelled",
          id, op->method);
      fail(std::unique_ptr<op_base>(op), asio::error::operation_aborted, {});
    }
    if (out.cancel_frame_queued) schedule_write();
  }

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
  void deliver(handler_t<T> h, error_code ec, T&& value, completion how = completion::post,
               home_t home = nullptr) {
    // The handler's io_context runs in this thread: what dispatch would do, without asking the
    // erased handler for its executor or wrapping it and its value into a function object.
    if (how == completion::dispatch && home && home->get_executor().running_in_this_thread())
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

  void post_notification(const notification_handler& cb, notification n) {
    // The inner executor, not the strand: a slow handler must not hold up the connection.
    asio::post(strand_.get_inner_executor(), [cb, n = std::move(n)] { cb(n); });
  }

  void uncorrelated(notification n) {
    if (opts_.on_notification) post_notification(opts_.on_notification, std::move(n));
  }

  void set_initialized(const protocol::initialize_result& r) {
    {
      std::lock_guard lock(init_mutex_);
      init_ = r;
    }
    study_name_ = r.study;
    mux_.set_supports_cancel(r.has_capability("cancel"));
  }

  std::optional<protocol::initialize_result> initialized() const {
    std::lock_guard lock(init_mutex_);
    return init_;
  }

  const host_options& options() const { return opts_; }
  multiplexer& mux() { return mux_; }

  void log(log_level level, std::string_view message, std::optional<std::int64_t> id = {},
           std::string_view method = {}, std::string_view excerpt = {}) {
    log_record r;
    r.level = level;
    r.message = message;
    r.study = study_name_;
    r.request_id = id;
    r.method = method;
    r.excerpt = excerpt;
    opts_.log(r);
  }

  // --- shutdown ------------------------------------------------------------------------------

  asio::awaitable<exit_status> shutdown() {
    output_closed_ = true;
    io_->close_output();
    if (!proc_) {
      finish_close(make_error_code(errc::study_exited), "the host shut the connection down");
      co_return exit_status{};
    }
    bool gone = co_await wait_exit(opts_.shutdown_grace);
    if (!gone) {
      log(log_level::warning, "the study did not exit after its input closed; sending SIGTERM");
      proc_->request_exit();
      gone = co_await wait_exit(opts_.terminate_grace);
    }
    if (!gone) {
      log(log_level::warning, "the study ignored SIGTERM; sending SIGKILL");
      proc_->kill();
      while (!exited_) co_await wait_exit(std::chrono::hours(1));
    }
    // Give stdout and stderr a moment to drain the last lines before failing what is left.
    co_await wait_closed(opts_.exit_wait);
    finish_close(make_error_code(errc::study_exited), "the study exited during shutdown");
    co_return exit_.value_or(exit_status{});
  }

  // The last handle went away: stop everything now.
  void release() {
    if (proc_ && !exited_) proc_->kill();
    output_closed_ = true;
    finish_close(asio::error::operation_aborted, "the host handle was released");
    if (proc_) proc_->close_stderr();
  }

  // The execution context is being torn down: no handler can run any more.
  void abandon() {
    if (proc_ && !exited_) proc_->kill();
    finished_ = true;
    auto ops = mux_.close();
    ops.clear();  // destroys handlers (and the coroutine frames they own) without running them
    io_->close();
    if (proc_) proc_->close_stderr();
  }

  asio::strand<asio::any_io_executor> strand_;
  std::atomic<std::int64_t> next_id_{1};
  std::atomic<std::size_t> abandoned_{0};  // mux_.abandoned(), readable from any thread

 private:
  static std::string_view required_capability(std::string_view method) {
    if (method == "execute") return "execute";
    if (method == "score") return "score";
    if (method == "cancel") return "cancel";
    return {};
  }

  error_code closed_code() const {
    return close_code_ ? close_code_ : make_error_code(errc::study_exited);
  }

  // --- writing -------------------------------------------------------------------------------

  // Writing is deferred to the end of the strand's current burst, so every request submitted
  // in it (typically one per answer of the last read) goes out in one gathered write instead of
  // one system call (and one wake-up of the study) each.
  void schedule_write() {
    if (write_scheduled_) return;
    write_scheduled_ = true;
    asio::post(strand_, [self = shared_from_this()] {
      self->write_scheduled_ = false;
      self->kick_writer();
    });
  }

  void kick_writer() {
    if (mux_.writing() || finished_ || output_broken_ || !mux_.has_pending_writes()) return;
    // The idle clock starts when the study gets work while it had none.
    if (mux_.outstanding() == 0) idle_since_ = std::chrono::steady_clock::now();
    io_->async_write(
        mux_.prepare_write(),
        asio::bind_executor(strand_, [self = shared_from_this()](error_code ec, std::size_t) {
          self->on_written(ec);
        }));
  }

  void on_written(error_code ec) {
    mux_.on_write_done();
    if (!ec) {
      arm_idle();
      return kick_writer();
    }
    if (ec == asio::error::operation_aborted || finished_) return;
    output_broken_ = true;
    gone_reason_ = "the study stopped reading its input (" + ec.message() + ")";
    maybe_finish();
  }

  // --- idle timeout --------------------------------------------------------------------------

  // While requests are pending, the study must write something at least every idle_timeout.
  void arm_idle() {
    if (opts_.idle_timeout.count() <= 0 || idle_armed_ || finished_ || mux_.outstanding() == 0)
      return;
    idle_armed_ = true;
    idle_timer_.expires_at(idle_since_ + opts_.idle_timeout);
    idle_timer_.async_wait(asio::bind_executor(
        strand_, [self = shared_from_this()](error_code ec) { self->on_idle(ec); }));
  }

  void on_idle(error_code ec) {
    idle_armed_ = false;
    if (ec || finished_ || mux_.outstanding() == 0) return;
    if (std::chrono::steady_clock::now() < idle_since_ + opts_.idle_timeout) return arm_idle();
    char secs[32];
    std::snprintf(secs, sizeof secs, "%g",
                  std::chrono::duration<double>(opts_.idle_timeout).count());
    gone_reason_ = "the study wrote nothing for " + std::string(secs) + " s while " +
                   std::to_string(mux_.outstanding()) +
                   " request(s) were pending (idle timeout); it was killed";
    log(log_level::warning, gone_reason_);
    if (proc_ && !exited_)
      proc_->kill();  // its exit fails what is pending, with this reason
    else
      finish_close(make_error_code(errc::study_exited), gone_reason_);
  }

  // --- reading stdout ------------------------------------------------------------------------

  void read_stdout() {
    auto buf = framer_.prepare();
    io_->async_read_some(
        asio::buffer(buf.data(), buf.size()),
        asio::bind_executor(strand_, [self = shared_from_this()](error_code ec, std::size_t n) {
          self->on_stdout(ec, n);
        }));
  }

  void on_stdout(error_code ec, std::size_t n) {
    if (n > 0) idle_since_ = std::chrono::steady_clock::now();
    framer_.commit(n);
    while (auto f = framer_.next()) on_frame(*f);
    abandoned_ = mux_.abandoned();
    if (!ec) return read_stdout();
    if (auto f = framer_.finish()) on_frame(*f);
    if (finished_) return;
    stdout_eof_ = true;
    if (gone_reason_.empty())
      gone_reason_ = ec == asio::error::eof ? "the study closed its output"
                                            : "reading the study's output failed: " + ec.message();
    maybe_finish();
  }

  void on_frame(const line_framer::frame& f) {
    using fk = line_framer::frame_kind;
    if (f.kind == fk::overlong) {
      auto what = "a line of " + std::to_string(f.size) + " bytes from the study (limit " +
                  std::to_string(framer_.max_line()) + ")";
      std::int64_t id = 0;
      if (auto op = mux_.take_oversized(f.text, id)) {
        std::unique_ptr<op_base> o(static_cast<op_base*>(op.release()));
        log(log_level::warning, "the response was " + what, id, o->method, f.text);
        diagnostics d;
        d.message = "the response was " + what;
        return fail(std::move(o), make_error_code(errc::response_too_large), std::move(d));
      }
      log(log_level::warning, "skipped " + what, {}, {}, f.text);
      return;
    }
    if (f.kind == fk::partial) {
      log(log_level::warning, "the study's output ended inside a line; ignored", {}, {},
          excerpt(f.text));
      return;
    }
    on_line(f.text);
  }

  void on_line(std::string_view line) {
    inbound in = mux_.on_line(line);
    switch (in.kind) {
      case inbound_kind::response: {
        std::unique_ptr<op_base> op(static_cast<op_base*>(in.op.release()));
        if (in.study_error) {
          diagnostics d;
          auto ec = make_error_code(in.study_error->retryable ? errc::study_error_retryable
                                                              : errc::study_error);
          d.study_error = std::move(in.study_error);
          return fail(std::move(op), ec, std::move(d));
        }
        if (!in.violation.empty()) {
          log(log_level::warning, "malformed response: " + in.violation, in.id, op->method,
              excerpt(line));
          diagnostics d;
          d.message = in.violation;
          return fail(std::move(op), make_error_code(errc::bad_response), std::move(d));
        }
        return op->complete(*this, {}, &in, {}, true);
      }
      case inbound_kind::notification: {
        notification n;
        n.method = std::move(in.method);
        n.request_id = in.request_id;
        // Copied out of the parser's arena: the handler runs later.
        if (auto* o = in.params.if_object()) n.params = *o;
        if (in.target) return static_cast<op_base*>(in.target)->notify(*this, std::move(n));
        return uncorrelated(std::move(n));
      }
      case inbound_kind::dropped: {
        bool expected =
            in.reason == drop_reason::late_response || in.reason == drop_reason::cancel_ack;
        auto level = expected || !in.first_of_kind ? log_level::debug : log_level::warning;
        std::string msg = "ignored a line from the study: ";
        msg += to_string(in.reason);
        if (level == log_level::warning) msg += " (repeats are logged at debug level)";
        log(level, msg, {}, {}, in.detail);
        return;
      }
    }
  }

  // --- stderr and exit -----------------------------------------------------------------------

  void read_stderr() {
    auto buf = err_framer_.prepare();
    proc_->async_read_stderr(
        asio::buffer(buf.data(), buf.size()),
        asio::bind_executor(strand_, [self = shared_from_this()](error_code ec, std::size_t n) {
          self->on_stderr(ec, n);
        }));
  }

  void on_stderr(error_code ec, std::size_t n) {
    err_framer_.commit(n);
    while (auto f = err_framer_.next()) stderr_line(f->text);
    if (!ec) return read_stderr();
    if (auto f = err_framer_.finish()) stderr_line(f->text);
    stderr_eof_ = true;
    maybe_finish();
  }

  void stderr_line(std::string_view line) {
    tail_.emplace_back(line.substr(0, 1024));
    while (tail_.size() > opts_.stderr_tail_lines) tail_.pop_front();
    if (opts_.on_stderr_line) return opts_.on_stderr_line(line);
    std::string out = "[study] ";
    out += line;
    out += '\n';
    std::fwrite(out.data(), 1, out.size(), stderr);
  }

  void on_exit(error_code ec, exit_status st) {
    if (ec == asio::error::operation_aborted && !exited_) return;
    exited_ = true;
    if (!ec) exit_ = st;
    exit_event_.cancel();
    if (gone_reason_.empty()) gone_reason_ = "the study exited";
    maybe_finish();
  }

  asio::awaitable<bool> wait_exit(std::chrono::steady_clock::duration d) {
    if (exited_) co_return true;
    exit_event_.expires_after(d);
    co_await exit_event_.async_wait(asio::as_tuple(asio::use_awaitable));
    co_return exited_;
  }

  asio::awaitable<void> wait_closed(std::chrono::steady_clock::duration d) {
    if (stdout_eof_ && stderr_eof_) co_return;
    close_wait_.emplace(strand_, d);
    co_await close_wait_->async_wait(asio::as_tuple(asio::use_awaitable));
    close_wait_.reset();
  }

  // The study is going (output closed, input broken or process exited): fail what waits once
  // the rest has arrived (exit status, last stderr lines), or after exit_wait at the latest.
  void maybe_finish() {
    if (finished_) return;
    if (close_wait_ && stdout_eof_ && stderr_eof_) close_wait_->cancel();
    if (!(stdout_eof_ || exited_ || output_broken_)) return;
    if (stdout_eof_ && (!proc_ || (exited_ && stderr_eof_)))
      return finish_close(make_error_code(errc::study_exited), gone_reason_);
    if (close_timer_armed_) return;
    close_timer_armed_ = true;
    close_timer_.expires_after(opts_.exit_wait);
    close_timer_.async_wait(asio::bind_executor(strand_, [self = shared_from_this()](error_code) {
      self->finish_close(make_error_code(errc::study_exited), self->gone_reason_);
    }));
  }

  void finish_close(error_code ec, std::string why) {
    if (finished_) return;
    finished_ = true;
    close_code_ = ec;
    close_diag_.message = std::move(why);
    close_diag_.exit = exit_;
    close_diag_.stderr_tail.assign(tail_.begin(), tail_.end());
    close_timer_.cancel();
    idle_timer_.cancel();
    auto ops = mux_.close();
    abandoned_ = 0;
    if (!ops.empty() && ec != asio::error::operation_aborted)
      log(log_level::warning,
          std::to_string(ops.size()) + " pending request(s) failed: " + close_diag_.message);
    for (auto& op : ops)
      fail(std::unique_ptr<op_base>(static_cast<op_base*>(op.release())), ec, close_diag_);
    io_->close();
  }

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
  host_registry* registry_ = nullptr;

  mutable std::mutex init_mutex_;  // init_ is read from user threads
  std::optional<protocol::initialize_result> init_;
  std::string study_name_;

  bool stdout_eof_ = false;
  bool stderr_eof_ = false;
  bool exited_ = false;
  bool output_broken_ = false;
  bool output_closed_ = false;
  bool close_timer_armed_ = false;
  bool write_scheduled_ = false;
  bool finished_ = false;
  std::optional<exit_status> exit_;
  std::string gone_reason_;
  error_code close_code_;
  diagnostics close_diag_;
};

void host_registry::add(const std::shared_ptr<host_impl>& h) {
  std::lock_guard lock(mutex_);
  std::erase_if(hosts_, [](auto& w) { return w.expired(); });
  hosts_.push_back(h);
}

void host_registry::remove(host_impl* h) {
  std::lock_guard lock(mutex_);
  std::erase_if(hosts_, [h](auto& w) {
    auto p = w.lock();
    return !p || p.get() == h;
  });
}

void host_registry::shutdown() {
  std::vector<std::weak_ptr<host_impl>> hosts;
  {
    std::lock_guard lock(mutex_);
    hosts.swap(hosts_);
  }
  for (auto& w : hosts)
    if (auto h = w.lock()) h->abandon();
}

template <class T>
struct typed_op final : op_base {
  // Move-constructed only: Asio 1.26's any_completion_handler move *assignment* copies the
  // handler into a new wrapper of itself and recurses until the stack overflows.
  explicit typed_op(handler_t<T> h) : handler(std::move(h)) {}
  handler_t<T> handler;
  decoder<T> decode = nullptr;
  validator<T> check = nullptr;

  void complete(host_impl& host, error_code ec, inbound* response, diagnostics d,
                bool from_reader) override {
    T out{};  // decoded in place: a run result is large, and each move of it costs
    if (!ec && response) {
      if (auto e = decode(host.mux(), *response, out)) {
        out = T{};
        ec = make_error_code(errc::bad_response);
        d.message = "the result of '" + std::string(method) + "' does not decode: " + e->message();
        host.log(log_level::warning, d.message, id, method);
      } else if (check) {
        ec = check(host, out, d);
      }
    }
    if (opts.diag) *opts.diag = ec ? std::move(d) : diagnostics{};
    // Completing inline would overtake notifications still queued for this request.
    host.deliver(
        std::move(handler), ec, std::move(out),
        from_reader && !notified ? host_impl::completion::dispatch : host_impl::completion::post,
        home);
  }

  void notify(host_impl& host, notification n) override {
    if (!opts.on_notification) return host.uncorrelated(std::move(n));
    // Run it where the requester's completion runs, not on the connection's strand.
    notified = true;
    auto ex = asio::get_associated_executor(handler, host.strand_.get_inner_executor());
    asio::post(host.strand_.get_inner_executor(),
               asio::bind_executor(ex, [cb = opts.on_notification, n = std::move(n)] { cb(n); }));
  }
};

template <class T>
void host_impl::request(std::string_view method, std::string params, request_options o,
                        handler_t<T> h, home_t home, decoder<T> dec, validator<T> check) {
  auto id = next_id_.fetch_add(1);
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
  op->method = method;
  op->opts = std::move(o);
  op->decode = dec;
  op->check = check;
  op->home = home;
  // Typically a completion's handler asking for the next case, on the strand already: what
  // dispatch would do, without wrapping the call and converting executors on the way.
  if (strand_.running_in_this_thread()) return submit(params, std::move(op));
  asio::dispatch(strand_, [self = shared_from_this(), params = std::move(params),
                           op = std::move(op)]() mutable { self->submit(params, std::move(op)); });
}

namespace {

template <class T>
std::optional<protocol::decode_error> assign(protocol::decoded<T> r, T& out) {
  if (!r) return std::move(r.error());
  out = std::move(*r);
  return std::nullopt;
}

template <class T, protocol::decoded<T> (*F)(const json::value&)>
std::optional<protocol::decode_error> by_ref(multiplexer& mux, inbound& in, T& out) {
  return assign(F(mux.result_value(in)), out);
}

// From the result's text, without a DOM (the multiplexer routes results as text).
template <class T, protocol::decoded<T> (*F)(std::string_view)>
std::optional<protocol::decode_error> by_text(multiplexer&, inbound& in, T& out) {
  return assign(F(in.result_text), out);
}

std::optional<protocol::decode_error> decode_run(multiplexer&, inbound& in,
                                                 protocol::run_result& out) {
  // The hot path: straight from the text the multiplexer checked, no DOM.
  if (!in.result_parsed) return protocol::detail::decode_valid_run_result_text(in.result_text, out);
  return assign(protocol::decode_run_result(in.result, std::string(in.result_text)), out);
}
std::optional<protocol::decode_error> decode_execute(multiplexer& mux, inbound& in,
                                                     protocol::execute_result& out) {
  const auto& v = mux.result_value(in);
  return assign(protocol::decode_execute_result(v, std::string(in.result_text)), out);
}
std::optional<protocol::decode_error> decode_cancel(multiplexer& mux, inbound& in, bool& out) {
  return assign(
      protocol::decode_cancel_result(mux.result_value(in)).map([](auto r) { return r.cancelled; }),
      out);
}

error_code check_initialize(host_impl& host, protocol::initialize_result& r, diagnostics& d) {
  auto theirs = protocol::version_major(r.protocol_version);
  auto ours = protocol::version_major(protocol::protocol_version);
  if (!theirs || theirs != ours) {
    d.message = "study '" + r.study + "' speaks protocol " + r.protocol_version +
                ", this host speaks " + std::string(protocol::protocol_version) +
                " (major versions must match)";
    host.log(log_level::error, d.message);
    return make_error_code(errc::incompatible_protocol);
  }
  host.set_initialized(r);
  return {};
}

// Builds the awaitable outside any coroutine: g++ 12 mis-destroys temporaries built inside a
// co_await full-expression (seen as a double release of the shared_ptr under ASan).
template <class T, class Call>
auto async_call(impl_ptr impl, Call call, request_options o) {
  auto tok = asio::as_tuple(asio::use_awaitable);
  return asio::async_initiate<decltype(tok), void(error_code, T)>(initiate<T>{std::move(impl)}, tok,
                                                                  std::move(call), std::move(o));
}

template <class T>
struct outcome {
  error_code ec;
  T value{};
};
using list_all_outcome = outcome<protocol::list_result>;

asio::awaitable<list_all_outcome> list_all_coro(impl_ptr self, diagnostics* diag) {
  request_options o;
  o.diag = diag;
  auto [ec, list] = co_await async_call<protocol::list_result>(self, list_call{}, o);
  if (ec) co_return list_all_outcome{ec, {}};
  // Cursors that never repeat but keep giving empty pages would page forever.
  constexpr int max_empty_pages = 100;
  for (auto& e : list.evals) {
    std::unordered_set<std::string> seen;
    int empty_pages = 0;
    while (e.next_cursor) {
      if (!seen.insert(*e.next_cursor).second) {
        if (diag) {
          diag->clear();
          diag->message = "eval '" + e.name + "': list_samples returned cursor \"" +
                          excerpt(*e.next_cursor, 80) + "\" a second time";
        }
        co_return list_all_outcome{make_error_code(errc::cursor_loop), {}};
      }
      protocol::list_samples_params p{e.name, *e.next_cursor};
      auto [ec2, page] = co_await async_call<protocol::list_samples_result>(self, std::move(p), o);
      if (ec2) co_return list_all_outcome{ec2, {}};
      empty_pages = page.samples.empty() ? empty_pages + 1 : 0;
      if (empty_pages == max_empty_pages && page.next_cursor) {
        if (diag) {
          diag->clear();
          diag->message = "eval '" + e.name + "': list_samples returned " +
                          std::to_string(max_empty_pages) +
                          " empty pages in a row and still a next cursor";
        }
        co_return list_all_outcome{make_error_code(errc::cursor_loop), {}};
      }
      e.samples.insert(e.samples.end(), std::make_move_iterator(page.samples.begin()),
                       std::make_move_iterator(page.samples.end()));
      e.next_cursor = std::move(page.next_cursor);
    }
  }
  co_return list_all_outcome{{}, std::move(list)};
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

}  // namespace

void start(const impl_ptr& impl, initialize_call, request_options o,
           handler_t<protocol::initialize_result> h, home_t home) {
  protocol::initialize_params p;
  p.host = impl->options().host_name;
  impl->request<protocol::initialize_result>(
      "initialize", protocol::to_json_text(protocol::encode(p)), std::move(o), std::move(h), home,
      &by_ref<protocol::initialize_result, protocol::decode_initialize_result>, &check_initialize);
}

void start(const impl_ptr& impl, list_call, request_options o, handler_t<protocol::list_result> h,
           home_t home) {
  impl->request<protocol::list_result>(
      "list", {}, std::move(o), std::move(h), home,
      &by_text<protocol::list_result, protocol::decode_list_result_text>);
}

void start(const impl_ptr& impl, protocol::list_samples_params p, request_options o,
           handler_t<protocol::list_samples_result> h, home_t home) {
  impl->request<protocol::list_samples_result>(
      "list_samples", protocol::to_json_text(protocol::encode(p)), std::move(o), std::move(h), home,
      &by_text<protocol::list_samples_result, protocol::decode_list_samples_result_text>);
}

void start(const impl_ptr& impl, protocol::run_params p, request_options o,
           handler_t<protocol::run_result> h, home_t home) {
  std::string params;
  protocol::append_json(params, p);
  impl->request<protocol::run_result>("run", std::move(params), std::move(o), std::move(h), home,
                                      &decode_run);
}

void start(const impl_ptr& impl, execute_call c, request_options o,
           handler_t<protocol::execute_result> h, home_t home) {
  std::string params;
  protocol::append_json(params, c.params);
  impl->request<protocol::execute_result>("execute", std::move(params), std::move(o), std::move(h),
                                          home, &decode_execute);
}

void start(const impl_ptr& impl, protocol::score_params p, request_options o,
           handler_t<protocol::run_result> h, home_t home) {
  impl->request<protocol::run_result>("score", protocol::to_json_text(protocol::encode(p)),
                                      std::move(o), std::move(h), home, &decode_run);
}

void start(const impl_ptr& impl, protocol::cancel_params p, request_options o, handler_t<bool> h,
           home_t home) {
  impl->request<bool>("cancel", protocol::to_json_text(protocol::encode(p)), std::move(o),
                      std::move(h), home, &decode_cancel);
}

namespace {

asio::awaitable<outcome<exit_status>> shutdown_coro(impl_ptr self) {
  outcome<exit_status> out;
  out.value = co_await self->shutdown();
  co_return out;
}

}  // namespace

void start(const impl_ptr& impl, list_all_call, request_options o,
           handler_t<protocol::list_result> h, home_t) {
  spawn_op<protocol::list_result>(impl, list_all_coro(impl, o.diag), std::move(h), o.diag);
}

void start(const impl_ptr& impl, shutdown_call, request_options, handler_t<exit_status> h, home_t) {
  spawn_op<exit_status>(impl, shutdown_coro(impl), std::move(h), nullptr);
}

// Owned by every copy of a host_handle; its end is the end of the host.
struct host_ref {
  explicit host_ref(impl_ptr p) : impl(std::move(p)) {}
  host_ref(const host_ref&) = delete;
  host_ref& operator=(const host_ref&) = delete;
  impl_ptr impl;
  ~host_ref() {
    auto strand = impl->strand_;
    asio::post(strand, [impl = std::move(impl)] { impl->release(); });
  }
};

}  // namespace mira::detail

namespace mira {

namespace asio = boost::asio;

asio::io_context* detail::io_context_of(const asio::any_io_executor& ex) noexcept {
  auto* e = ex.target<asio::io_context::executor_type>();
  return e ? &asio::query(*e, asio::execution::context) : nullptr;
}

host_handle::host_handle(executor_type ex, std::unique_ptr<detail::transport> io,
                         host_options opts) {
  auto impl =
      std::make_shared<detail::host_impl>(std::move(ex), std::move(io), nullptr, std::move(opts));
  impl->start();
  ref_ = std::make_shared<detail::host_ref>(std::move(impl));
}

host_handle::host_handle(std::shared_ptr<detail::host_ref> ref) : ref_(std::move(ref)) {}

tl::expected<host_handle, error> host_handle::spawn(executor_type ex, study_command cmd,
                                                    host_options opts) {
  // Writing to a study that died must be an error on that write, not the death of the host.
  struct sigaction old {};
  if (::sigaction(SIGPIPE, nullptr, &old) == 0 && old.sa_handler == SIG_DFL)
    std::signal(SIGPIPE, SIG_IGN);
  auto s = detail::spawn_study(ex, cmd);
  if (!s) return tl::make_unexpected(std::move(s.error()));
  auto impl = std::make_shared<detail::host_impl>(std::move(ex), std::move(s->io),
                                                  std::move(s->process), std::move(opts));
  impl->start();
  return host_handle(std::make_shared<detail::host_ref>(std::move(impl)));
}

const detail::impl_ptr& host_handle::impl() const {
  return ref_->impl;
}

host_handle::executor_type host_handle::get_executor() const {
  return impl()->strand_.get_inner_executor();
}

std::optional<protocol::initialize_result> host_handle::study() const {
  return impl()->initialized();
}

std::size_t host_handle::abandoned() const {
  return impl()->abandoned_.load();
}

namespace {

template <class T, class Call>
asio::awaitable<tl::expected<T, error>> call_expected(detail::impl_ptr impl, Call call,
                                                      notification_handler nh) {
  diagnostics d;
  request_options o;
  o.diag = &d;
  o.on_notification = std::move(nh);
  auto [ec, v] = co_await detail::async_call<T>(std::move(impl), std::move(call), std::move(o));
  if (ec) co_return tl::unexpected<error>(error{ec, std::move(d)});
  co_return std::move(v);
}

}  // namespace

asio::awaitable<tl::expected<protocol::initialize_result, error>> host_handle::initialize() {
  return call_expected<protocol::initialize_result>(impl(), detail::initialize_call{}, {});
}

asio::awaitable<tl::expected<protocol::list_result, error>> host_handle::list_all() {
  return call_expected<protocol::list_result>(impl(), detail::list_all_call{}, {});
}

asio::awaitable<tl::expected<protocol::run_result, error>> host_handle::run(
    protocol::run_params p, notification_handler nh) {
  return call_expected<protocol::run_result>(impl(), std::move(p), std::move(nh));
}

asio::awaitable<tl::expected<protocol::execute_result, error>> host_handle::execute(
    protocol::run_params p, notification_handler nh) {
  return call_expected<protocol::execute_result>(impl(), detail::execute_call{std::move(p)},
                                                 std::move(nh));
}

asio::awaitable<tl::expected<protocol::run_result, error>> host_handle::score(
    protocol::score_params p) {
  return call_expected<protocol::run_result>(impl(), std::move(p), {});
}

asio::awaitable<tl::expected<exit_status, error>> host_handle::shutdown() {
  return call_expected<exit_status>(impl(), detail::shutdown_call{}, {});
}

}  // namespace mira
