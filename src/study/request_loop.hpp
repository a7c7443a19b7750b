// The study's request loop: the coroutine shell around the request table. One reader turns lines
// into requests, each run / execute / score runs as its own coroutine, and one writer sends what
// has built up in a single write per turn of the loop.
#pragma once

#include <mira/study/context.hpp>
#include <mira/study/serve.hpp>

#include "framing/line_framer.hpp"
#include "study/request_table.hpp"

#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/json/monotonic_resource.hpp>
#include <boost/json/parser.hpp>

#include <atomic>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

namespace mira::study::detail {

enum class method_kind { run, execute, score };

/// How a request in flight is stopped: the signal its coroutine's slot is bound to, and the
/// stop token blocking code polls, made only when a subject asks for it.
struct case_control {
  boost::asio::cancellation_signal signal;
  // Atomic: run_context::cancelled() may be asked from blocking code on the pool.
  std::atomic<bool> cancelled = false;
  bool answered = false;  // the answer is queued; the entry goes after co_spawn's completion
  bool began = false;     // its `started` event was sent: a `finished` one goes before the answer

  /// On the I/O thread.
  void cancel() {
    request_stop();
    signal.emit(boost::asio::cancellation_type::terminal);
  }
  /// Marks the request cancelled and stops its token, if one was made. From any thread.
  void request_stop() {
    cancelled = true;  // before the look: a token made after it sees the flag
    if (auto* s = made_source()) s->request_stop();
  }
  /// From any thread: run_context::stop_token() may be called from blocking code, while the
  /// I/O thread cancels.
  std::stop_token token() {
    std::stop_source* s = nullptr;
    {
      std::lock_guard lock(stop_mutex_);
      if (!stop_) stop_.emplace();
      s = &*stop_;
    }
    // A request_stop() that found no source had set the flag first. Outside the lock, as in
    // request_stop(): a stop runs the token's callbacks, which may ask for the token again.
    if (cancelled) s->request_stop();
    return s->get_token();
  }

 private:
  // The source, once made, is never reset: its address may be used outside the lock
  // (request_stop() and get_token() are safe to call from several threads at once).
  std::stop_source* made_source() {
    std::lock_guard lock(stop_mutex_);
    return stop_ ? &*stop_ : nullptr;
  }

  std::mutex stop_mutex_;  // guards the making of stop_ against a look for it
  std::optional<std::stop_source> stop_;
};

/// One run / execute / score request: what it asks, and how to stop it.
struct request {
  method_kind kind = method_kind::run;
  protocol::run_params identity;
  std::optional<protocol::transcript> transcript;  // score's
  std::optional<run_context::clock::time_point> deadline;
  // Behind a pointer: the table moves payloads, a signal may not move. Made when admitted.
  std::unique_ptr<case_control> ctl;
};

class request_loop {
 public:
  request_loop(const registry& study, const serve_options& options,
               boost::asio::any_io_executor ex);
  request_loop(const request_loop&) = delete;
  request_loop& operator=(const request_loop&) = delete;
  ~request_loop();

  boost::asio::awaitable<void> run(byte_stream& stream);

  /// Queues a whole frame (newline included) for the writer. From any thread.
  void send(std::string frame);
  /// The pool run_context::blocking() runs on, started on first use.
  boost::asio::any_io_executor blocking_executor();

 private:
  boost::asio::awaitable<void> read(byte_stream& stream);
  boost::asio::awaitable<void> write(byte_stream& stream);
  void on_line(std::string_view line);
  void on_request(std::int64_t id, std::string_view method, const json::value* params);
  void admit(std::int64_t id, method_kind kind, const json::value* params);
  void admit(std::int64_t id, request r);
  void cancel(std::int64_t id);
  void end_of_input();
  void start(std::int64_t id);
  boost::asio::awaitable<void> answer(std::int64_t id, request& r);
  // answer()'s steps that need no co_await: plain functions, so that the subject and the
  // coroutine scorers stay the only points where a cancel reaches answer().
  run_context context_of(std::int64_t id, request& r, const eval& e, const study::sample& s,
                         const protocol::target_info& target);
  /// The subject's transcript as answered: its duration (when it gave none, measured from
  /// `t0`), its trajectory's flat fields, no metric JSON cannot carry.
  void complete_transcript(std::int64_t id, const protocol::case_identity& c,
                           protocol::transcript& t, run_context::clock::time_point t0);
  void answer_execute(std::int64_t id, request& r, protocol::transcript t, bool skipped,
                      bool events);
  void answer_run(std::int64_t id, request& r, protocol::run_result& rr, protocol::transcript& t,
                  bool events);
  void failed(std::int64_t id, const std::exception_ptr& e);
  void finished();

  void queue(std::string_view frame);
  void answer(std::int64_t id, std::string_view result_json);
  void answer_error(std::int64_t id, const protocol::rpc_error& e);
  void answer_error(std::int64_t id, boost::system::error_code code, std::string_view message,
                    bool retryable = false);
  void log(std::string_view message, std::int64_t request_id = 0);
  /// The SDK's own `started` / `finished` event of a case (serve_options::case_events).
  void case_event(std::int64_t id, const protocol::case_identity& c, std::string_view kind);
  /// Drops the metrics JSON cannot carry (NaN, infinities), with a `log` naming each.
  void drop_non_finite_metrics(std::int64_t id, const protocol::case_identity& c,
                               protocol::transcript& t);
  void wake(boost::asio::steady_timer& t) { t.cancel(); }
  bool on_io_thread() const { return runs_here_(ex_); }

  const registry& study_;
  serve_options options_;
  // The caller's executor, or a strand over it when that kind cannot tell whether it runs on
  // this thread (a strand over a thread_pool): every subject runs on it.
  boost::asio::any_io_executor ex_;
  // Asks the executor type ex_ holds whether this thread runs it; chosen once, with ex_.
  bool (*runs_here_)(const boost::asio::any_io_executor&);
  request_table<request> table_;
  mira::detail::line_framer framer_;
  boost::json::parser parser_;
  std::string out_;      // frames waiting for the writer
  std::string result_;   // a result's text, reused
  std::string scratch_;  // a frame's text, reused
  boost::asio::steady_timer has_output_;
  boost::asio::steady_timer settled_;   // a request finished, or the writer stopped
  std::vector<std::int64_t> done_;      // answered, their entries released on the next turn
  std::vector<std::int64_t> settling_;  // done_ of the turn being released
  bool closing_ = false;
  bool writer_done_ = false;
  std::exception_ptr write_error_;
  std::optional<boost::asio::thread_pool> pool_;
};

}  // namespace mira::study::detail
