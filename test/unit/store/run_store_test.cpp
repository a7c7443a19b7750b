// The run store's pure parts and its folder rules: meta.json in every format it reads, the
// resume decision per saved state and option, the writer's lock, records in natural order.
#include <mira/aggregate/summary.hpp>
#include <mira/protocol/codec.hpp>
#include <mira/report/render.hpp>
#include <mira/store/records.hpp>
#include <mira/store/run_store.hpp>

#include "common/temp_dir.hpp"
#include "store/digest.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/test/unit_test.hpp>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <fstream>
#include <iterator>

using namespace mira::store;
using mira::schedule::case_state;
namespace fs = std::filesystem;
namespace json = boost::json;

namespace {

mira::plan::planned_case planned(std::string sample) {
  mira::plan::planned_case c;
  c.params.eval = "echo";
  c.params.sample = std::move(sample);
  c.params.target = "sim";
  c.key = mira::plan::case_key(c.params);
  return c;
}

saved_case saved(const std::string& sample, case_state state) {
  mira::schedule::case_record r;
  r.state = state;
  r.attempts = 1;
  auto c = planned(sample);
  return {c.key, json::parse(case_line(c, r)).as_object()};
}

// Saves a passed record of each sample through the store's writer, and waits until they are.
void save_passed(run_store& w, const std::vector<std::string>& samples) {
  auto writer = w.writer();
  BOOST_REQUIRE(writer.has_value());
  for (auto& sample : samples) {
    auto c = saved(sample, case_state::passed);
    (*writer)->submit(c.key, json::serialize(c.record),
                      [](boost::system::error_code ec) { BOOST_TEST(!ec); });
  }
  (*writer)->drain();
}

// A compact run of three saved cases (a, b, c) whose session planned three.
run_store three_saved_cases(const fs::path& results) {
  auto w = run_store::create(results, "20261130T081502Z-3fa9", layout::compact);
  BOOST_REQUIRE(w.has_value());
  session_entry session;
  session.planned = 3;
  BOOST_TEST(!w->begin_session(session));
  save_passed(*w, {"a", "b", "c"});
  return std::move(*w);
}

std::string read_bytes(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

}  // namespace

BOOST_AUTO_TEST_SUITE(run_store_tests)

BOOST_AUTO_TEST_CASE(meta_round_trips_and_keeps_unknown_members) {
  run_meta m;
  m.run_id = "20261130T081502Z-3fa9";
  m.layout = layout::compact;
  m.study = "s";
  m.initialize = json::object{{"study", "s"}, {"study_version", "1"}};
  session_entry s;
  s.started = "2026-11-30T08:15:02Z";
  s.seconds = 1.5;
  s.argv = {"run", "--evals", "a"};
  m.sessions = {s, s};
  m.extra["from_the_future"] = 42;
  auto back = run_meta::from_json(m.to_json());
  BOOST_REQUIRE(back.has_value());
  BOOST_TEST(to_string(back->layout) == "compact");
  BOOST_TEST(back->study_version == "1");
  BOOST_TEST(back->sessions.size() == 2u);
  BOOST_TEST(back->seconds() == 3.0);
  BOOST_TEST(back->sessions[1].argv.at(2) == "a");
  BOOST_TEST(back->extra.at("from_the_future").as_int64() == 42);
}

BOOST_AUTO_TEST_CASE(meta_of_format_1_and_of_the_rust_host_and_bad_meta) {
  auto v1 =
      run_meta::from_json(json::parse(R"({"format":1,"run_id":"x","started":"2026-11-30T08:15:02Z",
        "study":{"study":"s","study_version":"2"},"config":{"argv":["run"]},
        "summary":{"seconds":4.0}})")
                              .as_object());
  BOOST_REQUIRE(v1.has_value());
  BOOST_REQUIRE(v1->sessions.size() == 1u);  // the one configuration becomes a session
  BOOST_TEST(v1->sessions[0].argv.at(0) == "run");
  BOOST_TEST(v1->seconds() == 4.0);
  BOOST_TEST(v1->study == "s");

