// The flag table drives parsing, help, the saved configuration and docs/cli.md: these tests hold
// each of those to it, so a flag cannot be parsed yet undocumented, or documented yet unknown.
#include <boost/test/unit_test.hpp>

#include <boost/json/parse.hpp>

#include <mira/flags.hpp>
#include <mira/help.hpp>

#include <cctype>
#include <fstream>
#include <set>
#include <sstream>

using namespace mira::cli;

namespace {

constexpr command all_commands[] = {command::list,          command::plan,   command::run,
                                    command::score,         command::report, command::export_,
                                    command::store_convert, command::merge,  command::doctor,
                                    command::compare,       command::serve,  command::view};

// `name` stands in `text` as a whole flag (not as the head of a longer one).
bool mentions(const std::string& text, std::string_view name) {
  for (auto at = text.find(name); at != std::string::npos; at = text.find(name, at + 1)) {
    auto next = at + name.size();
    bool whole_end = next == text.size() ||
                     !(std::isalnum(static_cast<unsigned char>(text[next])) || text[next] == '-');
    bool whole_start = at == 0 || text[at - 1] == '`' || text[at - 1] == ' ' ||
                       text[at - 1] == '[' || text[at - 1] == '(';
    if (whole_start && whole_end) return true;
  }
  return false;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(cli_flags)

BOOST_AUTO_TEST_CASE(docs_cli_md_lists_every_flag) {
  std::ifstream in(MIRA_SOURCE_DIR "/docs/cli.md");
  BOOST_REQUIRE(in);
  std::stringstream doc;
  doc << in.rdbuf();
  for (auto& f : flags()) {
    BOOST_TEST(mentions(doc.str(), f.name), "docs/cli.md does not list " << f.name);
    if (!f.alias.empty())
      BOOST_TEST(mentions(doc.str(), f.alias), "docs/cli.md does not list " << f.alias);
  }
}

BOOST_AUTO_TEST_CASE(each_command_has_one_meaning_per_flag_and_its_help_shows_it) {
  for (auto cmd : all_commands) {
    std::set<std::string_view> seen;
    const auto help = command_help(cmd);
    for (auto& f : flags()) {
      if (!(f.commands & bit(cmd))) continue;
      BOOST_TEST(seen.insert(f.name).second, f.name << " twice for one command");
      BOOST_TEST(find_flag(cmd, f.name) == &f);
      if (!f.alias.empty()) BOOST_TEST(find_flag(cmd, f.alias) == &f);
      BOOST_TEST(mentions(help, f.name), f.name << " missing from a command's help");
    }
  }
}

BOOST_AUTO_TEST_CASE(a_flag_of_another_command_is_an_unknown_option) {
  BOOST_CHECK_EXCEPTION(
      parse_args(command::run, {"--json", "--", "study"}), usage_error,
      [](const usage_error& e) { return e.message == "unknown option '--json'"; });
  BOOST_CHECK_EXCEPTION(
      parse_args(command::report, {"r1", "--dry-run"}), usage_error,
      [](const usage_error& e) { return e.message == "unknown option '--dry-run'"; });
  BOOST_CHECK_EXCEPTION(
      parse_args(command::run, {"--timeout"}), usage_error,
      [](const usage_error& e) { return e.message == "--timeout needs a value"; });
}

BOOST_AUTO_TEST_CASE(the_saved_configuration_has_every_recorded_flag_as_parsed) {
  auto a = parse_args(command::run, {"bench",
                                     "--evals",
                                     "e*",
                                     "--samples",
                                     "s1,s2",
                                     "--targets",
                                     "t",
                                     "--tag",
                                     "x",
                                     "--axis",
                                     "effort=low,high",
                                     "--trials",
                                     "3",
                                     "--seed",
                                     "7",
                                     "-j",
                                     "5",
                                     "-P",
                                     "2",
                                     "--provider-concurrency",
                                     "p=2",
                                     "--no-adaptive",
                                     "--max-retries",
                                     "1",
                                     "--max-restarts",
                                     "0",
                                     "--timeout",
                                     "1.5",
                                     "--timeout-is-infra",
                                     "--deadline",
                                     "60",
                                     "--fail-fast",
                                     "--max-cost",
                                     "0.5",
                                     "--max-tokens",
                                     "100",
                                     "--store",
                                     "compact",
                                     "--study-env",
                                     "KEY=secret",
                                     "--",
                                     "study"});
  auto argv = std::vector<std::string>{"--study-env", "KEY=secret"};
  auto c = config_json(argv, a);
  namespace json = boost::json;
  BOOST_TEST(c.at("argv") == (json::array{"--study-env", "KEY"}));
  auto& sel = c.at("selection").as_object();
  BOOST_TEST(sel.at("filter") == "bench");
  BOOST_TEST(sel.at("evals") == json::array{"e*"});
  BOOST_TEST(sel.at("samples") == (json::array{"s1", "s2"}));
  BOOST_TEST(sel.at("targets") == json::array{"t"});
  BOOST_TEST(sel.at("tags") == json::array{"x"});
  // Parsed, not braced: `json::array{json::array{...}}` is a copy under Clang, a nesting under GCC.
  BOOST_TEST(sel.at("axes") == json::parse(R"({"effort": [["low", "high"]]})"));
  BOOST_TEST(sel.at("trials") == 3);
  BOOST_TEST(sel.at("seed") == 7);
  BOOST_TEST(c.at("max_concurrent") == 5u);
  BOOST_TEST(c.at("procs") == 2u);
  BOOST_TEST(c.at("provider_concurrency") == (json::object{{"p", 2u}}));
  BOOST_TEST(c.at("adaptive") == false);
  BOOST_TEST(c.at("max_retries") == 1);
  BOOST_TEST(c.at("max_restarts") == 0);
  BOOST_TEST(c.at("timeout_s") == 1.5);
  BOOST_TEST(c.at("timeout_is_infra") == true);
  BOOST_TEST(c.at("deadline_s") == 60.0);
  BOOST_TEST(c.at("fail_fast") == true);
  BOOST_TEST(c.at("max_cost_usd") == 0.5);
  BOOST_TEST(c.at("max_tokens") == 100);
  BOOST_TEST(c.at("store") == "compact");
  // Every flag with a config key shows up, so a new one cannot be left out by accident.
  for (auto& f : flags()) {
    if (f.config_key.empty()) continue;
    auto dot = f.config_key.find('.');
    auto* v = dot == std::string_view::npos ? c.if_contains(f.config_key)
                                            : c.at(f.config_key.substr(0, dot))
                                                  .as_object()
                                                  .if_contains(f.config_key.substr(dot + 1));
    BOOST_TEST(v != nullptr, f.config_key << " missing from the configuration");
  }
}

// The library names the field of the selection a plan error concerns; the command line prints
// the flag that sets it in its place, found in the flag table.
BOOST_AUTO_TEST_CASE(plan_errors_are_printed_with_the_flag_of_their_field) {
  using mira::plan::field;
  BOOST_TEST(flag_of(field::evals) == "--evals");
  BOOST_TEST(flag_of(field::samples) == "--samples");
  BOOST_TEST(flag_of(field::targets) == "--targets");
  BOOST_TEST(flag_of(field::tags) == "--tag");
  BOOST_TEST(flag_of(field::axes) == "--axis");
  BOOST_TEST(flag_of(field::shard) == "--shard");
  BOOST_TEST(flag_of(field::none).empty());

  mira::plan::selection sel;
  sel.evals = {"nope"};
  auto p = mira::plan::make_plan({}, sel);
  BOOST_REQUIRE(!p);
  BOOST_TEST(p.error().message().find("evals: ") == 0u, p.error().message());
  BOOST_TEST(in_flag_words(p.error().message(), p.error().field).find("--evals: \"nope\"") == 0u);
  BOOST_TEST(in_flag_words("axes effort: \"x\" matches no value", field::axes) ==
             "--axis effort: \"x\" matches no value");
  BOOST_TEST(in_flag_words("shard: CI_NODE_TOTAL is not set", field::shard, "--shard auto") ==
             "--shard auto: CI_NODE_TOTAL is not set");
  // Only the field's name whole is replaced.
  BOOST_TEST(in_flag_words("evalsx: y", field::evals) == "evalsx: y");
  BOOST_TEST(in_flag_words("two cases have the key", field::none) == "two cases have the key");
  BOOST_TEST(in_flag_words("group_by 'x': no case", "group_by", "--group-by") ==
             "--group-by 'x': no case");

  BOOST_CHECK_EXCEPTION(
      parse_args(command::run, {"--shard", "4/4", "--", "study"}), usage_error,
      [](const usage_error& e) { return e.message.find("--shard '4/4': ") == 0; });
}

BOOST_AUTO_TEST_SUITE_END()
