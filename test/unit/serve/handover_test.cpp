// The hand-over of a run's hook calls to the server's executor, driven directly: a burst is
// delivered in order, a slice per executor turn, and the executor's other work runs between two
// slices (one handler per call kept every client waiting for the whole burst).
#include "serve/handover.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/test/unit_test.hpp>

#include <memory>
#include <numeric>
#include <thread>
#include <vector>

namespace asio = boost::asio;
using mira::serve::detail::handover;

BOOST_AUTO_TEST_SUITE(serve_handover)

BOOST_AUTO_TEST_CASE(a_burst_is_delivered_in_order_with_the_executors_work_between_slices) {
  asio::io_context ctx;
  std::vector<int> got;
  std::vector<std::size_t> slices;
  auto h = std::make_shared<handover<int>>(ctx.get_executor(), 4, [&](std::span<int> items) {
    slices.push_back(items.size());
    got.insert(got.end(), items.begin(), items.end());
  });
  BOOST_TEST(h->idle());
  std::thread session([&] {
    for (int i = 0; i < 10; ++i) h->push(i);
  });
  session.join();
  BOOST_TEST(!h->idle());
  // A client's request, come after the burst began.
  std::size_t seen_by_client = 0;
  asio::post(ctx, [&] { seen_by_client = got.size(); });
  ctx.run();
  std::vector<int> all(10);
  std::iota(all.begin(), all.end(), 0);
  BOOST_TEST(got == all, boost::test_tools::per_element());
  BOOST_TEST(slices == (std::vector<std::size_t>{4, 4, 2}), boost::test_tools::per_element());
  BOOST_TEST(seen_by_client == 4u);  // after the first slice, not after all ten
  BOOST_TEST(h->idle());
}

BOOST_AUTO_TEST_CASE(items_pushed_while_a_slice_is_delivered_follow_it) {
  asio::io_context ctx;
  std::vector<int> got;
  std::shared_ptr<handover<int>> h;
  h = std::make_shared<handover<int>>(ctx.get_executor(), 2, [&](std::span<int> items) {
    for (int i : items) {
      got.push_back(i);
      if (i < 3) h->push(i + 10);  // as a session thread might, meanwhile
    }
  });
  h->push(0);
  h->push(1);
  h->push(2);
  ctx.run();
  BOOST_TEST(got == (std::vector<int>{0, 1, 2, 10, 11, 12}), boost::test_tools::per_element());
  BOOST_TEST(h->idle());
}

BOOST_AUTO_TEST_SUITE_END()
