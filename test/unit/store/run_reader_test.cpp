// The streaming reader of saved runs: the same cases as load_run (newest record of each key, the
// run's own layout winning, natural key order) read one at a time, through a window over segments
// appended in any order; selection and early stops; records gone after the run was opened; and
// the readers' clients (a report rendered from it, a comparison of two) agreeing with the in-memory
// path.
#include <mira/compare/compare.hpp>
#include <mira/report/render.hpp>
#include <mira/store/records.hpp>
#include <mira/store/run_reader.hpp>
#include <mira/store/run_store.hpp>
#include <mira/store/summary_feed.hpp>
#include "store/segment_log.hpp"

#include "common/temp_dir.hpp"

#include <boost/json/parse.hpp>
#include <boost/test/unit_test.hpp>

#include <fcntl.h>
#include <sys/stat.h>

#include <chrono>
#include <fstream>
#include <iterator>
#include <tuple>

using namespace mira::store;
using mira::schedule::case_state;
namespace fs = std::filesystem;
namespace json = boost::json;

namespace {

const std::string run_id = "20261130T081502Z-3fa9";

mira::plan::planned_case planned(const std::string& sample) {
  mira::plan::planned_case c;
  c.params.eval = "echo";
  c.params.sample = sample;
  c.params.target = "sim";
  c.key = mira::plan::case_key(c.params);
  return c;
}

std::string line_of(const std::string& sample, case_state state) {
  mira::schedule::case_record r;
  r.state = state;
  r.attempts = 1;
  r.latency_seconds = 0.25;
  return case_line(planned(sample), r);
}

// Saves each (sample, state) through the store's writer, in that order.
void save(run_store& w, const std::vector<std::pair<std::string, case_state>>& cases) {
  auto writer = w.writer();
  BOOST_REQUIRE(writer.has_value());
  for (auto& [sample, state] : cases)
    (*writer)->submit(planned(sample).key, line_of(sample, state),
                      [](boost::system::error_code ec) { BOOST_TEST(!ec); });
  (*writer)->drain();
}

run_store new_run(const fs::path& results, layout l, const std::string& id = run_id) {
  auto w = run_store::create(results, id, l);
  BOOST_REQUIRE(w.has_value());
  BOOST_TEST(!w->begin_session({}));
  return std::move(*w);
}

// A run whose one session planned `samples`, their keys saved with it unless `keys` is false.
run_store planned_run(const fs::path& results, layout l, const std::vector<std::string>& samples,
                      bool keys = true) {
  auto w = run_store::create(results, run_id, l);
  BOOST_REQUIRE(w.has_value());
  mira::plan::plan p;
  for (auto& sample : samples) p.cases.push_back(planned(sample));
  session_entry session;
  session.planned = samples.size();
  BOOST_TEST(!w->begin_session(session, keys ? keys_of(p.cases) : plan_keys{}));
  return std::move(*w);
}

// (key, state) of every case a visit reads.
std::vector<std::pair<std::string, case_state>> read_all(const run_reader& r) {
  std::vector<std::pair<std::string, case_state>> out;
  auto late = r.visit_cases([&](std::size_t i, const mira::plan::planned_case& c,
                                const mira::schedule::case_record& rec) {
    BOOST_TEST(i == out.size());
    BOOST_TEST(r.key(i) == c.key);
    out.emplace_back(c.key, rec.state);
    return true;
  });
  BOOST_TEST(late.empty());
  return out;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(run_reader_tests)

BOOST_AUTO_TEST_CASE(the_newest_record_of_each_key_in_natural_order_with_the_runs_layout_winning) {
  mira::test::temp_dir d;
  auto results = d.path / "results";
  auto w = new_run(results, layout::compact);
  save(w, {{"case-10", case_state::passed},
           {"case-2", case_state::passed},
           {"case-1", case_state::failed}});
  save(w, {{"case-2", case_state::failed}});  // saved again later: this one stands
  // A per-case record of a compact run (converted half-way): the segment's record of the same
  // key wins, a key only there is read.
  auto folder = w.path() / "cases";
  for (auto [sample, state] :
       {std::pair{"case-1", case_state::passed}, std::pair{"case-3", case_state::error}}) {
    fs::create_directories(folder / encode_key(planned(sample).key));
    std::ofstream(folder / encode_key(planned(sample).key) / "result.json")
        << line_of(sample, state) << "\n";
  }

  auto r = run_reader::open(results, run_id);
  BOOST_REQUIRE(r.has_value());
  BOOST_TEST(r->unreadable().empty());
  BOOST_REQUIRE(r->size() == 4u);
  const std::vector<std::pair<std::string, case_state>> expected = {
      {"echo/case-1@sim", case_state::failed},
      {"echo/case-2@sim", case_state::failed},
      {"echo/case-3@sim", case_state::error},
      {"echo/case-10@sim", case_state::passed}};
  BOOST_TEST((read_all(*r) == expected));

  // load_run is the same reader holding every record.
  auto loaded = load_run(results, run_id);
  BOOST_REQUIRE(loaded.has_value());
  BOOST_REQUIRE(loaded->cases.size() == 4u);
  for (std::size_t i = 0; i < 4; ++i) {
    BOOST_TEST(loaded->cases[i].key == expected[i].first);
    BOOST_TEST(loaded->cases[i].record.at("key").as_string() == expected[i].first);
    BOOST_TEST(decode_case_record(loaded->cases[i].record).state == expected[i].second);
  }
}

BOOST_AUTO_TEST_CASE(a_visit_reads_only_what_it_selects_and_stops_when_asked) {
  mira::test::temp_dir d;
  auto results = d.path / "results";
  auto w = new_run(results, layout::compact);
  save(w, {{"a", case_state::passed}, {"b", case_state::failed}, {"c", case_state::passed}});
  auto r = run_reader::open(results, run_id);
  BOOST_REQUIRE(r.has_value());
  std::vector<std::string> seen;
  r->visit(
      [&](std::size_t i, const saved_case& c) {
        BOOST_TEST(i == 1u);  // positions are the run's, not the visit's
        seen.push_back(c.key);
        return true;
      },
      [](std::size_t, std::string_view key) { return key == "echo/b@sim"; });
  BOOST_TEST((seen == std::vector<std::string>{"echo/b@sim"}));
  seen.clear();
  r->visit([&](std::size_t, const saved_case& c) {
    seen.push_back(c.key);
    return seen.size() < 2;
  });
  BOOST_TEST((seen == std::vector<std::string>{"echo/a@sim", "echo/b@sim"}));
}

// Segments appended in the reverse of natural order, many of them: each record is found again
// through the window, whatever the distance between two neighbours.
BOOST_AUTO_TEST_CASE(records_appended_in_any_order_over_many_segments_read_back_in_order) {
  const int n = 3000;
  // Last first; and as a session saves them: about in order, neighbours swapped within a few
  // dozen, every 500th saved at the end (a retried case).
  std::vector<int> reversed, mostly;
  for (int i = n - 1; i >= 0; --i) reversed.push_back(i);
  for (int i = 0; i < n; ++i) {
    const int v = i % 40 < 20 ? i + 19 - 2 * (i % 20) : i;  // every other 20 reversed
    if (v % 500 != 250) mostly.push_back(v);
  }
  for (int v = 250; v < n; v += 500) mostly.push_back(v);
  for (auto* order : {&reversed, &mostly}) {
    mira::test::temp_dir d;
    auto results = d.path / "results";
    auto w = new_run(results, layout::compact);
    {
      segment_options small;
      small.segment_bytes = 64 << 10;
      auto seg = segment_writer::open(w.path() / "segments", small);
      BOOST_REQUIRE(seg.has_value());
      for (int i : *order) {
        auto sample = "s" + std::to_string(i);
        auto state = i % 7 == 0 ? case_state::failed : case_state::passed;
        (*seg)->submit(planned(sample).key, line_of(sample, state),
                       [](boost::system::error_code ec) { BOOST_TEST(!ec); });
      }
      (*seg)->drain();
    }
    BOOST_TEST(list_segments(w.path() / "segments").size() > 5u);
    auto r = run_reader::open(results, run_id);
    BOOST_REQUIRE(r.has_value());
    BOOST_REQUIRE(r->size() == static_cast<std::size_t>(n));
    auto all = read_all(*r);
    BOOST_REQUIRE(all.size() == static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) {
      BOOST_TEST(all[i].first == "echo/s" + std::to_string(i) + "@sim");
      BOOST_TEST((all[i].second == (i % 7 == 0 ? case_state::failed : case_state::passed)));
    }
  }
}

// A record the Rust mira CLI saved (a bare RunResult under its folder name, "-" as _2d) is read
// with the key both hosts compute; a file that is not a record is named and left out.
BOOST_AUTO_TEST_CASE(rust_records_are_read_and_torn_files_named) {
  mira::test::temp_dir d;
  auto results = d.path / "results";
  auto w = new_run(results, layout::per_case);
  save(w, {{"a", case_state::passed}});
  fs::create_directories(w.path() / "cases" / "echo_2fb_40sim");
  std::ofstream(w.path() / "cases" / "echo_2fb_40sim" / "result.json")
      << R"({"eval":"echo","sample":"b","target":"sim","passed":false,"aggregate":0,)"
      << R"("scores":[],"transcript":{"final_response":""}})";
  fs::create_directories(w.path() / "cases" / "torn");
  std::ofstream(w.path() / "cases" / "torn" / "result.json") << R"({"eval":)";
  auto r = run_reader::open(results, run_id);
  BOOST_REQUIRE(r.has_value());
  BOOST_REQUIRE(r->unreadable().size() == 1u);
  BOOST_TEST(r->unreadable()[0].find("torn/result.json") != std::string::npos);
  const std::vector<std::pair<std::string, case_state>> expected = {
      {"echo/a@sim", case_state::passed}, {"echo/b@sim", case_state::failed}};
  BOOST_TEST((read_all(*r) == expected));
  // Opening changes nothing: the torn file is still there.
  BOOST_TEST(fs::exists(w.path() / "cases" / "torn" / "result.json"));
}

// A lost or false record is not passed (#36): a result.json copied into another case's folder is
// unreadable, naming both cases (it was read as the case it holds, and the folder's own case was
// silently lost); an unknown status is unreadable, not "cancelled".
BOOST_AUTO_TEST_CASE(a_record_in_another_cases_folder_or_of_an_unknown_status_is_not_read) {
  mira::test::temp_dir d;
  auto results = d.path / "results";
  auto w = new_run(results, layout::per_case);
  save(w, {{"a", case_state::passed}, {"b", case_state::failed}});
  const auto cases = w.path() / "cases";
  fs::copy_file(cases / encode_key("echo/a@sim") / "result.json",
                cases / encode_key("echo/b@sim") / "result.json",
                fs::copy_options::overwrite_existing);
  auto r = run_reader::open(results, run_id);
  BOOST_REQUIRE(r.has_value());
  BOOST_TEST(r->size() == 1u);
  BOOST_REQUIRE(r->unreadable().size() == 1u);
  BOOST_TEST(r->unreadable()[0].find("the record is of case echo/a@sim, not of the case its "
                                     "folder names (echo/b@sim)") != std::string::npos,
             r->unreadable()[0]);

  auto c = new_run(results, layout::compact, "20261130T081502Z-0002");
  auto bogus = line_of("x", case_state::passed);
  bogus.replace(bogus.find("\"status\":\"passed\""), 17, "\"status\":\"bogus\"");
  auto writer = c.writer();
  BOOST_REQUIRE(writer.has_value());
  (*writer)->submit(planned("x").key, bogus, {});
  (*writer)->drain();
  auto rc = run_reader::open(results, "20261130T081502Z-0002");
  BOOST_REQUIRE(rc.has_value());
  auto late = rc->visit_cases([](auto, auto&, auto&) { return true; });
  BOOST_REQUIRE(late.size() == 1u);
  BOOST_TEST(late[0].find("the record of echo/x@sim cannot be read: its \"status\" \"bogus\" is "
                          "no case state") != std::string::npos,
             late[0]);
  BOOST_TEST(rc->load().unreadable.size() == 1u);
}

// Two records of one key in the segments: a resume's re-run of a cancelled, error, N/A or failed
// case is how they come, anything else (a passed record twice: a copied line) is a warning naming
// the key. The last record is read either way.
BOOST_AUTO_TEST_CASE(a_key_saved_twice_without_a_rerun_is_a_warning) {
  mira::test::temp_dir d;
  auto results = d.path / "results";
  auto w = new_run(results, layout::compact);
  save(w, {{"a", case_state::error}, {"b", case_state::passed}, {"a", case_state::passed}});
  auto r = run_reader::open(results, run_id);
  BOOST_REQUIRE(r.has_value());
  BOOST_TEST(r->superseded().empty());
  save(w, {{"b", case_state::passed}});
  r = run_reader::open(results, run_id);
  BOOST_REQUIRE(r.has_value());
  BOOST_TEST(r->size() == 2u);
  BOOST_TEST(r->unreadable().empty());
  BOOST_REQUIRE(r->superseded().size() == 1u);
  BOOST_TEST(r->superseded()[0].find("echo/b@sim has more than one record") != std::string::npos,
             r->superseded()[0]);
}

// A finished run that lacks a record of a planned case names it (#36), in either layout, by the
// keys its session saved: also when a record of a case outside the plan makes up the count (a
// count alone took the run for whole), and whatever bytes the key holds.
BOOST_AUTO_TEST_CASE(the_planned_cases_with_no_record_are_named_by_the_plans_keys) {
  for (auto l : {layout::per_case, layout::compact}) {
    BOOST_TEST_CONTEXT(to_string(l)) {
      mira::test::temp_dir d;
      auto results = d.path / "results";
      const std::string odd = "b \"q\" \\ \n ü";
      auto w = planned_run(results, l, {"a", odd, "c"});
      save(w, {{"a", case_state::passed}, {"c", case_state::failed}, {"x", case_state::passed}});
      BOOST_TEST(!w.finish({}, json::object{}));
      BOOST_TEST(fs::is_regular_file(w.path() / "plan-keys.ndjson"));
      auto r = run_reader::open(results, run_id);
      BOOST_REQUIRE(r.has_value());
      BOOST_TEST(r->plan_keys_problem().empty(), r->plan_keys_problem());
      BOOST_REQUIRE(r->missing().has_value());
      BOOST_TEST(r->missing()->count == 1u);
      BOOST_TEST((r->missing()->first == std::vector<std::string>{planned(odd).key}));
      auto c = completeness_of(*r);
      BOOST_TEST(c.saved == 3u);  // a, c and x: the count alone found nothing missing
      BOOST_TEST(c.unfinished() == 1u);
      BOOST_TEST(!c.complete());
      BOOST_TEST(c.stop_message ==
                 "1 of 3 planned case(s) have no saved record: " + planned(odd).key);
    }
  }
}

BOOST_AUTO_TEST_CASE(the_first_ten_missing_cases_are_named_and_the_rest_counted) {
  mira::test::temp_dir d;
  auto results = d.path / "results";
  std::vector<std::string> samples;
  for (int i = 0; i < 12; ++i) samples.push_back("s" + std::to_string(i));
  auto w = planned_run(results, layout::compact, samples);
  save(w, {{"s5", case_state::passed}});
  BOOST_TEST(!w.finish({}, json::object{}));
  auto r = run_reader::open(results, run_id);
  BOOST_REQUIRE(r.has_value());
  BOOST_REQUIRE(r->missing().has_value());
  BOOST_TEST(r->missing()->count == 11u);
  BOOST_REQUIRE(r->missing()->first.size() == 10u);
  BOOST_TEST(r->missing()->first[5] == "echo/s6@sim");  // plan order, the saved one left out
  BOOST_TEST(completeness_of(*r).stop_message ==
             "11 of 12 planned case(s) have no saved record: echo/s0@sim, echo/s1@sim, "
             "echo/s2@sim, echo/s3@sim, echo/s4@sim, echo/s6@sim, echo/s7@sim, echo/s8@sim, "
             "echo/s9@sim, echo/s10@sim and 1 more");
}

// Without the last session's keys (a run saved before they were kept, a session that wrote none,
// a damaged, cut or linked file) the reader counts as before and names nothing; a file it cannot
// use is said, one of an earlier session is not.
BOOST_AUTO_TEST_CASE(without_the_last_sessions_keys_the_missing_cases_are_only_counted) {
  const std::string counted = "1 of 3 planned case(s) have no saved record";
  auto open_finished = [](const fs::path& results) {
    auto r = run_reader::open(results, run_id);
    BOOST_REQUIRE(r.has_value());
    BOOST_TEST(!r->missing().has_value());
    return std::move(*r);
  };
  {
    mira::test::temp_dir d;
    auto w = planned_run(d.path / "results", layout::per_case, {"a", "b", "c"}, false);
    save(w, {{"a", case_state::passed}, {"c", case_state::passed}});
    BOOST_TEST(!w.finish({}, json::object{}));
    BOOST_TEST(!fs::exists(w.path() / "plan-keys.ndjson"));
    auto r = open_finished(d.path / "results");
    BOOST_TEST(r.plan_keys_problem().empty());
    BOOST_TEST(completeness_of(r).stop_message == counted);
    // The keys of an earlier session are not the last one's.
    mira::plan::plan p;
    p.cases.push_back(planned("a"));
    session_entry second;
    second.planned = 3;
    BOOST_TEST(!w.begin_session(second, keys_of(p.cases)));
    r = open_finished(d.path / "results");  // a session that planned more than it saved keys of
    BOOST_TEST(
        r.plan_keys_problem().find("it holds 1 key(s), session 2 planned 3") != std::string::npos,
        r.plan_keys_problem());
    BOOST_TEST(!w.begin_session(second));
    BOOST_TEST(!w.finish({}, json::object{}));
    r = open_finished(d.path / "results");
    BOOST_TEST(r.plan_keys_problem().empty());
    BOOST_TEST(completeness_of(r).stop_message == counted);
  }
  const auto damages = {std::pair<std::string, std::string>{"a byte flipped", "checksum mismatch"},
                        {"cut short", "cut short"},
                        {"a link", "is a symbolic link"}};
  for (auto& [damage, said] : damages) {
    BOOST_TEST_CONTEXT(damage) {
      mira::test::temp_dir d;
      auto w = planned_run(d.path / "results", layout::compact, {"a", "b", "c"});
      save(w, {{"a", case_state::passed}, {"c", case_state::passed}});
      BOOST_TEST(!w.finish({}, json::object{}));
      const auto file = w.path() / "plan-keys.ndjson";
      std::ifstream in(file, std::ios::binary);
      std::string bytes{std::istreambuf_iterator<char>(in), {}};
      if (damage == "a byte flipped") {
        bytes[bytes.find("echo/b@sim")] = 'x';
      } else if (damage == "cut short") {
        bytes.resize(bytes.size() - 5);
      } else {
        fs::rename(file, d.path / "elsewhere.ndjson");
        fs::create_symlink(d.path / "elsewhere.ndjson", file);
      }
      if (damage != "a link") std::ofstream(file, std::ios::binary) << bytes;
      auto r = open_finished(d.path / "results");
      BOOST_TEST(r.plan_keys_problem().find(said) != std::string::npos, r.plan_keys_problem());
      BOOST_TEST(completeness_of(r).stop_message == counted);
    }
  }
}

BOOST_AUTO_TEST_CASE(a_record_gone_after_the_run_was_opened_is_a_visit_problem) {
  mira::test::temp_dir d;
  auto results = d.path / "results";
  auto w = new_run(results, layout::per_case);
  save(w, {{"a", case_state::passed}, {"b", case_state::passed}, {"c", case_state::passed}});
  auto r = run_reader::open(results, run_id);
  BOOST_REQUIRE(r.has_value());
  fs::remove(w.path() / "cases" / encode_key("echo/b@sim") / "result.json");
  std::vector<std::string> seen;
  auto late = r->visit([&](std::size_t, const saved_case& c) {
    seen.push_back(c.key);
    return true;
  });
  BOOST_TEST((seen == std::vector<std::string>{"echo/a@sim", "echo/c@sim"}));
  BOOST_REQUIRE(late.size() == 1u);
  BOOST_TEST(late[0].find("result.json") != std::string::npos);
}

// The report rendered from a run read back is the one rendered from the run in memory.
BOOST_AUTO_TEST_CASE(a_report_rendered_as_the_run_is_read_is_the_one_from_memory) {
  mira::test::temp_dir d;
  auto results = d.path / "results";
  auto w = new_run(results, layout::compact);
  save(w, {{"x10", case_state::passed},
           {"x2", case_state::failed},
           {"x1", case_state::error},
           {"y", case_state::skipped}});
  auto loaded = load_run(results, run_id);
  BOOST_REQUIRE(loaded.has_value());
  // Not a structured binding: the lambda below captures `report` (Clang 14 cannot).
  auto in_memory = loaded->as_report();
  auto& p = in_memory.first;
  auto& report = in_memory.second;
  auto s = mira::aggregate::summarize(p, report.cases);

  auto r = run_reader::open(results, run_id);
  BOOST_REQUIRE(r.has_value());
  summary_feed feed;
  r->visit_cases(
      [&](std::size_t, const mira::plan::planned_case& c, const mira::schedule::case_record& rec) {
        feed.add(c, rec);
        return true;
      });
  auto streamed = feed.finish();
  BOOST_TEST(mira::aggregate::summary_json(streamed, report) ==
             mira::aggregate::summary_json(s, report));
  const mira::report::saved_cases cases(*r);
  for (std::string format : {"json", "jsonl", "csv", "md", "junit", "html"})
    BOOST_TEST(
        mira::report::render(format, p, report, s) ==
            [&] {
              std::string text;
              mira::report::render(format, cases, report, streamed,
                                   [&](std::string_view piece) { text += piece; });
              return text;
            }(),
        format);
  BOOST_TEST(cases.problems().empty());
  // Only some cases: the ones a filter chose, numbered from 0.
  const mira::report::saved_cases some(*r, {false, true, false, true});
  std::vector<std::string> keys;
  some.visit_keys([&](std::size_t i, std::string_view key) {
    BOOST_TEST(i == keys.size());
    keys.emplace_back(key);
    return true;
  });
  BOOST_TEST((keys == std::vector<std::string>{"echo/x2@sim", "echo/y@sim"}));
  BOOST_TEST(some.size() == 2u);
}

BOOST_AUTO_TEST_CASE(two_runs_read_back_compare_as_they_do_in_memory) {
  mira::test::temp_dir d;
  auto results = d.path / "results";
  const std::string other = "20261130T081502Z-3fb0";
  auto base = new_run(results, layout::compact);
  save(base, {{"a", case_state::passed},
              {"b", case_state::passed},
              {"c", case_state::failed},
              {"only-base", case_state::passed}});
  auto cand = new_run(results, layout::per_case, other);
  save(cand, {{"a", case_state::failed},
              {"b", case_state::passed},
              {"c", case_state::passed},
              {"only-cand", case_state::na}});
  auto rb = run_reader::open(results, run_id);
  auto rc = run_reader::open(results, other);
  BOOST_REQUIRE((rb.has_value() && rc.has_value()));
  auto streamed = mira::compare::compare_runs(*rb, *rc);
  auto in_memory =
      mira::compare::compare_runs(*load_run(results, run_id), *load_run(results, other));
  BOOST_REQUIRE((streamed.has_value() && in_memory.has_value()));
  BOOST_TEST(streamed->count(mira::compare::change::regressed) == 1u);
  BOOST_TEST(streamed->count(mira::compare::change::fixed) == 1u);
  BOOST_TEST(streamed->only_in_base == 1u);
  BOOST_TEST(streamed->only_in_candidate == 1u);
  BOOST_TEST(mira::compare::render(*streamed, "json") == mira::compare::render(*in_memory, "json"));
}

namespace {

// Changes `from` to `to` (as long) in `file` in place, keeping its inode and modification time:
// damage no stamp shows.
void damage_in_place(const fs::path& file, const std::string& from, const std::string& to) {
  struct stat before {};
  BOOST_REQUIRE(::stat(file.c_str(), &before) == 0);
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  auto at = text.find(from);
  BOOST_REQUIRE(at != std::string::npos);
  f.seekp(static_cast<std::streamoff>(at));
  f.write(to.data(), static_cast<std::streamsize>(to.size()));
  f.close();
  const timespec times[2] = {before.st_atim, before.st_mtim};
  BOOST_REQUIRE(::utimensat(AT_FDCWD, file.c_str(), times, 0) == 0);
}

}  // namespace

// What opening a finished compact run learns is kept in case-index.bin: the next reader takes
// it (the same cases, states and findings) without scanning the segments; a record damaged
// after that is found by its checksum when visited; a damaged index is not taken.
BOOST_AUTO_TEST_CASE(a_finished_compact_runs_scan_is_kept_and_checked) {
  mira::test::temp_dir d;
  auto results = d.path / "results";
  auto index = results / run_id / "case-index.bin";
  {
    auto w = planned_run(results, layout::compact, {"a", "b", "c"});
    save(w, {{"a", case_state::passed}, {"b", case_state::failed}, {"c", case_state::error}});
    BOOST_TEST(run_reader::open(results, run_id).has_value());
    BOOST_TEST(!fs::exists(index));  // its session has not finished: the segments may grow
    BOOST_TEST(!w.finish({}, json::object{}));
  }
  auto first = run_reader::open(results, run_id);
  BOOST_REQUIRE(first.has_value());
  BOOST_TEST(fs::is_regular_file(index));
  auto second = run_reader::open(results, run_id);
  BOOST_REQUIRE(second.has_value());
  BOOST_TEST(read_all(*second) == read_all(*first));
  BOOST_TEST((second->status(1) == case_state::failed));
  BOOST_TEST((second->status(2) == case_state::error));
  BOOST_TEST(*second->find("echo/c@sim") == 2u);
  BOOST_TEST(!second->find("echo/z@sim"));
  BOOST_TEST(second->unreadable().empty());

  auto segment = list_segments(results / run_id / "segments").front();
  damage_in_place(segment, "\"sample\":\"b\"", "\"sample\":\"B\"");
  auto indexed = run_reader::open(results, run_id);
  BOOST_REQUIRE(indexed.has_value());
  BOOST_TEST(indexed->unreadable().empty());  // the index vouched for the segment
  std::vector<std::string> read;
  auto late = indexed->visit([&](std::size_t, const saved_case& c) {
    read.push_back(c.key);
    return true;
  });
  BOOST_TEST((read == std::vector<std::string>{"echo/a@sim", "echo/c@sim"}));
  BOOST_REQUIRE(late.size() == 1u);
  BOOST_TEST(late[0].find("the record of echo/b@sim has changed since it was read") !=
             std::string::npos);

  damage_in_place(index, "mira_case_index", "mira_case_indeX");
  fs::remove(results / run_id / "case-index.journal");  // as a run written before journals
  auto scanned = run_reader::open(results, run_id);     // the index fails its checksum
  BOOST_REQUIRE(scanned.has_value());
  BOOST_REQUIRE(scanned->unreadable().size() == 1u);
  BOOST_TEST(scanned->unreadable()[0].find("checksum mismatch") != std::string::npos);
}

// visit_lines hands over the same cases and problems as visit, each as the line a report writes:
// a compact record as saved, a per-case one written again from its record.
BOOST_AUTO_TEST_CASE(a_visit_of_lines_reads_what_a_visit_reads_as_the_reports_lines) {
  mira::test::temp_dir d;
  auto results = d.path / "results";
  auto w = new_run(results, layout::compact);
  save(w, {{"a", case_state::passed}, {"b", case_state::failed}, {"c", case_state::error}});
  auto folder = w.path() / "cases" / encode_key(planned("d").key);
  fs::create_directories(folder);
  std::ofstream(folder / "result.json") << line_of("d", case_state::skipped) << "\n";
  auto r = run_reader::open(results, run_id);
  BOOST_REQUIRE(r.has_value());
  BOOST_REQUIRE(r->size() == 4u);
  // b's record changes after the run was opened: both visits leave it out, with one problem.
  damage_in_place(w.path() / "segments" / "000001.ndjson", "\"failed\"", "\"FAILED\"");
  std::vector<std::tuple<std::string, case_state, std::string>> by_visit, by_lines;
  auto late = r->visit([&](std::size_t, const saved_case& c) {
    by_visit.emplace_back(c.key, decode_case_record(c.record).state,
                          case_line(planned_case_of(c), decode_case_record(c.record)));
    return true;
  });
  auto late_lines = r->visit_lines(
      [&](std::size_t i, std::string_view key, std::string_view line, case_state state) {
        BOOST_TEST(r->key(i) == key);
        by_lines.emplace_back(std::string(key), state, std::string(line));
        return true;
      });
  BOOST_TEST(by_lines.size() == 3u);
  BOOST_TEST((by_lines == by_visit));
  BOOST_TEST((late_lines == late));
  BOOST_REQUIRE(late.size() == 1u);
  BOOST_TEST(late[0].find("echo/b@sim") != std::string::npos);
  // The compact line is the saved text itself: it equals the one written again above only because
  // the host wrote it.
  BOOST_TEST(std::get<2>(by_lines[0]) == line_of("a", case_state::passed));
}

// A finished compact run's own summary stands for its records while it says what they say: the
// same states counted, the same group-by, a run that ran to its end.
BOOST_AUTO_TEST_CASE(a_finished_runs_own_summary_stands_while_its_records_agree) {
  mira::test::temp_dir d;
  auto results = d.path / "results";
  auto w = planned_run(results, layout::compact, {"a", "b", "c"});
  save(w, {{"a", case_state::passed}, {"b", case_state::failed}, {"c", case_state::passed}});
  auto opened = run_reader::open(results, run_id);
  BOOST_REQUIRE(opened.has_value());
  summary_feed feed;
  opened->visit_cases(
      [&](std::size_t, const mira::plan::planned_case& c, const mira::schedule::case_record& r) {
        feed.add(c, r);
        return true;
      });
  const auto s = feed.finish();
  const mira::schedule::run_report header;
  const auto as_json = mira::aggregate::summary_json(s, header);
  BOOST_TEST(!saved_summary(*opened, "").has_value());  // no summary saved yet
  BOOST_TEST(!w.finish({}, as_json));
  auto r = run_reader::open(results, run_id);
  BOOST_REQUIRE(r.has_value());
  auto saved = saved_summary(*r, "");
  BOOST_REQUIRE(saved.has_value());
  BOOST_TEST(mira::aggregate::summary_json(*saved, header) == as_json);
  BOOST_TEST(!saved_summary(*r, "target").has_value());  // made by another group-by

  // A summary that counts the states otherwise is not the records' summary.
  auto other = s;
  ++other.counts[static_cast<std::size_t>(case_state::failed)];
  --other.counts[static_cast<std::size_t>(case_state::passed)];
  BOOST_TEST(!w.finish({}, mira::aggregate::summary_json(other, header)));
  BOOST_TEST(!saved_summary(*run_reader::open(results, run_id), "").has_value());
}

namespace {

// A finished compact run of `n` cases (s0 ... s<n-1>, saved last first, every seventh failed)
// written as a session writes them, over segments of 8 KiB, by two writers with the run's
// journal: the second saves s5 again, passed (the scan warns of it).
void journaled_run(const fs::path& results, std::size_t n) {
  std::vector<std::string> samples;
  for (std::size_t i = 0; i < n; ++i) samples.push_back("s" + std::to_string(i));
  auto w = planned_run(results, layout::compact, samples);
  segment_options o;
  o.segment_bytes = 8 << 10;
  o.journal = w.path() / "case-index.journal";
  auto check = [](case_batch&, std::span<const boost::system::error_code> saved) {
    for (auto ec : saved) BOOST_TEST(!ec);
  };
  {
    auto seg = segment_writer::open(w.path() / "segments", o);
    BOOST_REQUIRE(seg.has_value());
    mira::plan::case_list cases;
    case_batch batch;
    for (std::size_t i = n; i-- > 0;) {
      cases.push_back(planned(samples[i]));
      mira::schedule::case_record r;
      r.state = i % 7 == 0 ? case_state::failed : case_state::passed;
      r.attempts = 1;
      batch.add_case(cases, cases.size() - 1, r);
    }
    (*seg)->submit(std::move(batch), check);
  }
  BOOST_TEST(fs::is_regular_file(o.journal));  // closed with its trailer
  {
    auto seg = segment_writer::open(w.path() / "segments", o);  // continues the journal
    BOOST_REQUIRE(seg.has_value());
    case_batch again;
    again.add(planned("s5").key, line_of("s5", case_state::passed));
    (*seg)->submit(std::move(again), check);
  }
  BOOST_TEST(!w.finish({}, json::object{}));
}

}  // namespace

namespace {

// Changes sample `sample`'s record in place in whichever segment holds it (damage_in_place: no
// stamp shows it), so that a reader that scans finds a checksum mismatch and one that takes a
// journal or an index reads no line and sees nothing.
void damage_record(const fs::path& folder, const std::string& sample) {
  const std::string from = "\"sample\":\"" + sample + "\"";
  for (auto& segment : list_segments(folder / "segments")) {
    std::ifstream f(segment, std::ios::binary);
    std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    if (text.find(from) == std::string::npos) continue;
    f.close();
    damage_in_place(segment, from, "\"sample\":\"X" + sample.substr(1) + "\"");
    return;
  }
  BOOST_FAIL("no record of " + sample);
}

bool scanned_damage(const run_reader& r) {
  return r.unreadable().size() == 1u &&
         r.unreadable()[0].find("checksum mismatch") != std::string::npos;
}

}  // namespace

// The first reader of a finished compact run takes its writers' journal instead of scanning the
// segments (a record damaged in place goes unseen until it is read), and learns what a scan
// does: the same cases in the same order, their states, the key saved twice; then it keeps the
// index.
BOOST_AUTO_TEST_CASE(a_compact_runs_journal_reads_as_a_scan_of_its_segments) {
  mira::test::temp_dir d;
  journaled_run(d.path / "a", 300);
  fs::copy(d.path / "a", d.path / "b", fs::copy_options::recursive);
  fs::remove(d.path / "b" / run_id / "case-index.journal");
  BOOST_TEST(list_segments(d.path / "a" / run_id / "segments").size() > 3u);
  damage_record(d.path / "a" / run_id, "s150");
  auto journaled = run_reader::open(d.path / "a", run_id);
  auto scanned = run_reader::open(d.path / "b", run_id);
  BOOST_REQUIRE((journaled.has_value() && scanned.has_value()));
  BOOST_TEST(journaled->unreadable().empty());  // no line was read
  BOOST_REQUIRE(journaled->size() == 300u);
  BOOST_REQUIRE(scanned->size() == 300u);
  for (std::size_t i = 0; i < journaled->size(); ++i) {
    BOOST_TEST(journaled->key(i) == scanned->key(i));
    BOOST_TEST((journaled->status(i) == scanned->status(i)), journaled->key(i));
  }
  BOOST_REQUIRE(journaled->superseded().size() == 1u);
  BOOST_TEST(scanned->superseded().size() == 1u);
  BOOST_TEST(journaled->superseded()[0].find("echo/s5@sim has more than one record") !=
             std::string::npos);
  BOOST_TEST(!journaled->missing()->count);
  BOOST_TEST(fs::is_regular_file(d.path / "a" / run_id / "case-index.bin"));
  BOOST_TEST(fs::is_regular_file(d.path / "a" / run_id / "case-index.journal"));
}

// A journal counts only while the segments are as its writers left them: a segment touched since,
// or a journal never closed (no trailer), is not taken and the segments are scanned; a writer
// that finds a journal it cannot vouch for removes it.
BOOST_AUTO_TEST_CASE(a_journal_counts_only_for_the_segments_its_writers_left) {
  mira::test::temp_dir d;
  journaled_run(d.path / "touched", 40);
  damage_record(d.path / "touched" / run_id, "s1");
  const auto last = list_segments(d.path / "touched" / run_id / "segments").back();
  fs::last_write_time(last, fs::last_write_time(last) + std::chrono::seconds(1));
  auto touched = run_reader::open(d.path / "touched", run_id);
  BOOST_REQUIRE(touched.has_value());
  BOOST_TEST(scanned_damage(*touched));

  journaled_run(d.path / "unclosed", 40);
  const auto folder = d.path / "unclosed" / run_id;
  damage_record(folder, "s1");
  segment_options o;
  o.journal = folder / "case-index.journal";
  fs::resize_file(o.journal, fs::file_size(o.journal) - 8);  // its closing "MIRA-CJ1" gone
  auto unclosed = run_reader::open(d.path / "unclosed", run_id);
  BOOST_REQUIRE(unclosed.has_value());
  BOOST_TEST(scanned_damage(*unclosed));
  fs::remove(folder / "case-index.bin");
  BOOST_TEST(segment_writer::open(folder / "segments", o).has_value());
  BOOST_TEST(!fs::exists(o.journal));
}

// A resumed session reads its run (the index its last reader kept) before it writes: its writer
// continues the journal, which the next reader takes without scanning the records old and new.
BOOST_AUTO_TEST_CASE(a_resumed_session_continues_the_journal) {
  mira::test::temp_dir d;
  journaled_run(d.path, 30);
  const auto folder = d.path / run_id;
  BOOST_TEST(run_reader::open(d.path, run_id).has_value());
  BOOST_TEST(fs::is_regular_file(folder / "case-index.bin"));
  {
    auto w = run_store::open(d.path, run_id);
    BOOST_REQUIRE(w.has_value());
    BOOST_TEST(!w->begin_session({}));
    BOOST_TEST(w->reader().size() == 30u);
    save(*w, {{"s30", case_state::failed}});
    BOOST_TEST(!w->finish({}, json::object{}));
  }
  damage_record(folder, "s1");
  auto r = run_reader::open(d.path, run_id);
  BOOST_REQUIRE(r.has_value());
  BOOST_TEST(r->unreadable().empty());  // no line was read
  BOOST_REQUIRE(r->size() == 31u);
  BOOST_TEST((r->status(*r->find("echo/s30@sim")) == case_state::failed));
}

BOOST_AUTO_TEST_SUITE_END()
