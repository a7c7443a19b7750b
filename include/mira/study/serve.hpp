// Serving a study: the protocol's study side over stdin/stdout (what a host spawns) or over
// any Asio byte stream (a socket: a study inside a host's process, for tests). Many requests
// are in flight at once on one I/O thread; blocking work goes to a thread pool the study owns.
#pragma once

#include <mira/study/registry.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include <cstddef>
#include <functional>

namespace mira::study {

struct serve_options {
  /// run / execute / score requests handled at once; later ones wait, in order, for a free
  /// slot (a `cancel` reaches them while they wait).
  std::size_t max_in_flight = 1024;
  /// Threads of the pool run_context::blocking() uses; 0: the hardware's, at least 2. Started
  /// when first used.
  std::size_t blocking_threads = 0;
  /// Samples per page of `list` and `list_samples`.
  std::size_t page_size = 1000;
  /// The longest request line read; a longer one is skipped with a `log` notification.
  std::size_t max_line = std::size_t{64} << 20;
  /// Answer `cancel` (and advertise it). Off, `cancel` is an unknown method and a subject runs
  /// to its end whatever the host sends; the end of the input still cancels what is in flight.
  bool cancel = true;
  /// Sends an `event` of kind `started` when a run / execute case begins and one of kind
  /// `finished` just before its answer, whatever the answer (a result or an error, a cancel
  /// included), as the Rust SDK does; `initialize` then advertises the `events` capability with
  /// both kinds (and those registry::emits_events declares). A case cancelled while it waits for
  /// a slot never began and gets neither; `score` gets neither. Off, only the events subjects
  /// send are sent.
  bool case_events = true;
};

/// Reads and writes bytes: the transport serve() runs over, type-erased so that the server is
/// compiled once. read_some completes with 0 bytes at the end of the input.
struct byte_stream {
  std::function<boost::asio::awaitable<std::size_t>(boost::asio::mutable_buffer)> read_some;
  std::function<boost::asio::awaitable<void>(boost::asio::const_buffer)> write;
};

/// Serves `study` over `stream` until its input ends. The end of the input ends every request
/// in flight, as the protocol says closing stdin does: each is cancelled as by `cancel`, and
/// serve() returns once all have answered (a subject that ignores its cancellation holds it). Runs
/// on the calling coroutine's executor, which must be single-threaded (an io_context run by one
/// thread, or a strand): every subject and scorer runs there. Throws std::invalid_argument when
/// study.check() finds a problem, and boost::system::system_error when the stream fails.
boost::asio::awaitable<void> serve(const registry& study, byte_stream stream,
                                   serve_options options = {});

/// A byte_stream over one full-duplex Asio stream (a connected socket), or over two (an input
/// and an output); the streams must outlive serve().
template <class In, class Out>
byte_stream stream_of(In& in, Out& out) {
  namespace asio = boost::asio;
  return {[&in](asio::mutable_buffer b) -> asio::awaitable<std::size_t> {
            auto [ec, n] = co_await in.async_read_some(b, asio::as_tuple(asio::use_awaitable));
            if (ec == asio::error::eof) co_return 0;
            if (ec) throw boost::system::system_error(ec, "reading the host's requests");
            co_return n;
          },
          [&out](asio::const_buffer b) -> asio::awaitable<void> {
            co_await asio::async_write(out, b, asio::use_awaitable);
          }};
}
template <class Stream>
byte_stream stream_of(Stream& s) {
  return stream_of(s, s);
}

/// Serves `study` on stdin and stdout until the host closes stdin, in an io_context of its own;
/// for main(): `return mira::study::serve_stdio(study);`. Returns 0, or 1 after printing why
/// on stderr (a problem study.check() found, a failed read or write). SIGPIPE is ignored, so
/// a host that goes away shows as a failed write.
int serve_stdio(const registry& study, serve_options options = {});

}  // namespace mira::study
