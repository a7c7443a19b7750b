// The mira error category and diagnostics formatting.
#include <mira/error.hpp>

#include <boost/asio/error.hpp>

#include <string.h>
#include <cstring>
#include <ostream>

namespace mira {

namespace {

class category_impl final : public boost::system::error_category {
 public:
  const char* name() const noexcept override { return "mira"; }
  std::string message(int ev) const override {
    switch (static_cast<errc>(ev)) {
      case errc::study_error:
        return "the study reported an error";
      case errc::study_error_retryable:
        return "the study reported a retryable error";
      case errc::study_exited:
        return "the study exited or closed its output";
      case errc::bad_response:
        return "the study sent a malformed response";
      case errc::incompatible_protocol:
        return "the study speaks an incompatible protocol";
      case errc::not_supported:
        return "the study does not support this request";
      case errc::cursor_loop:
        return "the study's sample cursor repeats";
      case errc::spawn_failed:
        return "the study could not be started";
      case errc::response_too_large:
        return "the study's response is too large";
      case errc::not_initialized:
        return "the request was made before initialize() completed";
      case errc::timed_out:
        return "the request's deadline passed";
      case errc::rejected_outcome:
        return "the case's outcome is one the caller fails fast on";
    }
    return "unknown mira error";
  }
};

}  // namespace

const boost::system::error_category& category() {
  static const category_impl c;
  return c;
}

error_code make_error_code(errc e) {
  return {static_cast<int>(e), category()};
}

std::ostream& operator<<(std::ostream& os, errc e) {
  return os << make_error_code(e);
}

bool is_retryable(const error_code& ec) {
  return ec == errc::study_error_retryable;
}

bool is_fatal(const error_code& ec) {
  return ec == errc::study_exited || ec == errc::incompatible_protocol || ec == errc::spawn_failed;
}

std::string exit_status::to_string() const {
  if (no_process) return "no process";
  if (signal != 0) {
    const char* abbrev = sigabbrev_np(signal);
    return "killed by signal " + std::to_string(signal) +
           (abbrev ? std::string(" (SIG") + abbrev + ")" : std::string());
  }
  return "exit code " + std::to_string(code);
}

std::string error::message() const {
  std::string m = code.message();
  if (diag.study_error) {
    m += ": " + diag.study_error->message;
    if (diag.study_error->code != 0) m += " (code " + std::to_string(diag.study_error->code) + ")";
  }
  if (!diag.message.empty()) m += ": " + diag.message;
  if (diag.exit) m += " [" + diag.exit->to_string() + "]";
  return m;
}

}  // namespace mira
