// Pages of a saved run's cases: every case once whatever the page size and the order (ties and
// cases without a value included), a cursor refused when it is of another order, filters by
// status, eval, score and text, and one case read whole.
#include <mira/store/case_query.hpp>
#include <mira/store/records.hpp>
#include <mira/store/run_store.hpp>
#include "store/case_batch.hpp"

#include "common/temp_dir.hpp"

#include <boost/test/unit_test.hpp>

#include <set>

using namespace mira::store;
using mira::schedule::case_state;

namespace {

const std::string run_id = "20261207T120000Z-ab12";

mira::plan::planned_case planned(int i) {
  mira::plan::planned_case c;
  c.params.eval = i % 2 ? "odd" : "even";
  c.params.sample = "s" + std::to_string(i);
  c.params.target = "sim";
  c.key = mira::plan::case_key(c.params);
  return c;
}

// Ten cases: s0..s9, latency 3 ms for the first five and 1 ms for the rest (ties), s7 failed,
// s9 without a result (an error: no score).
void save_cases(run_store& w) {
  auto writer = w.writer();
  BOOST_REQUIRE(writer.has_value());
  for (int i = 0; i < 10; ++i) {
    mira::schedule::case_record r;
    r.state = i == 7 ? case_state::failed : i == 9 ? case_state::error : case_state::passed;
    r.attempts = 1;
    r.latency_seconds = i < 5 ? 0.003 : 0.001;
    auto c = planned(i);
    if (i != 9)
      r.result_json = R"({"eval":")" + c.params.eval + R"(","sample":"s)" + std::to_string(i) +
                      R"(","target":"sim","input":["Question )" + std::to_string(i) +
                      R"("],"passed":true,"aggregate":0.)" + std::to_string(i) +
                      R"(,"scores":[],"transcript":{"final_response":"Answer )" +
                      std::to_string(i) + R"("}})";
    (*writer)->submit(c.key, case_line(c, r),
                      [](boost::system::error_code ec) { BOOST_TEST(!ec); });
  }
  (*writer)->drain();
}

struct saved {
  mira::test::temp_dir dir;
  std::optional<run_reader> run;
  explicit saved(layout l = layout::compact) {
    auto w = run_store::create(dir.path, run_id, l);
    BOOST_REQUIRE(w.has_value());
    BOOST_TEST(!w->begin_session({}));
    save_cases(*w);
    w->append_event(R"({"key":"odd/s7@sim","method":"event","params":{"kind":"turn"}})");
    w->append_event(R"({"key":"odd/s1@sim","method":"event","params":{"kind":"turn"}})");
    BOOST_TEST(!w->flush_events());
    auto r = run_reader::open(dir.path, run_id);
    BOOST_REQUIRE(r.has_value());
    run.emplace(std::move(*r));
  }
};

