// A study whose names, answers and outputs are built to break every place they end up: file
// paths, the terminal, HTML (checked in headless Chromium), XML, CSV, Markdown and JSON.
#include "integration/process_util.hpp"

#include <boost/json/parse.hpp>
#include <boost/test/unit_test.hpp>

#include <filesystem>
#include <regex>

using namespace mira::test;
namespace fs = std::filesystem;
namespace json = boost::json;

namespace {

const std::string mira_bin = MIRA_CLI;
const std::string hostile_study = std::string(MIRA_PYTHON3) + " " MIRA_PY_STUDY " --hostile";
constexpr std::size_t hostile_cases = 12;

std::string python(const std::string& code, const std::string& file) {
  return run_command(std::string(MIRA_PYTHON3) + " -c \"" + code + "\" " + file).out;
}

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto pos = text.find(what); pos != std::string::npos; pos = text.find(what, pos + 1)) ++n;
  return n;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(hostile_data)

BOOST_AUTO_TEST_CASE(hostile_names_stay_inert_in_paths_terminal_and_every_report_format) {
  temp_dir dir;
  auto results = dir / "results";
  auto run = run_command(mira_bin + " run --results-dir " + results + " --format html --out " +
                         (dir / "report.html") + " -- " + hostile_study + " 2>&1");
  BOOST_TEST(run.code == 1);  // the "fail" sample fails; the rest pass
  BOOST_TEST(run.out.find("11 passed, 1 failed") != std::string::npos);
  // The terminal never receives an escape sequence: no ESC, BEL or 8-bit CSI from the study.
  BOOST_TEST(run.out.find('\x1b') == std::string::npos);
  BOOST_TEST(run.out.find('\x07') == std::string::npos);
  BOOST_TEST(run.out.find("\xc2\x9b") == std::string::npos);
  BOOST_TEST(run.out.find("\\x1b[31mred") != std::string::npos);

  // Paths: the run folder and the report, nothing else; case folders are short and tame.
  std::vector<fs::path> top(fs::directory_iterator(dir.path), fs::directory_iterator{});
  BOOST_TEST(top.size() == 2u);
  std::vector<fs::path> runs(fs::directory_iterator(results), fs::directory_iterator{});
  BOOST_REQUIRE(runs.size() == 1u);
  auto id = runs[0].filename().string();
  std::size_t case_dirs = 0;
  for (auto& e : fs::directory_iterator(runs[0] / "cases")) {
    ++case_dirs;
    auto name = e.path().filename().string();
    BOOST_TEST(name.size() < 200u);
    BOOST_TEST(std::regex_match(name, std::regex("[A-Za-z0-9_-]+")), name);
    BOOST_TEST(fs::exists(e.path() / "result.json"));
  }
  BOOST_TEST(case_dirs == hostile_cases);

  // HTML, as a browser sees it: the page's own script ran, nothing injected exists.
  auto dom = run_command(std::string(MIRA_CHROMIUM) +
                         " --headless --no-sandbox --disable-gpu --dump-dom file://" +
                         (dir / "report.html") + " 2>/dev/null");
  BOOST_REQUIRE(dom.out.find("</html>") != std::string::npos);
  BOOST_TEST(dom.out.find("data-ready=\"1\"") != std::string::npos);
  BOOST_TEST(count(dom.out, "<script") == 1u);
  BOOST_TEST(count(dom.out, "<img") == 0u);
  BOOST_TEST(dom.out.find("pwned</title>") == std::string::npos);
  BOOST_TEST(dom.out.find("<title>Mira eval report</title>") != std::string::npos);
  BOOST_TEST(dom.out.find("href=\"javascript") == std::string::npos);
  BOOST_TEST(dom.out.find("href=\"https://example.com/a?b=1&amp;c=&quot;2&quot;\"") !=
             std::string::npos);
  BOOST_TEST(count(dom.out, "<tr data-status=") == hostile_cases);

  // The other formats, re-rendered from the folder and read by real parsers.
  auto report = [&](const std::string& format) {
    auto path = dir / ("r." + format);
    BOOST_TEST(run_command(mira_bin + " report " + id + " --results-dir " + results + " --format " +
                           format + " --out " + path + " >/dev/null 2>&1")
                   .code == 0);
    return path;
  };
  auto xml = report("junit");
  BOOST_TEST(python("import sys, xml.dom.minidom as m; d = m.parse(sys.argv[1]); "
                    "print(len(d.getElementsByTagName('testcase')))",
                    xml) == "12\n");
  BOOST_TEST(read_file(xml).find("]]>") == std::string::npos);
  auto csv = report("csv");
  BOOST_TEST(python("import csv, sys; r = list(csv.reader(open(sys.argv[1], newline=''))); "
                    "print(len(r), sum(x[2] == 'comma,\\\"quote\\\"' for x in r), "
                    "sum(x[2] == 'line\\nbreak' for x in r))",
                    csv) == "13 1 1\n");
  auto md = read_file(report("md"));
  BOOST_TEST(md.find("<script") == std::string::npos);
  BOOST_TEST(md.find("<img") == std::string::npos);
  auto js = json::parse(read_file(report("json"))).as_object();
  BOOST_TEST(js.at("cases").as_array().size() == hostile_cases);
  bool nul_kept = false;
  for (auto& c : js.at("cases").as_array())
    nul_kept = nul_kept || c.at("sample").as_string() == std::string_view("nul\0byte", 8);
  BOOST_TEST(nul_kept);

  // Every key decodes back: a resume finds every case saved.
  auto resumed = run_command(mira_bin + " run --resume " + id + " --results-dir " + results +
                             " -- " + hostile_study + " 2>&1");
  BOOST_TEST(resumed.out.find("12 of 12 case(s) already saved") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()
