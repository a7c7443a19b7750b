// `mira run --shard`, `mira plan --shard` and `mira merge` end to end with the example study: four
// shards merged equal a single-process run of the same plan (keys and verdicts), report, export
// and resume work on the merged run, a partial merge exits 4 and its resume runs the rest, a
// resumed shard keeps its shard.
#include "integration/process_util.hpp"

#include <boost/json/parse.hpp>
#include <boost/test/unit_test.hpp>

#include <filesystem>
#include <map>

using namespace mira::test;
namespace fs = std::filesystem;
namespace json = boost::json;

namespace {

const std::string mira_bin = MIRA_CLI;
const std::string example = MIRA_EXAMPLE_STUDY;
// One retry of the outage case keeps its backoff short.
const std::string run_opts = " --max-retries 1 --color never ";

// stdout and stderr together.
command_result cli(const std::string& args) {
  return run_command(mira_bin + " " + args + " 2>&1");
}

// key -> status of a run's records, as `mira report --format json` gives them.
std::map<std::string, std::string> verdicts(const fs::path& run) {
  std::map<std::string, std::string> out;
  auto rendered = run_command(mira_bin + " report " + run.filename().string() + " --results-dir " +
                              run.parent_path().string() + " --format json 2>/dev/null");
  BOOST_REQUIRE(rendered.code == 0);
  auto v = json::parse(rendered.out);
  for (auto& c : v.at("cases").as_array())
    out[std::string(c.at("key").as_string())] = std::string(c.at("status").as_string());
  return out;
}

struct sharded {
  temp_dir tmp;
  fs::path shard_run[4];
  std::map<std::string, std::string> single;
  sharded() {
    for (int i = 0; i < 4; ++i) {
      auto dir = tmp.path / "shards" / std::to_string(i);
      auto r = cli("run --shard " + std::to_string(i) + "/4 --results-dir " + dir.string() +
                   run_opts + "-- " + example);
      BOOST_REQUIRE_MESSAGE(r.code == 0, r.out);
      shard_run[i] = only_run(dir);
    }
    auto r = cli("run --results-dir " + tmp / "single" + run_opts + "-- " + example);
    BOOST_REQUIRE_MESSAGE(r.code == 0, r.out);
    single = verdicts(only_run(tmp.path / "single"));
  }
  std::string inputs(std::initializer_list<int> which) const {
    std::string out;
    for (int i : which) out += " " + shard_run[i].string();
    return out;
  }
};

}  // namespace

BOOST_AUTO_TEST_SUITE(mira_cli_shard)

