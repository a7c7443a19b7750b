// A deliberate data race, kept out of the suite: .ci/run runs it under ThreadSanitizer and
// requires the report, so a TSan stage that stopped catching races (a lost -fsanitize flag, a
// suppression that swallows too much) fails CI instead of passing quietly.
//
// The race is the mistake the library's users can make: handlers posted to an io_context that
// two threads run, touching one counter without a strand. Each handler waits until the other
// has started (relaxed atomics: no ordering between them), so the two writes always overlap
// and one thread can never run both alone.
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include <atomic>
#include <cstdio>
#include <thread>

int main() {
  boost::asio::io_context ctx(2);
  long counter = 0;  // no strand, no atomic: the race
  std::atomic<int> started{0};
  for (int i = 0; i < 2; ++i)
    boost::asio::post(ctx, [&] {
      ++counter;
      started.fetch_add(1, std::memory_order_relaxed);
      while (started.load(std::memory_order_relaxed) < 2) std::this_thread::yield();
    });
  std::thread other([&ctx] { ctx.run(); });
  ctx.run();
  other.join();
  std::printf("%ld\n", counter);
}
