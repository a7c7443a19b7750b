// The response cache: canonical keys, entries written whole by rename, every unreadable entry a
// miss, the modes, and writers and readers at once.
#include "common/scoped_env.hpp"
#include "common/temp_dir.hpp"

#include <mira/models/cache.hpp>

#include <boost/json/parse.hpp>
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <fstream>
#include <set>
#include <thread>

namespace json = boost::json;
namespace models = mira::models;
using mira::test::scoped_env;
using mira::test::temp_dir;

BOOST_AUTO_TEST_SUITE(models_cache)

BOOST_AUTO_TEST_CASE(canonical_json_sorts_members_at_every_depth) {
  auto a = json::parse(R"({"b":1,"a":{"y":[1,{"d":2,"c":3}],"x":"s"}})");
  auto b = json::parse(R"({"a":{"x":"s","y":[1,{"c":3,"d":2}]},"b":1})");
  BOOST_TEST(models::canonical_json(a) == models::canonical_json(b));
  BOOST_TEST(models::canonical_json(a) == R"({"a":{"x":"s","y":[1,{"c":3,"d":2}]},"b":1})");
  BOOST_TEST(models::sha256_hex("abc") ==
             "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

BOOST_AUTO_TEST_CASE(an_entry_is_found_under_its_key_only) {
  temp_dir dir;
  models::response_cache c(dir.path);
  BOOST_TEST(!c.find("k1"));
  BOOST_TEST(c.store("k1", "v1"));
  BOOST_TEST(c.find("k1").value_or("") == "v1");
  BOOST_TEST(!c.find("k2"));
  auto path = c.entry_path("k1");
  BOOST_TEST(path.parent_path().filename().string() == path.stem().string().substr(0, 2));
  BOOST_TEST(path.stem().string() == models::sha256_hex("k1"));
  // No temporary file is left beside the entry.
  std::size_t files = 0;
  for (auto& f : std::filesystem::recursive_directory_iterator(dir.path))
    files += f.is_regular_file();
  BOOST_TEST(files == 1U);
}

BOOST_AUTO_TEST_CASE(an_entry_that_cannot_be_read_whole_is_a_miss) {
  temp_dir dir;
  models::response_cache c(dir.path);
  BOOST_REQUIRE(c.store("k", "value"));
  auto path = c.entry_path("k");
  for (std::string torn : {std::string(""), std::string(R"({"key":"k","val)"),
                           std::string(R"({"key":"other","value":"x"})"),
                           std::string(R"({"key":"k","value":3})"), std::string("\x01\x02")}) {
    std::ofstream(path, std::ios::trunc) << torn;
    BOOST_TEST(!c.find("k"), torn);
  }
  std::filesystem::remove(path);
  std::filesystem::create_directory(path);  // a folder where the entry should be
  BOOST_TEST(!c.find("k"));
  BOOST_TEST(!c.store("k", "v"));  // not an error either: the entry is left out
}

BOOST_AUTO_TEST_CASE(the_modes) {
  temp_dir dir;
  models::response_cache writer(dir.path, models::cache_mode::read_write);
  models::response_cache reader(dir.path, models::cache_mode::read_only);
  models::response_cache off(dir.path, models::cache_mode::off);
  BOOST_TEST(!reader.store("k", "v"));
  BOOST_TEST(!off.store("k", "v"));
  BOOST_TEST(!std::filesystem::exists(writer.entry_path("k")));
  BOOST_TEST(writer.store("k", "v"));
  BOOST_TEST(reader.find("k").value_or("") == "v");
  BOOST_TEST(!off.find("k"));
  BOOST_TEST((models::response_cache().mode() == models::cache_mode::off));
}

BOOST_AUTO_TEST_CASE(the_environment_names_the_folder_and_the_mode) {
  temp_dir dir;
  scoped_env folder("MIRA_CACHE_DIR", dir.path.c_str());
  {
    scoped_env mode("MIRA_CACHE_MODE", nullptr);
    auto c = models::response_cache::from_environment();
    BOOST_TEST((c.mode() == models::cache_mode::read_write));
    BOOST_TEST(c.folder() == dir.path);
  }
  {
    scoped_env mode("MIRA_CACHE_MODE", "read-only");
    BOOST_TEST(
        (models::response_cache::from_environment().mode() == models::cache_mode::read_only));
  }
  {
    scoped_env mode("MIRA_CACHE_MODE", "off");
    BOOST_TEST((models::response_cache::from_environment().mode() == models::cache_mode::off));
  }
  {
    scoped_env mode("MIRA_CACHE_MODE", "sometimes");
    BOOST_CHECK_EXCEPTION(models::response_cache::from_environment(), std::invalid_argument,
                          [](const auto& e) {
                            return std::string(e.what()) ==
                                   "MIRA_CACHE_MODE is \"sometimes\": it is read-write, read-only "
                                   "or off";
                          });
  }
  scoped_env none("MIRA_CACHE_DIR", nullptr);
  BOOST_TEST((models::response_cache::from_environment().mode() == models::cache_mode::off));
}

// Writers of one entry and readers of it at once: a reader sees nothing or one whole value.
BOOST_AUTO_TEST_CASE(writers_and_readers_at_once_see_whole_entries) {
  temp_dir dir;
  models::response_cache c(dir.path);
  const std::string big(256 * 1024, 'x');
  std::vector<std::string> values;
  for (char v = 'a'; v < 'e'; ++v) values.push_back(std::string(1, v) + big);
  std::atomic<int> torn{0};
  {
    std::vector<std::jthread> threads;
    for (const auto& v : values)
      threads.emplace_back([&c, &v] {
        for (int i = 0; i < 20; ++i) c.store("one key", v);
      });
    for (int r = 0; r < 4; ++r)
      threads.emplace_back([&] {
        for (int i = 0; i < 50; ++i)
          if (auto got = c.find("one key"))
            if (std::find(values.begin(), values.end(), *got) == values.end()) ++torn;
      });
  }
  BOOST_TEST(torn == 0);
  BOOST_TEST(c.find("one key").has_value());
  std::size_t files = 0;
  for (auto& f : std::filesystem::recursive_directory_iterator(dir.path))
    files += f.is_regular_file();
  BOOST_TEST(files == 1U);  // every temporary renamed into place
}

BOOST_AUTO_TEST_SUITE_END()
