// The server's errors: an error_code in serve's own category, which callers decide on (a port
// in use is not a configuration that can never start), and a message for people naming what
// failed.
#pragma once

#include <mira/coded_error.hpp>

#include <boost/system/error_code.hpp>

#include <string>
#include <type_traits>

namespace mira::serve {

enum class errc {
  invalid_address = 1,   // the listen address is not an IP address
  token_required,        // a listen address other than loopback, and no token
  no_study,              // the allow-list is empty
  duplicate_study,       // two studies of the allow-list have one name
  invalid_limit,         // a limit of the configuration is zero
  invalid_study_entry,   // text that is not NAME=COMMAND (parse_study_entry)
  results_dir_unusable,  // the results directory cannot be created
  address_in_use,        // another socket listens on the address and port
  bind_failed,           // the listening socket cannot be opened, bound or listened on otherwise
};

const boost::system::error_category& category() noexcept;
boost::system::error_code make_error_code(errc e) noexcept;

/// Makes serve::error a type of its own.
struct error_tag;
/// A server failure: its kind, and one line for people (what failed and why).
using error = coded_error<error_tag>;

}  // namespace mira::serve

/// @cond
template <>
struct boost::system::is_error_code_enum<mira::serve::errc> : std::true_type {};
/// @endcond
