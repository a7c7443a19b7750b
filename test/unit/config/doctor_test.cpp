// The doctor's checks over built listings, configs and results directories: each rule gives
// its finding at its severity, and a clean setup gives none.
#include <boost/test/unit_test.hpp>

#include <mira/config/doctor.hpp>
#include <mira/store/run_store.hpp>

#include <unistd.h>

#include <fstream>

namespace cfg = mira::config;
namespace fs = std::filesystem;
using mira::protocol::eval_info;
using mira::protocol::list_result;

namespace {

eval_info good_eval(std::string name) {
  eval_info e;
  e.name = std::move(name);
  e.samples = {{"s1", {}, {}}, {"s2", {}, {}}};
  e.scorers = {"exact"};
  e.targets = {{"sim", "sim", true, {}}};
  e.axes = {{"effort", {"low", "high"}}};
  return e;
}

cfg::config config_of(const std::string& text) {
  auto c = cfg::parse_config(text, "mira.toml");
  BOOST_REQUIRE_MESSAGE(c, (c ? "" : c.error().to_string()));
  return *c;
}

// The one finding, which must say `says` at `level`.
void expect_one(const std::vector<cfg::finding>& got, cfg::severity level,
                const std::string& says) {
  BOOST_REQUIRE_EQUAL(got.size(), 1u);
  BOOST_TEST((got[0].level == level));
  BOOST_TEST(got[0].message.find(says) != std::string::npos, got[0].message);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(config_doctor)

BOOST_AUTO_TEST_CASE(a_clean_listing_has_no_findings) {
  list_result list{{good_eval("a"), good_eval("b")}};
  BOOST_TEST(cfg::check_listing(list, {}).empty());
}

BOOST_AUTO_TEST_CASE(each_listing_rule) {
  using cfg::severity;
  struct rule {
    const char* name;
    void (*breaks)(list_result&);
    severity level;
    const char* says;
    bool alone;  // false: the planner refuses the listing too, after this finding
  };
  const rule rules[] = {
      {"no evals", [](list_result& l) { l.evals.clear(); }, severity::error,
       "the study lists no evals", true},
      {"eval twice", [](list_result& l) { l.evals[1].name = "a"; }, severity::error,
       "two evals are named \"a\": case keys collide", false},
      {"sample twice",
       [](list_result& l) {
         l.evals[0].samples.push_back({"s1", {}, {}});
       },
       severity::error, "eval \"a\": sample \"s1\" is listed twice", false},
      {"target twice", [](list_result& l) { l.evals[0].targets.push_back(l.evals[0].targets[0]); },
       severity::error, "eval \"a\": target \"sim\" is listed twice", false},
      {"axis twice", [](list_result& l) { l.evals[0].axes.push_back(l.evals[0].axes[0]); },
       severity::error, "eval \"a\": axis \"effort\" is declared twice", false},
      {"axis named target", [](list_result& l) { l.evals[0].axes[0].name = "target"; },
       severity::error, "an axis is named \"target\"", true},
      {"axis value twice", [](list_result& l) { l.evals[0].axes[0].values[1] = "low"; },
       severity::error, "axis \"effort\" lists \"low\" twice", false},
      {"colliding keys",
       [](list_result& l) {
         l.evals[0].samples = {{"x@y", {}, {}}, {"x", {}, {}}};
         l.evals[0].targets = {{"z", "", true, {}}, {"y@z", "", true, {}}};
         l.evals[0].axes.clear();
       },
       severity::error, "a/x@y@z", true},
      {"no samples", [](list_result& l) { l.evals[0].samples.clear(); }, severity::warning,
       "eval \"a\": no samples", true},
      {"no targets", [](list_result& l) { l.evals[0].targets.clear(); }, severity::warning,
       "eval \"a\": no targets", true},
      {"no scorers", [](list_result& l) { l.evals[0].scorers.clear(); }, severity::warning,
       "eval \"a\": no scorers", true},
      {"empty axis", [](list_result& l) { l.evals[0].axes[0].values.clear(); }, severity::warning,
       "axis \"effort\" has no values", true},
      {"unavailable", [](list_result& l) { l.evals[0].targets[0].available = false; },
       severity::warning, "target \"sim\" is unavailable", true},
  };
  for (auto& r : rules) {
    BOOST_TEST_CONTEXT(r.name) {
      list_result list{{good_eval("a"), good_eval("b")}};
      r.breaks(list);
      auto got = cfg::check_listing(list, {});
      if (r.alone) {
        expect_one(got, r.level, r.says);
      } else {
        BOOST_REQUIRE_EQUAL(got.size(), 2u);
        BOOST_TEST((got[0].level == r.level));
        BOOST_TEST(got[0].message.find(r.says) != std::string::npos, got[0].message);
        BOOST_TEST((got[1].level == severity::error));  // the planner's refusal
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(presets_and_targets_that_name_nothing) {
  list_result list{{good_eval("a")}};
  auto c = config_of(
      "[presets.ok]\nsamples = \"s{1,2}\"\n[presets.bad]\ntargets = \"gpt\"\n"
      "[targets.sim]\ntimeout = 3\n[targets.ghost]\ntimeout = 3\n");
  auto got = cfg::check_listing(list, c);
  BOOST_REQUIRE_EQUAL(got.size(), 2u);
  BOOST_TEST(got[0].message.find("preset \"bad\" (line 3): targets: \"gpt\"") == 0u,
             got[0].message);
  BOOST_TEST(got[1].message ==
             "[targets] \"ghost\" (line 7): no eval of the study declares this target");
}

BOOST_AUTO_TEST_CASE(launchers_need_their_programs) {
  auto c = config_of(
      "default_launcher = \"main\"\n[launchers.main]\nbin = \"b\"\n"
      "[launchers.other]\nuv = \"s.py\"\n[launchers.ok]\ncmd = \"x\"\n");
  cfg::system_probe nothing;
  nothing.find_program = [](const std::string&) { return std::optional<fs::path>(); };
  nothing.is_file = [](const fs::path&) { return false; };
  nothing.is_executable = [](const fs::path&) { return false; };
  nothing.head = [](const fs::path&) { return std::string(); };
  auto got = cfg::check_config(c, nothing);
  BOOST_REQUIRE_EQUAL(got.size(), 2u);
  BOOST_TEST((got[0].level == cfg::severity::error));
  BOOST_TEST(got[0].message ==
             "launcher \"main\" (default_launcher): cargo is not on PATH; it is needed to run "
             "cargo bin b");
  BOOST_TEST((got[1].level == cfg::severity::warning));
  BOOST_TEST(got[1].message == "launcher \"other\": uv is not on PATH; it is needed to run s.py");
}

BOOST_AUTO_TEST_CASE(results_dir_states) {
  auto root = fs::temp_directory_path() / ("mira-doctor-test-" + std::to_string(::getpid()));
  fs::remove_all(root);
  auto got = cfg::check_results_dir(root);
  expect_one(got, cfg::severity::warning, "does not exist (the first run creates it");
  fs::create_directories(root);
  BOOST_TEST(cfg::check_results_dir(root).empty());
  { std::ofstream(root / "file") << "x"; }
  expect_one(cfg::check_results_dir(root / "file"), cfg::severity::error, "is not a directory");
  fs::create_directories(root / "stray");
  expect_one(cfg::check_results_dir(root), cfg::severity::warning, "run stray: no meta.json");
  fs::remove_all(root / "stray");
  {
    // A run whose store is open holds its lock: in use, not checked further.
    auto open = mira::store::run_store::create(root, "20261201T000000Z-0002",
                                               mira::store::layout::per_case);
    BOOST_REQUIRE_MESSAGE(open, (open ? "" : open.error().message()));
    BOOST_REQUIRE(!open->begin_session({}));
    expect_one(cfg::check_results_dir(root), cfg::severity::warning,
               "run 20261201T000000Z-0002: in use by ");
  }
  // Closed without finishing (as when its host is killed): the lock went with it.
  expect_one(cfg::check_results_dir(root), cfg::severity::warning,
             "run 20261201T000000Z-0002: its last session did not finish (the host was killed, "
             "or could not write the run's report); resume it with "
             "`mira run --resume 20261201T000000Z-0002`");
  fs::remove_all(root);
}

BOOST_AUTO_TEST_SUITE_END()
