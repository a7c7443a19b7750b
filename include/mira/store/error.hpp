// The run store's errors: an error_code in the store's own category, which callers decide on
// (a run in use is not a run that does not exist), and a message for people naming what failed.
#pragma once

#include <mira/coded_error.hpp>

#include <boost/system/error_code.hpp>

#include <string>
#include <type_traits>

namespace mira::store {

enum class errc {
  in_use = 1,    // another process holds the run's lock
  not_found,     // no saved run of that id
  invalid_id,    // the id cannot name a run folder
  exists,        // a new run's folder is there already
  corrupt,       // a file of the run cannot be read as what it should hold
  incompatible,  // the saved run does not match what is asked of it (another study or plan),
                 // or its format is newer than this host reads
  io,            // the file system refused (the message names the file)
};

const boost::system::error_category& category() noexcept;
boost::system::error_code make_error_code(errc e) noexcept;

/// Makes store::error a type of its own.
struct error_tag;
/// A store failure: its kind, and one line for people (what failed and where).
using error = coded_error<error_tag>;

}  // namespace mira::store

/// @cond
template <>
struct boost::system::is_error_code_enum<mira::store::errc> : std::true_type {};
/// @endcond