BOOST_AUTO_TEST_CASE(plan_shows_each_shard_and_the_shards_cover_the_plan_once) {
  auto whole = run_command(mira_bin + " plan --json -- " + example + " 2>/dev/null");
  BOOST_REQUIRE(whole.code == 0);
  std::map<std::string, int> seen;
  for (int i = 0; i < 4; ++i) {
    auto r = run_command(mira_bin + " plan --json --shard " + std::to_string(i) + "/4 -- " +
                         example + " 2>/dev/null");
    BOOST_REQUIRE(r.code == 0);
    std::istringstream in(r.out);
    for (std::string line; std::getline(in, line);)
      ++seen[std::string(json::parse(line).at("key").as_string())];
  }
  std::istringstream in(whole.out);
  std::size_t planned = 0;
  for (std::string line; std::getline(in, line); ++planned)
    BOOST_TEST(seen[std::string(json::parse(line).at("key").as_string())] == 1, line);
  BOOST_TEST(seen.size() == planned);
  BOOST_TEST(planned == 41u);
  auto text = cli("plan --shard 1/4 -- " + example);
  BOOST_TEST(text.out.find("shard 1/4: ") != std::string::npos, text.out);
  BOOST_TEST(text.out.find("total in the shard: ") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_bad_shard_is_a_usage_error_naming_it) {
  for (auto bad : {"4/4", "1/0", "x", "-1/3"}) {
    auto r = cli(std::string("run --dry-run --shard ") + bad + " -- " + example);
    BOOST_TEST(r.code == 2);
    BOOST_TEST(r.out.find(std::string("--shard '") + bad + "'") != std::string::npos, r.out);
  }
  auto r = run_command("env -u SLURM_ARRAY_TASK_ID -u JOB_COMPLETION_INDEX " + mira_bin +
                       " plan --shard auto -- " + example + " 2>&1");
  BOOST_TEST(r.code == 2);
  BOOST_TEST(r.out.find("mira: --shard auto: neither SLURM_ARRAY_TASK_ID") != std::string::npos,
             r.out);
  r = run_command("env -u SLURM_ARRAY_TASK_ID JOB_COMPLETION_INDEX=2 MIRA_SHARD_COUNT=4 " +
                  mira_bin + " plan --shard auto -- " + example + " 2>&1");
  BOOST_TEST(r.code == 0);
  BOOST_TEST(r.out.find("shard 2/4: ") != std::string::npos, r.out);
}

BOOST_FIXTURE_TEST_CASE(four_shards_merged_equal_a_single_process_run, sharded) {
  auto meta = json::parse(read_file((shard_run[2] / "meta.json").string())).as_object();
  BOOST_TEST(meta.at("shard").at("index").as_int64() == 2);
  BOOST_TEST(meta.at("shard").at("count").as_int64() == 4);
  BOOST_TEST(meta.at("shard").at("plan_cases").as_int64() == 41);
  BOOST_TEST(meta.at("shard").at("fingerprint").as_string().size() == 64u);
  BOOST_TEST(meta.at("study").at("study").as_string() == "example-study");

  auto before = read_file((shard_run[0] / "meta.json").string());
  auto m = cli("merge" + inputs({3, 1, 0, 2}) + " --results-dir " + tmp / "results" +
               " --run-id merged");
  BOOST_REQUIRE_MESSAGE(m.code == 0, m.out);
  BOOST_TEST(m.out.find("merged 4 of 4 shard(s), 41 case(s), into run merged") != std::string::npos,
             m.out);
  BOOST_TEST(read_file((shard_run[0] / "meta.json").string()) == before);
  auto merged = tmp.path / "results" / "merged";
  BOOST_TEST((verdicts(merged) == single));
  BOOST_TEST(fs::exists(merged / "report.html"));

  // report, export and resume read it as any run.
  auto rep = cli("report merged --results-dir " + tmp / "results" + " --format json --out -");
  BOOST_TEST(rep.code == 0);
  BOOST_TEST(rep.out.find(R"("counts":{"passed":37,"failed":0,"na":1,"skipped":3,)") !=
             std::string::npos);
  auto exported = run_command(mira_bin + " export merged --results-dir " + tmp / "results" +
                              " --out - 2>/dev/null");
  BOOST_TEST(exported.code == 0);
  BOOST_TEST(std::count(exported.out.begin(), exported.out.end(), '\n') == 38);  // 3 skipped
  auto resumed =
      cli("run --resume merged --results-dir " + tmp / "results" + run_opts + "-- " + example);
  BOOST_TEST(resumed.code == 0, resumed.out);
  BOOST_TEST(
      resumed.out.find("resuming run merged: 41 of 41 case(s) already saved") != std::string::npos,
      resumed.out);
}

BOOST_FIXTURE_TEST_CASE(a_partial_merge_exits_4_and_its_resume_runs_the_rest, sharded) {
  auto results = tmp / "results";
  auto refused = cli("merge" + inputs({0, 2}) + " --results-dir " + results + " --run-id part");
  BOOST_TEST(refused.code == 2);
  BOOST_TEST(refused.out.find("shard(s) 1, 3 of 4 are missing (--allow-partial merges what is "
                              "there; resume an unfinished shard with mira run --resume); nothing "
                              "was written") != std::string::npos,
             refused.out);
  BOOST_TEST(!fs::exists(results));  // nothing written
  auto partial = cli("merge" + inputs({0, 2}) + " --results-dir " + results +
                     " --run-id part --allow-partial");
  BOOST_TEST(partial.code == 4, partial.out);
  BOOST_TEST(partial.out.find("not run (missing shard(s) 1, 3)") != std::string::npos, partial.out);
  auto resumed = cli("run --resume part --results-dir " + results + run_opts + "-- " + example);
  BOOST_TEST(resumed.code == 0, resumed.out);
  BOOST_TEST((verdicts(fs::path(results) / "part") == single));
}

BOOST_FIXTURE_TEST_CASE(a_resumed_shard_keeps_its_shard_and_its_plan, sharded) {
  auto dir = shard_run[1].parent_path().string(), id = shard_run[1].filename().string();
  auto r = cli("run --resume " + id + " --results-dir " + dir + run_opts + "-- " + example);
  BOOST_TEST(r.code == 0, r.out);
  BOOST_TEST(r.out.find("shard 1/4: ") != std::string::npos, r.out);
  BOOST_TEST(r.out.find("already saved") != std::string::npos, r.out);
  auto other =
      cli("run --resume " + id + " --shard 2/4 --results-dir " + dir + run_opts + "-- " + example);
  BOOST_TEST(other.code == 2);
  BOOST_TEST(other.out.find("is shard 1/4, not 2/4") != std::string::npos, other.out);
  auto replanned =
      cli("run --resume " + id + " --trials 2 --results-dir " + dir + run_opts + "-- " + example);
  BOOST_TEST(replanned.code == 2);
  BOOST_TEST(replanned.out.find("the plan changed since shard run") != std::string::npos,
             replanned.out);
}

BOOST_AUTO_TEST_SUITE_END()
