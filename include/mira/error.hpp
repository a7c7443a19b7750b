// Error codes of the host (an error_category at the Asio boundary) and the diagnostics object
// that carries the study's own message, code and data plus transport facts beside them.
#pragma once

#include <mira/protocol/types.hpp>

#include <boost/system/error_code.hpp>

#include <iosfwd>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

namespace mira {

using boost::system::error_code;

enum class errc {
  study_error = 1,        // the study answered with an error object (not retryable)
  study_error_retryable,  // ... flagged `retryable: true`
  study_exited,           // the study closed its stdout or exited
  bad_response,           // a response was malformed or did not decode into its type
  incompatible_protocol,  // the study's protocol major differs from ours
  not_supported,          // the study did not advertise the capability this call needs
  cursor_loop,            // list_samples returned a cursor it had returned before
  spawn_failed,           // the study command could not be started
  response_too_large,     // the answer was longer than host_options::max_line_bytes
  not_initialized,        // a request before initialize() completed (it is never sent)
  timed_out,              // request_options::deadline passed before the answer came
  rejected_outcome,       // mira::fail_when: the outcome is one its predicate rejects
};

const boost::system::error_category& category();
error_code make_error_code(errc e);
std::ostream& operator<<(std::ostream& os, errc e);  // "mira:3" style, like error_code

/// True for errors worth retrying with the same request (the study said so).
bool is_retryable(const error_code& ec);
/// True when the connection is gone: no later request on it can succeed.
bool is_fatal(const error_code& ec);

/// How the study process ended, when it has.
struct exit_status {
  int code = -1;                  // exit code when it exited normally
  int signal = 0;                 // signal number when it was killed by one
  bool no_process = false;        // connect(): the host manages no process, so there is no status
  std::string to_string() const;  // "exit code 3" / "killed by signal 9 (SIGKILL)" / "no process"
};

/// What is known about a failure beyond its error_code. The study's own words (study_error)
/// are kept apart from text the host made (message).
struct diagnostics {
  std::optional<protocol::rpc_error> study_error;
  std::string message;                   // host-made explanation, empty when ec says it all
  std::optional<exit_status> exit;       // set when the study process ended
  std::vector<std::string> stderr_tail;  // last lines the study wrote on stderr

  void clear() { *this = diagnostics{}; }
};

/// An error_code with its diagnostics, for the tl::expected-returning layer.
struct error {
  error_code code;
  diagnostics diag;

  /// One line: the code's message, then the study's message or the host's explanation,
  /// then how the study ended.
  std::string message() const;
};

}  // namespace mira

// Left out of the reference: Doxygen cannot place a specialisation of Boost's trait.
/// @cond
template <>
struct boost::system::is_error_code_enum<mira::errc> : std::true_type {};
/// @endcond
