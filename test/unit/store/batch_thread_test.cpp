// The writer thread under both layouts: batches whole and in submission order, the queue
// bounded by the weight of what waits, drain() and the destructor waiting for every batch.
#include "store/batch_thread.hpp"

#include <boost/test/unit_test.hpp>

#include <atomic>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

using mira::store::detail::batch_thread;

namespace {

struct item {
  std::string text;
  std::function<void()> done;
};

}  // namespace

BOOST_AUTO_TEST_SUITE(batch_thread_tests)

BOOST_AUTO_TEST_CASE(batches_are_written_whole_and_in_order) {
  std::mutex m;
  std::vector<std::string> written;      // by the layout, batch by batch
  std::vector<std::size_t> batch_sizes;  // every batch is whole and non-empty
  std::atomic<int> reported{0};
  {
    batch_thread<item> t(8, [&](std::span<item> batch) {
      {
        std::lock_guard lock(m);
        batch_sizes.push_back(batch.size());
        for (auto& i : batch) written.push_back(std::move(i.text));
      }
      for (auto& i : batch) i.done();
    });
    for (int i = 0; i < 100; ++i) t.submit({"k" + std::to_string(i), [&] { ++reported; }});
    t.drain();
    BOOST_TEST(reported == 100);  // drain() returned after every callback
  }
  BOOST_TEST_REQUIRE(written.size() == 100u);
  for (int i = 0; i < 100; ++i) BOOST_TEST(written[i] == "k" + std::to_string(i));
  for (auto n : batch_sizes) BOOST_TEST((n >= 1 && n <= 8));
}

BOOST_AUTO_TEST_CASE(the_bound_counts_weight_and_a_heavy_item_waits_for_an_empty_queue) {
  std::mutex m;
  std::vector<std::size_t> weights;  // of each batch
  {
    batch_thread<item> t(10, [&](std::span<item> batch) {
      std::size_t w = 0;
      for (auto& i : batch) w += i.text.size();
      std::lock_guard lock(m);
      weights.push_back(w);
    });
    for (int i = 0; i < 50; ++i) {
      const std::size_t w = i % 7 == 0 ? 25 : 3;  // some heavier than the whole bound
      t.submit({std::string(w, 'x'), [] {}}, w);
    }
  }
  std::size_t total = 0;
  for (auto w : weights) {
    total += w;
    BOOST_TEST((w <= 10 || w == 25));  // an item over the bound goes alone
  }
  BOOST_TEST(total == 8u * 25 + 42u * 3);
}

BOOST_AUTO_TEST_CASE(the_destructor_writes_what_is_queued_and_zero_means_one) {
  std::atomic<int> done{0};
  std::atomic<std::size_t> largest{0};
  {
    batch_thread<item> t(0, [&](std::span<item> batch) {
      if (batch.size() > largest) largest = batch.size();
      for (auto& i : batch) i.done();
    });
    for (int i = 0; i < 20; ++i) t.submit({"k", [&] { ++done; }});
  }
  BOOST_TEST(done == 20);
  BOOST_TEST(largest == 1u);  // one may wait, so each batch holds one
}

BOOST_AUTO_TEST_SUITE_END()
