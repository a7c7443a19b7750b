// Runs a plan and interrupts it, as Ctrl-C does, once a number of attempts have begun: the
// run_plan and pool tests of a stop with work in flight.
#pragma once

#include <mira/schedule/run_plan.hpp>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace mira::test {

/// `conn`: a host_handle or a study_pool. The signal is emitted from a posted handler, after
/// the `starts`-th attempt's request has been initiated; `started` counts every attempt begun.
template <class Conn>
boost::asio::awaitable<schedule::run_report> run_interrupted_after(boost::asio::io_context& ctx,
                                                                   Conn conn, const plan::plan& p,
                                                                   schedule::run_policy policy,
                                                                   std::size_t starts,
                                                                   std::size_t& started) {
  namespace asio = boost::asio;
  asio::cancellation_signal sig;
  schedule::run_hooks hooks;
  hooks.on_start = [&](std::size_t) {
    if (++started == starts) asio::post(ctx, [&] { sig.emit(asio::cancellation_type::terminal); });
  };
  co_return co_await asio::co_spawn(
      ctx, schedule::run_plan(std::move(conn), p, std::move(policy), std::move(hooks)),
      asio::bind_cancellation_slot(sig.slot(), asio::use_awaitable));
}

}  // namespace mira::test
