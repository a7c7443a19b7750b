// mira.toml loading: every table read into the model, each error naming file, line and column,
// unknown keys warned with a did-you-mean, and discovery walking up from a directory.
#include <boost/test/unit_test.hpp>

#include <mira/config/mira_toml.hpp>

#include <unistd.h>

#include <fstream>

namespace cfg = mira::config;
namespace fs = std::filesystem;

namespace {

cfg::config load(const std::string& text) {
  auto c = cfg::parse_config(text, "/p/mira.toml");
  BOOST_REQUIRE_MESSAGE(c, (c ? "" : c.error().to_string()));
  return *c;
}

// A fresh empty directory under the system's temporary directory.
fs::path temp_dir() {
  auto d = fs::temp_directory_path() / ("mira-toml-test-" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(config_mira_toml)

BOOST_AUTO_TEST_CASE(every_table_is_read) {
  auto c = load(R"(
default_launcher = "py"

[results]
dir = "./out/runs"

[environment]
enabled = false
[environment.labels]
team = "evals"
region = "eu"

[presets.smoke]
evals = ["reason*", "math"]
samples = "case-{1,2}"
targets = ["mock"]
tag = "fast"
timeout = 30
[presets.smoke.axes]
effort = ["low", "high"]

[presets.slow]
timeout = 2.5

[launchers.py]
study = "studies/s.py"
[launchers.cargo]
bin = "greet"
package = "mira-examples"
manifest_path = "rust/Cargo.toml"
[launchers.sh]
cmd = "./study --flag 'two words'"
[launchers.three]
python3 = "s.py --x"
[launchers.u]
uv = "s.py"
[launchers.ex]
example = "demo"
[launchers.rs]
script = "study.rs"

[targets."gpt-4o"]
timeout = 120
[targets.mock]
)");
  BOOST_TEST(c.warnings.empty());
  BOOST_TEST(c.file == "/p/mira.toml");
  BOOST_TEST(c.results_dir == "/p/out/runs");
  BOOST_TEST(!c.environment_enabled);
  BOOST_TEST(c.environment_labels.size() == 2u);
  BOOST_TEST(c.environment_labels[0].first == "team");
  BOOST_TEST(c.environment_labels[1].second == "eu");

  auto& smoke = c.presets.at("smoke");
  BOOST_TEST((smoke.evals == std::vector<std::string>{"reason*", "math"}));
  BOOST_TEST((smoke.samples == std::vector<std::string>{"case-{1,2}"}));  // commas kept
  BOOST_TEST((smoke.targets == std::vector<std::string>{"mock"}));
  BOOST_TEST((smoke.tags == std::vector<std::string>{"fast"}));
  BOOST_TEST(*smoke.timeout_s == 30.0);
  BOOST_REQUIRE(smoke.axes.size() == 1u);
  BOOST_TEST(smoke.axes[0].first == "effort");
  BOOST_TEST(smoke.axes[0].second.size() == 2u);
  BOOST_TEST(smoke.where.line == 13u);
  BOOST_TEST(*c.presets.at("slow").timeout_s == 2.5);

  BOOST_TEST(c.default_launcher == "py");
  BOOST_TEST(c.launchers.size() == 7u);
  BOOST_TEST((c.launchers.at("py").mode == cfg::launch_mode::study));
  BOOST_TEST(c.launchers.at("py").value == "/p/studies/s.py");  // relative to mira.toml
  auto& cargo = c.launchers.at("cargo");
  BOOST_TEST((cargo.mode == cfg::launch_mode::bin));
  BOOST_TEST(cargo.value == "greet");
  BOOST_TEST(cargo.package == "mira-examples");
  BOOST_TEST(cargo.manifest_path == "/p/rust/Cargo.toml");
  BOOST_TEST((c.launchers.at("sh").mode == cfg::launch_mode::cmd));
  BOOST_TEST(c.launchers.at("sh").value == "./study --flag 'two words'");  // split when run
  BOOST_TEST((c.launchers.at("three").mode == cfg::launch_mode::python));
  BOOST_TEST((c.launchers.at("u").mode == cfg::launch_mode::uv));
  BOOST_TEST((c.launchers.at("ex").mode == cfg::launch_mode::example));
  BOOST_TEST((c.launchers.at("rs").mode == cfg::launch_mode::script));
  BOOST_TEST(c.launchers.at("rs").value == "/p/study.rs");

  BOOST_TEST(*c.targets.at("gpt-4o").timeout_s == 120.0);
  BOOST_TEST(!c.targets.at("mock").timeout_s);
}

BOOST_AUTO_TEST_CASE(defaults_without_keys) {
  auto c = load("");
  BOOST_TEST(c.results_dir == "/p/results");
  BOOST_TEST(c.environment_enabled);
  BOOST_TEST(c.presets.empty());
  BOOST_TEST(c.default_launcher.empty());
  cfg::config none;  // no file at all
  BOOST_TEST(none.results_dir == "results");
}

BOOST_AUTO_TEST_CASE(each_error_names_file_line_and_column) {
  struct error_case {
    const char* text;
    std::size_t line, column;
    const char* says;
  };
  const error_case cases[] = {
      {"[results\ndir = 1", 1, 9, ""},  // TOML syntax
      {"a = 1\na = 2", 2, 5, ""},       // duplicate key
      {"[results]\ndir = 3", 2, 7, "[results] dir must be a string"},
      {"results = 1", 1, 11, "[results] must be a table"},
      {"[results]\ndir = \"\"", 2, 7, "[results] dir is empty"},
      {"[environment]\nenabled = \"yes\"", 2, 11, "enabled must be true or false"},
      {"[environment.labels]\nteam = 3", 2, 8, "[environment.labels] team must be a string"},
      {"[presets.p]\nsamples = [1]", 2, 12, "samples must be a string or an array of strings"},
      {"[presets.p]\ntimeout = 0", 2, 11, "timeout must be a positive number of seconds"},
      {"[presets.p]\ntimeout = \"30s\"", 2, 11, "timeout must be a number of seconds"},
      {"[presets.p.axes]\neffort = 3", 2, 10, "axes.effort must be a string"},
      {"[launchers.l]\npackage = \"x\"", 1, 1, "[launchers.l] has no mode"},
      {"[launchers.l]\nbin = \"a\"\ncmd = \"b\"", 3, 7, "sets both bin and cmd"},
      {"[launchers.l]\ncmd = \"\"", 2, 7, "[launchers.l] cmd is empty"},
      {"[launchers.l]\ncmd = [\"a\"]", 2, 7, "[launchers.l] cmd must be a string"},
      {"default_launcher = \"py\"\n[launchers.pv]\ncmd = \"x\"", 1, 20,
       "default_launcher names \"py\", which is not in [launchers]; did you mean \"pv\"?"},
      {"default_launcher = \"x\"", 1, 20, "(there are none)"},
      {"[targets.\"gpt\"]\ntimeout = -1", 2, 11, "[targets.gpt] timeout must be a positive"},
      {"[targets]\nmock = 3", 2, 8, "[targets.mock] must be a table"},
  };
  for (auto& ec : cases) {
    auto c = cfg::parse_config(ec.text, "conf/mira.toml");
    BOOST_TEST_CONTEXT(ec.text) {
      BOOST_REQUIRE(!c);
      BOOST_TEST(c.error().where.line == ec.line);
      BOOST_TEST(c.error().where.column == ec.column);
      BOOST_TEST(c.error().message.find(ec.says) != std::string::npos, c.error().message);
      auto text = c.error().to_string();
      BOOST_TEST(text.rfind("conf/mira.toml:" + std::to_string(ec.line) + ":" +
                                std::to_string(ec.column) + ": ",
                            0) == 0u,
                 text);
    }
  }
}

BOOST_AUTO_TEST_CASE(unknown_keys_are_warned_with_a_did_you_mean) {
  auto c = load(R"(defualt_launcher = "x"
[results]
dri = "r"
[presets.p]
sample = "a"
timout = 3
[launchers.l]
cmd = "x"
pakage = "y"
[targets.t]
time_out = 3
[environment]
zzz = 1
)");
  std::vector<std::string> got;
  for (auto& w : c.warnings) got.push_back(w.to_string());
  std::vector<std::string> want = {
      "/p/mira.toml:1:20: unknown key 'defualt_launcher' in mira.toml; did you mean "
      "'default_launcher'?",
      "/p/mira.toml:3:7: unknown key 'dri' in [results]; did you mean 'dir'?",
      "/p/mira.toml:5:10: unknown key 'sample' in [presets.p]; did you mean 'samples'?",
      "/p/mira.toml:6:10: unknown key 'timout' in [presets.p]; did you mean 'timeout'?",
      "/p/mira.toml:9:10: unknown key 'pakage' in [launchers.l]; did you mean 'package'?",
      "/p/mira.toml:11:12: unknown key 'time_out' in [targets.t]; did you mean 'timeout'?",
      "/p/mira.toml:13:7: unknown key 'zzz' in [environment] (known: enabled, labels)",
  };
  BOOST_TEST(got == want, boost::test_tools::per_element());
}

// A misspelt key is the likely cause of the failure it leads to: it is named first (`cmnd`, not
// "has no mode"), whichever table it is in, and the failure follows.
BOOST_AUTO_TEST_CASE(a_failure_names_the_unknown_keys_of_every_table_first) {
  auto c = cfg::parse_config("[launchers.ex]\ncmnd = \"./study\"\n[targets.t]\ntime_out = 3\n",
                             "/p/mira.toml");
  BOOST_REQUIRE(!c);
  BOOST_TEST(c.error().to_string() ==
             "/p/mira.toml:2:8: unknown key 'cmnd' in [launchers.ex]; did you mean 'cmd'?; "
             "line 4: unknown key 'time_out' in [targets.t]; did you mean 'timeout'?; then line "
             "1: [launchers.ex] has no mode: set one of bin, example, cmd, script, study, uv, "
             "python");
  // A table read before the one with the unknown key fails: the unknown key still comes first.
  auto early = cfg::parse_config("[results]\ndir = 3\n[targets.t]\ntimout = 3\n", "/p/mira.toml");
  BOOST_REQUIRE(!early);
  BOOST_TEST(early.error().to_string() ==
             "/p/mira.toml:4:10: unknown key 'timout' in [targets.t]; did you mean 'timeout'?; "
             "then line 2: [results] dir must be a string");
}

BOOST_AUTO_TEST_CASE(dubious_values_are_warned) {
  auto c = load(R"([launchers.l]
cmd = "x"
package = "p"
[presets.p.axes]
effort = []
)");
  BOOST_REQUIRE(c.warnings.size() == 2u);
  BOOST_TEST(c.warnings[0].message.find("package applies to bin and example only") !=
             std::string::npos);
  BOOST_TEST(c.launchers.at("l").package.empty());
  BOOST_TEST(c.warnings[1].message.find("axes.effort is empty") != std::string::npos);
  BOOST_TEST(c.presets.at("p").axes.empty());
}

BOOST_AUTO_TEST_CASE(lookups_list_the_known_names) {
  auto c = load("[presets.smoke]\n[presets.full]\n[launchers.a]\ncmd = \"x\"\n");
  BOOST_TEST(*c.find_preset("smoke") == &c.presets.at("smoke"));
  BOOST_TEST(c.find_preset("smok").error().message() ==
             "unknown preset \"smok\" (known: full, smoke in /p/mira.toml)");
  BOOST_TEST((c.find_preset("smok").error().code == cfg::errc::not_found));
  BOOST_TEST(c.find_launcher("b").error().message() ==
             "unknown launcher \"b\" (known: a in /p/mira.toml)");
  BOOST_TEST((c.find_launcher("b").error().code == cfg::errc::not_found));
  cfg::config none;
  BOOST_TEST(none.find_preset("x").error().message() ==
             "unknown preset \"x\" (none are defined; no mira.toml was found)");
}

BOOST_AUTO_TEST_CASE(presets_fill_what_the_command_line_left_out) {
  auto c = load(R"([presets.p]
evals = "e*"
samples = ["s1", "s2"]
targets = "t"
tag = "fast"
[presets.p.axes]
effort = ["low"]
size = ["big"]
)");
  mira::plan::selection cli;
  cli.samples = {"s9"};
  cli.axes = {{"effort", {"high"}}};
  auto s = cfg::apply_preset(c.presets.at("p"), cli);
  BOOST_TEST((s.evals == std::vector<std::string>{"e*"}));
  BOOST_TEST((s.samples == std::vector<std::string>{"s9"}));  // the command line wins
  BOOST_TEST((s.targets == std::vector<std::string>{"t"}));
  BOOST_TEST((s.tags == std::vector<std::string>{"fast"}));
  BOOST_REQUIRE(s.axes.size() == 2u);
  BOOST_TEST((s.axes[0].second == std::vector<std::string>{"high"}));
  BOOST_TEST(s.axes[1].first == "size");
}

BOOST_AUTO_TEST_CASE(timeout_precedence_is_command_line_then_target_then_preset) {
  auto c = load("[presets.p]\ntimeout = 5\n[targets.slow]\ntimeout = 60\n[targets.other]\n");
  auto* p = &c.presets.at("p");
  BOOST_TEST(*cfg::effective_timeout(c, p, "slow", 1.0) == 1.0);
  BOOST_TEST(*cfg::effective_timeout(c, p, "slow", std::nullopt) == 60.0);
  BOOST_TEST(*cfg::effective_timeout(c, p, "other", std::nullopt) == 5.0);
  BOOST_TEST(*cfg::effective_timeout(c, p, "fast", std::nullopt) == 5.0);
  BOOST_TEST(!cfg::effective_timeout(c, nullptr, "fast", std::nullopt));
}

BOOST_AUTO_TEST_CASE(did_you_mean_only_suggests_near_words) {
  BOOST_TEST(cfg::did_you_mean("tiemout", {"timeout", "tag"}) == "timeout");
  BOOST_TEST(cfg::did_you_mean("zebra", {"timeout", "tag"}) == "");
  BOOST_TEST(cfg::did_you_mean("x", {"y"}) == "y");
}

BOOST_AUTO_TEST_CASE(found_walking_up_and_read_from_disk) {
  auto root = temp_dir();
  fs::create_directories(root / "a/b/c");
  auto above = cfg::find_config(root / "a/b/c");  // none in root: any is above it
  BOOST_TEST((!above || !above->string().starts_with(root.string())));
  { std::ofstream(root / "a/mira.toml") << "[results]\ndir = \"runs\"\n"; }
  auto found = cfg::find_config(root / "a/b/c");
  BOOST_REQUIRE(found);
  BOOST_TEST(*found == root / "a/mira.toml");
  { std::ofstream(root / "a/b/mira.toml") << "[environment]\nenabled = false\n"; }
  BOOST_TEST(*cfg::find_config(root / "a/b/c") == root / "a/b/mira.toml");  // the nearest
  auto c = cfg::discover_config(root / "a");
  BOOST_REQUIRE(c);
  BOOST_TEST(c->results_dir == root / "a/runs");
  auto missing = cfg::load_config(root / "nope.toml");
  BOOST_REQUIRE(!missing);
  BOOST_TEST(missing.error().to_string() ==
             (root / "nope.toml").string() + ": cannot read the file");
  fs::remove_all(root);
}

BOOST_AUTO_TEST_CASE(the_starter_config_loads_cleanly) {
  auto c = load(cfg::starter_config());
  BOOST_TEST(c.warnings.empty());
  BOOST_TEST(c.results_dir == "/p/results");
}

BOOST_AUTO_TEST_SUITE_END()
