// Run-store building blocks: run ids, key directory names, atomic writes, user-named outputs,
// SHA-256.
#include <mira/store/files.hpp>

#include "common/temp_dir.hpp"
#include "store/digest.hpp"
#include "store/file_helpers.hpp"

#include <boost/json/parse.hpp>
#include <boost/test/unit_test.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

using namespace mira::store;
namespace fs = std::filesystem;

BOOST_AUTO_TEST_SUITE(store_files)

BOOST_AUTO_TEST_CASE(run_ids_sort_by_start_and_are_validated) {
  auto t = std::chrono::system_clock::from_time_t(1796026502);  // 2026-11-30T08:15:02Z
  BOOST_TEST(new_run_id(t, 0x3fa9) == "20261130T081502Z-3fa9");
  BOOST_TEST(new_run_id(t, 0x3fa9) < new_run_id(t + std::chrono::seconds(1), 0x0000));
  BOOST_TEST(!invalid_run_id("20261130T081502Z-3fa9"));
  BOOST_TEST(invalid_run_id("").has_value());
  BOOST_TEST(invalid_run_id("../etc").has_value());
  BOOST_TEST(invalid_run_id("a/b").has_value());
  BOOST_TEST(invalid_run_id("..").has_value());
  BOOST_TEST(invalid_run_id("run id").has_value());
  BOOST_TEST(invalid_run_id(std::string(101, 'a')).has_value());
}

BOOST_AUTO_TEST_CASE(key_names_use_a_safe_alphabet_and_round_trip) {
  BOOST_TEST(encode_key("greet/hi@sim") == "greet_2fhi_40sim");
  BOOST_TEST(encode_key("a_b/é@x-1") == "a_5fb_2f_c3_a9_40x-1");
  BOOST_TEST(encode_key("../../etc/passwd") == "_2e_2e_2f_2e_2e_2fetc_2fpasswd");
  const std::vector<std::string> keys = {"greet/hi@sim[effort=high]#2", "a_b/é@x-1",
                                         std::string("nul\0byte", 8), "../..",
                                         "\x1b[31m\"><script>"};
  for (auto& key : keys) {
    auto name = encode_key(key);
    BOOST_TEST(name.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                      "0123456789_-") == std::string::npos);
    BOOST_TEST(decode_key(name).value() == key);
  }
}

BOOST_AUTO_TEST_CASE(long_keys_end_in_a_hash_and_stay_short) {
  std::string a(10000, '/'), b = a;
  b.back() = '@';
  auto na = encode_key(a), nb = encode_key(b);
  BOOST_TEST(na.size() < 200u);
  BOOST_TEST(nb.size() < 200u);
  BOOST_TEST(na != nb);
  BOOST_TEST(na.find("__") != std::string::npos);
  BOOST_TEST(!decode_key(na).has_value());
  std::string longest(199, 'x');  // the longest name that is not hashed
  BOOST_TEST(encode_key(longest) == longest);
  BOOST_TEST(encode_key(longest + "x").size() < 200u);
  BOOST_TEST(encode_key(longest + "x").find("__") != std::string::npos);
  BOOST_TEST(!decode_key("abc_zz").has_value());
  BOOST_TEST(!decode_key("abc_2").has_value());
}

