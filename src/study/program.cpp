// Running an external program for one case (see program.hpp): posix_spawn into a process group
// of its own, the pipes read and written on a strand, its end awaited through a pidfd.
//
// Five coroutines share a run_state: two read stdout and stderr, one writes stdin, one waits for
// the exit and reaps, and the watchdog stops the group on the time limit or a cancellation. None
// of them hears cancellation (Asio's coroutines would filter partial out, and could hear it only
// once started): the operation that run_program awaits takes it on its slot and wakes the
// watchdog. That operation's handler belongs to the state, which the coroutines own, so an
// io_context destroyed meanwhile destroys it all, and the child is killed and reaped on the way.
//
// The slot is the caller's, and its cancellation is emitted where the caller runs. So the strand
// never touches it: the slot's handler only posts to the strand, through a weak_ptr, and the
// completion is posted to the caller's executor, which clears the slot and runs the handler, as
// Asio's awaitable clears its own where its handler runs.
#include <mira/study/program.hpp>

#include "study/unique_fd.hpp"

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/system_error.hpp>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <exception>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string_view>
#include <utility>

namespace mira::study {

namespace asio = boost::asio;
using boost::system::error_code;

namespace {

using steady = std::chrono::steady_clock;
using descriptor = asio::posix::stream_descriptor;

[[noreturn]] void throw_errno(int e, const std::string& what) {
  throw boost::system::system_error(error_code(e, boost::system::generic_category()), what);
}

// Pipe ends are owned until an Asio descriptor adopts them.
using detail::unique_fd;

struct pipe_ends {
  unique_fd read, write;
};

// Close-on-exec, so no other child started meanwhile inherits them.
pipe_ends make_pipe() {
  std::array<int, 2> fds{};
  if (::pipe2(fds.data(), O_CLOEXEC) < 0) throw_errno(errno, "run_program: pipe2");
  return {unique_fd(fds[0]), unique_fd(fds[1])};
}

void adopt(descriptor& d, unique_fd& fd) {
  d.assign(fd.get());
  fd.release();
}

// The inherited environment with the options' variables added or replaced.
std::vector<std::string> child_environment(const program_options& o) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string_view var(*e);
    auto name = var.substr(0, var.find('='));
    if (std::none_of(o.env.begin(), o.env.end(), [&](const auto& v) { return v.first == name; }))
      env.emplace_back(var);
  }
  for (const auto& [name, value] : o.env) {
    std::string var = name;
    var += '=';
    var += value;
    env.push_back(std::move(var));
  }
  return env;
}

