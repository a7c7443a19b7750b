// A request's way through the connection: refused (before initialize, a missing capability, a
// closed connection) or queued for the writer; cancelled by its slot or its deadline; completed
// on its handler's executor. Also the abandoned-count waiters and the host's logging.
#include "host_impl.hpp"

namespace mira::detail {

void host_impl::submit(const std::string& params, std::unique_ptr<op_base> op) {
  auto id = op->id;
  auto method = op->name();
  auto& info = *op->info;
  if (finished_ || output_closed_) return fail(std::move(op), closed_code(), close_diag_);
  // Refused rather than sent: without initialize the host knows no capabilities, so a
  // timeout could not send `cancel`, and the protocol version was never checked.
  if (!initialized_ && !info.before_initialize) {
    diagnostics d;
    d.message = "'" + std::string(method) +
                "' was requested before initialize() completed successfully; call "
                "initialize() first";
    return fail(std::move(op), make_error_code(errc::not_initialized), std::move(d));
  }
  if (!info.capability.empty()) {
    std::lock_guard lock(init_mutex_);
    if (init_ && !init_->has_capability(info.capability)) {
      diagnostics d;
      d.message =
          "the study does not advertise the '" + std::string(info.capability) + "' capability";
      return fail(std::move(op), make_error_code(errc::not_supported), std::move(d));
    }
  }
  if (op->opts.deadline) {
    op->deadline.emplace(strand_, *op->opts.deadline);
    op->deadline->async_wait(
        asio::bind_executor(strand_, [w = weak_from_this(), id](error_code ec) {
          auto self = w.lock();
          if (ec || !self) return;  // answered (the op and its timer are gone) or host gone
          diagnostics d;
          d.message = "no answer before the request's deadline";
          self->cancel_request(id, asio::cancellation_type::terminal,
                               make_error_code(errc::timed_out), std::move(d));
        }));
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

void host_impl::cancel_request(std::int64_t id, asio::cancellation_type_t type, error_code ec,
                               diagnostics d) {
  // The protocol defines `cancel` for run, execute and score only: others are just abandoned.
  auto* pending = static_cast<op_base*>(mux_.find(id));
  if (!pending) return;  // answered (or failed) before the cancellation reached the strand
  // After shutdown() closed the study's input, no `cancel` can reach it.
  bool frame = pending->info->cancellable && !output_shut_;
  auto out = mux_.cancel(id, type, frame ? next_id_.fetch_add(1) : 0);
  abandoned_changed();
  if (out.op) {
    auto* op = static_cast<op_base*>(out.op.release());
    log(log_level::debug,
        out.kind == cancel_kind::removed_unsent ? "request cancelled before it was sent"
                                                : "request cancelled",
        id, op->name());
    fail(std::unique_ptr<op_base>(op), ec, std::move(d));
  }
  if (out.cancel_frame_queued) schedule_write();
}

// On the strand.
void host_impl::uncorrelated(notification n) {
  if (!opts_.on_notification) return;
  if (!uncorrelated_) {
    auto inner = strand_.get_inner_executor();
    uncorrelated_ = std::make_shared<ordered_calls>(inner, inner);
  }
  uncorrelated_->push([cb = opts_.on_notification, n = std::move(n)] { cb(n); });
}

void host_impl::set_initialized(const protocol::initialize_result& r) {
  {
    std::lock_guard lock(init_mutex_);
    init_ = r;
  }
  study_name_ = r.study;
  initialized_ = true;
  mux_.set_supports_cancel(r.has_capability("cancel"));
}

std::optional<protocol::initialize_result> host_impl::initialized() const {
  std::lock_guard lock(init_mutex_);
  return init_;
}

void host_impl::log(log_level level, std::string_view message, std::optional<std::int64_t> id,
                    std::string_view method, std::string_view excerpt) {
  log_record r;
  r.level = level;
  r.message = message;
  r.study = study_name_;
  r.request_id = id;
  r.method = method;
  r.excerpt = excerpt;
  opts_.log(r);
}

// Completes `h` with the abandoned count once it differs from `seen` (at once if it does
// already), or when the connection ends. On the strand; `h`'s slot drops `key`.
void host_impl::wait_abandoned(std::size_t seen, std::uint64_t key, handler_t<std::size_t> h) {
  if (abandoned_.load() != seen || finished_)
    return deliver(std::move(h), error_code{}, abandoned_.load());
  abandoned_waiters_.emplace_back(key, std::move(h));
}

// The count changed (a cancellation, a late answer, the end): wake whoever waits for that.
void host_impl::abandoned_changed() {
  auto n = mux_.abandoned();
  if (abandoned_.exchange(n) == n && !finished_) return;
  auto waiters = std::move(abandoned_waiters_);
  abandoned_waiters_.clear();
  for (auto& [key, h] : waiters) deliver(std::move(h), error_code{}, std::size_t{n});
}

void host_impl::drop_abandoned_waiter(std::uint64_t key) {
  for (auto it = abandoned_waiters_.begin(); it != abandoned_waiters_.end(); ++it) {
    if (it->first != key) continue;
    auto h = std::move(it->second);
    abandoned_waiters_.erase(it);
    return deliver(std::move(h), error_code(asio::error::operation_aborted), abandoned_.load());
  }
}

}  // namespace mira::detail
