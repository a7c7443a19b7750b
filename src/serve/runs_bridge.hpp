// A bridge for runs.cpp while it is rewritten: there `error` means the host's mira::error, which
// serve::error (serve/error.hpp) now hides inside mira::serve. CMakeLists.txt force-includes this
// header into runs.cpp alone; delete both once runs.cpp writes mira::error.
#pragma once

#include <mira/error.hpp>

namespace mira::serve::detail {
using mira::error;
}  // namespace mira::serve::detail
