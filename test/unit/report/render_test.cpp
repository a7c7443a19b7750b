// The renderers: the terminal table's columns, what is shown when nothing was scored, the
// number form of the JSON reports, natural order of group-by values.
#include <mira/aggregate/summary.hpp>
#include <mira/report/render.hpp>

#include <boost/json/parse.hpp>
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

using namespace mira;
using schedule::case_state;

namespace {

struct fixture_run {
  plan::plan p;
  schedule::run_report report;

  void add(std::string sample, case_state state, std::string result_json = {},
           protocol::axis_params params = {}) {
    plan::planned_case c;
    c.params.eval = "e";
    c.params.sample = std::move(sample);
    c.params.target = "sim";
    c.params.params = std::move(params);
    c.key = plan::case_key(c.params);
    p.cases.push_back(std::move(c));
    schedule::case_record r;
    r.state = state;
    r.attempts = state == case_state::skipped ? 0 : 1;
    r.result_json = std::move(result_json);
    report.cases.push_back(std::move(r));
  }
  aggregate::summary summary(std::string group_by = {}) const {
    return aggregate::summarize(p, report.cases, nullptr, std::move(group_by));
  }
};

std::string table(const fixture_run& run, const aggregate::summary& s) {
  char* buf = nullptr;
  std::size_t size = 0;
  std::FILE* f = ::open_memstream(&buf, &size);
  report::print_table(f, run.p, run.report, s);
  std::fclose(f);
  std::string out(buf, size);
  std::free(buf);
  return out;
}

std::string result(bool passed, double aggregate) {
  return std::string("{\"passed\":") + (passed ? "true" : "false") +
         ",\"aggregate\":" + std::to_string(aggregate) +
         ",\"scores\":[{\"scorer\":\"match\",\"value\":" + std::to_string(aggregate) +
         ",\"pass\":" + (passed ? "true" : "false") + ",\"reason\":\"why\"}]}";
}

}  // namespace

BOOST_AUTO_TEST_SUITE(report_render)

BOOST_AUTO_TEST_CASE(nothing_scored_is_said_not_shown_as_0_percent) {
  fixture_run run;
  run.add("a", case_state::skipped);
  run.add("b", case_state::skipped);
  auto s = run.summary();
  auto t = table(run, s);
  BOOST_TEST(t.find("0 passed, 0 failed, 0 n/a, 2 skipped") != std::string::npos);
  BOOST_TEST(t.find("pass rate – (no scored cases)") != std::string::npos, t);
  BOOST_TEST(t.find("0%") == std::string::npos, t);
  auto md = report::render("md", run.p, run.report, s);
  BOOST_TEST(md.find("**no scored cases**") != std::string::npos, md);
  BOOST_TEST(md.find("0%") == std::string::npos, md);
  auto html = report::render("html", run.p, run.report, s);
  BOOST_TEST(html.find("pass rate: no scored cases") != std::string::npos);
  // The policy admits the page's one script, by its hash.
  BOOST_TEST(html.find("img-src data:; script-src 'sha256-") != std::string::npos);
  BOOST_TEST(html.find("(95% 0%–0%)") == std::string::npos);
  // The JSON's rates of nothing scored are null, not 0 with [0, 0] (as compare writes them).
  for (auto format : {"json", "jsonl"}) {
    auto text = report::render(format, run.p, run.report, s);
    auto summary = boost::json::parse(text.substr(text.rfind("{\"summary\"")));
    for (auto rate :
         {&summary.at("summary").at("overall"), &summary.at("summary").at("per_eval").at("e"),
          &summary.at("summary").at("per_target").at("sim"),
          &summary.at("summary").at("matrix").at("e").at("sim")}) {
      BOOST_TEST(rate->at("scored").as_int64() == 0, format);
      BOOST_TEST(rate->at("rate").is_null(), format);
      BOOST_TEST(rate->at("ci95").is_null(), format);
    }
  }
  // With one scored case the rate is back.
  run.add("c", case_state::passed, result(true, 1));
  BOOST_TEST(table(run, run.summary()).find("pass rate 100% [") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(the_markdown_says_why_a_case_failed) {
  fixture_run run;
  run.add("p", case_state::passed, result(true, 1));
  run.add("f", case_state::failed, result(false, 0));
  auto md = report::render("md", run.p, run.report, run.summary());
  BOOST_TEST(md.find("| failed | match: why |") != std::string::npos, md);
}

BOOST_AUTO_TEST_CASE(a_cancelled_case_says_cancelled_once_in_junit) {
  fixture_run run;
  run.add("p", case_state::passed, result(true, 1));
  run.add("c", case_state::cancelled);
  run.report.cases.back().message = "cancelled: fail-fast";
  auto junit = report::render("junit", run.p, run.report, run.summary());
  BOOST_TEST(junit.find("<skipped message=\"cancelled: fail-fast\"/>") != std::string::npos, junit);
  BOOST_TEST(junit.find("cancelled: cancelled") == std::string::npos, junit);
}

BOOST_AUTO_TEST_CASE(a_rate_with_a_failure_never_reads_100_percent) {
  fixture_run most;
  for (int i = 0; i < 999; ++i)
    most.add("p" + std::to_string(i), case_state::passed, result(true, 1));
  most.add("f", case_state::failed, result(false, 0));
  auto t = table(most, most.summary());
  BOOST_TEST(t.find("pass rate 99.9% [99%, 99.9%]") != std::string::npos,
             t.substr(t.rfind('\n', t.size() - 2)));
  fixture_run few;
  few.add("p", case_state::passed, result(true, 1));
  for (int i = 0; i < 999; ++i)
    few.add("f" + std::to_string(i), case_state::failed, result(false, 0));
  t = table(few, few.summary());
  BOOST_TEST(t.find("pass rate 0.1% [0.1%, 1%]") != std::string::npos,
             t.substr(t.rfind('\n', t.size() - 2)));
}

BOOST_AUTO_TEST_CASE(table_columns_are_aligned) {
  fixture_run run;
  run.add("short", case_state::passed, result(true, 1));
  run.add("a-much-longer-sample", case_state::failed, result(false, 0.25));
  run.add("mid", case_state::skipped);
  run.report.cases.back().message = "target unavailable";
  auto t = table(run, run.summary());
  std::istringstream in(t);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line) && !line.empty();) lines.push_back(line);
  BOOST_REQUIRE(lines.size() == 3u);
  // In natural key order, as `mira report` lists a saved run.
  BOOST_TEST(lines[0] == "FAIL  e/a-much-longer-sample@sim  0.25  (match: why)");
  BOOST_TEST(lines[1] == "SKIP  e/mid@sim                         (target unavailable)");
  BOOST_TEST(lines[2] == "PASS  e/short@sim                 1.00");
}

