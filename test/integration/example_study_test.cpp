// The bundled example study end to end through host_handle: every planned case, events
// correlated with their request, and a deadline that the study sees as `cancel`.
#include "common/fake_study.hpp"
#include "common/run_co.hpp"
#include "integration/process_util.hpp"

#include <mira/plan/plan.hpp>

#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/steady_timer.hpp>

using namespace mira;
using namespace mira::test;
using namespace boost::asio::experimental::awaitable_operators;

namespace {

study_command example(std::vector<std::string> extra = {}) {
  study_command c;
  c.argv = {MIRA_EXAMPLE_STUDY};
  c.argv.insert(c.argv.end(), extra.begin(), extra.end());
  return c;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(example_study_runs)

BOOST_AUTO_TEST_CASE(every_available_case_runs_and_events_are_correlated) {
  run_co([](asio::io_context& ctx) -> asio::awaitable<void> {
    auto o = quiet_options();
    o.on_stderr_line = [](std::string_view) {};
    auto host = host_handle::spawn(ctx.get_executor(), example(), o);
    BOOST_REQUIRE(host);
    auto init = co_await host->initialize();
    BOOST_REQUIRE(init);
    BOOST_TEST(init->study == "example-study");
    auto list = co_await host->list_all();
    BOOST_REQUIRE(list);
    auto planned = plan::make_plan(*list);
    BOOST_REQUIRE(planned);
    auto& cases = planned->cases;
    BOOST_TEST(cases.size() == 41u);
    int passed = 0, na = 0, skipped = 0, events = 0;
    for (const auto& c : cases) {
      if (!c.available) {
        ++skipped;
        continue;
      }
      request_options counting;
      counting.on_notification = [&](const notification& n) {
        if (n.method == "event") ++events;
      };
      auto r = co_await host->run(c.params, std::move(counting));
      BOOST_REQUIRE_MESSAGE(r, c.key << ": " << (r ? "" : r.error().message()));
      BOOST_TEST(r->eval == c.params.eval);  // the study echoes the case identity
      BOOST_TEST(r->trial == c.params.trial);
      if (r->is_na())
        ++na;
      else if (r->passed)
        ++passed;
    }
    BOOST_TEST(passed == 37);
    BOOST_TEST(na == 1);
    BOOST_TEST(skipped == 3);
    // The SDK's started and finished around each of the 38 cases run, and the events eval's
    // two turns, two tool calls and output.
    BOOST_TEST(events == 2 * 38 + 5);
    co_await host->shutdown();
  });
}

BOOST_AUTO_TEST_CASE(a_deadline_cancels_the_slow_eval_in_the_study) {
  std::vector<std::string> stderr_lines;
  run_co([&](asio::io_context& ctx) -> asio::awaitable<void> {
    auto o = quiet_options();
    o.on_stderr_line = [&](std::string_view l) { stderr_lines.emplace_back(l); };
    auto host = host_handle::spawn(ctx.get_executor(), example({"--slow-ms", "30000"}), o);
    BOOST_REQUIRE(host);
    auto init = co_await host->initialize();
    BOOST_REQUIRE(init);
    protocol::run_params p;
    p.eval = "slow";
    p.sample = "long-task";
    p.target = "sim";
    asio::steady_timer deadline(ctx, std::chrono::milliseconds(100));
    auto raced = co_await (host->run(p) || deadline.async_wait(asio::use_awaitable));
    BOOST_TEST(raced.index() == 1u);
    co_await host->shutdown();
  });
  // initialize was request 1, the run request 2.
  BOOST_TEST((std::find(stderr_lines.begin(), stderr_lines.end(),
                        "example-study: run 2 cancelled") != stderr_lines.end()));
}

BOOST_AUTO_TEST_CASE(the_example_hosts_run_a_deadline_and_a_fail_fast_group) {
  auto r = run_command(std::string(MIRA_EXAMPLE_01) + " " + MIRA_EXAMPLE_STUDY +
                       " --slow-ms 30000 2>/dev/null");
  BOOST_TEST(r.code == 0);
  BOOST_TEST(r.out.find("greet/hi: passed") != std::string::npos);
  BOOST_TEST(r.out.find("slow/long-task: timed out, cancel sent") != std::string::npos);
  r = run_command(std::string(MIRA_EXAMPLE_03) + " " + MIRA_EXAMPLE_STUDY +
                  " --slow-ms 30000 2>/dev/null");
  BOOST_TEST(r.code == 0);
  BOOST_TEST(r.out.find("group case 0: Operation canceled") != std::string::npos);
  BOOST_TEST(r.out.find("group case 1: the study reported an error: no such sample") !=
             std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()
