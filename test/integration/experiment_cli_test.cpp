// `mira run --experiment PLAN.toml` end to end: three treatments of a test study whose
// environment knob makes one of them worse; the comparison flags exactly that one (exit 1 and its
// name), each treatment is an ordinary saved run labelled with the experiment and carrying the
// plan as source and as resolved; a treatment that fails does not stop the others.
#include "integration/process_util.hpp"

#include <boost/json/parse.hpp>
#include <boost/test/unit_test.hpp>

#include <filesystem>
#include <fstream>
#include <map>

using namespace mira::test;
namespace fs = std::filesystem;
namespace json = boost::json;

namespace {

const std::string mira_bin = MIRA_CLI;
const std::string study = std::string(MIRA_PYTHON3) + " " + MIRA_COMPARE_STUDY;

// stdout and stderr apart: the comparisons are on stdout, the treatments' output on stderr.
struct outputs {
  int code = -1;
  std::string out, err;
};

outputs experiment(const fs::path& dir, const fs::path& plan, const std::string& flags) {
  auto err = dir / "stderr.txt";
  auto r = run_command(mira_bin + " run --color never --results-dir " + (dir / "results").string() +
                       " --experiment " + plan.string() + " " + flags + " -- " + study + " 2>" +
                       err.string());
  return {r.code, r.out, read_file(err.string())};
}

void write(const fs::path& p, const std::string& text) {
  std::ofstream(p) << text;
}

// treatment -> meta.json of each run folder in `results`.
std::map<std::string, json::object> runs(const fs::path& results) {
  std::map<std::string, json::object> out;
  for (auto& e : fs::directory_iterator(results)) {
    auto meta = json::parse(read_file((e.path() / "meta.json").string())).as_object();
    auto& x = meta.at("experiment").as_object();
    out[std::string(x.at("treatment").as_string())] = meta;
  }
  return out;
}

const std::string three_treatments = R"(study = "compare-study"

[slice]
samples = ["m*", "t*"]

[[treatments]]
name = "control"
env.COMPARE_FAIL = "text/t5"
env.DATA = "./data/set.txt"

[[treatments]]
name = "same"
env.COMPARE_FAIL = "text/t5"

[[treatments]]
name = "worse"
env.COMPARE_FAIL = "text/t5,math/m0,math/m1,math/m2,math/m3"

[compare]
group_by = "treatment"
baseline = "control"
)";

}  // namespace

BOOST_AUTO_TEST_SUITE(experiment_cli)

BOOST_AUTO_TEST_CASE(three_treatments_and_compare_flags_the_worse_one) {
  temp_dir tmp;
  auto plan = tmp.path / "plan.toml";
  write(plan, three_treatments);
  auto r = experiment(tmp.path, plan, "--experiment-parallel 2");
  BOOST_TEST_MESSAGE(r.err);
  BOOST_TEST(r.code == 1, r.out << r.err);
  BOOST_TEST(r.err.find("significantly worse than the baseline: worse\n") != std::string::npos,
             r.err);
  // The comparison of each treatment against the baseline: only "worse" dropped.
  auto same = r.out.find("== treatment same "), worse = r.out.find("== treatment worse ");
  BOOST_REQUIRE(same != std::string::npos);
  BOOST_REQUIRE(worse != std::string::npos);
  BOOST_TEST(r.out.find("== treatment control ") == std::string::npos);
  auto same_part = r.out.substr(same, worse > same ? worse - same : std::string::npos);
  auto worse_part = r.out.substr(worse, same > worse ? same - worse : std::string::npos);
  BOOST_TEST(same_part.find("no significant change") != std::string::npos, same_part);
  BOOST_TEST(same_part.find("0 regressed, 0 fixed") != std::string::npos, same_part);
  BOOST_TEST(worse_part.find("significant drop") != std::string::npos, worse_part);
  BOOST_TEST(worse_part.find("8 regressed, 0 fixed") != std::string::npos, worse_part);
  // Each treatment's output reached stderr under its name.
  BOOST_TEST(r.err.find("[worse] ") != std::string::npos);

  // Each treatment is a saved run with the experiment's id and its label, and the plan.
  auto saved = runs(tmp.path / "results");
  BOOST_REQUIRE_EQUAL(saved.size(), 3u);
  std::string id;
  for (auto& [treatment, meta] : saved) {
    auto& x = meta.at("experiment").as_object();
    if (id.empty()) id = std::string(x.at("id").as_string());
    BOOST_TEST(x.at("id").as_string() == id);
    BOOST_TEST(x.at("baseline").as_bool() == (treatment == "control"));
    auto& labels = meta.at("environment").at("labels").as_object();
    BOOST_TEST(labels.at("treatment").as_string() == treatment);
    BOOST_TEST(labels.at("experiment_id").as_string() == id);
    auto folder = tmp.path / "results" / std::string(meta.at("run_id").as_string());
    BOOST_TEST(read_file((folder / "experiment-source.toml").string()) == three_treatments);
    auto resolved = read_file((folder / "experiment.toml").string());
    // "./data/set.txt" resolved against the plan's directory; the defaults filled in, alpha
    // written the shortest way that reads back the same.
    BOOST_TEST(resolved.find((tmp.path / "data/set.txt").string()) != std::string::npos, resolved);
    BOOST_TEST(resolved.find("\n[compare]\nbaseline = 'control'\ngroup_by = 'treatment'\nalpha = "
                             "0.05\n") != std::string::npos,
               resolved);
  }
  BOOST_TEST(id.rfind("exp-", 0) == 0);
}

