// The example study (examples/study/example_study.cpp, written on the SDK) run by this host's
// command line: every frame of a full run, of `execute` and of `score` validates against the
// protocol's schema; a case timeout reaches every running subject; a subject that waits runs
// concurrently with the others on one study process.
#include "common/schema.hpp"
#include "integration/process_util.hpp"

#include <boost/test/unit_test.hpp>

#include <chrono>
#include <sstream>

using namespace mira::test;

namespace {

const std::string cli = MIRA_CLI;
const std::string example = MIRA_EXAMPLE_STUDY;

// The study's command, behind the recording proxy.
std::string recorded(const std::string& rec, const std::string& args = "") {
  return std::string(MIRA_PYTHON3) + " " + MIRA_RECORD_PROXY + " " + rec + " -- " + example + args;
}

std::size_t count_lines(const std::string& text, const std::string& needle) {
  std::size_t n = 0;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) n += line.find(needle) != std::string::npos;
  return n;
}

void validate(const std::string& rec) {
  auto r = run_command(std::string(MIRA_PYTHON3) + " " + ndjson_validator()->string() + " " +
                       (*schema_dir() / "schema.json").string() + " " + rec + " --deep 2>&1");
  BOOST_TEST_MESSAGE(r.out);
  BOOST_TEST(r.code == 0, rec << ": " << r.out);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(study_example)

BOOST_AUTO_TEST_CASE(every_frame_of_a_run_an_execute_and_a_score_validates,
                     *boost::unit_test::precondition(needs_schema_and_validator)) {
  temp_dir d;
  auto rec = (d.path / "run.ndjson").string();
  // Every eval; the slow one waits 30 s and is cancelled by the 1 s timeout.
  auto r = run_command(cli + " run --dry-run -j 8 --max-retries 0 --timeout 1 -- " +
                       recorded(rec, " --slow-ms 30000") + " 2>&1");
  BOOST_TEST_MESSAGE(r.out);
  BOOST_TEST(r.code != 0);  // the slow case timed out: a failing run
  validate(rec);
  auto frames = read_file(rec);
  BOOST_TEST(count_lines(frames, "\"method\":\"cancel\"") == 1U);
  // The timeout travels with each run request.
  BOOST_TEST(count_lines(frames, "\"timeout_ms\":1000") ==
             count_lines(frames, "\"method\":\"run\""));
  BOOST_TEST(count_lines(frames, "\"code\":-32800") == 1U);
  // The SDK's started and finished around every case, and the events eval's five of its own.
  auto runs = count_lines(frames, "\"method\":\"run\"");
  BOOST_TEST(count_lines(frames, "\"kind\":\"started\"") == runs);
  BOOST_TEST(count_lines(frames, "\"kind\":\"finished\"") == runs);
  BOOST_TEST(count_lines(frames, "\"method\":\"event\"") == 2 * runs + 5U);
  BOOST_TEST(count_lines(frames, "\"method\":\"list_samples\"") == 2U);
  BOOST_TEST(count_lines(frames, "\"passed\":true") == 36U);  // all but slow

  auto exec = (d.path / "execute.ndjson").string();
  auto artifacts = (d.path / "artifacts").string();
  r = run_command(cli + " run --execute-only --artifacts " + artifacts +
                  " --max-retries 0 greet/ -- " + recorded(exec) + " 2>&1");
  BOOST_TEST(r.code == 0, r.out);
  validate(exec);
  BOOST_TEST(count_lines(read_file(exec), "\"schema_version\":\"ATIF-v1.7\"") == 3U);

  auto score = (d.path / "score.ndjson").string();
  r = run_command(cli + " score --dry-run --artifacts " + artifacts + " greet/ -- " +
                  recorded(score) + " 2>&1");
  BOOST_TEST(r.code == 0, r.out);
  validate(score);
  BOOST_TEST(count_lines(read_file(score), "\"method\":\"score\"") == 3U);
}

BOOST_AUTO_TEST_CASE(a_case_timeout_cancels_each_running_subject) {
  // 16 trials of the slow case (30 s each) at once, each cancelled by a 0.1 s timeout: every
  // subject sees its cancellation (it says so on stderr) and none runs on.
  auto r = run_command(cli + " run --dry-run -j 16 --trials 16 --max-retries 0 --timeout 0.1 " +
                       "slow/ -- " + example + " --slow-ms 30000 2>&1");
  BOOST_TEST_MESSAGE(r.out);
  BOOST_TEST(r.code != 0);
  BOOST_TEST(count_lines(r.out, "[study] example-study: run ") == 16U);
  BOOST_TEST(count_lines(r.out, " cancelled") >= 16U);
}

BOOST_AUTO_TEST_CASE(waiting_subjects_run_at_once_on_one_study_process) {
  // Sixteen trials of a 250 ms case at -j 16: about 250 ms when they run at once, 4 s one after
  // another. The bound is generous (time is the subject here, not a synchronisation).
  auto t0 = std::chrono::steady_clock::now();
  auto r = run_command(cli + " run --dry-run -j 16 --trials 16 slow/ -- " + example +
                       " --slow-ms 250 2>&1");
  auto took = std::chrono::steady_clock::now() - t0;
  BOOST_TEST(r.code == 0, r.out);
  BOOST_TEST(r.out.find("16 passed") != std::string::npos, r.out);
  BOOST_TEST(took < std::chrono::seconds(3));
}

BOOST_AUTO_TEST_SUITE_END()
