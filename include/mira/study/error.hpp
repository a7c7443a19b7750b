// The study SDK's errors: what a study answers a request with when it cannot give a result, as
// an error_code in the study's own category (which tests and callers decide on) and the
// JSON-RPC code the wire carries for it; and what its file helpers (datasets, seeded files,
// parts read from a file) fail with.
#pragma once

#include <mira/coded_error.hpp>
#include <mira/protocol/types.hpp>

#include <boost/system/error_code.hpp>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

namespace mira::study {

enum class errc {
  unknown_method = 1,  // a method the protocol does not define, or one this study turned off
  invalid_request,     // a request line that is not a request: no method, an id not an integer
  invalid_params,      // params of the wrong shape: a missing eval, a cursor not issued here
  unknown_eval,        // no eval of that name
  unknown_sample,      // the eval has no sample of that id
  unknown_target,      // the eval has no target of that label
  duplicate_id,        // a request reused the id of one still in flight
  cancelled,           // the host cancelled the request (or closed the connection) first
  subject_failed,      // the subject threw
  scorer_failed,       // a scorer threw
  sample_failed,       // making a sample threw (a sample generator's make or index_of)
  // What the file helpers fail with (a dataset loader, seeded files, parts read from a file).
  file_unreadable,  // a file could not be opened or read (the message names it and why)
  file_unwritable,  // a seeded file could not be written into its folder
  file_too_large,   // a file is larger than the limit it is read under
  dataset_invalid,  // a dataset record is not what its format and field map ask (names file:line)
  unsafe_path,      // a seeded file's path is absolute, climbs with "..", or meets a link
  unknown_media_type,  // a part's file has no media type given or known, or one of another kind
};

const boost::system::error_category& category() noexcept;
boost::system::error_code make_error_code(errc e) noexcept;

/// The JSON-RPC code an error of this category is answered with: -32601 for an unknown method,
/// -32600 for an invalid request or a duplicate id, -32602 for bad params and unknown names,
/// -32800 for a cancelled request (as LSP does), -32603 for a subject, scorer or sample generator
/// that threw and for the file helpers' errors, and 0 for a code of another category.
std::int64_t rpc_code(boost::system::error_code ec) noexcept;

/// Makes study::error a type of its own.
struct error_tag;
/// A file helper's failure (datasets, seeded files, parts): its kind, and one line for people
/// naming the file (and the line of a dataset) and what was wrong.
using error = coded_error<error_tag>;

/// Thrown by a subject (or a scorer) to answer its request with an error of its own choosing,
/// e.g. a retryable one for an outage the host should retry. Anything else a subject throws is
/// answered as errc::subject_failed with the exception's what().
class request_error : public std::runtime_error {
 public:
  request_error(boost::system::error_code code, const std::string& message, bool retryable = false)
      : std::runtime_error(message), code_(code), retryable_(retryable) {}

  boost::system::error_code code() const noexcept { return code_; }
  bool retryable() const noexcept { return retryable_; }
  /// The wire form: rpc_code(code()), what() and retryable().
  protocol::rpc_error to_rpc() const;

 private:
  boost::system::error_code code_;
  bool retryable_;
};

}  // namespace mira::study

/// @cond
template <>
struct boost::system::is_error_code_enum<mira::study::errc> : std::true_type {};
/// @endcond
