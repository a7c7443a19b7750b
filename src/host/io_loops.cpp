// The connection's I/O loops on the strand: the writer (one gathered write per burst), the
// reader (framing, routing each line through the multiplexer) and the stderr pump.
#include "host_impl.hpp"

#include <cstdio>

namespace mira::detail {

// Writing is deferred to the end of the strand's current burst, so every request submitted
// in it (typically one per answer of the last read) goes out in one gathered write instead of
// one system call (and one wake-up of the study) each.
void host_impl::schedule_write() {
  if (write_scheduled_) return;
  write_scheduled_ = true;
  asio::post(strand_, [self = shared_from_this()] {
    self->write_scheduled_ = false;
    self->kick_writer();
  });
}

void host_impl::kick_writer() {
  if (mux_.writing() || finished_ || output_broken_ || output_shut_ || !mux_.has_pending_writes())
    return;
  // The idle clock starts when the study gets work while it had none.
  if (mux_.outstanding() == 0) idle_since_ = std::chrono::steady_clock::now();
  io_->async_write(
      mux_.prepare_write(),
      asio::bind_executor(strand_, [self = shared_from_this()](error_code ec, std::size_t) {
        self->on_written(ec);
      }));
}

void host_impl::on_written(error_code ec) {
  mux_.on_write_done();
  if (!ec) {
    arm_idle();
    kick_writer();
    if (flush_wait_ && !mux_.writing()) flush_wait_->cancel();  // all written: shutdown goes on
    return;
  }
  if (flush_wait_) flush_wait_->cancel();
  if (ec == asio::error::operation_aborted || finished_) return;
  output_broken_ = true;
  if (gone_reason_.empty()) {
    gone_reason_ = "the study stopped reading its input (" + ec.message() + ")";
    gone_noticed_only_ = true;
  }
  maybe_finish();
}

void host_impl::read_stdout() {
  auto buf = framer_.prepare();
  io_->async_read_some(
      asio::buffer(buf.data(), buf.size()),
      asio::bind_executor(strand_, [self = shared_from_this()](error_code ec, std::size_t n) {
        self->on_stdout(ec, n);
      }));
}

void host_impl::on_stdout(error_code ec, std::size_t n) {
  if (n > 0) idle_since_ = std::chrono::steady_clock::now();
  framer_.commit(n);
  while (auto f = framer_.next()) on_frame(*f);
  abandoned_changed();
  if (!ec) return read_stdout();
  if (auto f = framer_.finish()) on_frame(*f);
  if (finished_) return;
  stdout_eof_ = true;
  if (gone_reason_.empty()) {
    gone_reason_ = ec == asio::error::eof ? "the study closed its output"
                                          : "reading the study's output failed: " + ec.message();
    gone_noticed_only_ = true;
  }
  maybe_finish();
}

void host_impl::on_frame(const line_framer::frame& f) {
  using frame_kind = line_framer::frame_kind;
  if (f.kind == frame_kind::overlong) {
    auto what = "a line of " + std::to_string(f.size) + " bytes from the study (limit " +
                std::to_string(framer_.max_line()) + ")";
    std::int64_t id = 0;
    if (auto op = mux_.take_oversized(f.text, id)) {
      std::unique_ptr<op_base> o(static_cast<op_base*>(op.release()));
      log(log_level::warning, "the response was " + what, id, o->name(), f.text);
      diagnostics d;
      d.message = "the response was " + what;
      return fail(std::move(o), make_error_code(errc::response_too_large), std::move(d));
    }
    log(log_level::warning, "skipped " + what, {}, {}, f.text);
    return;
  }
  if (f.kind == frame_kind::partial) {
    log(log_level::warning, "the study's output ended inside a line; ignored", {}, {},
        excerpt(f.text));
    return;
  }
  on_line(f.text);
}

void host_impl::on_line(std::string_view line) {
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
        log(log_level::warning, "malformed response: " + in.violation, in.id, op->name(),
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

void host_impl::read_stderr() {
  auto buf = err_framer_.prepare();
  proc_->async_read_stderr(
      asio::buffer(buf.data(), buf.size()),
      asio::bind_executor(strand_, [self = shared_from_this()](error_code ec, std::size_t n) {
        self->on_stderr(ec, n);
      }));
}

void host_impl::on_stderr(error_code ec, std::size_t n) {
  err_framer_.commit(n);
  while (auto f = err_framer_.next()) stderr_line(f->text);
  if (!ec) return read_stderr();
  if (auto f = err_framer_.finish()) stderr_line(f->text);
  stderr_eof_ = true;
  maybe_finish();
}

void host_impl::stderr_line(std::string_view line) {
  tail_.emplace_back(line.substr(0, 1024));
  while (tail_.size() > opts_.stderr_tail_lines) tail_.pop_front();
  if (opts_.on_stderr_line) return opts_.on_stderr_line(line);
  log_record r;
  r.message = line;
  r.study = study_name_;
  r.source = log_source::study_stderr;
  opts_.log(r);
}

}  // namespace mira::detail
