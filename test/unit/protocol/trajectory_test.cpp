// ATIF projection against the shared conformance fixtures, and receipt-time filling rules.
#include "common/schema.hpp"

#include <mira/protocol/trajectory.hpp>

#include <boost/json/parse.hpp>
#include <boost/test/unit_test.hpp>

#include <fstream>
#include <sstream>

namespace json = boost::json;
using namespace mira::protocol;

namespace {

// Only called by tests with the needs_schema precondition.
json::value load_fixture() {
  auto path = *mira::test::schema_dir() / "conformance" / "trajectory.json";
  std::ifstream in(path);
  BOOST_REQUIRE_MESSAGE(in, "conformance fixture not found: " << path);
  std::stringstream ss;
  ss << in.rdbuf();
  return json::parse(ss.str());
}

}  // namespace

BOOST_AUTO_TEST_SUITE(trajectory)

BOOST_AUTO_TEST_CASE(conformance_fixtures_project_as_pinned,
                     *boost::unit_test::precondition(mira::test::needs_schema)) {
  auto fixture = load_fixture();
  auto& cases = fixture.at("cases").as_array();
  BOOST_REQUIRE(cases.size() >= 4);
  for (auto& c : cases) {
    auto& co = c.as_object();
    std::string name(co.at("name").as_string());
    BOOST_TEST_CONTEXT("case " << name) {
      auto p = project(co.at("trajectory"));
      if (co.contains("rejects") && co.at("rejects").as_bool()) {
        BOOST_TEST(!p);
        continue;
      }
      BOOST_REQUIRE(p);
      auto& want = co.at("projection").as_object();
      BOOST_TEST(p->final_response == std::string(want.at("final_response").as_string()));
      std::vector<std::string> calls;
      for (auto& t : want.at("tool_calls").as_array()) calls.emplace_back(t.as_string());
      BOOST_TEST(p->tool_calls == calls, boost::test_tools::per_element());
      BOOST_TEST(static_cast<std::int64_t>(p->tool_calls.size()) ==
                 want.at("tool_calls_count").as_int64());
      BOOST_TEST(p->iterations == want.at("iterations").as_int64());
      auto& u = want.at("usage").as_object();
      BOOST_TEST(p->usage.input_tokens == u.at("input_tokens").as_int64());
      BOOST_TEST(p->usage.output_tokens == u.at("output_tokens").as_int64());
      BOOST_TEST(p->usage.cache_read_tokens == u.at("cache_read_tokens").as_int64());
      BOOST_TEST(p->usage.reasoning_tokens == u.at("reasoning_tokens").as_int64());
      BOOST_TEST(p->usage.cost_usd == u.at("cost_usd").to_number<double>(),
                 boost::test_tools::tolerance(1e-12));
    }
  }
}

BOOST_AUTO_TEST_CASE(execute_result_fills_only_unset_fields,
                     *boost::unit_test::precondition(mira::test::needs_schema)) {
  auto fixture = load_fixture();
  auto traj = fixture.at("cases").as_array()[0].at("trajectory");
  json::object transcript{{"trajectory", traj}, {"final_response", "set by the study"}};
  json::value result =
      json::object{{"eval", "e"}, {"sample", "s"}, {"target", "t"}, {"transcript", transcript}};
  auto r = decode_execute_result(result);
  BOOST_REQUIRE(r);
  BOOST_TEST(r->transcript.final_response == "set by the study");  // never overwritten
  BOOST_TEST(r->transcript.tool_calls_count == 2);
  BOOST_TEST(r->transcript.iterations == 2);
  BOOST_TEST(r->transcript.usage.input_tokens == 1120);
  BOOST_TEST(r->transcript.trajectory.has_value());
  // The persisted raw JSON agrees with the typed view.
  BOOST_TEST(r->raw().at("transcript").at("tool_calls_count").as_int64() == 2);
}

BOOST_AUTO_TEST_CASE(non_v1_trajectory_is_an_error_not_a_crash) {
  json::value result = json::parse(
      R"({"eval":"e","sample":"s","target":"t","transcript":{"trajectory":{"schema_version":"ATIF-v2.0","agent":{},"steps":[]}}})");
  auto r = decode_execute_result(result);
  BOOST_REQUIRE(!r);
  BOOST_TEST(r.error().path == "transcript.trajectory");
  BOOST_TEST(!project(json::parse(R"({"schema_version":"ATIF-v10.0"})")));
  BOOST_TEST(!project(json::parse(R"({"schema_version":"ATIF-v1.2","steps":[3]})")));
  BOOST_TEST(!project(json::parse(R"("text")")));
}

BOOST_AUTO_TEST_SUITE_END()
