// GitHub Actions annotations of a run: one per failed or errored case with the Markdown report's
// "why", the first 10 only and a count of the rest, every value escaped.
#include <mira/aggregate/summary.hpp>
#include <mira/report/github.hpp>

#include <boost/test/unit_test.hpp>

#include <sstream>
#include <string>
#include <vector>

using namespace mira;
using schedule::case_state;

namespace {

struct fixture_run {
  plan::plan p;
  schedule::run_report report;

  void add(std::string sample, case_state state, std::string message = {},
           std::string result_json = {}) {
    plan::planned_case c;
    c.params.eval = "e";
    c.params.sample = std::move(sample);
    c.params.target = "sim";
    c.key = plan::case_key(c.params);
    p.cases.push_back(std::move(c));
    schedule::case_record r;
    r.state = state;
    r.attempts = 1;
    r.message = std::move(message);
    r.result_json = std::move(result_json);
    report.cases.push_back(std::move(r));
  }
};

std::vector<std::string> annotations(const fixture_run& run) {
  std::string text;
  report::github_annotations(report::memory_cases(run.p, run.report),
                             [&](std::string_view piece) { text.append(piece); });
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  BOOST_TEST((text.empty() || text.back() == '\n'));
  return lines;
}

const std::string failed_score =
    R"({"passed":false,"aggregate":0,"scores":[{"scorer":"match","value":0,"pass":false,"reason":"said 4, not 5"}]})";

}  // namespace

BOOST_AUTO_TEST_SUITE(report_github)

BOOST_AUTO_TEST_CASE(each_failed_or_errored_case_is_an_error_with_the_markdown_why) {
  fixture_run run;
  run.add("ok", case_state::passed);
  run.add("f", case_state::failed, {}, failed_score);
  run.add("n", case_state::na, "gave up");
  run.add("x", case_state::error, "the study answered an error");
  run.add("s", case_state::skipped);
  run.add("c", case_state::cancelled, "cancelled: interrupted");
  run.add("bare", case_state::failed);
  auto lines = annotations(run);
  BOOST_REQUIRE_EQUAL(lines.size(), 3u);
  // In natural key order, as every report lists cases.
  BOOST_TEST(lines[0] == "::error title=e/bare@sim failed::failed");  // nothing says why
  BOOST_TEST(lines[1] == "::error title=e/f@sim failed::match: said 4, not 5");
  BOOST_TEST(lines[2] == "::error title=e/x@sim error::the study answered an error");
  // The same words as the Markdown report's failures table.
  BOOST_TEST(report::failure_reason(run.report.cases[1]) == "match: said 4, not 5");
}

BOOST_AUTO_TEST_CASE(ten_are_annotated_and_the_rest_counted_in_a_warning) {
  fixture_run run;
  for (int i = 0; i < 13; ++i) run.add("s" + std::to_string(i), case_state::failed, "no");
  auto lines = annotations(run);
  BOOST_REQUIRE_EQUAL(lines.size(), 11u);
  BOOST_TEST(lines[9] == "::error title=e/s9@sim failed::no");
  BOOST_TEST(lines[10].rfind("::warning title=mira::3 more failed or errored case(s), not "
                             "annotated: GitHub shows 10 error annotations a step.",
                             0) == 0,
             lines[10]);

  fixture_run ten;
  for (int i = 0; i < 10; ++i) ten.add("s" + std::to_string(i), case_state::error, "no");
  BOOST_TEST(annotations(ten).size() == 10u);  // no count when nothing is left out
}

BOOST_AUTO_TEST_CASE(study_text_cannot_end_a_value_or_start_another_command) {
  fixture_run run;
  run.add("a:b,c%", case_state::failed, "first line\n::warning::forged\r\n100%");
  auto lines = annotations(run);
  BOOST_REQUIRE_EQUAL(lines.size(), 1u);
  BOOST_TEST(lines[0] ==
             "::error title=e/a%3Ab%2Cc%25@sim failed::first line%0A::warning::forged%0D%0A100%25");
}

BOOST_AUTO_TEST_SUITE_END()
