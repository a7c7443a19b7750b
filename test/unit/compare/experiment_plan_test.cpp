// Experiment plans (`mira run --experiment PLAN.toml`): the Rust host's format is read, "./"
// values resolve against the plan's directory, and each mistake is an error naming file, line and
// column (unknown keys included, as the Rust host's deny_unknown_fields).
#include <boost/test/unit_test.hpp>

#include <mira/experiment.hpp>

#include <utility>

using namespace mira::cli;

namespace {

std::string error_of(std::string_view text) {
  auto p = parse_experiment(text, "/plans/p.toml");
  BOOST_REQUIRE(!p);
  return p.error();
}

}  // namespace

BOOST_AUTO_TEST_SUITE(experiment_plan)

BOOST_AUTO_TEST_CASE(reads_the_rust_format_and_resolves_relative_paths) {
  auto p = parse_experiment(R"(study = "s"
[slice]
samples = ["a", "b*"]
targets = "sim"
trials = 3

[[treatments]]
name = "control"

[[treatments]]
name = "new-prompt"
env.PROMPT = "./prompts/new.txt"
env.UP = "../x"
env.PLAIN = "v"

[compare]
group_by = "treatment"
baseline = "control"
)",
                            "/plans/p.toml");
  BOOST_REQUIRE_MESSAGE(p, p.error());
  BOOST_TEST(p->study == "s");
  BOOST_TEST(p->samples == (std::vector<std::string>{"a", "b*"}), boost::test_tools::per_element());
  BOOST_TEST(p->targets == (std::vector<std::string>{"sim"}), boost::test_tools::per_element());
  BOOST_TEST(*p->trials == 3);
  BOOST_REQUIRE_EQUAL(p->treatments.size(), 2u);
  BOOST_TEST(p->treatments[0].env.empty());
  auto& env = p->treatments[1].env;
  BOOST_REQUIRE_EQUAL(env.size(), 3u);
  // toml++ keeps a table's keys sorted.
  BOOST_TEST(env[0].first == "PLAIN");
  BOOST_TEST(env[0].second == "v");
  BOOST_TEST(env[1].first == "PROMPT");
  BOOST_TEST(env[1].second == "/plans/prompts/new.txt");
  BOOST_TEST(env[2].second == "/x");
  BOOST_TEST(p->baseline == "control");
  BOOST_TEST(p->alpha == 0.05);

  // The resolved plan reads back to the same plan; alpha is written as given, not as
  // 0.050000000000000003.
  auto resolved = resolved_toml(*p);
  BOOST_TEST(resolved.find("\nalpha = 0.05\n") != std::string::npos, resolved);
  auto again = parse_experiment(resolved, "/elsewhere/r.toml");
  BOOST_REQUIRE_MESSAGE(again, again.error());
  BOOST_TEST(again->treatments[1].env[1].second == "/plans/prompts/new.txt");
  BOOST_TEST(again->samples == p->samples, boost::test_tools::per_element());
  BOOST_TEST(*again->trials == 3);
  BOOST_TEST(again->baseline == "control");
  BOOST_TEST(again->group_by == "treatment");
  BOOST_TEST(again->alpha == p->alpha);
}

BOOST_AUTO_TEST_CASE(the_resolved_alpha_is_the_shortest_text_that_reads_back_the_same) {
  for (auto [given, written] : {std::pair<const char*, const char*>{"0.01", "0.01"},
                                {"0.1", "0.1"},
                                {"1e-5", "1e-05"},
                                {"0.30000000000000004", "0.30000000000000004"}}) {
    auto p = parse_experiment(
        std::string("study = \"s\"\n[[treatments]]\nname = \"a\"\n[compare]\nalpha = ") + given +
            "\n",
        "p.toml");
    BOOST_REQUIRE_MESSAGE(p, p.error());
    auto resolved = resolved_toml(*p);
    BOOST_TEST(resolved.find(std::string("\nalpha = ") + written + "\n") != std::string::npos,
               resolved);
    auto again = parse_experiment(resolved, "r.toml");
    BOOST_REQUIRE_MESSAGE(again, again.error());
    BOOST_TEST(again->alpha == p->alpha);
  }
}

BOOST_AUTO_TEST_CASE(the_baseline_defaults_to_the_first_treatment) {
  auto p = parse_experiment(
      "study = \"s\"\n[[treatments]]\nname = \"a\"\n[[treatments]]\nname = "
      "\"b\"\n",
      "p.toml");
  BOOST_REQUIRE_MESSAGE(p, p.error());
  BOOST_TEST(p->baseline == "a");
}

BOOST_AUTO_TEST_CASE(each_mistake_names_file_line_and_column) {
  BOOST_TEST(error_of("study = \"s\"\nmodel = 1\n[[treatments]]\nname = \"a\"\n") ==
             "/plans/p.toml:2:9: unknown key 'model' in the plan (expected: study, launcher, "
             "preset, slice, treatments, compare)");
  BOOST_TEST(error_of("study = \"s\n").find("/plans/p.toml:1:") == 0);  // TOML syntax
  BOOST_TEST(error_of("[[treatments]]\nname = \"a\"\n").find("study = \"NAME\" is required") !=
             std::string::npos);
  BOOST_TEST(error_of("study = \"s\"\n").find("at least one [[treatments]]") != std::string::npos);
  BOOST_TEST(error_of("study = \"s\"\n[[treatments]]\nname = \"a\"\n[[treatments]]\nname = \"a\"\n")
                 .find("5:8: treatment 'a' twice") != std::string::npos);
  BOOST_TEST(error_of("study = \"s\"\n[[treatments]]\nname = \"a\"\nenv.K = 3\n")
                 .find("4:9: env.K must be a string") != std::string::npos);
  BOOST_TEST(error_of("study = \"s\"\n[[treatments]]\nname = \"a\"\n[compare]\nbaseline = \"z\"\n")
                 .find("5:12: baseline 'z' is not a treatment") != std::string::npos);
  BOOST_TEST(error_of("study = \"s\"\n[slice]\ntrials = 0\n[[treatments]]\nname = \"a\"\n")
                 .find("3:10: trials must be a whole number") != std::string::npos);
  BOOST_TEST(error_of("study = \"s\"\n[slice]\nevals = [\"e\"]\n[[treatments]]\nname = \"a\"\n")
                 .find("unknown key 'evals' in [slice]") != std::string::npos);
  BOOST_TEST(error_of("study = \"s\"\n[[treatments]]\nname = \"a\"\nenvs = {}\n")
                 .find("unknown key 'envs' in [[treatments]]") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()
