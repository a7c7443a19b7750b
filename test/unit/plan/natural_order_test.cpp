// Natural order of keys: digit runs by value.
#include "plan/natural_order.hpp"

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <string>
#include <vector>

using mira::plan::natural_less;

BOOST_AUTO_TEST_SUITE(natural_order)

BOOST_AUTO_TEST_CASE(digit_runs_compare_by_value) {
  BOOST_TEST(natural_less("case-2", "case-10"));
  BOOST_TEST(!natural_less("case-10", "case-2"));
  BOOST_TEST(natural_less("a9b", "a10a"));
  BOOST_TEST(natural_less("x/2@sim#3", "x/2@sim#12"));
  BOOST_TEST(natural_less("v1.9", "v1.10"));
  // Longer than any integer type.
  BOOST_TEST(natural_less("n99999999999999999999999", "n100000000000000000000000"));
  BOOST_TEST(natural_less("a", "a0"));
  BOOST_TEST(natural_less("", "0"));
}

BOOST_AUTO_TEST_CASE(leading_zeros_and_ties_are_deterministic) {
  BOOST_TEST(natural_less("a007", "a8"));
  BOOST_TEST(natural_less("a010", "a9") == false);
  // Equal by value: ordered by bytes, so only equal strings are equivalent.
  BOOST_TEST(natural_less("a01", "a1"));
  BOOST_TEST(!natural_less("a1", "a01"));
  BOOST_TEST(natural_less("a1b01", "a01b1") != natural_less("a01b1", "a1b01"));
  BOOST_TEST(!natural_less("same-1", "same-1"));
}

BOOST_AUTO_TEST_CASE(mixed_text_sorts_as_a_reader_expects) {
  std::vector<std::string> keys = {"echo/case-10@sim",   "echo/case-2@sim",   "echo/case-1@sim",
                                   "alpha/x@sim",        "echo/case-02@sim",  "Echo/case-3@sim",
                                   "echo/case-2@sim#10", "echo/case-2@sim#9", "echo/case@sim"};
  std::sort(keys.begin(), keys.end(), [](auto& a, auto& b) { return natural_less(a, b); });
  const std::vector<std::string> expected = {
      "Echo/case-3@sim",    "alpha/x@sim",      "echo/case-1@sim",
      "echo/case-02@sim",   "echo/case-2@sim",  "echo/case-2@sim#9",
      "echo/case-2@sim#10", "echo/case-10@sim", "echo/case@sim"};
  BOOST_TEST(keys == expected, boost::test_tools::per_element());
  // A strict weak order over every pair of a mixed set (irreflexive, asymmetric, transitive).
  const std::vector<std::string> set = {"",     "0",     "00", "1",   "01",  "a",
                                        "a0",   "a00",   "a1", "a01", "a1b", "a01b",
                                        "a1b2", "a1b02", "b",  "10",  "9",   "a-1"};
  for (auto& x : set) {
    BOOST_TEST(!natural_less(x, x));
    for (auto& y : set) {
      if (x != y) BOOST_TEST((natural_less(x, y) != natural_less(y, x)), x << " " << y);
      for (auto& z : set)
        if (natural_less(x, y) && natural_less(y, z)) BOOST_TEST(natural_less(x, z));
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
