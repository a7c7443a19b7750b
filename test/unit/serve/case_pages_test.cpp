// The viewer's routes and queries without I/O: a case key as the rest of the path, the query of
// a page decoded (and refused, naming the parameter), what asks for the NDJSON dump, and the
// token's redirect URL encoding.
#include "serve/case_pages.hpp"
#include "serve/api.hpp"

#include <boost/test/unit_test.hpp>

using namespace mira::serve;

namespace {

request_target target(std::string_view t) {
  auto r = parse_target(t);
  BOOST_REQUIRE(r.has_value());
  return *r;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(case_pages)

BOOST_AUTO_TEST_CASE(a_case_key_is_the_rest_of_the_path_slashes_and_all) {
  for (auto path : {"/v1/runs/r1/cases/greet%2Fhi%40sim", "/v1/runs/r1/cases/greet/hi@sim"}) {
    auto m = match_route("GET", target(path).path);
    BOOST_REQUIRE(m.has_value());
    BOOST_TEST((m->spec->r == route::run_case));
    BOOST_TEST(m->run_id == "r1");
    BOOST_TEST(m->key == "greet/hi@sim");
  }
  auto page = match_route("GET", "/runs/r1/cases/a/b/c");
  BOOST_REQUIRE(page.has_value());
  BOOST_TEST((page->spec->r == route::dashboard_case));
  BOOST_TEST(page->key == "a/b/c");
  BOOST_TEST(match_route("GET", "/v1/runs/r1/cases/").error().status == 404u);
  BOOST_TEST((match_route("GET", "/v1/runs/r1/cases")->spec->r == route::run_cases));
  BOOST_TEST(match_route("GET", "/v1/runs/..x/cases/k").error().status == 400u);
}

BOOST_AUTO_TEST_CASE(a_page_query_is_decoded) {
  auto q = decode_case_query(
      target("/v1/runs/r/cases?status=failed,error&eval=a,b&target=t&trial=2&score_min=0.5"
             "&score_max=1&q=Hello%20World&sort=-latency&limit=500&cursor=latency%3A3%3Ak"));
  BOOST_REQUIRE(q.has_value());
  BOOST_TEST(q->filter.statuses == (std::vector<std::string>{"failed", "error"}));
  BOOST_TEST(q->filter.evals == (std::vector<std::string>{"a", "b"}));
  BOOST_TEST(q->filter.targets == std::vector<std::string>{"t"});
  BOOST_TEST(*q->filter.trial == 2);
  BOOST_TEST(*q->filter.score_min == 0.5);
  BOOST_TEST(*q->filter.score_max == 1.0);
  BOOST_TEST(q->filter.text == "Hello World");
  BOOST_TEST((q->sort == mira::store::case_sort::latency));
  BOOST_TEST(q->descending);
  BOOST_TEST(q->limit == 500u);
  BOOST_TEST(q->cursor == "latency:3:k");
  auto plain = decode_case_query(target("/v1/runs/r/cases"));
  BOOST_TEST((plain->sort == mira::store::case_sort::key));
  BOOST_TEST(plain->limit == 50u);
}

BOOST_AUTO_TEST_CASE(a_bad_parameter_is_named) {
  struct row {
    const char* query;
    const char* parameter;
  };
  const row rows[] = {{"status=done", "status"}, {"limit=0", "limit"},
                      {"limit=501", "limit"},    {"limit=x", "limit"},
                      {"trial=1.5", "trial"},    {"score_min=abc", "score_min"},
                      {"sort=size", "sort"},     {"format=xml", "format"},
                      {"state=na", "state"},     {"colour=red", "colour"}};
  for (auto& r : rows) {
    auto q = decode_case_query(target(std::string("/v1/runs/r/cases?") + r.query));
    BOOST_TEST_CONTEXT(r.query) {
      BOOST_REQUIRE(!q.has_value());
      BOOST_TEST(q.error().status == 400u);
      BOOST_TEST(q.error().details.at("parameter").as_string() == r.parameter);
    }
  }
}

BOOST_AUTO_TEST_CASE(the_ndjson_dump_is_asked_for_by_format_or_accept) {
  BOOST_TEST(!wants_ndjson(target("/c"), ""));
  BOOST_TEST(!wants_ndjson(target("/c"), "application/json"));
  BOOST_TEST(wants_ndjson(target("/c?format=ndjson"), ""));
  BOOST_TEST(wants_ndjson(target("/c"), "application/x-ndjson"));
  BOOST_TEST(!wants_ndjson(target("/c?format=json"), "application/x-ndjson"));
}

BOOST_AUTO_TEST_CASE(percent_encoding_keeps_unreserved_characters_only) {
  BOOST_TEST(percent_encode("a/b c@d~e", true) == "a/b%20c%40d~e");
  BOOST_TEST(percent_encode("a/b", false) == "a%2Fb");
  BOOST_TEST(percent_encode("\xff", false) == "%FF");
}

BOOST_AUTO_TEST_SUITE_END()