// Every page of `q`, walked by its cursors: the keys in order.
std::vector<std::string> walk(const run_reader& run, case_query q) {
  std::vector<std::string> keys;
  for (int pages = 0; pages < 20; ++pages) {
    auto page = query_cases(run, q);
    BOOST_REQUIRE(page.has_value());
    for (auto& c : page->cases) keys.push_back(c.key);
    if (page->next_cursor.empty()) break;
    q.cursor = page->next_cursor;
  }
  return keys;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(case_query_tests)

// In the compact layout the reader knows each case's state, and a page in key order is counted
// and read without the rest; in the per-case layout every record is read.
BOOST_AUTO_TEST_CASE(pages_hold_every_case_once_in_each_order) {
  for (auto l : {layout::compact, layout::per_case}) {
    saved s(l);
    for (auto sort : {case_sort::key, case_sort::latency, case_sort::score})
      for (bool descending : {false, true})
        for (std::size_t limit : {1u, 3u, 10u, 500u}) {
          case_query q;
          q.sort = sort;
          q.descending = descending;
          q.limit = limit;
          auto keys = walk(*s.run, q);
          BOOST_TEST_CONTEXT(to_string(sort)
                             << " descending " << descending << " limit " << limit) {
            BOOST_TEST(keys.size() == 10u);
            BOOST_TEST(std::set<std::string>(keys.begin(), keys.end()).size() == 10u);
            if (sort == case_sort::latency && descending)
              BOOST_TEST(keys.front() == "even/s0@sim");  // 3 ms, then by key
            if (sort == case_sort::score)
              BOOST_TEST(keys.back() == "odd/s9@sim");  // no score: last either way
          }
        }
    case_query failed;
    failed.filter.statuses = {"failed", "error"};
    failed.limit = 1;
    auto first = query_cases(*s.run, failed);
    BOOST_TEST(first->matched == 2u);
    failed.cursor = first->next_cursor;
    auto second = query_cases(*s.run, failed);
    BOOST_TEST(second->matched == 2u);  // every page counts the whole run
    BOOST_REQUIRE(second->cases.size() == 1u);
    BOOST_TEST(second->cases[0].key == "odd/s9@sim");
    BOOST_TEST(second->next_cursor.empty());
  }
}

BOOST_AUTO_TEST_CASE(filters_and_summaries) {
  saved s;
  case_query q;
  q.filter.statuses = {"failed", "error"};
  auto page = query_cases(*s.run, q);
  BOOST_REQUIRE(page.has_value());
  BOOST_TEST(page->matched == 2u);
  BOOST_TEST(page->cases[0].key == "odd/s7@sim");
  BOOST_TEST(page->cases[0].input_preview == "Question 7");
  BOOST_TEST(page->cases[0].response_preview == "Answer 7");
  BOOST_TEST(*page->cases[0].score == 0.7);
  BOOST_TEST(!page->cases[1].score);

  q = {};
  q.filter.evals = {"even"};
  q.filter.score_min = 0.3;
  BOOST_TEST(query_cases(*s.run, q)->matched == 3u);  // s4, s6, s8
  q = {};
  q.filter.text = "aNsWeR 5";
  auto found = query_cases(*s.run, q);
  BOOST_TEST(found->matched == 1u);
  BOOST_TEST(found->cases[0].key == "odd/s5@sim");
}

// A case's record carries its sample's tags (the study's listing, through the plan), which a page
// filters by (any of them) and shows; a record read and saved again (a merge, a report's
// rewrite) keeps them.
BOOST_AUTO_TEST_CASE(the_listings_tags_are_saved_and_filtered_by) {
  mira::test::temp_dir dir;
  auto w = run_store::create(dir.path, run_id, layout::compact);
  BOOST_REQUIRE(w.has_value());
  BOOST_TEST(!w->begin_session({}));
  using mira::plan::shared_name;
  mira::plan::case_list cases;
  const auto group = cases.add_group(shared_name("e"), 1, std::nullopt);
  const auto target = cases.add_target(shared_name("sim"), shared_name("p"), true);
  const std::vector<std::vector<std::string>> tags = {{"smoke", "fast"}, {}, {"slow"}};
  case_batch batch;
  for (std::size_t i = 0; i < tags.size(); ++i) {
    const auto sample = "s" + std::to_string(i);
    cases.append(cases.add_sample(group, sample, tags[i]), target, 0, 0);
    mira::schedule::case_record r;
    r.state = case_state::passed;
    r.attempts = 1;
    r.result_json = R"({"eval":"e","sample":")" + sample +
                    R"(","target":"sim","passed":true,"aggregate":1,"scores":[]})";
    batch.add_case(cases, i, r);
  }
  {
    auto writer = w->writer();
    BOOST_REQUIRE(writer.has_value());
    (*writer)->submit_batch(std::move(batch), [](case_batch, std::vector<save_failure> failed) {
      BOOST_TEST(failed.empty());
    });
    (*writer)->drain();
  }
  auto run = run_reader::open(dir.path, run_id);
  BOOST_REQUIRE(run.has_value());
  case_query q;
  q.filter.tags = {"slow", "fast"};
  auto page = query_cases(*run, q);
  BOOST_REQUIRE(page.has_value());
  BOOST_REQUIRE(page->matched == 2u);
  BOOST_TEST(page->cases[0].key == "e/s0@sim");
  BOOST_TEST(page->cases[0].tags == tags[0]);
  BOOST_TEST(page->cases[1].key == "e/s2@sim");

  std::string again;
  run->visit([&](std::size_t, const saved_case& c) {
    again = case_line(planned_case_of(c), decode_case_record(c.record));
    return false;
  });
  BOOST_TEST(again.find(R"("tags":["smoke","fast"])") != std::string::npos, again);
}

BOOST_AUTO_TEST_CASE(a_cursor_of_another_order_or_a_bad_limit_is_refused) {
  saved s;
  case_query q;
  q.limit = 2;
  auto first = query_cases(*s.run, q);
  q.cursor = first->next_cursor;
  q.sort = case_sort::latency;
  auto e = query_cases(*s.run, q);
  BOOST_REQUIRE(!e.has_value());
  BOOST_TEST(e.error().parameter == "cursor");
  q = {};
  q.sort = case_sort::latency;
  q.cursor = "latency:fast:k";
  BOOST_TEST(query_cases(*s.run, q).error().parameter == "cursor");
  q = {};
  q.limit = 0;
  BOOST_TEST(query_cases(*s.run, q).error().parameter == "limit");
}

BOOST_AUTO_TEST_CASE(one_case_whole_with_its_events) {
  saved s;
  auto d = read_case(*s.run, "odd/s7@sim");
  BOOST_REQUIRE(d.has_value());
  BOOST_TEST(d->record.key == "odd/s7@sim");
  BOOST_TEST(d->events.size() == 1u);
  BOOST_TEST(!d->trajectory);
  BOOST_TEST(!read_case(*s.run, "odd/s77@sim"));
}

BOOST_AUTO_TEST_SUITE_END()
