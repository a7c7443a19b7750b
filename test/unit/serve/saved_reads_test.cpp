// The run manager's heavy reads of a saved run (its cases, its reports), driven directly: a
// read whose client has left is not done, and a report read by clients at the same time is
// rendered and held once.
#include "serve/runs.hpp"

#include <mira/store/records.hpp>
#include <mira/store/run_store.hpp>

#include "common/temp_dir.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <memory>
#include <string>

namespace asio = boost::asio;
namespace fs = std::filesystem;
using namespace mira;
using serve::detail::run_manager;

namespace {

const std::string run_id = "20261207T000000Z-0001";

// A saved run of three cases whose session ended (`ended`) or was cut short.
void save_run(const fs::path& results, bool ended) {
  auto st = store::run_store::create(results, run_id, store::layout::compact);
  BOOST_REQUIRE(st);
  store::session_entry session;
  session.planned = 3;
  BOOST_REQUIRE(!st->begin_session(std::move(session)));
  auto writer = st->writer();
  BOOST_REQUIRE(writer);
  for (const char* sample : {"a", "b", "c"}) {
    plan::planned_case c;
    c.params.eval = "echo";
    c.params.sample = sample;
    c.params.target = "sim";
    c.key = plan::case_key(c.params);
    schedule::case_record r;
    r.state = schedule::case_state::passed;
    r.attempts = 1;
    (*writer)->submit(c.key, store::case_line(c, r),
                      [](boost::system::error_code ec) { BOOST_TEST(!ec); });
  }
  (*writer)->drain();
  if (ended) BOOST_REQUIRE(!st->finish({}, {}));
}

// Runs `body(manager)` to its end on an io_context of its own.
template <class Body>
void with_manager(const fs::path& results, Body body) {
  serve::server_config config;
  config.results_dir = results;
  asio::io_context ctx;
  run_manager m(ctx.get_executor(), config);
  bool done = false;
  asio::co_spawn(
      ctx,
      [&]() -> asio::awaitable<void> {
        auto run = body(m);
        co_await std::move(run);
        done = true;
      },
      asio::detached);
  ctx.run();
  BOOST_TEST(done);
}

using text = serve::detail::shared_reports::text;

}  // namespace

BOOST_AUTO_TEST_SUITE(serve_saved_reads)

BOOST_AUTO_TEST_CASE(a_read_whose_client_has_left_is_not_done) {
  mira::test::temp_dir d;
  save_run(d.path, true);
  with_manager(d.path, [](run_manager& m) -> asio::awaitable<void> {
    auto gone = std::make_shared<std::atomic<bool>>(true);
    auto report = co_await m.report(run_id, "json", gone);
    BOOST_REQUIRE(!report);
    BOOST_TEST(report.error().status == 499);
    auto cases = co_await m.cases(run_id, std::nullopt, gone);
    BOOST_REQUIRE(!cases);
    BOOST_TEST(cases.error().status == 499);
    gone->store(false);
    cases = co_await m.cases(run_id, std::string("passed"), gone);
    BOOST_REQUIRE(cases);
    BOOST_TEST(std::count(cases->begin(), cases->end(), '\n') == 3);
  });
}

BOOST_AUTO_TEST_CASE(a_report_read_by_clients_at_the_same_time_is_held_once) {
  mira::test::temp_dir d;
  save_run(d.path, true);
  with_manager(d.path, [&](run_manager& m) -> asio::awaitable<void> {
    auto first = co_await m.report(run_id, "html");
    auto second = co_await m.report(run_id, "html");
    BOOST_REQUIRE(first);
    BOOST_REQUIRE(second);
    BOOST_TEST(first->first == "text/html; charset=utf-8");
    BOOST_TEST(first->second.get() == second->second.get());
    auto json = co_await m.report(run_id, "json");
    BOOST_REQUIRE(json);
    BOOST_TEST(json->second.get() != first->second.get());  // each format its own
    // A new meta.json (a resume began): rendered again, though the old text is still held.
    auto meta = d.path / run_id / "meta.json";
    fs::last_write_time(meta, fs::last_write_time(meta) + std::chrono::seconds(1));
    auto third = co_await m.report(run_id, "html");
    BOOST_REQUIRE(third);
    BOOST_TEST(third->second.get() != first->second.get());
    BOOST_TEST(*third->second == *first->second);
  });
}

BOOST_AUTO_TEST_CASE(the_report_of_a_run_whose_session_did_not_end_is_rendered_each_time) {
  mira::test::temp_dir d;
  save_run(d.path, false);  // its records may still grow
  with_manager(d.path, [](run_manager& m) -> asio::awaitable<void> {
    auto first = co_await m.report(run_id, "json");
    auto second = co_await m.report(run_id, "json");
    BOOST_REQUIRE(first);
    BOOST_REQUIRE(second);
    BOOST_TEST(first->second.get() != second->second.get());
  });
}

BOOST_AUTO_TEST_SUITE_END()