BOOST_AUTO_TEST_CASE(atomic_writes_replace_whole_files) {
  auto dir = fs::temp_directory_path() / ("mira-store-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  auto file = dir / "result.json";
  BOOST_TEST(!write_file_atomic(file, "first"));
  BOOST_TEST(!write_file_atomic(file, "second, longer"));
  std::ifstream in(file);
  std::stringstream ss;
  ss << in.rdbuf();
  BOOST_TEST(ss.str() == "second, longer");
  std::size_t entries = 0;
  for (auto& e : fs::directory_iterator(dir)) entries += e.is_regular_file();
  BOOST_TEST(entries == 1u);  // no temporary left behind
  auto missing = write_file_atomic(dir / "no-such-dir" / "x.json", "x");
  BOOST_TEST(missing.failed());
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(atomic_files_appear_whole_on_commit_or_not_at_all) {
  auto dir = fs::temp_directory_path() / ("mira-store-af-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  auto file = dir / "report.json";
  auto read = [&] {
    std::ifstream in(file);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  };
  auto entries = [&] {
    std::size_t n = 0;
    for (auto& e : fs::directory_iterator(dir)) n += e.is_regular_file();
    return n;
  };
  BOOST_TEST(!write_file_atomic(file, "old"));
  {
    auto f = atomic_file::create(file);
    BOOST_REQUIRE(f);
    // Two megabytes in small pieces: the buffer is flushed to the temporary on the way.
    std::string piece(1000, 'x');
    for (int i = 0; i < 2000; ++i) BOOST_TEST(!f->write(piece));
    BOOST_TEST(read() == "old");  // not yet
    BOOST_TEST(entries() == 2u);  // the file and its temporary
  }                               // abandoned: the temporary goes, the file stays
  BOOST_TEST(read() == "old");
  BOOST_TEST(entries() == 1u);
  auto f = atomic_file::create(file);
  BOOST_REQUIRE(f);
  BOOST_TEST(!f->write("{\"a\":"));
  BOOST_TEST(!f->write("1}"));
  BOOST_TEST(!f->commit());
  BOOST_TEST(read() == "{\"a\":1}");
  BOOST_TEST(entries() == 1u);
  BOOST_TEST(!atomic_file::create(dir / "no-such-dir" / "x.json").has_value());
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(sha256_known_answers) {
  BOOST_TEST(sha256_hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  BOOST_TEST(sha256_hex("abc") ==
             "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  BOOST_TEST(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq") ==
             "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  BOOST_TEST(sha256_hex(std::string(1000000, 'a')) ==
             "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

// Fed in pieces of every size across the 64-byte blocks, the digest is the one-shot digest.
BOOST_AUTO_TEST_CASE(sha256_in_pieces_is_sha256_of_the_whole) {
  std::string text;
  for (int i = 0; i < 300; ++i) text += static_cast<char>('a' + i % 26);
  for (std::size_t piece : {1u, 7u, 63u, 64u, 65u, 200u}) {
    sha256_stream s;
    for (std::size_t at = 0; at < text.size(); at += piece)
      s.update(std::string_view(text).substr(at, piece));
    BOOST_TEST(s.hex_digest() == sha256_hex(text), "pieces of " << piece);
  }
}

// One member written by the caller, in pieces: the text canonical_json makes of the whole.
BOOST_AUTO_TEST_CASE(canonical_json_to_writes_one_member_as_the_caller_gives_it) {
  auto v = boost::json::parse(R"({"z":1,"samples":[{"id":"s1","b":2}],"a":"x"})").as_object();
  std::string text;
  canonical_json_to(
      v, "samples",
      [](const text_sink& sink) {
        sink("[");
        sink(canonical_json(boost::json::parse(R"({"id":"s1","b":2})")));
        sink("]");
      },
      [&](std::string_view piece) { text += piece; });
  BOOST_TEST(text == canonical_json(v));
}

BOOST_AUTO_TEST_CASE(canonical_json_sorts_keys_and_writes_numbers_shortest) {
  auto v = boost::json::parse(
      R"({"b":1,"a":[true,null,"x\n\u0001"],"c":1.5,"d":1e21,"e":2.0,"f":-0.0,"g":1e-7})");
  BOOST_TEST(canonical_json(v) ==
             R"({"a":[true,null,"x\n\u0001"],"b":1,"c":1.5,"d":1e+21,"e":2,"f":0,"g":1e-7})");
  auto same = boost::json::parse(R"({ "g":1e-7, "f":0, "e":2, "d":1e21, "c":1.5,
                                      "b":1, "a":[true, null, "x\n\u0001"] })");
  BOOST_TEST(canonical_json(same) == canonical_json(v));
}

namespace {

std::string slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Writes `text` to `path` through output_file, in two pieces.
boost::system::error_code write_output(const fs::path& path, std::string_view text) {
  auto f = output_file::open(path);
  if (!f) return f.error();
  f->write(text.substr(0, text.size() / 2));
  f->write(text.substr(text.size() / 2));
  return f->commit();
}

std::size_t entries(const fs::path& dir) {
  return static_cast<std::size_t>(
      std::distance(fs::directory_iterator(dir), fs::directory_iterator{}));
}

}  // namespace

BOOST_AUTO_TEST_CASE(an_output_file_replaces_a_regular_file_or_makes_a_new_one) {
  mira::test::temp_dir dir;
  auto file = dir.path / "report.json";
  BOOST_TEST(!write_output(file, "new"));
  BOOST_TEST(slurp(file) == "new");
  auto before = fs::status(file);
  {
    auto f = output_file::open(file);
    BOOST_REQUIRE(f);
    BOOST_TEST(f->atomic());
    f->write("abandoned");
  }
  BOOST_TEST(slurp(file) == "new");  // no commit: as it was
  BOOST_TEST(!write_output(file, "second"));
  BOOST_TEST(slurp(file) == "second");
  BOOST_TEST(entries(dir.path) == 1u);  // no temporary left
  BOOST_TEST((fs::status(file).type() == before.type()));
  BOOST_TEST(output_file::open(dir.path).error() ==
             boost::system::error_code(EISDIR, boost::system::system_category()));
}

BOOST_AUTO_TEST_CASE(an_output_file_writes_through_a_symlink_and_keeps_the_link) {
  mira::test::temp_dir dir;
  fs::create_directory(dir.path / "elsewhere");
  auto target = dir.path / "elsewhere" / "target.json";
  std::ofstream(target) << "old";
  auto link = dir.path / "link.json";
  fs::create_symlink("elsewhere/target.json", link);  // relative, as `ln -s` makes them
  auto f = output_file::open(link);
  BOOST_REQUIRE(f);
  BOOST_TEST(f->atomic());
  BOOST_TEST(f->target() == dir.path / "elsewhere" / "target.json");
  f->write("through the link");
  BOOST_TEST(!f->commit());
  BOOST_TEST(fs::is_symlink(fs::symlink_status(link)));
  BOOST_TEST(fs::read_symlink(link) == "elsewhere/target.json");
  BOOST_TEST(slurp(target) == "through the link");
  BOOST_TEST(entries(dir.path / "elsewhere") == 1u);
  // A link to a link to a file that does not exist yet: the file is made, both links stay.
  fs::create_symlink(dir.path / "elsewhere" / "new.json", dir.path / "inner");
  fs::create_symlink("inner", dir.path / "outer");
  BOOST_TEST(!write_output(dir.path / "outer", "made"));
  BOOST_TEST(fs::is_symlink(fs::symlink_status(dir.path / "outer")));
  BOOST_TEST(fs::is_symlink(fs::symlink_status(dir.path / "inner")));
  BOOST_TEST(slurp(dir.path / "elsewhere" / "new.json") == "made");
  // A loop is an error, not a hang.
  fs::create_symlink("loop-b", dir.path / "loop-a");
  fs::create_symlink("loop-a", dir.path / "loop-b");
  BOOST_TEST(!output_file::open(dir.path / "loop-a").has_value());
}

BOOST_AUTO_TEST_CASE(an_output_file_writes_a_fifo_in_place) {
  mira::test::temp_dir dir;
  auto fifo = dir.path / "pipe";
  BOOST_REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  std::string text(200000, 'x');  // more than a pipe holds: the reader must be reading
  text += "end";
  std::string got;
  std::thread reader([&] { got = slurp(fifo); });
  auto ec = write_output(fifo, text);
  reader.join();
  BOOST_TEST(!ec);
  BOOST_TEST(got == text);
  BOOST_TEST(fs::is_fifo(fs::symlink_status(fifo)));  // still a FIFO, not a file put there
  BOOST_TEST(entries(dir.path) == 1u);
}

BOOST_AUTO_TEST_CASE(dev_null_stays_a_character_device) {
  auto f = output_file::open("/dev/null");
  BOOST_REQUIRE(f);
  BOOST_TEST(!f->atomic());
  BOOST_TEST(!f->write("discarded"));
  BOOST_TEST(!f->commit());
  BOOST_TEST(fs::is_character_file(fs::symlink_status("/dev/null")));
  // Through a symbolic link to it, too.
  mira::test::temp_dir dir;
  fs::create_symlink("/dev/null", dir.path / "null");
  BOOST_TEST(!write_output(dir.path / "null", "discarded"));
  BOOST_TEST(fs::is_symlink(fs::symlink_status(dir.path / "null")));
  BOOST_TEST(fs::is_character_file(fs::symlink_status("/dev/null")));
}

BOOST_AUTO_TEST_CASE(dash_and_dev_stdout_are_this_process_standard_output) {
  // Standard output pointed at a pipe for the test: "-" and /dev/stdout both reach it.
  int pipe_fds[2];
  BOOST_REQUIRE(::pipe(pipe_fds) == 0);
  std::fflush(stdout);
  int saved = ::dup(STDOUT_FILENO);
  ::dup2(pipe_fds[1], STDOUT_FILENO);
  ::close(pipe_fds[1]);
  auto a = write_output("-", "dash,");
  auto b = write_output("/dev/stdout", "stdout");
  std::fflush(stdout);
  ::dup2(saved, STDOUT_FILENO);
  ::close(saved);
  std::string got(64, '\0');
  auto n = ::read(pipe_fds[0], got.data(), got.size());
  ::close(pipe_fds[0]);
  BOOST_TEST(!a);
  BOOST_TEST(!b);
  got.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
  BOOST_TEST(got == "dash,stdout");
  BOOST_TEST(fs::is_symlink(fs::symlink_status("/dev/stdout")));
}

BOOST_AUTO_TEST_SUITE_END()
