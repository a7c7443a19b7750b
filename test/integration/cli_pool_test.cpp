// `mira run --procs`: a pool of study processes from the command line (exit codes, meta.json,
// the per-process stderr in the run folder) and the advice given to a one-at-a-time study.
#include "integration/process_util.hpp"

#include <boost/json/parse.hpp>
#include <boost/test/unit_test.hpp>

#include <filesystem>

using namespace mira::test;
namespace json = boost::json;

namespace {

const std::string mira_bin = MIRA_CLI;
const std::string py = std::string(MIRA_PYTHON3) + " " + MIRA_PY_STUDY;

// stdout and stderr together.
command_result cli(const std::string& args) {
  return run_command(mira_bin + " " + args + " 2>&1");
}

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(mira_cli_pool)

BOOST_AUTO_TEST_CASE(a_pooled_run_survives_a_crash_and_records_procs_and_each_stderr) {
  temp_dir dir;
  auto r = cli("run -P 3 -j 6 --results-dir " + dir / "results" + " -- " + py +
               " --sequential --samples 12 --run-ms 20 --die-after 2 --die-once " + dir / "died");
  BOOST_TEST_MESSAGE(r.out);
  BOOST_TEST(r.code == 0);
  BOOST_TEST(has(r.out, "12 passed, 0 failed"));
  BOOST_TEST(has(r.out, "3 processes"));
  BOOST_TEST(has(r.out, "died (exit code 3); starting it again"));
  std::filesystem::path run;
  for (auto& e : std::filesystem::directory_iterator(dir.path / "results")) run = e.path();
  auto meta = json::parse(read_file((run / "meta.json").string())).as_object();
  BOOST_TEST(meta.at("config").at("procs").as_int64() == 3);
  auto log = read_file((run / "study.stderr.log").string());
  BOOST_TEST(has(log, "] py-study: dying on purpose"));
  BOOST_TEST(has(log, "[study "));
}

BOOST_AUTO_TEST_CASE(execute_only_and_score_run_through_a_pool) {
  temp_dir dir;
  auto study = std::string(MIRA_EXAMPLE_STUDY);
  auto e =
      cli("run --execute-only -P 2 --artifacts " + dir / "art" + " --evals arithmetic -- " + study);
  BOOST_TEST_MESSAGE(e.out);
  BOOST_TEST(e.code == 0);
  BOOST_TEST(has(e.out, "executed 25 case(s)"));
  auto s =
      cli("score -P 2 --dry-run --artifacts " + dir / "art" + " --evals arithmetic -- " + study);
  BOOST_TEST(s.code == 0);
  BOOST_TEST(has(s.out, "25 passed, 0 failed"));
}

BOOST_AUTO_TEST_CASE(procs_takes_a_positive_number_or_auto) {
  BOOST_TEST(cli("run -P 0 -- " + py).code == 2);
  auto r = cli("run --procs many -- " + py);
  BOOST_TEST(r.code == 2);
  BOOST_TEST(has(r.out, "--procs needs a whole number from 1 to 1024 or auto, got 'many'"));
  BOOST_TEST(cli("list -P 2 -- " + py).code == 2);  // list and plan use one process
  BOOST_TEST(cli("run --procs auto --dry-run -- " + py + " --samples 4").code == 0);
}

BOOST_AUTO_TEST_CASE(processes_that_disagree_exit_3_naming_the_difference) {
  temp_dir dir;
  auto r = cli("run -P 2 --dry-run -- " + py + " --odd-version-once " + dir / "odd");
  BOOST_TEST(r.code == 3);
  BOOST_TEST(has(r.out, "differ in study version"));
  BOOST_TEST(has(r.out, "9.9.9"));
}

BOOST_AUTO_TEST_CASE(a_single_study_answering_one_at_a_time_gets_the_procs_advice_once) {
  auto args = " --dry-run -j 8 -- " + py + " --sequential --samples 16 --run-ms 200";
  auto one = cli("run" + args);
  BOOST_TEST(one.code == 0);
  auto advice = std::string("the study answers one request at a time; --procs N runs N copies");
  auto at = one.out.find(advice);
  BOOST_TEST(at != std::string::npos);
  BOOST_TEST(one.out.find(advice, at + 1) == std::string::npos);
  auto pooled = cli("run -P 2" + args);
  BOOST_TEST(pooled.code == 0);
  BOOST_TEST(!has(pooled.out, advice));
}

BOOST_AUTO_TEST_SUITE_END()
