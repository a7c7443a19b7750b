// The study child process: spawn with piped stdin/stdout/stderr, exit status, signals.
// Started with posix_spawn, not Boost.Process v2's fork-based launcher, which calls notify_fork
// on the io_context: spawn_study is safe from any thread while other threads run the executor's
// context, and an exec that fails (missing file, no permission) is its error. Boost.Process v2
// (bp::process over a pidfd, for the exit) is confined to study_process.cpp.
#pragma once

#include <mira/detail/transport.hpp>
#include <mira/error.hpp>
#include <mira/host.hpp>

#include <boost/asio/any_io_executor.hpp>

#include <memory>

namespace mira::detail {

class study_process {
 public:
  virtual ~study_process() = default;  // kills and reaps a still-running child
  virtual void async_read_stderr(boost::asio::mutable_buffer buf, io_handler h) = 0;
  virtual void async_wait_exit(
      boost::asio::any_completion_handler<void(error_code, exit_status)> h) = 0;
  virtual void request_exit() = 0;  // SIGTERM
  virtual void kill() = 0;          // SIGKILL (reaped by the pending wait or the destructor)
  virtual void close_stderr() = 0;
  virtual int pid() const = 0;
};

struct spawned_study {
  std::unique_ptr<transport> io;
  std::unique_ptr<study_process> process;
};

// errc::spawn_failed when the program is not found on PATH or cannot be executed, with the
// command in the message.
tl::expected<spawned_study, error> spawn_study(const boost::asio::any_io_executor& ex,
                                               const study_command& cmd);

}  // namespace mira::detail