  auto rust = run_meta::from_json(
      json::parse(R"({"format":1,"run_id":"r","study":"greeter","study_version":"0.4.0",
        "started_unix":1764490502,"finished_unix":0})")
          .as_object());
  BOOST_REQUIRE(rust.has_value());
  BOOST_TEST(rust->made_by_rust_host);
  BOOST_TEST(rust->study == "greeter");
  BOOST_TEST(rust->started == "2025-11-30T08:15:02Z");
  BOOST_TEST(rust->finished.empty());  // 0: never finished
  BOOST_TEST(rust->to_json().at("started_unix").as_int64() == 1764490502);

  auto bad_layout = run_meta::from_json(json::parse(R"({"layout":"zip"})").as_object());
  BOOST_REQUIRE(!bad_layout);
  BOOST_TEST((bad_layout.error().code == errc::corrupt));
  BOOST_TEST(bad_layout.error().message().find("\"layout\"") != std::string::npos);
  auto newer = run_meta::from_json(json::parse(R"({"format":99})").as_object());
  BOOST_REQUIRE(!newer);
  BOOST_TEST((newer.error().code == errc::incompatible));
  BOOST_TEST(newer.error().message().find("format 99 is newer") == 0u);
}

// Which saved states a resume runs again, per option: a table over every state.
BOOST_AUTO_TEST_CASE(resume_reuses_by_state_and_option) {
  struct row {
    case_state state;
    bool runs_plain, runs_retry_errors, runs_retry_failed;
  };
  const row rows[] = {
      {case_state::passed, false, false, false},   {case_state::failed, false, false, true},
      {case_state::na, false, true, false},        {case_state::skipped, false, false, false},
      {case_state::cancelled, true, true, true},   {case_state::error, false, true, false},
      {case_state::executed, false, false, false},
  };
  mira::protocol::initialize_result study;
  study.study = "s";
  for (auto& r : rows) {
    loaded_run run;
    run.meta.study = "s";
    run.cases.push_back(saved("a", r.state));
    mira::plan::plan p;
    p.cases.push_back(planned("a"));
    p.cases.push_back(planned("b"));  // never saved: always runs
    for (int o = 0; o < 3; ++o) {
      resume_options opt;
      opt.retry_errors = o == 1;
      opt.retry_failed = o == 2;
      auto d = plan_resume(run, p, study, {}, std::nullopt, opt);
      BOOST_REQUIRE(d.has_value());
      bool runs = o == 0 ? r.runs_plain : o == 1 ? r.runs_retry_errors : r.runs_retry_failed;
      BOOST_TEST_CONTEXT("state " << r.state << ", option " << o) {
        BOOST_TEST(d->todo.size() == (runs ? 2u : 1u));
        BOOST_TEST(d->todo.back() == 1u);
        BOOST_TEST(d->reused == (runs ? 0u : 1u));
        if (!runs) BOOST_TEST(d->records[0].state == r.state);
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(resume_refuses_another_study_and_warns_of_changes) {
  loaded_run run;
  run.meta.run_id = "r";
  run.meta.study = "old";
  run.meta.study_version = "1";
  run.meta.fingerprints = json::object{{"echo", "aaa"}};
  session_entry s;
  s.config = json::parse(R"({"selection":{"seed":7}})").as_object();
  run.meta.sessions.push_back(s);
  run.cases.push_back(saved("outside", case_state::passed));
  mira::plan::plan p;
  p.cases.push_back(planned("a"));
  mira::protocol::initialize_result study;
  study.study = "new";
  study.study_version = "2";
  auto refused = plan_resume(run, p, study, {}, 7, {});
  BOOST_REQUIRE(!refused);
  BOOST_TEST((refused.error().code == errc::incompatible));
  BOOST_TEST(refused.error().message() == "run r was made by study 'old', this is 'new'");
  resume_options allow;
  allow.allow_other_study = true;
  auto d = plan_resume(run, p, study, json::object{{"echo", "bbb"}}, 8, allow);
  BOOST_REQUIRE(d.has_value());
  BOOST_TEST(d->warnings.size() == 4u);  // other study, version, seed, fingerprint
  // The saved case outside the plan stays in the run's report.
  BOOST_REQUIRE(d->outside.cases.size() == 1u);
  BOOST_TEST(d->outside.cases[0].key == "echo/outside@sim");
  mira::schedule::run_report report;
  report.cases.resize(1);
  auto whole = whole_run(p, report, *d);
  BOOST_REQUIRE(whole.has_value());
  BOOST_TEST(whole->first.cases.size() == 2u);
  BOOST_TEST(whole->second.cases.size() == 2u);
}

BOOST_AUTO_TEST_CASE(one_writer_holds_a_run_and_readers_need_no_lock) {
  mira::test::temp_dir d;
  auto results = d.path / "results";
  const std::string id = "20261130T081502Z-3fa9";
  {
    auto w = run_store::create(results, id, layout::per_case);
    BOOST_REQUIRE(w.has_value());
    BOOST_TEST(!w->begin_session(session_entry{}));
    auto second = run_store::open(results, id);
    BOOST_REQUIRE(!second);
    BOOST_TEST((second.error().code == errc::in_use));
    BOOST_TEST(second.error().message().find("is in use by pid " + std::to_string(::getpid())) !=
               std::string::npos);
    auto reader = load_run(results, id);
    BOOST_REQUIRE(reader.has_value());
    BOOST_TEST(reader->meta.sessions.size() == 1u);
  }
  BOOST_TEST(run_store::open(results, id).has_value());  // released with its store
  BOOST_TEST(!run_store::open(results, "../x"));
  auto missing = run_store::open(results, "20990101T000000Z-0000");
  BOOST_TEST((missing.error().code == errc::not_found));
  BOOST_TEST(missing.error().message().find("no saved run") == 0u);
}

// The lock is the run folder's own (an flock on the directory): deleting .lock while a writer
// holds the run let a second writer in, when the lock was on that file.
BOOST_AUTO_TEST_CASE(deleting_the_lock_file_lets_no_second_writer_in) {
  for (auto l : {layout::per_case, layout::compact}) {
    mira::test::temp_dir d;
    auto results = d.path / "results";
    const std::string id = "20261130T081502Z-3fa9";
    auto w = run_store::create(results, id, l);
    BOOST_REQUIRE(w.has_value());
    BOOST_TEST(!w->begin_session(session_entry{}));
    BOOST_REQUIRE(fs::remove(w->path() / ".lock"));
    auto second = run_store::open(results, id);
    BOOST_REQUIRE(!second);
    BOOST_TEST((second.error().code == errc::in_use));
    BOOST_TEST(second.error().message().find("is in use by another process") != std::string::npos,
               second.error().message());
    BOOST_TEST(!rebuild_meta(results, id));  // every writer of the folder takes the same lock
  }
}

// .lock is locked too: a host of an earlier version locks only that file (and on a network file
// system a directory's lock may not reach other nodes), so its lock keeps a writer out.
BOOST_AUTO_TEST_CASE(a_lock_on_the_lock_file_alone_keeps_a_writer_out) {
  mira::test::temp_dir d;
  auto results = d.path / "results";
  const std::string id = "20261130T081502Z-3fa9";
  {
    auto w = run_store::create(results, id, layout::compact);
    BOOST_REQUIRE(w.has_value());
    BOOST_TEST(!w->begin_session(session_entry{}));
  }
  int fd = ::open((results / id / ".lock").c_str(), O_RDWR | O_CLOEXEC);
  BOOST_REQUIRE(fd >= 0);
  BOOST_REQUIRE(::flock(fd, LOCK_EX | LOCK_NB) == 0);
  auto second = run_store::open(results, id);
  BOOST_REQUIRE(!second);
  BOOST_TEST((second.error().code == errc::in_use));
  ::close(fd);
  BOOST_TEST(run_store::open(results, id).has_value());
}

// A report file that cannot be written fails finish() naming the file, and the run is left
// unfinished in meta.json (a resume finishes it): it used to be marked finished with no report.
BOOST_AUTO_TEST_CASE(a_finish_that_cannot_write_a_report_names_it_and_leaves_the_run_unfinished) {
  mira::test::temp_dir d;
  auto results = d.path / "results";
  const std::string id = "20261130T081502Z-3fa9";
  auto w = run_store::create(results, id, layout::per_case);
  BOOST_REQUIRE(w.has_value());
  BOOST_TEST(!w->begin_session(session_entry{}));
  mira::plan::plan p;
  mira::schedule::run_report report;
  for (int i = 0; i < 3; ++i) {
    p.cases.push_back(planned("s" + std::to_string(i)));
    report.cases.emplace_back().state = case_state::passed;
  }
  // A directory where report.html goes: its replacement cannot be renamed into place.
  fs::create_directories(w->path() / "report.html" / "in-the-way");
  auto failed =
      mira::report::finish_run(*w, p, report, mira::aggregate::summarize(p, report.cases));
  BOOST_REQUIRE(static_cast<bool>(failed));
  BOOST_TEST(failed.path == w->path() / "report.html");
  BOOST_TEST(failed.message().find("cannot write " + (w->path() / "report.html").string() + ": ") ==
             0u);
  auto meta = load_run_meta(results, id);
  BOOST_REQUIRE(meta.has_value());
  BOOST_TEST(meta->finished.empty());
  BOOST_REQUIRE(meta->sessions.size() == 1u);
  BOOST_TEST(meta->sessions[0].finished.empty());
  fs::remove_all(w->path() / "report.html");
  BOOST_TEST(!mira::report::finish_run(*w, p, report, mira::aggregate::summarize(p, report.cases)));
  BOOST_TEST(!load_run_meta(results, id)->finished.empty());
}

// A damaged compact record whose case was saved again later (a resume ran it again) is
// superseded, not a loss: the run reads whole. One whose case has no later record is unreadable.
BOOST_AUTO_TEST_CASE(a_damaged_record_with_a_later_record_of_its_case_is_superseded) {
  mira::test::temp_dir d;
  auto w = three_saved_cases(d.path / "results");
  // Flip one byte inside the record of b (the second line), away from its key.
  auto segment = w.path() / "segments" / "000001.ndjson";
  auto bytes = read_bytes(segment);
  auto second = bytes.find('\n') + 1;
  auto flip = bytes.find('\n', second) - 3;
  bytes[flip] = static_cast<char>(bytes[flip] ^ 1);
  std::ofstream(segment, std::ios::binary | std::ios::trunc) << bytes;
  auto before = w.load();
  BOOST_TEST(before.cases.size() == 2u);
  BOOST_TEST(before.unreadable.size() == 1u);
  BOOST_TEST(before.superseded.empty());
  save_passed(w, {"b"});
  auto after = w.load();
  BOOST_TEST(after.cases.size() == 3u);
  BOOST_TEST(after.unreadable.empty());
  BOOST_REQUIRE(after.superseded.size() == 1u);
  BOOST_TEST(after.superseded[0].find("checksum mismatch at " + segment.string() + ":2") == 0u,
             after.superseded[0]);
  BOOST_TEST(after.superseded[0].find("superseded by a later record of echo/b@sim") !=
             std::string::npos);
}

// A flipped bit in a damaged line's key can name another saved case ("echo/b@sim" reads
// "echo/c@sim"): the line is not superseded while the run lacks a record of a planned case.
BOOST_AUTO_TEST_CASE(a_damaged_key_naming_another_case_supersedes_nothing_while_a_case_is_missing) {
  mira::test::temp_dir d;
  auto w = three_saved_cases(d.path / "results");
  auto segment = w.path() / "segments" / "000001.ndjson";
  auto bytes = read_bytes(segment);
  auto second = bytes.find('\n') + 1;
  auto key = bytes.find("echo/b@sim", second);
  BOOST_REQUIRE(key < bytes.find('\n', second));
  bytes[key + 5] = 'c';  // 'b' ^ 1
  std::ofstream(segment, std::ios::binary | std::ios::trunc) << bytes;
  auto before = w.load();
  BOOST_TEST(before.cases.size() == 2u);
  BOOST_TEST(before.unreadable.size() == 1u);
  BOOST_TEST(before.superseded.empty());
  save_passed(w, {"b"});  // what a resume does: b is missing, so it runs again
  auto after = w.load();
  BOOST_TEST(after.cases.size() == 3u);
  BOOST_TEST(after.unreadable.empty());
  BOOST_TEST(after.superseded.size() == 1u);
}

// The same flip to name a case saved before the line ("echo/b@sim" reads "echo/a@sim"): no
// later record of a follows, yet once the resume saved b again every planned case has a record,
// so the line is an old copy and the run reads whole (it was unreadable for good before).
BOOST_AUTO_TEST_CASE(a_damaged_key_naming_an_earlier_case_is_superseded_once_the_run_is_whole) {
  mira::test::temp_dir d;
  auto w = three_saved_cases(d.path / "results");
  auto segment = w.path() / "segments" / "000001.ndjson";
  auto bytes = read_bytes(segment);
  auto second = bytes.find('\n') + 1;
  auto key = bytes.find("echo/b@sim", second);
  BOOST_REQUIRE(key < bytes.find('\n', second));
  bytes[key + 5] = 'a';
  std::ofstream(segment, std::ios::binary | std::ios::trunc) << bytes;
  auto before = w.load();
  BOOST_TEST(before.cases.size() == 2u);
  BOOST_TEST(before.unreadable.size() == 1u);
  save_passed(w, {"b"});
  auto after = w.load();
  BOOST_TEST(after.cases.size() == 3u);
  BOOST_TEST(after.unreadable.empty());
  BOOST_REQUIRE(after.superseded.size() == 1u);
  BOOST_TEST(after.superseded[0].find(
                 "superseded: the run has a record of each of its 3 planned") != std::string::npos,
             after.superseded[0]);
}

BOOST_AUTO_TEST_CASE(records_load_in_natural_order_and_unreadable_files_are_named) {
  mira::test::temp_dir d;
  auto results = d.path / "results";
  const std::string id = "20261130T081502Z-3fa9";
  auto w = run_store::create(results, id, layout::per_case);
  BOOST_REQUIRE(w.has_value());
  auto writer = w->writer();
  BOOST_REQUIRE(writer.has_value());
  for (auto s : {"case-10", "case-2", "case-1"}) {
    auto c = saved(s, case_state::passed);
    (*writer)->submit(c.key, json::serialize(c.record),
                      [](boost::system::error_code ec) { BOOST_TEST(!ec); });
  }
  (*writer)->drain();
  fs::create_directories(w->path() / "cases" / "torn");
  std::ofstream(w->path() / "cases" / "torn" / "result.json") << "{\"eval\":";
  auto run = w->load();
  BOOST_REQUIRE(run.cases.size() == 3u);
  BOOST_TEST(run.cases[0].key == "echo/case-1@sim");
  BOOST_TEST(run.cases[1].key == "echo/case-2@sim");
  BOOST_TEST(run.cases[2].key == "echo/case-10@sim");
  BOOST_REQUIRE(run.unreadable.size() == 1u);
  BOOST_TEST(run.unreadable[0].find("torn/result.json: not a JSON object") != std::string::npos);
}

// One fingerprint per eval, a SHA-256 of its listing entry: the same listing gives the same
// value, and a changed eval (here a scorer) changes its own fingerprint only.
BOOST_AUTO_TEST_CASE(listing_fingerprints_change_with_the_eval_they_describe) {
  mira::protocol::list_result list;
  list.evals.resize(2);
  list.evals[0].name = "a";
  list.evals[0].scorers = {"exact"};
  list.evals[1].name = "b";
  auto before = listing_fingerprints(list);
  BOOST_TEST(before.size() == 2u);
  BOOST_TEST(before.at("a").as_string().size() == 64u);
  BOOST_TEST(listing_fingerprints(list) == before);
  list.evals[0].scorers = {"judge"};
  auto after = listing_fingerprints(list);
  BOOST_TEST(after.at("a") != before.at("a"));
  BOOST_TEST(after.at("b") == before.at("b"));
}

// The fingerprint is hashed as the listing entry is written, samples one at a time: the same
// digest as the whole entry's canonical JSON (what runs saved before it hold).
BOOST_AUTO_TEST_CASE(a_listing_fingerprint_is_the_digest_of_the_whole_entry) {
  mira::protocol::list_result list;
  auto& e = list.evals.emplace_back();
  e.name = "a";
  e.description = "d";
  e.scorers = {"exact"};
  e.trials = 3;
  e.metadata = boost::json::parse(R"({"k":[1,2]})").as_object();
  for (int i = 0; i < 50; ++i) {
    mira::protocol::sample_info s{"s" + std::to_string(i), {}, {}};
    if (i % 3 == 0) s.tags = {"t"};
    if (i % 5 == 0) s.metadata = boost::json::parse(R"({"n":1.5})").as_object();
    e.samples.push_back(std::move(s));
  }
  BOOST_TEST(listing_fingerprints(list).at("a").as_string() ==
             mira::store::sha256_hex(
                 mira::store::canonical_json(boost::json::value(mira::protocol::encode(e)))));
}

BOOST_AUTO_TEST_SUITE_END()
