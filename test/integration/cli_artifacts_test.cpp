// Execute now, score later: `mira run --execute-only`, `mira score`, and `mira export` of the
// scored run as ATIF documents.
#include "common/schema.hpp"
#include "integration/process_util.hpp"

#include <boost/json/parse.hpp>
#include <boost/test/unit_test.hpp>

#include <filesystem>

using namespace mira::test;
namespace fs = std::filesystem;
namespace json = boost::json;

namespace {

const std::string mira_bin = MIRA_CLI;
const std::string example = MIRA_EXAMPLE_STUDY;
const std::string py = std::string(MIRA_PYTHON3) + " " MIRA_PY_STUDY;

command_result mira_cmd(const std::string& args) {
  return run_command(mira_bin + " " + args + " 2>&1");
}

std::size_t json_files(const fs::path& dir) {
  std::size_t n = 0;
  for (auto& e : fs::directory_iterator(dir))
    n += e.path().extension() == ".json" && e.path().filename() != "meta.json";
  return n;
}

std::size_t count_lines_with(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) n += line.find(what) != std::string::npos;
  return n;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(execute_score_export)

BOOST_AUTO_TEST_CASE(execute_only_then_score_then_export_atif) {
  temp_dir dir;
  auto art = dir / "artifacts", results = dir / "results";
  auto executed = mira_cmd("run --execute-only --artifacts " + art +
                           " --evals greet,coin,events -- " + example);
  BOOST_TEST(executed.code == 0);
  BOOST_TEST(executed.out.find("7 executed (10 cases)") != std::string::npos);
  BOOST_TEST(executed.out.find("score them with: mira score --artifacts " + art + " -- ") !=
             std::string::npos);
  BOOST_TEST(json_files(art) == 7u);
  auto greet = json::parse(read_file(art + "/greet_2fhi_40sim.json")).as_object();
  BOOST_TEST(greet.at("key").as_string() == "greet/hi@sim");
  BOOST_TEST(greet.at("transcript").at("trajectory").at("schema_version").as_string() ==
             "ATIF-v1.7");

  auto scored =
      mira_cmd("score --artifacts " + art + " --results-dir " + results + " -- " + example);
  BOOST_TEST(scored.code == 0);
  BOOST_TEST(scored.out.find("7 passed, 0 failed") != std::string::npos);
  std::vector<fs::path> runs(fs::directory_iterator(results), fs::directory_iterator{});
  BOOST_REQUIRE(runs.size() == 1u);
  auto id = runs[0].filename().string();
  auto report = json::parse(read_file((runs[0] / "report.json").string())).as_object();
  BOOST_TEST(report.at("records").at("count").as_int64() == 7);

  // The study's own trajectory for greet (its artifacts are found through the run's
  // meta.json), one made from the transcript summary for the rest.
  auto exported = run_command(mira_bin + " export " + id + " --results-dir " + results +
                              " --out - 2>/dev/null");
  BOOST_TEST(exported.code == 0);
  BOOST_TEST(count_lines_with(exported.out, "\"schema_version\":\"ATIF-v1.7\"") == 7u);
  BOOST_TEST(count_lines_with(exported.out, "\"name\":\"example-study\"") == 3u);
  BOOST_TEST(count_lines_with(exported.out, "\"name\":\"example-agent\"") == 1u);  // events
  BOOST_TEST(count_lines_with(exported.out, "\"name\":\"mira-cpp\"") == 3u);
  BOOST_TEST(count_lines_with(exported.out, "\"reward\":{\"pass\":true") == 7u);
  BOOST_TEST(mira_cmd("export " + id + " --results-dir " + results).code == 0);
  BOOST_TEST(mira_cmd("export 20990101T000000Z-0000 --results-dir " + results).code == 2);
  BOOST_TEST(mira_cmd("export " + id + " --format json --results-dir " + results).code == 2);
}

// Kept apart from the test above so that a clone without the schema still runs that one.
BOOST_AUTO_TEST_CASE(exported_trajectories_validate_against_the_schema,
                     *boost::unit_test::precondition(needs_schema)) {
  temp_dir dir;
  auto art = dir / "artifacts", results = dir / "results";
  BOOST_REQUIRE(
      mira_cmd("run --execute-only --artifacts " + art + " --evals greet,coin,events -- " + example)
          .code == 0);
  BOOST_REQUIRE(
      mira_cmd("score --artifacts " + art + " --results-dir " + results + " -- " + example).code ==
      0);
  std::vector<fs::path> runs(fs::directory_iterator(results), fs::directory_iterator{});
  BOOST_REQUIRE(runs.size() == 1u);
  BOOST_REQUIRE(
      mira_cmd("export " + runs[0].filename().string() + " --results-dir " + results).code == 0);
  auto valid =
      run_command(std::string(MIRA_PYTHON3) +
                  " -c \"import glob, json, sys, jsonschema; s = json.load(open(sys.argv[1])); "
                  "ref = {'\\$ref': '#/\\$defs/Trajectory', '\\$defs': s['\\$defs']}; "
                  "fs = glob.glob(sys.argv[2] + '/*.atif.json'); "
                  "[jsonschema.validate(json.load(open(f)), ref) for f in fs]; print(len(fs))\" " +
                  (*schema_dir() / "schema.json").string() + " " + (runs[0] / "export").string());
  BOOST_TEST(valid.out == "7\n");
}

BOOST_AUTO_TEST_CASE(execute_only_resumes_and_redoes_torn_artifacts) {
  temp_dir dir;
  auto art = dir / "artifacts";
  const std::string study = py + " --caps execute,score";
  BOOST_TEST(mira_cmd("run --execute-only --artifacts " + art + " -- " + study).code == 0);
  BOOST_REQUIRE(json_files(art) == 3u);
  fs::remove(art + "/echo_2fa_40sim.json");
  {
    std::ofstream torn(art + "/echo_2fb_40sim.json", std::ios::trunc);
    torn << "{\"key\":\"echo/b@sim\",\"transc";
  }
  temp_file rec;
  auto again =
      mira_cmd("run --execute-only --artifacts " + art + " -- " + study + " --record " + rec.path);
  BOOST_TEST(again.code == 0);
  BOOST_TEST(again.out.find("cannot read the artifact") != std::string::npos);
  BOOST_TEST(again.out.find("1 of 3 case(s) already have an artifact") != std::string::npos);
  BOOST_TEST(count_lines_with(read_file(rec.path), "\"method\":\"execute\"") == 2u);
  BOOST_TEST(json_files(art) == 3u);
  BOOST_TEST(json::parse(read_file(art + "/echo_2fb_40sim.json")).at("key").as_string() ==
             "echo/b@sim");
}

BOOST_AUTO_TEST_CASE(execute_and_score_need_the_capability_and_their_flags) {
  temp_dir dir;
  auto art = dir / "artifacts";
  auto no_execute = mira_cmd("run --execute-only --artifacts " + art + " -- " + py);
  BOOST_TEST(no_execute.code == 2);
  BOOST_TEST(no_execute.out.find("--execute-only: executing needs the study's 'execute' "
                                 "capability, and study 'py-study' does not advertise it") !=
             std::string::npos);
  BOOST_TEST(
      mira_cmd("run --execute-only --artifacts " + art + " -- " + py + " --caps execute").code ==
      0);
  auto no_score = mira_cmd("score --artifacts " + art + " --dry-run -- " + py + " --caps execute");
  BOOST_TEST(no_score.code == 2);
  BOOST_TEST(no_score.out.find("mira score: scoring needs the study's 'score' capability") !=
             std::string::npos);
  BOOST_TEST(mira_cmd("run --execute-only -- " + py).code == 2);
  BOOST_TEST(mira_cmd("run --artifacts " + art + " -- " + py).code == 2);
  BOOST_TEST(mira_cmd("run --execute-only --artifacts " + art + " --resume x -- " + py).code == 2);
  BOOST_TEST(mira_cmd("score -- " + py).code == 2);
  auto missing =
      mira_cmd("score --dry-run --artifacts " + (dir / "none") + " -- " + py + " --caps score");
  BOOST_TEST(missing.code == 2);
  BOOST_TEST(missing.out.find("no artifacts directory") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()
