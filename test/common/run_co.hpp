// Test helpers: run a coroutine to completion on a fresh io_context, with a watchdog so a hang
// fails the test instead of stalling CTest.
#pragma once

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>

#include <chrono>
#include <csignal>
#include <exception>
#include <optional>
#include <stdexcept>

namespace mira::test {

template <class F>
auto run_co(F&& make, std::chrono::milliseconds watchdog = std::chrono::seconds(20)) {
  boost::asio::io_context ctx;
  using awaitable_t = decltype(make(ctx));
  using T = typename awaitable_t::value_type;
  std::exception_ptr ep;
  bool done = false;
  if constexpr (std::is_void_v<T>) {
    boost::asio::co_spawn(ctx, make(ctx), [&](std::exception_ptr e) {
      done = true;
      ep = e;
    });
    ctx.run_for(watchdog);
    if (!done) throw std::runtime_error("run_co: watchdog expired");
    if (ep) std::rethrow_exception(ep);
  } else {
    std::optional<T> res;
    boost::asio::co_spawn(ctx, make(ctx), [&](std::exception_ptr e, T v) {
      done = true;
      ep = e;
      if (!e) res.emplace(std::move(v));
    });
    ctx.run_for(watchdog);
    if (!done) throw std::runtime_error("run_co: watchdog expired");
    if (ep) std::rethrow_exception(ep);
    return std::move(*res);
  }
}

// Writing to a dead peer must be an error code in tests too, not a silent rc=141.
struct ignore_sigpipe {
  ignore_sigpipe() { std::signal(SIGPIPE, SIG_IGN); }
};

}  // namespace mira::test
