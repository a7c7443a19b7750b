// Batched atomic writes: every file lands whole, every callback reports, failures are per file.
#include "common/temp_dir.hpp"

#include "store/batch_writer.hpp"

#include <boost/test/unit_test.hpp>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace fs = std::filesystem;
using mira::store::batch_writer;
using mira::test::temp_dir;

namespace {

std::string read(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

BOOST_AUTO_TEST_SUITE(batch_writer_tests)

BOOST_AUTO_TEST_CASE(files_land_whole_and_each_is_reported) {
  temp_dir dir;
  std::atomic<int> ok{0}, failed{0};
  {
    batch_writer w(dir.path);
    for (int i = 0; i < 200; ++i)
      w.submit(dir.path / ("case-" + std::to_string(i)) / "result.json",
               "{\"n\":" + std::to_string(i) + "}\n",
               [&](boost::system::error_code ec) { ++(ec ? failed : ok); });
    // A path whose parent is a file fails alone.
    std::ofstream(dir.path / "blocker") << "x";
    w.submit(dir.path / "blocker" / "result.json", "{}",
             [&](boost::system::error_code ec) { ++(ec ? failed : ok); });
    w.drain();
    BOOST_TEST(ok == 200);
    BOOST_TEST(failed == 1);
    // Replacing a file is atomic too.
    w.submit(dir.path / "case-7" / "result.json", "{\"n\":\"seven\"}\n", {});
  }  // the destructor writes what is queued
  BOOST_TEST(read(dir.path / "case-3" / "result.json") == "{\"n\":3}\n");
  BOOST_TEST(read(dir.path / "case-7" / "result.json") == "{\"n\":\"seven\"}\n");
  for (auto& e : fs::recursive_directory_iterator(dir.path))
    BOOST_TEST(e.path().filename().string().find(".tmp-") == std::string::npos, e.path());
}

BOOST_AUTO_TEST_CASE(a_full_queue_makes_submit_wait_not_drop) {
  temp_dir dir;
  std::atomic<int> ok{0};
  {
    batch_writer w(dir.path, 3);
    for (int i = 0; i < 50; ++i)
      w.submit(dir.path / (std::to_string(i) + ".json"), "{}", [&](boost::system::error_code ec) {
        if (!ec) ++ok;
      });
  }
  BOOST_TEST(ok == 50);
  BOOST_TEST(std::distance(fs::directory_iterator(dir.path), fs::directory_iterator{}) == 50);
}

BOOST_AUTO_TEST_SUITE_END()
