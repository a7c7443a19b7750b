// Spawning the study with Boost.Process v2, with the workarounds its 1.81 release needs
// (see the project notes on Process v2): inherited fds are closed in the child, and a failed
// exec ends the child with _exit so the parent's stdio buffers are not flushed twice.
#include "study_process.hpp"

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/readable_pipe.hpp>
#include <boost/asio/writable_pipe.hpp>
#include <boost/process/v2/environment.hpp>
// 1.81's header-only mode omits process_environment::on_setup; this is its only TU.
#include <boost/process/v2/impl/environment.ipp>
#include <boost/process/v2/process.hpp>
#include <boost/process/v2/start_dir.hpp>
#include <boost/process/v2/stdio.hpp>

#include <linux/close_range.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>

namespace mira::detail {

namespace asio = boost::asio;
namespace bp = boost::process::v2;

namespace {

// Pass after process_stdio: initializers run in order and stdio is dup2()ed onto 0/1/2 first.
struct close_inherited_fds {
  error_code on_exec_setup(bp::posix::default_launcher& l, const bp::filesystem::path&,
                           const char* const*) {
    auto keep = l.fd_whitelist;
    std::sort(keep.begin(), keep.end());
    int next = 0;
    for (int fd : keep) {
      if (fd > next) ::syscall(SYS_close_range, next, fd - 1, 0);
      next = fd + 1;
    }
    ::syscall(SYS_close_range, next, ~0U, 0);
    return {};
  }
  void on_exec_error(bp::posix::default_launcher&, const bp::filesystem::path&, const char* const*&,
                     const error_code&) {
    ::_exit(127);
  }
  // Declared only so 1.81's mismatched detection probe sees the hook above.
  void on_exec_error(bp::posix::default_launcher&, const error_code&, const bp::filesystem::path&,
                     const char* const*&, const error_code&);
};

exit_status to_status(int native) {
  exit_status s;
  if (WIFSIGNALED(native))
    s.signal = WTERMSIG(native);
  else if (WIFEXITED(native))
    s.code = WEXITSTATUS(native);
  return s;
}

class pipe_transport final : public transport {
 public:
  pipe_transport(asio::readable_pipe out, asio::writable_pipe in)
      : out_(std::move(out)), in_(std::move(in)) {}
  void async_read_some(asio::mutable_buffer buf, io_handler h) override {
    out_.async_read_some(buf, std::move(h));
  }
  void async_write(asio::const_buffer buf, io_handler h) override {
    asio::async_write(in_, buf, std::move(h));
  }
  void close_output() override {
    error_code ignored;
    in_.close(ignored);
  }
  void close() override {
    error_code ignored;
    out_.close(ignored);
    in_.close(ignored);
  }

 private:
  asio::readable_pipe out_;
  asio::writable_pipe in_;
};

class child_process final : public study_process {
 public:
  child_process(bp::process proc, asio::readable_pipe err)
      : proc_(std::move(proc)), err_(std::move(err)) {}

  void async_read_stderr(asio::mutable_buffer buf, io_handler h) override {
    err_.async_read_some(buf, std::move(h));
  }
  void async_wait_exit(asio::any_completion_handler<void(error_code, exit_status)> h) override {
    // The lambda carries the handler's executor (the host's strand): unbound, it would run on
    // whichever thread runs the io_context, racing the strand (seen by ThreadSanitizer).
    auto ex = asio::get_associated_executor(h, proc_.get_executor());
    proc_.async_wait(asio::bind_executor(ex, [this, h = std::move(h)](error_code ec, int) mutable {
      exit_status s = ec ? exit_status{} : to_status(proc_.native_exit_code());
      std::move(h)(ec, s);
    }));
  }
  void request_exit() override {
    error_code ignored;
    proc_.request_exit(ignored);
  }
  // bp::process::terminate() does not reap; the pending async_wait (or bp::process's
  // destructor, which kills and waits) does.
  void kill() override { ::kill(proc_.id(), SIGKILL); }
  void close_stderr() override {
    error_code ignored;
    err_.close(ignored);
  }
  int pid() const override { return proc_.id(); }

 private:
  bp::process proc_;
  asio::readable_pipe err_;
};

}  // namespace

tl::expected<spawned_study, error> spawn_study(const asio::any_io_executor& ex,
                                               const study_command& cmd) {
  auto fail = [&](std::string msg) {
    return tl::make_unexpected(
        error{make_error_code(errc::spawn_failed), diagnostics{{}, std::move(msg), {}, {}}});
  };
  if (cmd.argv.empty() || cmd.argv.front().empty()) return fail("empty study command");
  bp::filesystem::path exe = cmd.argv.front();
  if (cmd.argv.front().find('/') == std::string::npos) {
    exe = bp::environment::find_executable(cmd.argv.front());
    if (exe.empty()) return fail("'" + cmd.argv.front() + "' was not found on PATH");
  }
  std::vector<std::string> args(cmd.argv.begin() + 1, cmd.argv.end());
  asio::readable_pipe out(ex), err(ex);
  asio::writable_pipe in(ex);
  error_code ec;
  bp::filesystem::path dir = cmd.working_directory
                                 ? bp::filesystem::path(cmd.working_directory->string())
                                 : bp::filesystem::current_path();
  std::vector<std::string> env;
  if (cmd.environment)
    env = *cmd.environment;
  else
    for (char** e = ::environ; *e; ++e) env.emplace_back(*e);
  // The error_code overload still throws from some paths (e.g. when pidfd_open is refused).
  std::optional<bp::process> proc;
  try {
    proc.emplace(bp::default_process_launcher()(
        ex, ec, exe, args, bp::process_stdio{in, out, err}, bp::process_start_dir{dir},
        bp::process_environment{env}, close_inherited_fds{}));
  } catch (const std::exception& e) {
    return fail("cannot start '" + cmd.argv.front() + "': " + e.what());
  }
  if (ec) return fail("cannot start '" + cmd.argv.front() + "': " + ec.message());
  spawned_study s;
  s.io = std::make_unique<pipe_transport>(std::move(out), std::move(in));
  s.process = std::make_unique<child_process>(std::move(*proc), std::move(err));
  return s;
}

}  // namespace mira::detail
