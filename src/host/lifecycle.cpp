// How a connection ends: the study's exit, the idle timer, graceful shutdown, release by the
// last handle, and the registry that tears hosts down with their execution context.
#include "host_impl.hpp"

#include <cstdio>

namespace mira::detail {

void host_impl::start() {
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

asio::awaitable<exit_status> host_impl::shutdown() {
  // One shutdown at a time: a second waits for the first (it would restart the first's waits)
  // and answers as it did; if the first was cancelled before the end, the second carries on.
  if (!shutdown_done_) shutdown_done_.emplace(strand_, asio::steady_timer::time_point::max());
  while (shutdown_running_)
    co_await shutdown_done_->async_wait(asio::as_tuple(asio::use_awaitable));
  if (shutdown_status_) co_return *shutdown_status_;
  shutdown_running_ = true;
  struct wake_waiters {  // however this one ends, its own cancellation included
    host_impl& h;
    ~wake_waiters() {
      h.shutdown_running_ = false;
      h.shutdown_done_->cancel();
    }
  } wake{*this};
  shutdown_status_ = co_await shut_down();
  co_return *shutdown_status_;
}

asio::awaitable<exit_status> host_impl::shut_down() {
  output_closed_ = true;
  // What was queued goes out whole first (a `cancel` among it tells the study to stop that
  // work), within the grace.
  auto grace_end = std::chrono::steady_clock::now() + opts_.shutdown_grace;
  co_await flush_writes(opts_.shutdown_grace);
  output_shut_ = true;
  io_->close_output();
  auto rest = std::max<std::chrono::steady_clock::duration>(
      grace_end - std::chrono::steady_clock::now(), std::chrono::steady_clock::duration::zero());
  if (!proc_) {
    // No process to signal: the study's end of output is its exit. What is in flight may
    // still be answered until then, as after a spawned study's stdin closes.
    co_await wait_closed(rest);
    if (!stdout_eof_)
      log(log_level::warning, "the study did not close its output after the host's shutdown");
    finish_close(make_error_code(errc::study_exited),
                 stdout_eof_ ? "the study closed its output after the host's shutdown"
                             : "the study did not close its output within shutdown_grace of "
                               "the host's shutdown");
    exit_status none;
    none.no_process = true;
    co_return none;
  }
  bool gone = co_await wait_exit(rest);
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
void host_impl::release() {
  if (proc_ && !exited_) proc_->kill();
  output_closed_ = true;
  finish_close(asio::error::operation_aborted, "the host handle was released");
  if (proc_) proc_->close_stderr();
}

// The execution context is being torn down: no handler can run any more.
void host_impl::abandon() {
  if (proc_ && !exited_) proc_->kill();
  finished_ = true;
  auto ops = mux_.close();
  ops.clear();  // destroys handlers (and the coroutine frames they own) without running them
  abandoned_waiters_.clear();
  io_->close();
  if (proc_) proc_->close_stderr();
}

// While requests are pending, the study must write something at least every idle_timeout.
void host_impl::arm_idle() {
  if (opts_.idle_timeout.count() <= 0 || idle_armed_ || finished_ || mux_.outstanding() == 0)
    return;
  idle_armed_ = true;
  idle_timer_.expires_at(idle_since_ + opts_.idle_timeout);
  idle_timer_.async_wait(asio::bind_executor(
      strand_, [self = shared_from_this()](error_code ec) { self->on_idle(ec); }));
}

void host_impl::on_idle(error_code ec) {
  idle_armed_ = false;
  if (ec || finished_ || mux_.outstanding() == 0) return;
  if (std::chrono::steady_clock::now() < idle_since_ + opts_.idle_timeout) return arm_idle();
  char secs[32];
  std::snprintf(secs, sizeof secs, "%g", std::chrono::duration<double>(opts_.idle_timeout).count());
  gone_reason_ = "the study wrote nothing for " + std::string(secs) + " s while " +
                 std::to_string(mux_.outstanding()) +
                 " request(s) were pending (idle timeout), so the host killed it";
  gone_noticed_only_ = false;  // the host's own reason, whatever broke before
  log(log_level::warning, gone_reason_);
  if (proc_ && !exited_)
    proc_->kill();  // its exit fails what is pending, with this reason
  else
    finish_close(make_error_code(errc::study_exited), gone_reason_);
}

void host_impl::on_exit(error_code ec, exit_status st) {
  if (ec == asio::error::operation_aborted && !exited_) return;
  exited_ = true;
  if (!ec) exit_ = st;
  exit_event_.cancel();
  if (gone_reason_.empty()) {
    gone_reason_ = "the study exited";
    gone_noticed_only_ = true;
  }
  maybe_finish();
}

asio::awaitable<bool> host_impl::wait_exit(std::chrono::steady_clock::duration d) {
  if (exited_) co_return true;
  exit_event_.expires_after(d);
  co_await exit_event_.async_wait(asio::as_tuple(asio::use_awaitable));
  co_return exited_;
}

asio::awaitable<void> host_impl::flush_writes(std::chrono::steady_clock::duration d) {
  kick_writer();  // what is queued but not yet handed to the pipe
  if (!mux_.writing() || finished_ || output_broken_) co_return;
  flush_wait_.emplace(strand_, d);
  co_await flush_wait_->async_wait(asio::as_tuple(asio::use_awaitable));
  flush_wait_.reset();
}

asio::awaitable<void> host_impl::wait_closed(std::chrono::steady_clock::duration d) {
  if (outputs_closed()) co_return;
  close_wait_.emplace(strand_, d);
  co_await close_wait_->async_wait(asio::as_tuple(asio::use_awaitable));
  close_wait_.reset();
}

// The study is going (output closed, input broken or process exited): fail what waits once
// the rest has arrived (exit status, last stderr lines), or after exit_wait at the latest.
void host_impl::maybe_finish() {
  if (finished_) return;
  if (close_wait_ && outputs_closed()) close_wait_->cancel();
  if (!(stdout_eof_ || exited_ || output_broken_)) return;
  if (stdout_eof_ && (!proc_ || (exited_ && stderr_eof_)))
    return finish_close(make_error_code(errc::study_exited), gone_why());
  if (close_timer_armed_) return;
  close_timer_armed_ = true;
  close_timer_.expires_after(opts_.exit_wait);
  close_timer_.async_wait(asio::bind_executor(strand_, [self = shared_from_this()](error_code) {
    self->finish_close(make_error_code(errc::study_exited), self->gone_why());
  }));
}

// A study killed by a signal also breaks its pipes: the write error or end of output seen first
// is only a symptom once its exit status is in (diagnostics::exit then says how).
std::string host_impl::gone_why() const {
  if (!exit_ || !gone_noticed_only_) return gone_reason_;
  return exit_->signal != 0 ? "the study died" : "the study exited";
}

void host_impl::finish_close(error_code ec, std::string why) {
  if (finished_) return;
  finished_ = true;
  close_code_ = ec;
  close_diag_.message = std::move(why);
  close_diag_.exit = exit_;
  close_diag_.stderr_tail.assign(tail_.begin(), tail_.end());
  close_timer_.cancel();
  idle_timer_.cancel();
  // Nothing more will be written or read: a shutdown waiting for either goes on now.
  if (flush_wait_) flush_wait_->cancel();
  if (close_wait_) close_wait_->cancel();
  auto ops = mux_.close();
  abandoned_changed();
  if (!ops.empty() && ec != asio::error::operation_aborted)
    log(log_level::warning, std::to_string(ops.size()) +
                                " pending request(s) failed: " + close_diag_.message +
                                (exit_ ? " [" + exit_->to_string() + "]" : std::string()));
  for (auto& op : ops)
    fail(std::unique_ptr<op_base>(static_cast<op_base*>(op.release())), ec, close_diag_);
  io_->close();
}

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

namespace {

asio::awaitable<outcome<exit_status>> shutdown_coro(impl_ptr self) {
  outcome<exit_status> out;
  out.value = co_await self->shutdown();
  co_return out;
}

}  // namespace

void start_shutdown(const impl_ptr& impl, handler_t<exit_status> h) {
  spawn_op<exit_status>(impl, shutdown_coro(impl), std::move(h), nullptr);
}

}  // namespace mira::detail
