// The study's server: the coroutine shell around the request table. One reader turns lines into
// requests, each run / execute / score runs as its own coroutine, and one writer sends what
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
#include <optional>
#include <stop_token>
#include <string>
#include <thread>
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
  std::optional<std::stop_source> stop;

  void cancel() {
    cancelled = true;
    if (stop) stop->request_stop();
    signal.emit(boost::asio::cancellation_type::terminal);
  }
  std::stop_token token() {
    if (!stop) {
      stop.emplace();
      if (cancelled) stop->request_stop();
    }
    return stop->get_token();
  }
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

class server {
 public:
  server(const registry& study, const serve_options& options, boost::asio::any_io_executor ex);
  server(const server&) = delete;
  server& operator=(const server&) = delete;
  ~server();

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
  void failed(std::int64_t id, const std::exception_ptr& e);
  void finished();

  void queue(std::string_view frame);
  void answer(std::int64_t id, std::string_view result_json);
  void answer_error(std::int64_t id, const protocol::rpc_error& e);
  void answer_error(std::int64_t id, boost::system::error_code code, std::string_view message,
                    bool retryable = false);
  void log(std::string_view message, std::int64_t request_id = 0);
  void wake(boost::asio::steady_timer& t) { t.cancel(); }
  bool on_io_thread() const;

  const registry& study_;
  serve_options options_;
  boost::asio::any_io_executor ex_;
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
  std::thread::id io_thread_;  // where run() runs, for an executor on_io_thread() cannot ask
};

}  // namespace mira::study::detail
