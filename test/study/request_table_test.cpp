// The study's request table, driven directly: admission against the in-flight limit, and what
// `cancel` does in each state (the table in request_table.hpp), row by row.
#include "study/request_table.hpp"

#include <boost/test/unit_test.hpp>

#include <string>

using table = mira::study::detail::request_table<std::string>;

BOOST_AUTO_TEST_SUITE(study_request_table)

BOOST_AUTO_TEST_CASE(requests_beyond_the_limit_wait_in_order_for_a_slot) {
  table t(2);
  BOOST_TEST((t.admit(1, "a") == table::admitted::start));
  BOOST_TEST((t.admit(2, "b") == table::admitted::start));
  BOOST_TEST((t.admit(3, "c") == table::admitted::wait));
  BOOST_TEST((t.admit(4, "d") == table::admitted::wait));
  BOOST_TEST(t.running() == 2U);
  BOOST_TEST(t.waiting() == 2U);
  BOOST_TEST(*t.finish(2) == 3);
  BOOST_TEST(*t.find(3) == "c");
  BOOST_TEST(*t.finish(1) == 4);
  BOOST_TEST(!t.finish(3));
  BOOST_TEST(!t.finish(4));
  BOOST_TEST(t.empty());
}

BOOST_AUTO_TEST_CASE(an_id_in_flight_is_refused_and_free_again_once_answered) {
  table t(1);
  BOOST_TEST((t.admit(7, "first") == table::admitted::start));
  BOOST_TEST((t.admit(7, "again") == table::admitted::duplicate));
  BOOST_TEST(*t.find(7) == "first");
  t.finish(7);
  BOOST_TEST((t.admit(7, "later") == table::admitted::start));
}

// Answered requests leave their entries for the next ones: reused in every path, with the
// state of the new request only.
BOOST_AUTO_TEST_CASE(entries_are_reused_with_nothing_of_the_last_request) {
  table t(2);
  BOOST_TEST((t.admit(1, "a") == table::admitted::start));
  BOOST_TEST((t.admit(2, "b") == table::admitted::start));
  BOOST_TEST((t.cancel(1) == table::cancelled::stop_running));  // entry 1 is stopping
  t.finish(1);
  // A duplicate admitted over a spare entry is refused, and the entry kept for the next.
  BOOST_TEST((t.admit(2, "again") == table::admitted::duplicate));
  BOOST_TEST(*t.find(2) == "b");
  BOOST_TEST((t.admit(3, "c") == table::admitted::start));
  BOOST_TEST(*t.find(3) == "c");
  BOOST_TEST((t.cancel(3) == table::cancelled::stop_running));  // not stopping from entry 1
  BOOST_TEST((t.admit(4, "d") == table::admitted::wait));
  std::optional<std::string> removed;
  BOOST_TEST((t.cancel(4, &removed) == table::cancelled::removed_waiting));
  BOOST_TEST(removed.value_or("") == "d");
  BOOST_TEST((t.admit(5, "e") == table::admitted::wait));  // over the entry 4 left
  BOOST_TEST(*t.finish(2) == 5);
  BOOST_TEST(*t.find(5) == "e");
  BOOST_TEST(!t.find(1));
  BOOST_TEST(!t.find(4));
}

BOOST_AUTO_TEST_CASE(cancel_in_each_state) {
  struct row {
    const char* state;
    table::cancelled expected;
    bool still_in_flight;  // after the cancel
    bool payload_returned;
  };
  // One table per row, set up to put request 5 in the row's state.
  auto setup = [](std::string_view state, table& t) {
    t.admit(1, "holds the only slot");
    if (state == "waiting") t.admit(5, "five");
    if (state == "running") {
      t.finish(1);
      t.admit(5, "five");
    }
    if (state == "stopping") {
      t.finish(1);
      t.admit(5, "five");
      t.cancel(5);
    }
    if (state == "answered") {
      t.admit(5, "five");
      t.finish(1);  // 5 starts
      t.finish(5);
    }
  };
  for (auto r : {row{"waiting", table::cancelled::removed_waiting, false, true},
                 row{"running", table::cancelled::stop_running, true, false},
                 row{"stopping", table::cancelled::already_stopping, true, false},
                 row{"answered", table::cancelled::unknown, false, false},
                 row{"never sent", table::cancelled::unknown, false, false}}) {
    BOOST_TEST_CONTEXT(r.state) {
      table t(1);
      setup(r.state, t);
      std::optional<std::string> removed;
      BOOST_TEST((t.cancel(5, &removed) == r.expected));
      BOOST_TEST((t.find(5) != nullptr) == r.still_in_flight);
      BOOST_TEST(removed.has_value() == r.payload_returned);
      if (removed) BOOST_TEST(*removed == "five");
    }
  }
}

BOOST_AUTO_TEST_CASE(a_cancelled_waiting_request_never_takes_a_slot) {
  table t(1);
  t.admit(1, "a");
  t.admit(2, "b");
  t.admit(3, "c");
  t.cancel(2);
  BOOST_TEST(*t.finish(1) == 3);
  BOOST_TEST(t.waiting() == 0U);
}

BOOST_AUTO_TEST_CASE(ids_lists_waiting_requests_first) {
  table t(1);
  t.admit(1, "a");
  t.admit(2, "b");
  t.admit(3, "c");
  auto ids = t.ids();
  BOOST_TEST(ids.size() == 3U);
  BOOST_TEST(ids[0] == 2);
  BOOST_TEST(ids[1] == 3);
  BOOST_TEST(ids[2] == 1);
}

BOOST_AUTO_TEST_SUITE_END()
