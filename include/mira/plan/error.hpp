// The planner's errors: an error_code in the plan's own category, which callers decide on (a
// selection that matches nothing is not a shard that cannot be read), and a message for people
// naming the flag or variable and its value.
#pragma once

#include <mira/coded_error.hpp>

#include <boost/system/error_code.hpp>

#include <string>
#include <type_traits>

namespace mira::plan {

enum class errc {
  no_match = 1,   // a glob, tag or axis of the selection matches nothing the listing has
  duplicate_key,  // two cases would have the same key (names that hold / @ [ ] , = or #)
  invalid_shard,  // a shard that is not I/N with 0 <= I < N, given or read from the environment
  no_shard_env,   // --shard auto: the environment names no whole shard (no Slurm job array or
                  // Kubernetes Indexed Job, or one without its count)
};

const boost::system::error_category& category() noexcept;
boost::system::error_code make_error_code(errc e) noexcept;

/// Makes plan::error a type of its own.
struct error_tag;
/// A planning failure: its kind, and one line for people (the flag or variable, the value and
/// what is wrong with it).
using error = coded_error<error_tag>;

}  // namespace mira::plan

/// @cond
template <>
struct boost::system::is_error_code_enum<mira::plan::errc> : std::true_type {};
/// @endcond
