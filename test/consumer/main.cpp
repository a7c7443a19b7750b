// Uses the installed library: spawns a study, lists it, runs one case.
#include <mira/host.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>

#include <cstdio>

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  boost::asio::io_context ctx;
  int rc = 1;
  boost::asio::co_spawn(
      ctx,
      [&]() -> boost::asio::awaitable<void> {
        mira::study_command cmd;
        cmd.argv = {argv[1]};
        auto host = mira::host_handle::spawn(ctx.get_executor(), cmd);
        if (!host) co_return;
        auto init = co_await host->initialize();
        if (!init) co_return;
        mira::protocol::run_params p;
        p.eval = "greet";
        p.sample = "hi";
        p.target = "sim";
        auto r = co_await host->run(p);
        co_await host->shutdown();
        if (r && r->passed) rc = 0;
      },
      boost::asio::detached);
  ctx.run();
  std::printf("consumer: %s\n", rc == 0 ? "ok" : "failed");
  return rc;
}
