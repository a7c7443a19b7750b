// The byte-stream seam under a connection: the study's output (read) and input (write) as one
// type-erased pair, so the connection runs over child pipes in production and over in-memory
// fakes in tests.
#pragma once

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/socket_base.hpp>
#include <boost/asio/write.hpp>
#include <boost/system/error_code.hpp>

#include <cstddef>
#include <utility>

namespace mira::detail {

using io_handler =
    boost::asio::any_completion_handler<void(boost::system::error_code, std::size_t)>;

class transport {
 public:
  virtual ~transport() = default;
  virtual void async_read_some(boost::asio::mutable_buffer buf, io_handler h) = 0;
  /// Writes every byte of `buf` (which stays valid until `h` runs).
  virtual void async_write(boost::asio::const_buffer buf, io_handler h) = 0;
  /// The study sees end of input.
  virtual void close_output() = 0;
  /// Cancels outstanding reads and writes and closes both directions.
  virtual void close() = 0;
};

/// Adapts an Asio AsyncReadStream (the study's output) and AsyncWriteStream (its input).
template <class ReadStream, class WriteStream>
class stream_transport final : public transport {
 public:
  stream_transport(ReadStream in, WriteStream out) : in_(std::move(in)), out_(std::move(out)) {}

  void async_read_some(boost::asio::mutable_buffer buf, io_handler h) override {
    in_.async_read_some(buf, std::move(h));
  }
  void async_write(boost::asio::const_buffer buf, io_handler h) override {
    boost::asio::async_write(out_, buf, std::move(h));
  }
  void close_output() override { close_stream(out_); }
  void close() override {
    close_stream(in_);
    close_stream(out_);
  }

 private:
  template <class S>
  static void close_stream(S& s) {
    if constexpr (requires { s.close(std::declval<boost::system::error_code&>()); }) {
      boost::system::error_code ignored;
      s.close(ignored);
    } else if constexpr (requires { s.close(); }) {
      s.close();
    }
  }

  ReadStream in_;
  WriteStream out_;
};

/// Adapts one full-duplex Asio stream (a connected socket, or a wrapper over a pipe pair)
/// that the study both reads from and writes to. Ending the input is a half-close: the
/// stream's `shutdown(shutdown_send, ec)` when it has one (sockets), so the answers to
/// requests in flight can still be read.
template <class Stream>
class duplex_transport final : public transport {
 public:
  explicit duplex_transport(Stream s) : s_(std::move(s)) {}

  void async_read_some(boost::asio::mutable_buffer buf, io_handler h) override {
    s_.async_read_some(buf, std::move(h));
  }
  void async_write(boost::asio::const_buffer buf, io_handler h) override {
    boost::asio::async_write(s_, buf, std::move(h));
  }
  void close_output() override {
    boost::system::error_code ignored;
    s_.shutdown(boost::asio::socket_base::shutdown_send, ignored);
  }
  void close() override {
    boost::system::error_code ignored;
    s_.close(ignored);
  }

 private:
  Stream s_;
};

}  // namespace mira::detail
