// An executor that runs one handler at a time: the given one when it already does (a strand, or
// an io_context made for one thread), else a new strand over it. What the session and run_plan
// keep their state on, so that neither asks its caller for a strand.
#pragma once

#include <boost/asio/any_io_executor.hpp>

namespace mira::detail {

/// True when `ex` never runs two handlers at once: a strand, or the executor of an io_context
/// constructed with concurrency hint 1 (which promises one thread).
bool runs_serially(const boost::asio::any_io_executor& ex);

/// `ex` when it runs serially; else a new strand over it.
boost::asio::any_io_executor serial_executor(const boost::asio::any_io_executor& ex);

}  // namespace mira::detail
