// Symbolic links inside a run folder: the store never reads or writes through one. A writer
// refuses the run naming the link (errc::corrupt, exit 3 in the CLI) and leaves the link's target
// as it was; a reader lists the link as unreadable instead of taking its records.
#include <mira/store/files.hpp>
#include <mira/store/records.hpp>
#include <mira/store/run_reader.hpp>
#include <mira/store/run_store.hpp>
#include "store/batch_writer.hpp"

#include "common/temp_dir.hpp"
#include "store/segment_log.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/test/unit_test.hpp>

#include <fstream>
#include <iterator>

using namespace mira::store;
using mira::schedule::case_state;
using mira::test::temp_dir;
namespace fs = std::filesystem;
namespace json = boost::json;

namespace {

const std::string run_id = "20261130T081502Z-3fa9";

std::string read_bytes(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

void write_bytes(const fs::path& file, const std::string& bytes) {
  std::ofstream(file, std::ios::binary) << bytes;
}

std::string key_of_sample(const std::string& sample) {
  return "echo/" + sample + "@sim";
}

// A run of `layout` with a passed record of each sample, its store closed again.
fs::path saved_run(const fs::path& results, layout l, const std::vector<std::string>& samples) {
  auto w = run_store::create(results, run_id, l);
  BOOST_REQUIRE(w.has_value());
  session_entry session;
  session.planned = samples.size();
  BOOST_TEST(!w->begin_session(session));
  auto writer = w->writer();
  BOOST_REQUIRE(writer.has_value());
  for (auto& sample : samples) {
    mira::plan::planned_case c;
    c.params.eval = "echo";
    c.params.sample = sample;
    c.params.target = "sim";
    c.key = key_of_sample(sample);
    mira::schedule::case_record r;
    r.state = case_state::passed;
    r.attempts = 1;
    (*writer)->submit(c.key, case_line(c, r),
                      [](boost::system::error_code ec) { BOOST_TEST(!ec); });
  }
  (*writer)->drain();
  return w->path();
}

}  // namespace

BOOST_AUTO_TEST_SUITE(store_links)

// A case folder that links elsewhere: the batch writer's file fails, and nothing is written in
// the folder it points to.
BOOST_AUTO_TEST_CASE(a_linked_case_folder_is_never_written_through) {
  temp_dir dir;
  fs::create_directories(dir.path / "run" / "cases");
  fs::create_directories(dir.path / "elsewhere");
  fs::create_directory_symlink(dir.path / "elsewhere", dir.path / "run" / "cases" / "k");
  boost::system::error_code got;
  {
    batch_writer w(dir.path / "run");
    w.submit(dir.path / "run" / "cases" / "k" / "result.json", "{}\n",
             [&](boost::system::error_code ec) { got = ec; });
    w.drain();
  }
  // ENOTDIR: the link is no folder to an O_NOFOLLOW | O_DIRECTORY open.
  BOOST_TEST((got.value() == ELOOP || got.value() == ENOTDIR), got.message());
  BOOST_TEST(fs::is_empty(dir.path / "elsewhere"));
  // A path outside the root is refused too.
  {
    batch_writer w(dir.path / "run");
    w.submit(dir.path / "elsewhere" / "x.json", "{}\n",
             [&](boost::system::error_code ec) { got = ec; });
  }
  BOOST_TEST(got.value() == EINVAL);
  BOOST_TEST(fs::is_empty(dir.path / "elsewhere"));
}

// Each place a run folder keeps a file or a folder, made a link to something outside: opening
// the run as a writer (a resume, a conversion, a report rewrite, doctor --fix) fails naming the
// link, and the target keeps its bytes (a linked .lock was truncated and rewritten before).
BOOST_AUTO_TEST_CASE(a_writer_refuses_a_run_holding_a_link_and_changes_nothing) {
  struct place {
    layout l;
    std::string link;  // inside the run folder
    bool folder;       // the target is a folder
  };
  const place places[] = {
      {layout::compact, ".lock", false},
      {layout::compact, "meta.json", false},
      {layout::compact, "events.ndjson", false},
      {layout::compact, "plan-keys.ndjson", false},
      {layout::compact, "segments/000002.ndjson", false},
      {layout::per_case, "cases/" + encode_key(key_of_sample("s9")), true},
      {layout::per_case, "report.json", false},
  };
  for (auto& p : places) {
    BOOST_TEST_CONTEXT(p.link) {
      temp_dir dir;
      auto run = saved_run(dir.path / "results", p.l, {"s1", "s2"});
      const auto target = dir.path / "outside";
      const std::string torn = "a torn line with no end";
      if (p.folder) {
        fs::create_directory(target);
        write_bytes(target / "result.json", torn);
      } else {
        write_bytes(target, torn);
      }
      std::error_code ec;
      fs::remove(run / p.link, ec);
      fs::create_symlink(target, run / p.link);

      auto opened = run_store::open(dir.path / "results", run_id);
      BOOST_REQUIRE(!opened.has_value());
      BOOST_TEST((opened.error().code == errc::corrupt));
      BOOST_TEST(opened.error().message().find((run / p.link).string() + " is a symbolic link") !=
                     std::string::npos,
                 opened.error().message());
      BOOST_TEST(read_bytes(p.folder ? target / "result.json" : target) == torn);
      if (p.folder) BOOST_TEST(std::distance(fs::directory_iterator(target), {}) == 1);
    }
  }
}

// The segment writer alone (a conversion opens it too) refuses a linked segment, rather than
// cutting its "torn tail" and appending to it.
BOOST_AUTO_TEST_CASE(the_segment_writer_refuses_a_linked_segment) {
  temp_dir dir;
  auto run = saved_run(dir.path / "results", layout::compact, {"s1"});
  write_bytes(dir.path / "outside", "not a segment line");
  fs::create_symlink(dir.path / "outside", run / "segments" / "000002.ndjson");
  auto w = segment_writer::open(run / "segments");
  BOOST_REQUIRE(!w.has_value());
  BOOST_TEST((w.error().code == errc::corrupt));
  BOOST_TEST(w.error().message().find("000002.ndjson is a symbolic link") != std::string::npos,
             w.error().message());
  BOOST_TEST(read_bytes(dir.path / "outside") == "not a segment line");
  // A linked segments folder as well.
  fs::rename(run / "segments", dir.path / "segments");
  fs::create_directory_symlink(dir.path / "segments", run / "segments");
  w = segment_writer::open(run / "segments");
  BOOST_REQUIRE(!w.has_value());
  BOOST_TEST((w.error().code == errc::corrupt));
}

// Readers (report, export, compare, resume's plan) take no record through a link: a linked
// segment, case folder or result.json is listed as unreadable, naming it.
BOOST_AUTO_TEST_CASE(a_reader_lists_a_link_as_unreadable_and_reads_nothing_through_it) {
  temp_dir dir;
  auto compact = saved_run(dir.path / "results", layout::compact, {"s1"});
  // A whole, valid segment elsewhere: its record must still not be taken.
  fs::copy_file(compact / "segments" / "000001.ndjson", dir.path / "good.ndjson");
  fs::rename(compact, dir.path / "other");
  compact = saved_run(dir.path / "results", layout::compact, {"s2"});
  fs::create_symlink(dir.path / "good.ndjson", compact / "segments" / "000002.ndjson");
  auto r = run_reader::open(dir.path / "results", run_id);
  BOOST_REQUIRE(r.has_value());
  BOOST_TEST(r->size() == 1u);
  BOOST_REQUIRE(r->unreadable().size() == 1u);
  BOOST_TEST(r->unreadable()[0].find("000002.ndjson is a symbolic link") != std::string::npos,
             r->unreadable()[0]);

  temp_dir dir2;
  auto per_case = saved_run(dir2.path / "results", layout::per_case, {"s1"});
  const auto name = encode_key(key_of_sample("s1"));
  fs::rename(per_case / "cases" / name, dir2.path / "elsewhere");
  fs::create_directory_symlink(dir2.path / "elsewhere", per_case / "cases" / name);
  r = run_reader::open(dir2.path / "results", run_id);
  BOOST_REQUIRE(r.has_value());
  BOOST_TEST(r->size() == 0u);
  BOOST_REQUIRE(r->unreadable().size() == 1u);
  BOOST_TEST(r->unreadable()[0].find(name + " is a symbolic link") != std::string::npos,
             r->unreadable()[0]);
  // A linked result.json in a real folder.
  fs::remove(per_case / "cases" / name);
  fs::create_directory(per_case / "cases" / name);
  fs::create_symlink(dir2.path / "elsewhere" / "result.json",
                     per_case / "cases" / name / "result.json");
  r = run_reader::open(dir2.path / "results", run_id);
  BOOST_REQUIRE(r.has_value());
  BOOST_TEST(r->size() == 0u);
  BOOST_TEST(r->unreadable().size() == 1u);
  // meta.json through a link is not read either.
  fs::rename(per_case / "meta.json", dir2.path / "meta.json");
  fs::create_symlink(dir2.path / "meta.json", per_case / "meta.json");
  auto meta = load_run_meta(dir2.path / "results", run_id);
  BOOST_REQUIRE(!meta.has_value());
  BOOST_TEST((meta.error().code == errc::corrupt));
}

BOOST_AUTO_TEST_SUITE_END()
