// Spawning the study: posix_spawn with its stdin, stdout and stderr on three new pipes, then the
// pipes and the process (through a pidfd) handed to Asio.
//
// Not Boost.Process v2's launcher: it forks and calls execution_context::notify_fork on the
// io_context, which Asio forbids while other threads run that context (a child could block on a
// registry or reactor mutex that such a thread held at the fork, and the parent then waits for
// its exec for ever). glibc's posix_spawn (clone with CLONE_VM|CLONE_VFORK) runs no fork handlers
// and touches no Asio state, so any thread may spawn at any time, and it reports a failed exec
// (or chdir) as its result. The child gets only fds 0-2, default signal dispositions (the host
// ignores SIGPIPE) and an empty signal mask, and stays in the host's process group.
#include "study_process.hpp"

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/readable_pipe.hpp>
#include <boost/asio/writable_pipe.hpp>
#include <boost/asio/write.hpp>
#include <boost/process/v2/environment.hpp>
#include <boost/process/v2/process.hpp>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <exception>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace mira::detail {

namespace asio = boost::asio;
namespace bp = boost::process::v2;

namespace {

// An fd owned until Asio adopts it.
class unique_fd {
 public:
  unique_fd() = default;
  explicit unique_fd(int fd) noexcept : fd_(fd) {}
  unique_fd(const unique_fd&) = delete;
  unique_fd& operator=(const unique_fd&) = delete;
  ~unique_fd() { reset(); }
  int get() const noexcept { return fd_; }
  int release() noexcept { return std::exchange(fd_, -1); }
  void reset(int fd = -1) noexcept {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

struct pipe_ends {
  unique_fd read, write;
};

// Close-on-exec, so no other child started meanwhile inherits them (one holding the study's
// stdin open would keep it from ever reading its end). Returns 0 or an errno value.
int make_pipe(pipe_ends& p) {
  std::array<int, 2> fds{};
  if (::pipe2(fds.data(), O_CLOEXEC) < 0) return errno;
  p.read.reset(fds[0]);
  p.write.reset(fds[1]);
  return 0;
}

// The Asio pipe owns the fd once it is registered with the reactor.
template <class Pipe>
error_code adopt(Pipe& to, unique_fd& fd) {
  error_code ec;
  to.assign(fd.get(), ec);
  if (!ec) fd.release();
  return ec;
}

// RAII over posix_spawn's two attribute objects.
struct spawn_setup {
  posix_spawn_file_actions_t actions{};
  posix_spawnattr_t attr{};
  spawn_setup() {
    ::posix_spawn_file_actions_init(&actions);
    ::posix_spawnattr_init(&attr);
  }
  spawn_setup(const spawn_setup&) = delete;
  spawn_setup& operator=(const spawn_setup&) = delete;
  ~spawn_setup() {
    ::posix_spawnattr_destroy(&attr);
    ::posix_spawn_file_actions_destroy(&actions);
  }
};

// The pipes' child ends on 0-2 and every other fd closed (also those other threads opened
// without close-on-exec), the working directory, default signal dispositions and an empty mask.
// Returns 0 or the first errno value.
int prepare(spawn_setup& s, const std::array<pipe_ends, 3>& p, const study_command& cmd) {
  sigset_t all{}, none{};
  sigfillset(&all);
  sigemptyset(&none);
  int rc = ::posix_spawn_file_actions_adddup2(&s.actions, p[0].read.get(), 0);
  if (rc == 0) rc = ::posix_spawn_file_actions_adddup2(&s.actions, p[1].write.get(), 1);
  if (rc == 0) rc = ::posix_spawn_file_actions_adddup2(&s.actions, p[2].write.get(), 2);
  if (rc == 0 && cmd.working_directory)
    rc = ::posix_spawn_file_actions_addchdir_np(&s.actions, cmd.working_directory->c_str());
  if (rc == 0) rc = ::posix_spawn_file_actions_addclosefrom_np(&s.actions, 3);
  if (rc == 0) rc = ::posix_spawnattr_setsigdefault(&s.attr, &all);
  if (rc == 0) rc = ::posix_spawnattr_setsigmask(&s.attr, &none);
  if (rc == 0)
    rc = ::posix_spawnattr_setflags(&s.attr, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
  return rc;
}

// A started child not yet owned by a bp::process: killed and reaped if it cannot be handed over.
struct child_guard {
  pid_t pid = -1;
  child_guard() = default;
  child_guard(const child_guard&) = delete;
  child_guard& operator=(const child_guard&) = delete;
  ~child_guard() {
    if (pid <= 0) return;
    ::kill(pid, SIGKILL);
    while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
    }
  }
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
  auto cannot_start = [&](const std::string& why) {
    std::string msg = "cannot start '" + cmd.argv.front() + "'";
    if (cmd.working_directory) msg += " in '" + cmd.working_directory->string() + "'";
    return fail(msg + ": " + why);
  };
  auto errno_text = [](int e) {
    return error_code(e, boost::system::generic_category()).message();
  };
  std::string exe = cmd.argv.front();
  if (exe.find('/') == std::string::npos) {
    exe = bp::environment::find_executable(cmd.argv.front()).string();
    if (exe.empty()) return fail("'" + cmd.argv.front() + "' was not found on PATH");
  }
  // argv[0] is the program as found, as Boost.Process's launcher passed it.
  std::vector<char*> argv;
  argv.reserve(cmd.argv.size() + 1);
  argv.push_back(exe.data());
  for (auto a = cmd.argv.begin() + 1; a != cmd.argv.end(); ++a)
    argv.push_back(const_cast<char*>(a->c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  if (cmd.environment) {
    envp.reserve(cmd.environment->size() + 1);
    for (const auto& v : *cmd.environment) envp.push_back(const_cast<char*>(v.c_str()));
    envp.push_back(nullptr);
  }

  std::array<pipe_ends, 3> pipes;  // the study's stdin, stdout, stderr
  for (auto& p : pipes)
    if (int rc = make_pipe(p); rc != 0) return cannot_start("pipe2: " + errno_text(rc));
  spawn_setup setup;
  if (int rc = prepare(setup, pipes, cmd); rc != 0)
    return cannot_start("posix_spawn: " + errno_text(rc));
  child_guard child;
  // glibc's posix_spawn waits for the exec, so an exec (or chdir) error is its result, and it
  // has reaped that child.
  if (int rc = ::posix_spawn(&child.pid, exe.c_str(), &setup.actions, &setup.attr, argv.data(),
                             cmd.environment ? envp.data() : ::environ);
      rc != 0) {
    child.pid = -1;
    return cannot_start(errno_text(rc));
  }
  // Without a pidfd there is nothing to fall back on: bp::process(ex, pid) opens one itself, and
  // throws when it cannot.
  unique_fd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, child.pid, 0)));
  if (pidfd.get() < 0) {
    int e = errno;
    return cannot_start("pidfd_open: " + errno_text(e));
  }
  asio::writable_pipe in(ex);
  asio::readable_pipe out(ex), err(ex);
  error_code ec = adopt(in, pipes[0].write);
  if (!ec) ec = adopt(out, pipes[1].read);
  if (!ec) ec = adopt(err, pipes[2].read);
  if (ec) return cannot_start(ec.message());
  // The state the launcher leaves: async_wait waits on the pidfd, then reaps with waitpid.
  std::optional<bp::process> proc;
  try {
    proc.emplace(ex, child.pid, pidfd.get());
  } catch (const std::exception& e) {  // the pidfd's registration with the reactor failed
    return cannot_start(e.what());
  }
  pidfd.release();
  child.pid = -1;  // the process's now: its destructor kills and reaps a running child
  spawned_study s;
  s.io = std::make_unique<pipe_transport>(std::move(out), std::move(in));
  s.process = std::make_unique<child_process>(std::move(*proc), std::move(err));
  return s;
}

}  // namespace mira::detail
