// The launch and mira.toml flags as the parser takes them: one way to start the study, format
// aliases, `--axis target=`, brace-aware glob lists, report's FILTER.
#include <boost/test/unit_test.hpp>

#include <mira/args.hpp>

using namespace mira::cli;
using mira::config::launch_mode;
using strings = std::vector<std::string>;

BOOST_AUTO_TEST_SUITE(cli_launch_flags)

BOOST_AUTO_TEST_CASE(each_study_flag_sets_its_mode) {
  struct flag_mode {
    const char* flag;
    launch_mode mode;
  };
  for (auto [flag, mode] :
       {flag_mode{"--study", launch_mode::study}, flag_mode{"--study-python", launch_mode::python},
        flag_mode{"--study-uv", launch_mode::uv}, flag_mode{"--study-bin", launch_mode::bin},
        flag_mode{"--study-example", launch_mode::example},
        flag_mode{"--study-script", launch_mode::script},
        flag_mode{"--study-cmd", launch_mode::cmd}}) {
    BOOST_TEST_CONTEXT(flag) {
      auto a = parse_args(command::run, {flag, "x y"});
      BOOST_TEST((a.launch.mode == mode));
      BOOST_TEST(a.launch.value == "x y");
    }
  }
  auto a = parse_args(command::list,
                      {"--launcher", "l", "--package", "p", "--manifest-path", "m/Cargo.toml"});
  BOOST_TEST(a.launch.launcher == "l");
  BOOST_TEST(a.launch.package == "p");
  BOOST_TEST(a.launch.manifest_path == "m/Cargo.toml");
  BOOST_TEST(parse_args(command::doctor, {"--fix", "--study", "s.py"}).fix);
  auto dashes = parse_args(command::plan, {"--", "./s", "--flag"});
  BOOST_TEST(dashes.launch.argv == (strings{"./s", "--flag"}));
}

BOOST_AUTO_TEST_CASE(one_way_to_start_the_study) {
  BOOST_CHECK_EXCEPTION(parse_args(command::run, {"--study", "a.py", "--study-bin", "b"}),
                        usage_error, [](const usage_error& e) {
                          return e.message ==
                                 "give one way to start the study: --study-bin and --study are "
                                 "both given";
                        });
  BOOST_CHECK_EXCEPTION(parse_args(command::run, {"--study-uv", "a.py", "--", "x"}), usage_error,
                        [](const usage_error& e) {
                          return e.message ==
                                 "the study is given twice: by --study-uv and after `--`";
                        });
  BOOST_CHECK_EXCEPTION(parse_args(command::run, {"--"}), usage_error, [](const usage_error& e) {
    return e.message == "nothing after `--`: give the study's command";
  });
  BOOST_CHECK_EXCEPTION(parse_args(command::run, {"--study", ""}), usage_error,
                        [](const usage_error& e) { return e.message == "--study is empty"; });
  // No study at all parses: mira.toml's default_launcher may give one.
  BOOST_TEST(!parse_args(command::run, {}).launch.mode);
}

BOOST_AUTO_TEST_CASE(format_aliases) {
  struct alias {
    const char* given;
    const char* canonical;
  };
  for (auto [given, canonical] :
       {alias{"xml", "junit"}, alias{"XML", "junit"}, alias{"ndjson", "jsonl"},
        alias{"NdJson", "jsonl"}, alias{"markdown", "md"}, alias{"MARKDOWN", "md"},
        alias{"JSON", "json"}, alias{"Table", "table"}, alias{"html", "html"}, alias{"CSV", "csv"},
        alias{"JUnit", "junit"}}) {
    BOOST_TEST(parse_args(command::run, {"--format", given}).format == canonical, given);
    BOOST_TEST(parse_args(command::report, {"r", "--format", given}).format == canonical, given);
  }
  BOOST_CHECK_THROW(parse_args(command::run, {"--format", "yaml"}), usage_error);
  BOOST_TEST(canonical_format("txt") == "");
}

BOOST_AUTO_TEST_CASE(axis_target_and_brace_lists) {
  auto a = parse_args(command::plan,
                      {"--axis", "target=gpt-*,{a,b}", "--targets", "c", "--axis", "effort=low"});
  BOOST_TEST(a.selection.targets == (strings{"gpt-*", "{a,b}", "c"}));
  BOOST_REQUIRE(a.selection.axes.size() == 1u);
  BOOST_TEST(a.selection.axes[0].first == "effort");
  auto b = parse_args(command::plan, {"--samples", "case-{1,2},x,{a,{b,c}}", "--evals", "{"});
  BOOST_TEST(b.selection.samples == (strings{"case-{1,2}", "x", "{a,{b,c}}"}));
  BOOST_TEST(b.selection.evals == (strings{"{"}));
}

BOOST_AUTO_TEST_CASE(report_takes_a_filter_and_preset_is_recorded) {
  auto a = parse_args(command::report, {"run-1", "echo/b"});
  BOOST_TEST(a.run_id == "run-1");
  BOOST_TEST(a.selection.filter == "echo/b");
  auto r = parse_args(command::run, {"--preset", "smoke", "--results-dir", "x"});
  BOOST_TEST(r.preset == "smoke");
  BOOST_TEST(r.results_dir_given);
  BOOST_TEST(!parse_args(command::run, {}).results_dir_given);
}

BOOST_AUTO_TEST_CASE(unknown_flags_get_a_did_you_mean) {
  BOOST_CHECK_EXCEPTION(parse_args(command::run, {"--studdy", "x"}), usage_error,
                        [](const usage_error& e) {
                          return e.message == "unknown option '--studdy'; did you mean --study?";
                        });
  BOOST_CHECK_EXCEPTION(parse_args(command::run, {"--presets", "x"}), usage_error,
                        [](const usage_error& e) {
                          return e.message == "unknown option '--presets'; did you mean --preset?";
                        });
  BOOST_CHECK_EXCEPTION(
      parse_args(command::run, {"--zzzzzzzz"}), usage_error,
      [](const usage_error& e) { return e.message == "unknown option '--zzzzzzzz'"; });
}

BOOST_AUTO_TEST_SUITE_END()
