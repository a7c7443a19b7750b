// Chaos: a study that, under a fixed seed, crashes, answers late, writes garbage, never
// answers or asks for a retry, at random. The host must finish with every case accounted for
// (passed, failed, N/A or error) and a run folder that agrees with its report.
#include "integration/process_util.hpp"

#include <boost/json/parse.hpp>
#include <boost/test/unit_test.hpp>

#include <filesystem>
#include <map>
#include <set>

using namespace mira::test;
namespace fs = std::filesystem;
namespace json = boost::json;

BOOST_AUTO_TEST_SUITE(chaos)

BOOST_AUTO_TEST_CASE(every_case_is_accounted_for_and_the_folder_is_consistent) {
  temp_dir dir;
  fs::create_directories(dir.path / "state");
  auto results = dir / "results";
  auto r =
      run_command("timeout 240 " + std::string(MIRA_CLI) +
                  " run --trials 40 -j 8 --timeout 1 --timeout-is-infra --max-retries 6 "
                  "--max-restarts 20 --results-dir " +
                  results + " -- " + MIRA_PYTHON3 + " " MIRA_PY_STUDY " --chaos 7 --chaos-dir " +
                  (dir / "state") + " >/dev/null 2>&1");
  // 1: the "fail" sample fails; 3 only if the restarts ran out, which this seed does not do.
  BOOST_TEST(r.code == 1);
  auto generations = read_file(dir / "state/generation");
  BOOST_TEST_MESSAGE("studies started: " << generations);
  BOOST_TEST(std::stoi(generations) > 1);  // it did crash and was restarted

  std::vector<fs::path> runs(fs::directory_iterator(results), fs::directory_iterator{});
  BOOST_REQUIRE(runs.size() == 1u);
  // report.json is the summary; `mira report --format json` the whole report.
  auto folder_report = json::parse(read_file((runs[0] / "report.json").string())).as_object();
  BOOST_TEST(folder_report.at("records").at("count").as_int64() == 120);
  auto rendered = run_command(std::string(MIRA_CLI) + " report " + runs[0].filename().string() +
                              " --format json --results-dir " + results + " 2>/dev/null");
  BOOST_REQUIRE(rendered.code == 0);
  auto report = json::parse(rendered.out).as_object();
  // The same summary but for latencies, which records keep to the microsecond.
  BOOST_TEST(report.at("summary").at("counts") == folder_report.at("summary").at("counts"));
  BOOST_TEST(report.at("summary").at("trials") == folder_report.at("summary").at("trials"));
  auto& cases = report.at("cases").as_array();
  BOOST_TEST(cases.size() == 120u);
  std::map<std::string, json::value> status_of;  // by key, from the report
  const std::set<std::string> accounted{"passed", "failed", "na", "error"};
  for (auto& c : cases) {
    auto key = std::string(c.at("key").as_string());
    auto status = std::string(c.at("status").as_string());
    BOOST_TEST(accounted.count(status) == 1u, key << " ended " << status);
    BOOST_TEST(status_of.emplace(key, c.at("status")).second, key << " twice");
  }
  // Each saved case is in the report, with the same outcome, and each case of the report saved.
  std::size_t files = 0;
  for (auto& e : fs::directory_iterator(runs[0] / "cases")) {
    auto rec = json::parse(read_file((e.path() / "result.json").string())).as_object();
    auto key = std::string(rec.at("key").as_string());
    auto it = status_of.find(key);
    BOOST_REQUIRE_MESSAGE(it != status_of.end(), key << " saved but not in the report");
    BOOST_TEST(it->second == rec.at("status"), key);
    ++files;
  }
  BOOST_TEST(files == 120u);
  auto& counts = report.at("summary").at("counts").as_object();
  BOOST_TEST(counts.at("passed").as_int64() + counts.at("failed").as_int64() +
                 counts.at("na").as_int64() + counts.at("error").as_int64() ==
             120);
  BOOST_TEST(counts.at("failed").as_int64() >= 1);
}

BOOST_AUTO_TEST_SUITE_END()
