// Host memory per request in flight: N `run` requests issued at once to a study that answers
// none until it has all of them (echo_study --hold N), so all N are pending together.
//
//   memory_in_flight [-n N] -- STUDY_CMD [ARGS...]   (the study must hold: --hold N)
//
// Prints the resident set before the requests, its peak while they were pending (sampled from
// /proc/self/statm when the last request has been written, before any answer), and the
// bytes per request, beside the request frame's own size (what a client must keep at least).
#include "bench_util.hpp"

#include <mira/host.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

namespace asio = boost::asio;

int main(int argc, char** argv) {
  auto args = bench::parse_args(argc, argv);
  std::size_t n = args.number("-n", 100000);
  auto& study = args.study;
  if (study.empty()) {
    std::fprintf(stderr, "usage: memory_in_flight [-n N] -- STUDY_CMD --hold N\n");
    return 2;
  }
  asio::io_context ctx;
  double before = 0, pending = 0, after = 0;
  std::size_t answered = 0, failed = 0;
  asio::co_spawn(
      ctx,
      [&]() -> asio::awaitable<void> {
        auto host = co_await bench::start_study(ctx.get_executor(), study);
        if (!co_await host.list_all()) std::exit(1);
        mira::protocol::run_params p;
        p.eval = "bench";
        p.sample = "s0";
        p.target = "sim";
        before = bench::rss_mib();
        // Callbacks, not coroutines: the figure is the host's, not coroutine frames'.
        for (std::size_t i = 0; i < n; ++i)
          host.run(p, [&](mira::error_code ec, mira::protocol::run_result) {
            if (ec) ++failed;
            if (++answered == n) after = bench::rss_mib();
          });
        // Sample while all are pending: every request is written before the study answers.
        asio::steady_timer t(ctx);
        while (answered == 0) {
          pending = std::max(pending, bench::rss_mib());
          t.expires_after(std::chrono::milliseconds(5));
          co_await t.async_wait(asio::use_awaitable);
        }
        while (answered < n) {
          t.expires_after(std::chrono::milliseconds(5));
          co_await t.async_wait(asio::use_awaitable);
        }
        co_await host.shutdown();
      },
      asio::detached);
  ctx.run();
  auto frame =
      std::string(
          R"({"id":100000,"method":"run","params":{"eval":"bench","sample":"s0","target":"sim"}})")
          .size() +
      1;
  double per = (pending - before) * 1048576.0 / static_cast<double>(n);
  std::printf("memory_in_flight n=%zu failed=%zu\n", n, failed);
  std::printf("rss_mib before %.1f pending %.1f after_answers %.1f\n", before, pending, after);
  std::printf("bytes_per_request %.0f request_frame_bytes %zu ratio %.1f\n", per, frame,
              per / static_cast<double>(frame));
  return failed ? 1 : 0;
}
