// The compact layout: segment lines round-trip and check themselves, torn tails are found and
// dropped, callbacks come after the bytes are written, layouts convert without losing a record.
#include "common/temp_dir.hpp"

#include <mira/store/layout_convert.hpp>
#include "store/run_folder.hpp"
#include "store/segment_log.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/test/unit_test.hpp>

#include <sys/resource.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>

namespace fs = std::filesystem;
namespace json = boost::json;
using namespace mira::store;
using mira::test::temp_dir;

namespace {

std::string read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write(const fs::path& p, const std::string& bytes) {
  std::ofstream(p, std::ios::binary | std::ios::trunc) << bytes;
}

std::string record_for(int i, const std::string& extra = "") {
  return R"({"key":"k)" + std::to_string(i) + R"(","passed":true,"n":)" + std::to_string(i) +
         extra + "}";
}

// Writes records k0..k(n-1) and waits for all of them; returns how many failed.
int write_records(const fs::path& dir, int n, segment_options o = {}) {
  auto w = segment_writer::open(dir, o);
  BOOST_REQUIRE_MESSAGE(w.has_value(), (w ? std::string() : w.error().message()));
  std::atomic<int> failed{0};
  for (int i = 0; i < n; ++i)
    (*w)->submit("k" + std::to_string(i), record_for(i),
                 [&](boost::system::error_code ec) { failed += ec ? 1 : 0; });
  (*w)->drain();
  return failed;
}

bool mentions(const std::vector<std::string>& problems, const std::string& a,
              const std::string& b) {
  for (auto& p : problems)
    if (p.find(a) != std::string::npos && p.find(b) != std::string::npos) return true;
  return false;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(segment_log_tests)

BOOST_AUTO_TEST_CASE(crc32c_matches_the_standard_check_value) {
  BOOST_TEST(crc32c("123456789") == 0xE3069283u);
  BOOST_TEST(crc32c("") == 0u);
  // Longer than one eight-byte step, at an odd length: the same as byte by byte would give.
  BOOST_TEST(crc32c(std::string(32, '\0')) == 0x8A9136AAu);
}

BOOST_AUTO_TEST_CASE(crc32c_agrees_with_a_bit_at_a_time_at_every_length_and_offset) {
  // Whichever way it is computed (the processor's instruction, the tables): every tail length
  // and alignment of eight-byte steps.
  auto bitwise = [](std::string_view s) {
    std::uint32_t c = 0xffffffffu;
    for (unsigned char b : s) {
      c ^= b;
      for (int k = 0; k < 8; ++k) c = (c >> 1) ^ ((c & 1) ? 0x82F63B78u : 0u);
    }
    return c ^ 0xffffffffu;
  };
  std::string text;
  for (int i = 0; i < 80; ++i) text += static_cast<char>((i * 37 + 11) & 0xff);
  for (std::size_t from = 0; from < 8; ++from)
    for (std::size_t n = 0; from + n <= text.size(); ++n) {
      auto part = std::string_view(text).substr(from, n);
      BOOST_TEST(crc32c(part) == bitwise(part), "offset " << from << " length " << n);
    }
}

BOOST_AUTO_TEST_CASE(records_round_trip_as_ndjson_lines) {
  temp_dir d;
  auto dir = d.path / "segments";
  const std::vector<std::string> keys = {"greet/hi@sim", "quote\"back\\slash", "line\nbreak",
                                         "ünïcode/☃"};
  {
    auto w = segment_writer::open(dir);
    BOOST_REQUIRE(w);
    BOOST_TEST((*w)->repairs().empty());
    std::atomic<int> ok{0};
    for (std::size_t i = 0; i < keys.size(); ++i)
      (*w)->submit(keys[i], record_for(static_cast<int>(i), R"(,"nested":{"a":[1,2,{"b":null}]})"),
                   [&](boost::system::error_code ec) { ok += ec ? 0 : 1; });
    (*w)->drain();
    BOOST_TEST(ok == 4);
  }
  BOOST_TEST(list_segments(dir) == std::vector<fs::path>{dir / "000001.ndjson"});
  auto scan = read_segments(dir);
  BOOST_TEST(scan.problems.empty());
  BOOST_REQUIRE(scan.records.size() == keys.size());
  for (std::size_t i = 0; i < keys.size(); ++i) {
    BOOST_TEST(scan.records[i].key == keys[i]);
    BOOST_TEST(scan.records[i].json ==
               record_for(static_cast<int>(i), R"(,"nested":{"a":[1,2,{"b":null}]})"));
  }
  // Every line is a JSON object of its own, its checksum first.
  std::istringstream lines(read(dir / "000001.ndjson"));
  std::string line;
  std::size_t n = 0;
  while (std::getline(lines, line)) {
    auto v = json::parse(line).as_object();
    BOOST_TEST(line.rfind(R"({"crc32c":")", 0) == 0u);
    BOOST_TEST(v.at("key").as_string() == keys[n]);
    BOOST_TEST(v.at("record").is_object());
    ++n;
  }
  BOOST_TEST(n == keys.size());
}

BOOST_AUTO_TEST_CASE(records_that_are_not_one_object_on_one_line_are_refused) {
  temp_dir d;
  auto w = segment_writer::open(d.path);
  BOOST_REQUIRE(w);
  std::vector<boost::system::error_code> got(6);
  (*w)->submit("a", "{\"x\":1}", [&](auto ec) { got[0] = ec; });
  (*w)->submit("b", "{\"x\":\n1}", [&](auto ec) { got[1] = ec; });
  (*w)->submit("c", "[1]", [&](auto ec) { got[2] = ec; });
  (*w)->submit("d", "{\"x\":", [&](auto ec) { got[3] = ec; });
  (*w)->submit("bad utf-8 \xff", "{}", [&](auto ec) { got[4] = ec; });
  (*w)->submit("f", "{\"y\":2}", [&](auto ec) { got[5] = ec; });
  (*w)->drain();
  const auto invalid = make_error_code(boost::system::errc::invalid_argument);
  BOOST_TEST(!got[0]);
  for (int i = 1; i < 5; ++i) BOOST_TEST(got[i] == invalid, i);
  BOOST_TEST(!got[5]);
  auto scan = read_segments(d.path);
  BOOST_REQUIRE(scan.records.size() == 2u);
  BOOST_TEST(scan.records[1].key == "f");
  BOOST_TEST(scan.problems.empty());
}

BOOST_AUTO_TEST_CASE(segments_rotate_beyond_their_size_and_reopen_on_the_last) {
  temp_dir d;
  segment_options small;
  small.segment_bytes = 1000;
  small.max_queued = 7;  // several batches, some crossing a boundary
  BOOST_TEST(write_records(d.path, 60, small) == 0);
  auto files = list_segments(d.path);
  BOOST_TEST(files.size() > 3u);
  for (auto& f : files) BOOST_TEST(fs::file_size(f) <= 1000u, f);
  BOOST_TEST(files.front().filename() == "000001.ndjson");
  BOOST_TEST(write_records(d.path, 5, small) == 0);  // k0..k4 again, after the others
  auto scan = read_segments(d.path);
  BOOST_TEST(scan.problems.empty());
  BOOST_REQUIRE(scan.records.size() == 65u);
  for (int i = 0; i < 60; ++i) BOOST_TEST(scan.records[i].key == "k" + std::to_string(i));
  BOOST_TEST(scan.records[60].key == "k0");
  BOOST_TEST(list_segments(d.path).front() == files.front());
}

BOOST_AUTO_TEST_CASE(a_later_record_for_a_key_comes_later) {
  temp_dir d;
  {
    auto w = segment_writer::open(d.path);
    BOOST_REQUIRE(w);
    (*w)->submit("a", R"({"v":1})", {});
    (*w)->submit("b", R"({"v":1})", {});
    (*w)->submit("a", R"({"v":2})", {});
  }  // the destructor writes what is queued
  auto scan = read_segments(d.path);
  BOOST_REQUIRE(scan.records.size() == 3u);
  BOOST_TEST(scan.records[0].json == R"({"v":1})");
  BOOST_TEST(scan.records[2].key == "a");
  BOOST_TEST(scan.records[2].json == R"({"v":2})");
}

BOOST_AUTO_TEST_CASE(torn_tails_are_reported_by_the_reader_and_cut_by_the_writer) {
  struct damage {
    const char* name;
    void (*apply)(const fs::path& file);
    std::size_t records_left;
  };
  const damage cases[] = {
      {"a cut last line", [](const fs::path& f) { fs::resize_file(f, fs::file_size(f) - 5); }, 9},
      {"a last line cut before its newline",
       [](const fs::path& f) { fs::resize_file(f, fs::file_size(f) - 1); }, 9},
      {"garbage appended",
       [](const fs::path& f) {
         std::ofstream(f, std::ios::binary | std::ios::app) << "garbage\nmore, no newline";
       },
       10},
      {"zeros appended (a power loss on some filesystems)",
       [](const fs::path& f) { fs::resize_file(f, fs::file_size(f) + 4096); }, 10},
      {"a bad checksum on the last line",
       [](const fs::path& f) {
         auto bytes = read(f);
         bytes[bytes.size() - 4] ^= 1;  // inside the last record
         write(f, bytes);
       },
       9},
  };
  for (auto& c : cases) {
    BOOST_TEST_CONTEXT(c.name) {
      temp_dir d;
      BOOST_TEST(write_records(d.path, 10) == 0);
      auto file = d.path / "000001.ndjson";
      c.apply(file);
      auto damaged = read(file);
      auto scan = read_segments(d.path);
      BOOST_TEST(scan.records.size() == c.records_left);
      BOOST_TEST(mentions(scan.problems, "torn tail dropped in", file.string()));
      BOOST_TEST(scan.damaged_lines == 0u);
      BOOST_TEST(read(file) == damaged);  // the reader changes nothing
      {
        auto w = segment_writer::open(d.path);
        BOOST_REQUIRE(w);
        BOOST_TEST(mentions((*w)->repairs(), "torn tail dropped in", "truncated"));
        (*w)->submit("new", R"({"fresh":true})", {});
      }
      auto after = read_segments(d.path);
      BOOST_TEST(after.problems.empty());
      BOOST_REQUIRE(after.records.size() == c.records_left + 1);
      BOOST_TEST(after.records.back().key == "new");
    }
  }
}

BOOST_AUTO_TEST_CASE(a_bad_line_mid_file_is_skipped_and_reported_not_cut) {
  temp_dir d;
  BOOST_TEST(write_records(d.path, 10) == 0);
  auto file = d.path / "000001.ndjson";
  auto bytes = read(file);
  // The third line's "n":2 becomes "n":3: still JSON, no longer its checksum.
  auto third = bytes.find(R"("n":2})");
  BOOST_REQUIRE(third != std::string::npos);
  bytes[third + 4] = '3';
  write(file, bytes);
  auto scan = read_segments(d.path);
  BOOST_TEST(scan.records.size() == 9u);
  BOOST_TEST(scan.damaged_lines == 1u);
  BOOST_TEST(mentions(scan.problems, "checksum mismatch at " + file.string() + ":3", "skipped"));
  {
    auto w = segment_writer::open(d.path);
    BOOST_REQUIRE(w);
    BOOST_TEST((*w)->repairs().empty());
    (*w)->submit("new", "{}", {});
  }
  BOOST_TEST(read(file).substr(0, bytes.size()) == bytes);  // nothing before the end was cut
  auto after = read_segments(d.path);
  BOOST_TEST(after.records.size() == 10u);
  BOOST_TEST(after.damaged_lines == 1u);
}

BOOST_AUTO_TEST_CASE(callbacks_run_after_the_record_is_written_and_before_drain_returns) {
  temp_dir d;
  auto w = segment_writer::open(d.path);
  BOOST_REQUIRE(w);
  std::mutex m;
  std::vector<std::string> seen_missing;
  std::atomic<int> done{0}, failed{0};
  for (int i = 0; i < 20; ++i) {
    auto key = "k" + std::to_string(i);
    // Boost.Test is not thread-safe: the callbacks (on the writer's thread) only record.
    (*w)->submit(key, record_for(i), [&, key](boost::system::error_code ec) {
      failed += ec ? 1 : 0;
      bool found = false;
      for (auto& r : read_segments(d.path).records) found = found || r.key == key;
      std::lock_guard lock(m);
      if (!found) seen_missing.push_back(key);
      ++done;
    });
  }
  (*w)->drain();
  BOOST_TEST(done == 20);
  BOOST_TEST(failed == 0);
  BOOST_TEST(seen_missing.empty());
}

BOOST_AUTO_TEST_CASE(open_fails_naming_the_directory_and_one_writer_holds_it) {
  temp_dir d;
  write(d.path / "file", "x");
  auto bad = segment_writer::open(d.path / "file" / "segments");
  BOOST_REQUIRE(!bad);
  BOOST_TEST((bad.error().code == errc::io));
  BOOST_TEST(bad.error().message().find((d.path / "file" / "segments").string()) !=
             std::string::npos);
  auto first = segment_writer::open(d.path / "segments");
  BOOST_REQUIRE(first);
  auto second = segment_writer::open(d.path / "segments");
  BOOST_REQUIRE(!second);
  BOOST_TEST((second.error().code == errc::in_use));
  BOOST_TEST(second.error().message().find("in use") != std::string::npos);
  first->reset();
  BOOST_TEST(segment_writer::open(d.path / "segments").has_value());
}

// A write the filesystem refuses (here: beyond RLIMIT_FSIZE) fails its records, is cut back out
// of the segment, and fails every later record too; a new writer carries on.
BOOST_AUTO_TEST_CASE(a_write_error_reaches_every_callback_and_leaves_no_partial_line) {
  temp_dir d;
  BOOST_TEST(write_records(d.path, 5) == 0);
  auto size = fs::file_size(d.path / "000001.ndjson");
  auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  rlimit old{};
  ::getrlimit(RLIMIT_FSIZE, &old);
  rlimit limited = old;
  limited.rlim_cur = size + 10;  // less than any line
  std::vector<boost::system::error_code> got(12);
  {
    auto w = segment_writer::open(d.path);
    BOOST_REQUIRE(w);
    BOOST_REQUIRE(::setrlimit(RLIMIT_FSIZE, &limited) == 0);
    for (int i = 0; i < 10; ++i)
      (*w)->submit("x" + std::to_string(i), record_for(i), [&, i](auto ec) { got[i] = ec; });
    (*w)->drain();
    ::setrlimit(RLIMIT_FSIZE, &old);
    (*w)->submit("after", "{}", [&](auto ec) { got[10] = ec; });
    (*w)->drain();
  }
  std::signal(SIGXFSZ, old_handler);
  for (int i = 0; i < 11; ++i) BOOST_TEST(got[i].value() == EFBIG, i);
  BOOST_TEST(fs::file_size(d.path / "000001.ndjson") == size);
  auto scan = read_segments(d.path);
  BOOST_TEST(scan.problems.empty());
  BOOST_TEST(scan.records.size() == 5u);
  BOOST_TEST(write_records(d.path, 1) == 0);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(layout_convert_tests)

namespace {

std::map<std::string, json::object> saved_run(const fs::path& results, int n) {
  auto f = run_folder::create(results, "r1");
  BOOST_REQUIRE(f);
  std::map<std::string, json::object> out;
  for (int i = 0; i < n; ++i) {
    auto key = "e/s" + std::to_string(i) + (i % 3 ? "@sim" : "@other target");
    json::object record{{"key", key}, {"status", "passed"}, {"n", i}};
    BOOST_REQUIRE(!f->save_case(key, record));
    out.emplace(key, record);
  }
  return out;
}

std::map<std::string, json::object> compact_records(const fs::path& run) {
  std::map<std::string, json::object> out;
  for (auto& r : read_segments(run / "segments").records)
    out[r.key] = json::parse(r.json).as_object();
  return out;
}

}  // namespace

BOOST_AUTO_TEST_CASE(both_ways_with_every_record_and_the_old_files_gone) {
  temp_dir d;
  auto records = saved_run(d.path, 30);
  auto run = d.path / "r1";
  // What a conversion killed while appending leaves: a torn tail, cut and noted.
  fs::create_directories(run / "segments");
  write(run / "segments" / "000001.ndjson", R"({"crc32c":"0)");
  auto to_compact = convert_run_layout(run, layout::compact);
  BOOST_REQUIRE_MESSAGE(to_compact.has_value(),
                        (to_compact ? std::string() : to_compact.error().message()));
  BOOST_TEST(to_compact->records == 30u);
  BOOST_TEST(to_compact->removed_files == 30u);
  BOOST_TEST(to_compact->notes.size() == 1u);
  BOOST_TEST(mentions(to_compact->notes, "torn tail dropped in", "truncated"));
  BOOST_TEST(!fs::exists(run / "cases"));
  BOOST_TEST(compact_records(run) == records);
  auto again = convert_run_layout(run, layout::compact);  // no per-case layout is left
  BOOST_TEST((!again && again.error().code == errc::not_found));

  // A newer record for one key, appended later, is the one converted.
  {
    auto w = segment_writer::open(run / "segments");
    BOOST_REQUIRE(w);
    records["e/s1@sim"]["status"] = "failed";
    (*w)->submit("e/s1@sim", json::serialize(records["e/s1@sim"]), {});
  }
  // A torn tail (a write no callback confirmed) is dropped and noted, not refused.
  std::ofstream(run / "segments" / "000001.ndjson", std::ios::app) << R"({"crc32c":"0)";
  auto back = convert_run_layout(run, layout::per_case);
  BOOST_REQUIRE_MESSAGE(back.has_value(), (back ? std::string() : back.error().message()));
  BOOST_TEST(mentions(back->notes, "torn tail dropped in", "000001.ndjson"));
  BOOST_TEST(back->records == 30u);
  BOOST_TEST(back->removed_files == 1u);  // one segment file
  BOOST_TEST(!fs::exists(run / "segments"));
  auto folder = run_folder::open(d.path, "r1");
  BOOST_REQUIRE(folder);
  std::vector<std::string> unreadable;
  BOOST_TEST(folder->load_cases(&unreadable) == records);
  BOOST_TEST(unreadable.empty());
}

BOOST_AUTO_TEST_CASE(a_failing_conversion_leaves_the_old_layout_intact) {
  temp_dir d;
  auto records = saved_run(d.path, 12);
  auto run = d.path / "r1";
  auto folder = run_folder::open(d.path, "r1");
  BOOST_REQUIRE(folder);

  // The segments cannot be created: a file is in the way.
  write(run / "segments", "in the way");
  auto failed = convert_run_layout(run, layout::compact);
  BOOST_REQUIRE(!failed);
  BOOST_TEST((failed.error().code == errc::io));
  BOOST_TEST(failed.error().message().find("per-case layout is intact") != std::string::npos);
  BOOST_TEST(folder->load_cases() == records);
  fs::remove(run / "segments");

  // An unreadable case file: nothing is converted, nothing removed.
  fs::create_directories(run / "cases" / "odd");
  write(run / "cases" / "odd" / "result.json", "{\"key\": \"half");
  auto refused = convert_run_layout(run, layout::compact);
  BOOST_REQUIRE(!refused);
  BOOST_TEST((refused.error().code == errc::corrupt));
  BOOST_TEST(refused.error().message().find("unreadable") != std::string::npos);
  BOOST_TEST(!fs::exists(run / "segments"));
  fs::remove_all(run / "cases" / "odd");

  BOOST_REQUIRE(convert_run_layout(run, layout::compact));
  {
    // A writer holds the segments: refused as in use.
    auto w = segment_writer::open(run / "segments");
    BOOST_REQUIRE(w);
    auto busy = convert_run_layout(run, layout::per_case);
    BOOST_TEST((!busy && busy.error().code == errc::in_use));
  }
  auto segments = list_segments(run / "segments");
  BOOST_REQUIRE(segments.size() == 1u);
  auto bytes = read(segments.front());

  // The per-case files cannot be written: a file named "cases" is in the way.
  write(run / "cases", "in the way");
  auto back = convert_run_layout(run, layout::per_case);
  BOOST_REQUIRE(!back);
  BOOST_TEST((back.error().code == errc::io));
  BOOST_TEST(back.error().message().find("compact layout is intact") != std::string::npos);
  BOOST_TEST(read(segments.front()) == bytes);
  BOOST_TEST(compact_records(run) == records);
  fs::remove(run / "cases");

  // A damaged line in the segments: refused, nothing written or removed.
  auto damaged = bytes;
  damaged[damaged.find("\"n\":") + 4] ^= 1;
  write(segments.front(), damaged + bytes);  // the damage is not at the tail
  auto refused_back = convert_run_layout(run, layout::per_case);
  BOOST_REQUIRE(!refused_back);
  BOOST_TEST((refused_back.error().code == errc::corrupt));
  BOOST_TEST(refused_back.error().message().find("damaged") != std::string::npos);
  BOOST_TEST(read(segments.front()) == damaged + bytes);
  BOOST_TEST(!fs::exists(run / "cases"));
}

BOOST_AUTO_TEST_SUITE_END()