BOOST_AUTO_TEST_CASE(a_failing_treatment_does_not_stop_the_others) {
  temp_dir tmp;
  auto plan = tmp.path / "plan.toml";
  // "broken" reports another study name: its run is refused (exit 2); the others run and are
  // compared (broken down by the effort axis), and the experiment exits 3.
  write(plan, R"(study = "compare-study"
[[treatments]]
name = "control"
[[treatments]]
name = "broken"
env.COMPARE_STUDY = "other-study"
[[treatments]]
name = "worse"
env.COMPARE_FAIL = "math/m0,math/m1,math/m2,math/m3"
[compare]
group_by = "effort"
)");
  auto r = experiment(tmp.path, plan, "");
  BOOST_TEST(r.code == 3, r.out << r.err);
  BOOST_TEST(r.err.find("treatment broken failed (exit 2") != std::string::npos, r.err);
  BOOST_TEST(r.err.find("is for study 'compare-study' but this study is 'other-study'") !=
                 std::string::npos,
             r.err);
  BOOST_TEST(r.out.find("== treatment worse ") != std::string::npos, r.out);
  BOOST_TEST(r.out.find("significant drop") != std::string::npos, r.out);
  BOOST_TEST(r.out.find("by effort:") != std::string::npos, r.out);  // [compare] group_by
  auto saved = runs(tmp.path / "results");
  BOOST_TEST(saved.size() == 2u);
  BOOST_TEST(saved.count("worse") == 1u);
}

BOOST_AUTO_TEST_CASE(launcher_preset_and_results_dir_come_from_mira_toml) {
  temp_dir tmp;
  write(tmp.path / "mira.toml", "[results]\ndir = \"out\"\n[launchers.cs]\npython = \"" +
                                    std::string(MIRA_COMPARE_STUDY) +
                                    "\"\n[presets.mathonly]\nevals = [\"math\"]\n");
  write(tmp.path / "plan.toml", R"(study = "compare-study"
launcher = "cs"
preset = "mathonly"
[[treatments]]
name = "control"
[[treatments]]
name = "worse"
env.COMPARE_FAIL = "math/m0,math/m1,math/m2,math/m3"
)");
  // No study command: the plan's launcher gives it; run from the folder of mira.toml.
  auto err = tmp.path / "stderr.txt";
  auto r = run_command("cd " + tmp.path.string() + " && " + mira_bin +
                       " run --color never --experiment plan.toml 2>" + err.string());
  BOOST_TEST(r.code == 1, r.out << read_file(err.string()));
  BOOST_TEST(r.out.find("8 regressed, 0 fixed") != std::string::npos, r.out);
  auto saved = runs(tmp.path / "out");
  BOOST_REQUIRE_EQUAL(saved.size(), 2u);
  for (auto& [treatment, meta] : saved)  // the preset's evals only: math's 12 cases
    BOOST_TEST(meta.at("summary").at("overall").at("scored").as_int64() == 12, treatment);
}

BOOST_AUTO_TEST_CASE(a_bad_plan_exits_2_before_anything_runs) {
  temp_dir tmp;
  auto plan = tmp.path / "plan.toml";
  write(plan, "study = \"compare-study\"\n[[treatments]]\nname = \"a\"\nenv = 3\n");
  auto r = experiment(tmp.path, plan, "");
  BOOST_TEST(r.code == 2, r.err);
  BOOST_TEST(r.err.find("plan.toml:4:7: env must be a table") != std::string::npos, r.err);
  BOOST_TEST(!fs::exists(tmp.path / "results"));
  write(plan, three_treatments);
  r = experiment(tmp.path, plan, "--dry-run");
  BOOST_TEST(r.code == 2, r.err);
  BOOST_TEST(r.err.find("--dry-run does not apply") != std::string::npos, r.err);
  BOOST_TEST(!fs::exists(tmp.path / "results"));
}

BOOST_AUTO_TEST_SUITE_END()
