// The host killed with SIGKILL at twenty points of a run, resumed each time, in both run
// layouts: in the end every planned case is saved exactly once, no file is torn (a compact
// segment at most loses the torn tail of a batch never acknowledged), and no case saved before
// a kill is run again after it.
#include "integration/process_util.hpp"
#include "store/segment_log.hpp"

#include <boost/json/parse.hpp>
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <filesystem>
#include <map>

using namespace mira::test;
namespace fs = std::filesystem;
namespace json = boost::json;

namespace {

const std::string mira_bin = MIRA_CLI;
const std::string py = std::string(MIRA_PYTHON3) + " " MIRA_PY_STUDY;

// Every case saved in the run folder, by key, with how many result files (or segment records)
// name it.
std::map<std::string, int> saved_keys(const fs::path& run) {
  std::map<std::string, int> keys;
  if (fs::exists(run / "segments")) {
    auto scan = mira::store::read_segments(run / "segments");
    BOOST_TEST(scan.damaged_lines == 0u);
    for (auto& r : scan.records) {
      BOOST_TEST(json::parse(r.json).at("key").as_string() == r.key);
      ++keys[r.key];
    }
    return keys;
  }
  for (auto& e : fs::directory_iterator(run / "cases")) {
    auto file = e.path() / "result.json";
    if (!fs::exists(file)) continue;
    auto v = json::parse(read_file(file.string()));  // throws on a torn file
    ++keys[std::string(v.at("key").as_string())];
  }
  return keys;
}

// The case keys of the `run` requests a study recorded. A study that killed its host lives on
// for a moment and may still be writing its record: py_study holds a shared lock on the record
// while it lives, so taking it exclusively waits until the record is whole.
std::vector<std::string> run_requests(const std::string& record) {
  std::vector<std::string> keys;
  int fd = ::open(record.c_str(), O_RDONLY | O_CLOEXEC);
  BOOST_REQUIRE(fd >= 0);
  BOOST_REQUIRE(::flock(fd, LOCK_EX) == 0);
  std::istringstream in(read_file(record));
  ::close(fd);
  for (std::string line; std::getline(in, line);) {
    auto v = json::parse(line).as_object();
    auto* method = v.if_contains("method");
    if (!method || *method != "run") continue;
    auto& params = v.at("params").as_object();
    auto* trial = params.if_contains("trial");
    keys.push_back("echo/" + std::string(params.at("sample").as_string()) + "@sim#" +
                   std::to_string(trial ? trial->as_int64() : 0));
  }
  return keys;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(crash_resume)

BOOST_DATA_TEST_CASE(sigkill_at_twenty_points_then_resume_saves_every_case_once,
                     boost::unit_test::data::make({"per-case", "compact"}), layout) {
  temp_dir dir;
  auto results = dir / "results";
  // 3 samples x 40 trials; "fail" fails, which is an outcome like any other.
  const std::string selection = " --trials 40 -j 4 --max-retries 0 --store " + std::string(layout) +
                                " --results-dir " + results;
  std::string id;
  std::size_t kills = 0;
  for (int point = 0; point < 20; ++point) {
    temp_file rec;
    std::map<std::string, int> before;
    std::string resume;
    if (!id.empty()) {
      before = saved_keys(fs::path(results) / id);
      resume = " --resume " + id;
    }
    // Killed when the k-th run request of this invocation reaches the study: before anything
    // is saved, or with several answers saved and more being saved (4 are in flight).
    int k = 2 + point % 7;
    auto r = run_command(mira_bin + " run" + resume + selection + " -- " + py + " --record " +
                         rec.path + " --kill-host-after " + std::to_string(k) + " >/dev/null 2>&1");
    BOOST_TEST(r.code == 128 + SIGKILL);
    kills += r.code == 128 + SIGKILL;
    if (id.empty()) {
      std::vector<fs::path> runs(fs::directory_iterator(results), fs::directory_iterator{});
      BOOST_REQUIRE(runs.size() == 1u);
      id = runs[0].filename().string();
    }
    for (auto& key : run_requests(rec.path))
      BOOST_TEST(before.count(key) == 0u,
                 key << " was saved before kill " << point << " and ran again");
  }
  BOOST_TEST(kills == 20u);
  auto before = saved_keys(fs::path(results) / id);
  BOOST_TEST_MESSAGE(before.size() << " of 120 cases saved across the kills");
  BOOST_TEST(before.size() > 0u);
  temp_file rec;
  auto done = run_command(mira_bin + " run --resume " + id + selection + " -- " + py +
                          " --record " + rec.path + " 2>/dev/null");
  BOOST_TEST(done.code == 1);  // the "fail" trials
  BOOST_TEST(done.out.find("80 passed, 40 failed, 0 n/a, 0 skipped, 0 cancelled, 0 errors (120 "
                           "cases)") != std::string::npos);
  for (auto& key : run_requests(rec.path)) BOOST_TEST(before.count(key) == 0u, key);
  auto all = saved_keys(fs::path(results) / id);
  BOOST_TEST(all.size() == 120u);
  for (auto& [key, n] : all) BOOST_TEST(n == 1, key);
  BOOST_TEST(run_requests(rec.path).size() == 120u - before.size());
  // No temporary file is left behind.
  for (auto& e : fs::recursive_directory_iterator(fs::path(results) / id))
    BOOST_TEST(e.path().filename().string().find(".tmp-") == std::string::npos, e.path());
}

// A study that dies more often than --max-restarts allows stops the run (exit 3). The case it
// died under and the cases it never got to are not run, not errors: they were saved as errors,
// so the printed resume command ran nothing and only --retry-errors finished the run.
BOOST_AUTO_TEST_CASE(cases_never_run_by_a_study_that_died_for_good_are_run_by_a_plain_resume) {
  temp_dir dir;
  auto results = dir / "results";
  temp_file mark;
  fs::remove(mark.path);
  // -j 1: echo/a passes, the study dies when echo/b arrives (b: not run), echo/fail waits.
  const std::string args = " -j 1 --max-restarts 0 --results-dir " + results + " -- " + py +
                           " --die-after 2 --die-once " + mark.path + " 2>&1";
  auto first = run_command("timeout 60 " + mira_bin + " run" + args);
  BOOST_TEST(first.code == 3);
  BOOST_TEST(first.out.find("1 passed, 0 failed, 0 n/a, 0 skipped, 2 cancelled, 0 errors (3 "
                            "cases)") != std::string::npos,
             first.out);
  auto at = first.out.find("resume with: ");
  BOOST_REQUIRE(at != std::string::npos);
  auto id = only_run(results).filename().string();
  BOOST_TEST(saved_keys(fs::path(results) / id).size() == 1u);
  auto meta = json::parse(read_file((fs::path(results) / id / "meta.json").string()));
  BOOST_TEST(meta.at("sessions").at(0).at("stopped").as_string() == "study failed");

  auto resumed = run_command("timeout 60 " + mira_bin + " run --resume " + id + args);
  BOOST_TEST(resumed.code == 1);  // echo/fail's failure stands
  BOOST_TEST(resumed.out.find("resuming run " + id + ": 1 of 3 case(s) already saved") !=
                 std::string::npos,
             resumed.out);
  BOOST_TEST(resumed.out.find("2 passed, 1 failed, 0 n/a, 0 skipped, 0 cancelled, 0 errors (3 "
                              "cases)") != std::string::npos,
             resumed.out);
  BOOST_TEST(resumed.out.find("resume with: ") == std::string::npos);
  BOOST_TEST(saved_keys(fs::path(results) / id).size() == 3u);
}

BOOST_AUTO_TEST_SUITE_END()
