// Why two runs cannot be compared: an error_code in the comparison's own category, which callers
// decide on (runs of two studies are not a group key that names nothing), and a message for
// people naming the runs or the option and its value.
#pragma once

#include <mira/coded_error.hpp>

#include <boost/system/error_code.hpp>

#include <string>
#include <type_traits>

namespace mira::compare {

enum class errc {
  other_study = 1,  // the runs were made by different studies
  invalid_alpha,    // options::alpha is not in (0, 1)
  unknown_group,    // options::group_by names no key a case of either run has; the message
                    // begins with "group_by"
};

const boost::system::error_category& category() noexcept;
boost::system::error_code make_error_code(errc e) noexcept;

/// Makes compare::error a type of its own.
struct error_tag;
/// A comparison refused: its kind, and one line for people.
using error = coded_error<error_tag>;

}  // namespace mira::compare

/// @cond
template <>
struct boost::system::is_error_code_enum<mira::compare::errc> : std::true_type {};
/// @endcond
