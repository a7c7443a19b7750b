// The run folder: create/open rules, saved cases, unreadable files, meta.json.
#include "store/run_folder.hpp"

#include <boost/test/unit_test.hpp>

#include <unistd.h>
#include <fstream>

using namespace mira::store;
namespace fs = std::filesystem;
namespace json = boost::json;

namespace {

struct temp_dir {
  fs::path path = fs::temp_directory_path() / ("mira-runs-" + std::to_string(::getpid()));
  temp_dir() { fs::remove_all(path); }
  ~temp_dir() { fs::remove_all(path); }
};

}  // namespace

BOOST_AUTO_TEST_SUITE(run_folder_tests)

BOOST_AUTO_TEST_CASE(create_open_and_their_errors) {
  temp_dir d;
  auto f = run_folder::create(d.path / "results", "20261130T081502Z-3fa9");
  BOOST_REQUIRE(f);
  BOOST_TEST(fs::is_directory(d.path / "results" / "20261130T081502Z-3fa9" / "cases"));
  auto again = run_folder::create(d.path / "results", "20261130T081502Z-3fa9");
  BOOST_REQUIRE(!again);
  BOOST_TEST((again.error().code == errc::exists));
  auto escape = run_folder::create(d.path / "results", "../escape");
  BOOST_REQUIRE(!escape);
  BOOST_TEST((escape.error().code == errc::invalid_id));
  BOOST_TEST(escape.error().message().find("..") != std::string::npos);
  BOOST_TEST((run_folder::open(d.path / "results", "../escape").error().code == errc::invalid_id));
  BOOST_TEST(run_folder::open(d.path / "results", "20261130T081502Z-3fa9").has_value());
  auto missing = run_folder::open(d.path / "results", "20990101T000000Z-0000");
  BOOST_REQUIRE(!missing);
  BOOST_TEST((missing.error().code == errc::not_found));
  BOOST_TEST(missing.error().message().find("no saved run \"20990101T000000Z-0000\"") == 0u);
}

BOOST_AUTO_TEST_CASE(saved_cases_load_back_by_key_and_torn_files_are_reported) {
  temp_dir d;
  auto f = run_folder::create(d.path, "r1");
  BOOST_REQUIRE(f);
  json::object a{{"key", "greet/hi@sim"}, {"passed", true}};
  json::object b{{"key", "../../x@y"}, {"passed", false}};
  BOOST_TEST(!f->save_case("greet/hi@sim", a));
  BOOST_TEST(!f->save_case("../../x@y", b));
  json::object again{{"key", "greet/hi@sim"}, {"passed", false}};
  BOOST_TEST(!f->save_case("greet/hi@sim", again));  // a re-run replaces the record whole
  fs::create_directories(d.path / "r1" / "cases" / "torn");
  std::ofstream(d.path / "r1" / "cases" / "torn" / "result.json") << "{\"key\": \"half";
  std::vector<std::string> unreadable;
  auto cases = run_folder::open(d.path, "r1")->load_cases(&unreadable);
  BOOST_TEST(cases.size() == 2u);
  BOOST_TEST(cases.at("greet/hi@sim").at("passed").as_bool() == false);
  BOOST_TEST(cases.count("../../x@y") == 1u);
  BOOST_TEST(unreadable.size() == 1u);
  // Nothing was written outside the run folder.
  BOOST_TEST(!fs::exists(d.path / "x@y"));
}

BOOST_AUTO_TEST_CASE(meta_round_trips) {
  temp_dir d;
  auto f = run_folder::create(d.path, "r2");
  BOOST_REQUIRE(f);
  BOOST_TEST(!f->load_meta());
  BOOST_TEST(!f->save_meta(json::object{{"run_id", "r2"}}));
  BOOST_TEST(f->load_meta()->at("run_id").as_string() == "r2");
}

BOOST_AUTO_TEST_SUITE_END()
