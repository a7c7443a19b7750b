// A bridge for runs.hpp and runs.cpp while they are rewritten: runs.hpp used the sans-I/O
// layer's types (api_error, run_request, event_log, ...) through <mira/serve/server.hpp>, which no
// longer includes the now private serve/api.hpp; and in runs.cpp `error` means the host's
// mira::error, which serve::error (serve/error.hpp) now hides inside mira::serve. CMakeLists.txt
// force-includes this header into runs.cpp alone; delete both once runs.hpp includes
// "serve/api.hpp" and runs.cpp writes mira::error.
#pragma once

#include <mira/error.hpp>
#include "serve/api.hpp"

namespace mira::serve::detail {
using mira::error;
}  // namespace mira::serve::detail
