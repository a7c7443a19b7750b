// The writer thread under both layouts: batches in submission order, each callback given the
// outcome its layout reported, drain() and the destructor waiting for every callback.
#include "store/batch_thread.hpp"

#include <boost/test/unit_test.hpp>

#include <atomic>
#include <mutex>
#include <string>
#include <vector>

using mira::store::detail::batch_item;
using mira::store::detail::batch_thread;

BOOST_AUTO_TEST_SUITE(batch_thread_tests)

BOOST_AUTO_TEST_CASE(callbacks_run_in_order_with_the_outcome_of_their_item) {
  std::mutex m;
  std::vector<std::string> written;      // by the layout, batch by batch
  std::vector<std::string> reported;     // by the callbacks
  std::vector<std::size_t> batch_sizes;  // every batch is whole and non-empty
  {
    batch_thread t(
        8, [&](std::span<const batch_item> batch, std::span<boost::system::error_code> results) {
          std::lock_guard lock(m);
          batch_sizes.push_back(batch.size());
          for (std::size_t i = 0; i < batch.size(); ++i) {
            BOOST_TEST(!results[i]);  // success on entry
            written.push_back(batch[i].target + "=" + batch[i].bytes);
            if (batch[i].bytes == "bad")
              results[i] = make_error_code(boost::system::errc::io_error);
          }
        });
    for (int i = 0; i < 100; ++i)
      t.submit({"k" + std::to_string(i), i % 10 == 3 ? "bad" : "ok",
                [&, i](boost::system::error_code ec) {
                  std::lock_guard lock(m);
                  reported.push_back(std::to_string(i) + (ec ? " failed" : " ok"));
                }});
    t.drain();
    std::lock_guard lock(m);
    BOOST_TEST(reported.size() == 100u);  // drain() returned after every callback
  }
  BOOST_TEST_REQUIRE(written.size() == 100u);
  for (int i = 0; i < 100; ++i) {
    BOOST_TEST(written[i] == "k" + std::to_string(i) + (i % 10 == 3 ? "=bad" : "=ok"));
    BOOST_TEST(reported[i] == std::to_string(i) + (i % 10 == 3 ? " failed" : " ok"));
  }
  for (auto n : batch_sizes) BOOST_TEST((n >= 1 && n <= 8));
}

BOOST_AUTO_TEST_CASE(the_destructor_writes_what_is_queued_and_zero_means_one) {
  std::atomic<int> done{0};
  std::atomic<std::size_t> largest{0};
  {
    batch_thread t(0, [&](std::span<const batch_item> batch, auto) {
      if (batch.size() > largest) largest = batch.size();
    });
    for (int i = 0; i < 20; ++i) t.submit({"k", "v", [&](auto) { ++done; }});
  }
  BOOST_TEST(done == 20);
  BOOST_TEST(largest == 1u);  // one may wait, so each batch holds one
}

BOOST_AUTO_TEST_SUITE_END()
