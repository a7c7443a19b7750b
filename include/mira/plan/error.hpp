// The planner's errors: an error_code in the plan's own category, which callers decide on (a
// selection that matches nothing is not a shard that cannot be read), the field of the selection
// it concerns as data, and a message for people in the library's words. A front end names the
// field in its own: the command line by its flag, the HTTP API as a member of its error body.
#pragma once

#include <mira/coded_error.hpp>

#include <boost/system/error_code.hpp>

#include <string>
#include <string_view>
#include <type_traits>

namespace mira::plan {

enum class errc {
  no_match = 1,   // a glob, tag or axis of the selection matches nothing the listing has
  duplicate_key,  // two cases would have the same key (names that hold / @ [ ] , = or #)
  invalid_shard,  // a shard that is not I/N with 0 <= I < N, given or read from the environment
  no_shard_env,   // shard_from_env: the environment names no whole shard (no Slurm job array
                  // or Kubernetes Indexed Job, or one without its count)
};

const boost::system::error_category& category() noexcept;
boost::system::error_code make_error_code(errc e) noexcept;

/// What a planning error concerns: a member of plan::selection, or the shard.
enum class field {
  none,  // the listing itself (two cases with one key)
  evals,
  samples,
  targets,
  tags,
  axes,
  shard,  // parse_shard(), shard_from_env()
};

/// The field's name as plan::selection and the HTTP API's selection spell it: "evals",
/// "samples", "targets", "tags", "axes", "shard"; empty for field::none.
std::string_view to_string(field f);

/// Makes plan::error a type of its own.
struct error_tag;
/// A planning failure: its kind, one line for people (the field, the value and what is wrong
/// with it) and the field as data. Unless `field` is none, the message begins with its name
/// (to_string(field)), followed by ": " or by a space and the axis: "evals: \"nope\" matches no
/// eval (...)", "axes effort: \"extreme\" matches no value (...)".
struct error : coded_error<error_tag> {
  plan::field field = plan::field::none;
};

/// The error `e`, its message the field's name followed by `rest`.
error make_error(errc e, plan::field f, std::string_view rest);

}  // namespace mira::plan

/// @cond
template <>
struct boost::system::is_error_code_enum<mira::plan::errc> : std::true_type {};
/// @endcond