// argv[0] as execvp would find it, but in the child's PATH (which `env` may set), not ours, and
// skipping relative entries, which would depend on the working directory.
std::string find_program(const std::string& name, const std::vector<std::string>& env) {
  if (name.find('/') != std::string::npos) return name;
  std::string_view path = "/usr/local/bin:/usr/bin:/bin";
  for (const auto& var : env)
    if (var.starts_with("PATH=")) path = std::string_view(var).substr(5);
  int error = ENOENT;
  for (std::size_t begin = 0; begin <= path.size();) {
    auto end = std::min(path.find(':', begin), path.size());
    auto dir = path.substr(begin, end - begin);
    begin = end + 1;
    if (!dir.starts_with('/')) continue;
    std::string candidate = std::string(dir) + '/' + name;
    struct stat st {};
    if (::stat(candidate.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    error = EACCES;
  }
  throw_errno(error, "run_program: cannot start '" + name + "' (looked up in PATH)");
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

void check(int rc) {
  if (rc != 0) throw_errno(rc, "run_program: posix_spawn setup");
}

// The child, whose pid is its process group's id too. Killed with its group and reaped here when
// run_program ends before it does (an exception, or the io_context destroyed meanwhile).
struct child_group {
  pid_t pid = -1;
  bool reaped = false;

  child_group() = default;
  child_group(const child_group&) = delete;
  child_group& operator=(const child_group&) = delete;
  ~child_group() {
    if (pid <= 0 || reaped) return;
    ::kill(-pid, SIGKILL);
    siginfo_t info{};
    while (::waitid(P_PID, pid, &info, WEXITED) < 0 && errno == EINTR) {
    }
  }

  void signal(int sig) const { ::kill(-pid, sig); }

  // Once the pidfd is readable the child is a zombie, so this does not block.
  error_code reap(program_result& r) {
    siginfo_t info{};
    int rc = 0;
    while ((rc = ::waitid(P_PID, pid, &info, WEXITED)) < 0 && errno == EINTR) {
    }
    reaped = true;  // or reaped by someone else (ECHILD): either way, not ours to wait for
    if (rc < 0) return {errno, boost::system::generic_category()};
    if (info.si_code == CLD_EXITED) {
      r.exit_code = info.si_status;
      r.signal = 0;
    } else {
      r.exit_code = -1;
      r.signal = info.si_status;
    }
    return {};
  }
};

using done_handler = asio::any_completion_handler<void(std::exception_ptr, program_result)>;

struct run_state {
  run_state(asio::any_io_executor ex, program_options o)
      : caller(ex),
        strand(asio::make_strand(ex)),
        options(std::move(o)),
        in(strand),
        out(strand),
        err(strand),
        pidfd(strand),
        watch(strand),
        drain(strand) {}

  asio::any_io_executor caller;
  asio::strand<asio::any_io_executor> strand;
  program_options options;
  child_group child;
  descriptor in, out, err;  // the pipes' parent ends
  descriptor pidfd;
  asio::steady_timer watch;  // the time limit, then the grace
  asio::steady_timer drain;  // the pipes' grace once the program has ended
  steady::time_point start;
  program_result result;
  error_code reap_error;
  std::exception_ptr failure;
  // Optional for its emplace: 1.81's move assignment of any_completion_handler recurses forever
  // (it wraps the moved-from handler in a new one, and so on).
  std::optional<done_handler> done;
  int open_pipes = 3;
  int running = 5;  // coroutines
  bool exited = false;
  bool stopping = false;
  bool cancelled = false;
};

// Starts the program with its stdio on new pipes, in a new process group, with only fds 0-2,
// default signal dispositions and an empty signal mask, and takes the pipes and a pidfd.
void spawn(run_state& s) {
  const auto& o = s.options;
  // With SIGCHLD ignored the kernel reaps the child unseen: no exit status, and a process group
  // id that may be reused while this still signals it.
  struct sigaction chld {};
  if (::sigaction(SIGCHLD, nullptr, &chld) == 0 &&
      (chld.sa_handler == SIG_IGN || (chld.sa_flags & SA_NOCLDWAIT) != 0))
    throw boost::system::system_error(
        error_code(ECHILD, boost::system::generic_category()),
        "run_program: SIGCHLD is ignored in this process (SIG_IGN or SA_NOCLDWAIT), so its "
        "children are reaped unseen; give SIGCHLD its default action to run '" +
            o.argv.front() + "'");
  auto env = child_environment(o);
  auto path = find_program(o.argv.front(), env);
  auto in = make_pipe();
  auto out = make_pipe();
  auto err = make_pipe();

  spawn_setup setup;
  check(::posix_spawn_file_actions_adddup2(&setup.actions, in.read.get(), 0));
  check(::posix_spawn_file_actions_adddup2(&setup.actions, out.write.get(), 1));
  check(::posix_spawn_file_actions_adddup2(&setup.actions, err.write.get(), 2));
  if (o.cwd) check(::posix_spawn_file_actions_addchdir_np(&setup.actions, o.cwd->c_str()));
  // Also the fds opened by other threads without close-on-exec.
  check(::posix_spawn_file_actions_addclosefrom_np(&setup.actions, 3));
  sigset_t all{}, none{};
  sigfillset(&all);
  sigemptyset(&none);
  check(::posix_spawnattr_setpgroup(&setup.attr, 0));
  check(::posix_spawnattr_setsigdefault(&setup.attr, &all));
  check(::posix_spawnattr_setsigmask(&setup.attr, &none));
  check(::posix_spawnattr_setflags(
      &setup.attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK));

  std::vector<char*> argv;
  argv.reserve(o.argv.size() + 1);
  for (const auto& a : o.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  envp.reserve(env.size() + 1);
  for (const auto& v : env) envp.push_back(const_cast<char*>(v.c_str()));
  envp.push_back(nullptr);

  s.start = steady::now();
  // glibc's posix_spawn waits for the exec, so an exec error is its result.
  if (int rc = ::posix_spawn(&s.child.pid, path.c_str(), &setup.actions, &setup.attr, argv.data(),
                             envp.data());
      rc != 0) {
    s.child.pid = -1;
    std::string what = "run_program: cannot start '" + o.argv.front() + "'";
    if (o.cwd) what += " in '" + o.cwd->string() + "'";
    throw_errno(rc, what);
  }
  unique_fd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, s.child.pid, 0)));
  if (pidfd.get() < 0) throw_errno(errno, "run_program: pidfd_open");
  adopt(s.pidfd, pidfd);
  adopt(s.in, in.write);
  adopt(s.out, out.read);
  adopt(s.err, err.read);
}

void pipe_done(run_state& s) {
  if (--s.open_pipes == 0) s.drain.cancel();
}

asio::awaitable<void> read_pipe(std::shared_ptr<run_state> s, descriptor& pipe, std::string& to) {
  std::array<char, 65536> buf;
  for (;;) {
    auto [ec, n] =
        co_await pipe.async_read_some(asio::buffer(buf), asio::as_tuple(asio::use_awaitable));
    const std::size_t room = s->options.max_output - std::min(to.size(), s->options.max_output);
    to.append(buf.data(), std::min(n, room));
    if (n > room) s->result.truncated = true;
    if (ec) break;  // the end, or closed by the drain's grace
  }
  pipe_done(*s);
}

// SIGPIPE from a write to a pipe whose reader is gone would end this process unless it is
// ignored. It is blocked around the write, and the one the write raised (thread-directed, so
// pending on this thread) is taken back before the mask is restored.
ssize_t write_without_sigpipe(int fd, std::string_view data) {
  sigset_t pipe_only{}, old{}, pending{};
  sigemptyset(&pipe_only);
  sigaddset(&pipe_only, SIGPIPE);
  ::pthread_sigmask(SIG_BLOCK, &pipe_only, &old);
  ::sigpending(&pending);
  const bool was_pending = sigismember(&pending, SIGPIPE) == 1;
  const ssize_t n = ::write(fd, data.data(), data.size());
  const int error = errno;
  if (n < 0 && error == EPIPE && !was_pending) {
    const timespec now{};
    while (::sigtimedwait(&pipe_only, nullptr, &now) < 0 && errno == EINTR) {
    }
  }
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  errno = error;
  return n;
}

asio::awaitable<void> write_stdin(std::shared_ptr<run_state> s) {
  std::string_view rest = s->options.stdin_data;
  s->in.non_blocking(true);
  while (!rest.empty()) {
    const ssize_t n = write_without_sigpipe(s->in.native_handle(), rest);
    if (n >= 0) {
      rest.remove_prefix(static_cast<std::size_t>(n));
    } else if (errno == EAGAIN) {
      auto [ec] =
          co_await s->in.async_wait(descriptor::wait_write, asio::as_tuple(asio::use_awaitable));
      if (ec) break;  // closed by the drain's grace
    } else if (errno != EINTR) {
      break;  // EPIPE: the child does not read any more, which is its business
    }
  }
  error_code ignored;
  s->in.close(ignored);  // the child's EOF
  pipe_done(*s);
}

// Whether the pidfd says its process has ended, asked now.
bool ended(int pidfd) {
  pollfd p{pidfd, POLLIN, 0};
  int rc = 0;
  while ((rc = ::poll(&p, 1, 0)) < 0 && errno == EINTR) {
  }
  return rc != 0;  // readable, or an error the wait would meet too
}

asio::awaitable<void> wait_exit(std::shared_ptr<run_state> s) {
  // A wait can end while the child runs: on a reactor run by several threads, a readiness event
  // read for the descriptor that had this number before may be handed to this one. The pidfd is
  // asked again before the group is killed.
  for (;;) {
    auto [ec] =
        co_await s->pidfd.async_wait(descriptor::wait_read, asio::as_tuple(asio::use_awaitable));
    if (ec || ended(s->pidfd.native_handle())) break;
  }
  // What the program left in its group dies with it, now that the unreaped child still holds the
  // group's id. (Were the pidfd ever to fail, this would kill the child too, so the reap below
  // does not block.)
  s->child.signal(SIGKILL);
  s->exited = true;
  s->watch.cancel();
  s->reap_error = s->child.reap(s->result);
  s->result.duration =
      std::chrono::duration_cast<std::chrono::milliseconds>(steady::now() - s->start);
  // The group is dead, so the pipes' ends come at once, unless a descendant that left the group
  // holds them: it gets the grace.
  if (s->open_pipes > 0) {
    s->drain.expires_after(s->options.kill_grace);
    co_await s->drain.async_wait(asio::as_tuple(asio::use_awaitable));
    if (s->open_pipes > 0) {
      error_code ignored;
      s->in.cancel(ignored);
      s->out.cancel(ignored);
      s->err.cancel(ignored);
    }
  }
}

// Stops the group on the time limit or a cancellation: SIGTERM, then SIGKILL after the grace.
// wait_exit and on_cancellation() wake it by cancelling its timer.
asio::awaitable<void> watchdog(std::shared_ptr<run_state> s) {
  if (s->options.time_limit)
    s->watch.expires_at(s->start + *s->options.time_limit);
  else
    s->watch.expires_at(asio::steady_timer::time_point::max());
  if (!s->exited && !s->cancelled) {
    auto [ec] = co_await s->watch.async_wait(asio::as_tuple(asio::use_awaitable));
    if (!ec && !s->exited) s->result.timed_out = true;
  }
  if (s->exited) co_return;
  s->stopping = true;
  s->child.signal(SIGTERM);
  s->watch.expires_after(s->options.kill_grace);
  co_await s->watch.async_wait(asio::as_tuple(asio::use_awaitable));
  if (!s->exited) s->child.signal(SIGKILL);
}

// On the strand. Once the program has ended the result stands.
void on_cancellation(run_state& s) {
  if (s.exited) return;
  s.cancelled = true;
  if (!s.stopping) s.watch.cancel();
}

void coroutine_done(run_state& s, std::exception_ptr e) {
  if (e && !s.failure) s.failure = e;
  if (--s.running > 0) return;
  // Closed here rather than with the state, which a late cancellation may keep a moment longer.
  error_code ignored;
  s.in.close(ignored);
  s.out.close(ignored);
  s.err.close(ignored);
  s.pidfd.close(ignored);
  std::exception_ptr outcome = s.failure;
  if (!outcome && s.reap_error)
    outcome =
        std::make_exception_ptr(boost::system::system_error(s.reap_error, "run_program: waitid"));
  if (!outcome && s.cancelled)
    outcome = std::make_exception_ptr(
        boost::system::system_error(error_code(asio::error::operation_aborted)));
  auto done = std::move(*s.done);
  s.done.reset();
  asio::post(s.caller, [h = std::move(done), outcome, r = std::move(s.result)]() mutable {
    // On the caller's executor, where its cancellation is emitted (its strand, or its one
    // thread): the slot's handler is not running now, and cannot start once it is gone.
    if (auto slot = asio::get_associated_cancellation_slot(h); slot.is_connected()) slot.clear();
    std::move(h)(outcome, std::move(r));
  });
}

void launch(std::shared_ptr<run_state> s, done_handler done) {
  // The slot is the erased handler's: erasing replaces whatever the raw one's slot held.
  auto& erased = s->done.emplace(std::move(done));
  if (auto slot = asio::get_associated_cancellation_slot(erased); slot.is_connected()) {
    // Runs where the emission is, maybe beside the strand: it touches nothing of the state but
    // the weak_ptr, and leaves the rest to the strand.
    slot.assign([weak = std::weak_ptr<run_state>(s)](asio::cancellation_type type) {
      using ct = asio::cancellation_type;
      if ((type & (ct::terminal | ct::partial)) == ct::none) return;
      if (auto st = weak.lock()) asio::post(st->strand, [st] { on_cancellation(*st); });
    });
  }
  auto on_done = [s](std::exception_ptr e) { coroutine_done(*s, e); };
  asio::co_spawn(s->strand, read_pipe(s, s->out, s->result.out), on_done);
  asio::co_spawn(s->strand, read_pipe(s, s->err, s->result.err), on_done);
  asio::co_spawn(s->strand, write_stdin(s), on_done);
  asio::co_spawn(s->strand, wait_exit(s), on_done);
  asio::co_spawn(s->strand, watchdog(s), on_done);
}

asio::awaitable<program_result> supervise(std::shared_ptr<run_state> s) {
  return asio::async_initiate<const asio::use_awaitable_t<>&,
                              void(std::exception_ptr, program_result)>(
      [](auto handler, std::shared_ptr<run_state> st) {
        launch(std::move(st), std::move(handler));
      },
      asio::use_awaitable, std::move(s));
}

std::string signal_name(int sig) {
  if (const char* abbrev = ::sigabbrev_np(sig)) return std::string("SIG") + abbrev;
  return "signal " + std::to_string(sig);
}

}  // namespace

asio::awaitable<program_result> run_program(program_options options) {
  if (options.argv.empty()) throw std::invalid_argument("run_program: argv is empty");
  auto ex = co_await asio::this_coro::executor;
  auto s = std::make_shared<run_state>(ex, std::move(options));
  spawn(*s);
  co_return co_await supervise(std::move(s));
}

protocol::transcript to_transcript(const program_result& result) {
  protocol::transcript t;
  t.final_response = result.out;
  t.timing.duration_ms = result.duration.count();
  if (result.timed_out) {
    t.error = "timed out: stopped after " + std::to_string(result.duration.count()) + " ms";
    t.error_kind = protocol::error_kind::infra;
  } else if (result.signal != 0) {
    t.error = "killed by " + signal_name(result.signal);
  } else if (result.exit_code != 0) {
    t.error = "exited with code " + std::to_string(result.exit_code);
  }
  return t;
}

}  // namespace mira::study
