// An external program as a study's subject: a Python agent, a compiler, anything that reads its
// input on stdin (or argv) and answers on stdout, run once per case with a time limit and killed,
// with everything it started, when the case is over or cancelled. Linux only (pidfd, Linux 5.3).
#pragma once

#include <mira/protocol/types.hpp>

#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace mira::study {

// Every member of these two has an initializer: designated initializers may then leave any out
// without g++ 12's -Wmissing-field-initializers.

/// How to run one program.
struct program_options {
  /// The program and its arguments. An argv[0] without a slash is looked up in the absolute
  /// entries of the child's PATH (`env` included); one with a slash is used as it is (relative to
  /// `cwd` when that is set).
  std::vector<std::string> argv{};
  /// The child's working directory; this process's when unset.
  std::optional<std::filesystem::path> cwd{};
  /// Variables added to the inherited environment, or replacing inherited ones of the same name.
  std::vector<std::pair<std::string, std::string>> env{};
  /// Written to the child's stdin, which is then closed. A child that exits (or closes its stdin)
  /// before reading it all is not an error: the rest is dropped.
  std::string stdin_data{};
  /// When it passes, the child's process group is stopped (see kill_grace) and the result says
  /// timed_out. No limit when unset.
  std::optional<std::chrono::milliseconds> time_limit{};
  /// The most of each of stdout and stderr kept; the rest is read and dropped (so the child never
  /// blocks on a full pipe) and the result says truncated.
  std::size_t max_output = std::size_t{64} << 20;
  /// Stopping the group is SIGTERM first, then SIGKILL to whatever is left after this long.
  std::chrono::milliseconds kill_grace{2000};
};

/// How a program ended and what it wrote.
struct program_result {
  int exit_code = -1;  ///< the exit status, or -1 when a signal ended the program
  int signal = 0;      ///< the signal that ended the program, or 0 when it exited
  std::string out{};   ///< stdout, at most max_output bytes
  std::string err{};   ///< stderr, at most max_output bytes
  bool timed_out = false;
  bool truncated = false;                 ///< stdout or stderr was longer than max_output
  std::chrono::milliseconds duration{0};  ///< from the start to the program's end
};

/// Runs a program to its end and gives what it wrote and how it ended. The child is started in
/// a process group of its own, with only stdin, stdout and stderr open, default signal
/// dispositions and no blocked signal (whatever this process ignores or blocks); its stdin is
/// fed while stdout and stderr are read, so no pipe fills up.
///
/// The program's end is the end of the whole group: when the program exits, whatever it left
/// running in its group is SIGKILLed; a descendant that left the group (setsid) but keeps the
/// pipes open gets kill_grace to close them before they are closed here. No process stays a
/// zombie and no descriptor stays open once the awaitable completes, however it completes, or
/// once its io_context is destroyed with it pending.
///
/// The child's stdin is written with SIGPIPE blocked in the writing thread, and a SIGPIPE that
/// a write to a closed pipe raises there is discarded: the caller need not ignore SIGPIPE.
///
/// Executor: the calling coroutine's; run_program's own operations run on a strand of it, so
/// an io_context run by several threads is fine. It completes on the calling coroutine's
/// executor, and only there is the cancellation slot cleared, so a cancellation may come at any
/// moment (the program's end included) when it is emitted where that coroutine runs, as Asio
/// asks of every operation. A coroutine that races run_program in `||` or a parallel group on an
/// io_context run by several threads belongs on a strand: on the plain executor Asio 1.81 emits
/// from whichever thread ends the other operation, which nothing serialises with this one's end.
///
/// Cancellation: whatever the calling coroutine's cancellation state lets through (terminal
/// only, by default; partial too after reset_cancellation_state(enable_partial_cancellation())),
/// except total, which is ignored since stopping a program is not free of side effects. A
/// cancellation before the program has ended stops the group as the time limit does (or lets a
/// stop already under way go on), waits until the program is reaped, then completes by throwing
/// boost::system::system_error with asio::error::operation_aborted. One that comes once the
/// program has ended is ignored and the result returned.
///
/// Errors: a program that cannot be started throws boost::system::system_error whose code is
/// the exec error in the generic category (errc::no_such_file_or_directory for one not found,
/// errc::permission_denied for one not executable) and whose message names the program (and
/// the cwd, which may be what is missing); an empty argv throws std::invalid_argument. The caller
/// must not reap children it did not start (no waitpid(-1)); with SIGCHLD ignored (SIG_IGN or
/// SA_NOCLDWAIT) nothing is started and boost::system::system_error (errc::no_child_process)
/// says so.
boost::asio::awaitable<program_result> run_program(program_options options);

/// A result as a transcript: final_response is stdout as written; error is set when the program
/// timed out (error_kind infra), was ended by a signal or exited with a nonzero code (error_kind
/// subject), naming which; timing.duration_ms is the duration.
protocol::transcript to_transcript(const program_result& result);

}  // namespace mira::study