// A report that holds the records of its first cases only (a session keeps 10 000) lists those,
// says so, and takes its counts and its HTML page's case count from the summary.
BOOST_AUTO_TEST_CASE(a_report_with_its_first_records_only_lists_them_and_says_so) {
  fixture_run run;
  for (auto name : {"a", "b", "c", "d"}) run.add(name, case_state::passed, result(true, 1));
  auto s = run.summary();
  run.report.cases.resize(2);
  auto text = table(run, s);
  BOOST_TEST(text.find("e/b@sim") != std::string::npos, text);
  BOOST_TEST(text.find("e/c@sim") == std::string::npos, text);
  BOOST_TEST(text.find("... the first 2 of 4 cases are listed") != std::string::npos, text);
  BOOST_TEST(text.find("4 passed") != std::string::npos, text);
  auto html = report::render("html", run.p, run.report, s);
  BOOST_TEST(html.find("4 cases") != std::string::npos);
  BOOST_TEST(html.find("The table shows the first 2 of 4 cases") != std::string::npos);
}

// A failed case's note is its record's message, else its first failing scorer's reason.
BOOST_AUTO_TEST_CASE(the_table_notes_the_first_failing_scorer) {
  fixture_run run;
  run.add("a", case_state::passed, result(true, 0.75));
  run.add("b", case_state::failed, result(false, 0.25));
  run.add("c", case_state::failed, result(false, 0.5));
  run.report.cases.back().message = "the record's own";
  run.add("d", case_state::skipped);
  auto s = run.summary();
  BOOST_TEST(s.totals_by_target.count("sim") == 1u);
  auto from_summary = table(run, s);
  BOOST_TEST(from_summary.find("FAIL  e/b@sim  0.25  (match: why)") != std::string::npos,
             from_summary);
  BOOST_TEST(from_summary.find("FAIL  e/c@sim  0.50  (the record's own)") != std::string::npos,
             from_summary);
}

BOOST_AUTO_TEST_CASE(json_reports_write_numbers_shortest) {
  fixture_run run;
  run.add("a", case_state::passed, result(true, 1));
  run.add("b", case_state::failed, result(false, 0.5));
  auto s = run.summary();
  for (auto format : {"json", "jsonl"}) {
    auto text = report::render(format, run.p, run.report, s);
    BOOST_TEST(text.find("E0") == std::string::npos, format);
    BOOST_TEST(text.find("E-") == std::string::npos, format);
    BOOST_TEST(text.find("\"aggregate\":0.5") != std::string::npos, format);
    BOOST_TEST(text.find("\"rate\":0.5") != std::string::npos, format);
  }
  auto doc = boost::json::parse(report::render("json", run.p, run.report, s));
  BOOST_TEST(doc.at("summary").at("overall").at("passed").as_int64() == 1);
}

BOOST_AUTO_TEST_CASE(group_by_values_are_in_natural_order) {
  fixture_run run;
  for (auto v : {"case-10", "case-2", "case-1"})
    run.add(std::string("s") + v, case_state::passed, result(true, 1), {{"n", v}});
  auto s = run.summary("n");
  BOOST_REQUIRE(s.groups.size() == 3u);
  BOOST_TEST(s.groups[0].first == "case-1");
  BOOST_TEST(s.groups[1].first == "case-2");
  BOOST_TEST(s.groups[2].first == "case-10");
  auto t = table(run, s);
  BOOST_TEST(t.find("case-1  1/1") < t.find("case-2  1/1"));
  BOOST_TEST(t.find("case-2  1/1") < t.find("case-10  1/1"));
}

BOOST_AUTO_TEST_SUITE_END()
