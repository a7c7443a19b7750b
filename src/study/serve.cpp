// serve() over a byte stream, and over stdin / stdout (see serve.hpp).
#include <mira/study/serve.hpp>

#include "study/request_loop.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/this_coro.hpp>

#include <unistd.h>
#include <csignal>
#include <cstdio>
#include <stdexcept>

namespace mira::study {

namespace asio = boost::asio;

asio::awaitable<void> serve(const registry& study, byte_stream stream, serve_options options) {
  if (auto problem = study.check(); !problem.empty())
    throw std::invalid_argument("study " + study.name() + ": " + problem);
  detail::request_loop s(study, options, co_await asio::this_coro::executor);
  co_await s.run(stream);
}

int serve_stdio(const registry& study, serve_options options) {
  // A host that goes away must show as a failed write, not kill the study.
  std::signal(SIGPIPE, SIG_IGN);
  asio::io_context io(1);
  // Duplicates, so that closing the descriptors leaves fds 0 and 1 to the process.
  asio::posix::stream_descriptor in(io, ::dup(STDIN_FILENO));
  asio::posix::stream_descriptor out(io, ::dup(STDOUT_FILENO));
  int rc = 0;
  asio::co_spawn(io, serve(study, stream_of(in, out), options), [&](std::exception_ptr e) {
    if (!e) return;
    rc = 1;
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& x) {
      std::fprintf(stderr, "%s: %s\n", study.name().c_str(), x.what());
    } catch (...) {
      std::fprintf(stderr, "%s: serving failed with something not an exception\n",
                   study.name().c_str());
    }
  });
  io.run();
  return rc;
}

}  // namespace mira::study
