// `{a,b}` alternatives in selection globs (the Rust host's grammar): nested, mixed with the
// other wildcards, literal when unbalanced or inside a [...] class.
#include <boost/test/unit_test.hpp>

#include <mira/plan/plan.hpp>

using mira::plan::glob_match;

BOOST_AUTO_TEST_SUITE(plan_glob_braces)

BOOST_AUTO_TEST_CASE(alternatives) {
  BOOST_TEST(glob_match("case-{1,2}", "case-1"));
  BOOST_TEST(glob_match("case-{1,2}", "case-2"));
  BOOST_TEST(!glob_match("case-{1,2}", "case-3"));
  BOOST_TEST(!glob_match("case-{1,2}", "case-12"));
  BOOST_TEST(glob_match("{gpt,claude}-*", "claude-3"));
  BOOST_TEST(glob_match("x{a,b{c,d}}y", "xbdy"));
  BOOST_TEST(glob_match("x{a,b{c,d}}y", "xay"));
  BOOST_TEST(!glob_match("x{a,b{c,d}}y", "xby"));
  BOOST_TEST(glob_match("{a,}b", "b"));  // an empty alternative
  BOOST_TEST(glob_match("{s[0-9],t?}", "s4"));
  BOOST_TEST(glob_match("{s[0-9],t?}", "tx"));
  BOOST_TEST(glob_match("{a,b}-{1,2}", "b-2"));
}

BOOST_AUTO_TEST_CASE(literal_braces) {
  BOOST_TEST(glob_match("{a", "{a"));
  BOOST_TEST(glob_match("a}", "a}"));
  BOOST_TEST(glob_match("[{]x", "{x"));
  BOOST_TEST(!glob_match("[{]x", "ax"));
}

BOOST_AUTO_TEST_SUITE_END()
