// mira::session against a real study process: what a cancellation does in each state of a
// session (written down in docs/session.md), a resume through it, and its typed errors.
#include "common/run_co.hpp"
#include "common/temp_dir.hpp"
#include "integration/process_util.hpp"

#include <mira/session/session.hpp>
#include <mira/store/artifacts.hpp>
#include <mira/store/run_store.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json/parse.hpp>
#include <boost/test/data/monomorphic.hpp>
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <map>
#include <ostream>
#include <set>
#include <span>
#include <stdexcept>

namespace asio = boost::asio;
namespace bdata = boost::unit_test::data;
namespace fs = std::filesystem;
using namespace mira;
using namespace mira::test;
using namespace asio::experimental::awaitable_operators;

namespace {

std::size_t runs_in(const fs::path& results) {
  std::error_code ec;
  std::size_t n = 0;
  for (fs::directory_iterator it(results, ec), end; !ec && it != end; it.increment(ec)) ++n;
  return n;
}

session_options slow_session(const fs::path& results, int run_ms) {
  session_options o;
  o.study.command = py_study({"--run-ms", std::to_string(run_ms)});
  o.save.emplace();
  o.save->results_dir = results;
  return o;
}

// When the caller cancels, and what the session then answers.
enum class when { never, while_starting, at_first_attempt };

struct cancel_row {
  when at;
  bool opened;                    // completes with an outcome (else session_errc::cancelled)
  schedule::stop_reason stopped;  // of the outcome
  bool resumable;
  std::size_t folders;  // run folders made
};

std::ostream& operator<<(std::ostream& os, const cancel_row& r) {
  return os << "cancel " << static_cast<int>(r.at);
}

const cancel_row cancel_table[] = {
    {when::never, true, schedule::stop_reason::none, false, 1},
    {when::while_starting, false, schedule::stop_reason::none, false, 0},
    {when::at_first_attempt, true, schedule::stop_reason::interrupted, true, 1},
};

// What a session told of each case: on_case, on_saved, and what could not be read back when it
// was told saved.
struct told {
  std::map<std::size_t, int> ended, saved;
  std::set<std::size_t> cancelled;
  std::set<std::size_t> to_be_saved;  // session::saves() at their on_case
  std::vector<std::size_t> saved_before_ended;
  std::vector<std::string> not_on_disk;  // keys told saved before their record read back
};

// Runs `o`, cancelled once `cancel_at` cases have ended (0: never). Each case told saved must be
// readable then: `on_disk(session, key)`.
session_outcome run_telling(session_options o, told& t, std::size_t cancel_at,
                            std::function<bool(const session&, const std::string&)> on_disk) {
  const session* running = nullptr;
  asio::cancellation_signal cancel;
  o.hooks.on_case = [&](std::size_t i, const schedule::case_record& r) {
    ++t.ended[i];
    if (r.state == schedule::case_state::cancelled) t.cancelled.insert(i);
    if (running->saves(r)) t.to_be_saved.insert(i);
    if (t.ended.size() == cancel_at) cancel.emit(asio::cancellation_type::terminal);
  };
  o.hooks.on_saved = [&](std::span<const std::size_t> cases) {
    for (auto i : cases) {
      ++t.saved[i];
      if (!t.ended.count(i)) t.saved_before_ended.push_back(i);
      auto key = running->plan().cases.key(i);
      if (!on_disk(*running, key)) t.not_on_disk.push_back(key);
    }
  };
  return run_co([&](asio::io_context&) -> asio::awaitable<session_outcome> {
    auto opened = co_await session::open(std::move(o));
    if (!opened) throw std::runtime_error(opened.error().message());
    running = &*opened;
    auto out = co_await opened->async_run(
        asio::bind_cancellation_slot(cancel.slot(), asio::use_awaitable));
    // What the run left in the slot holds an executor of run_co's io_context, which is gone
    // when `cancel` is.
    cancel.slot().clear();
    co_return out;
  });
}

// Each case ended and not cancelled was to be saved (session::saves) and was told saved exactly
// once, after its on_case and once it could be read back; no cancelled case was.
void check_told(const told& t, const session_outcome& out) {
  BOOST_TEST(t.saved_before_ended.empty());
  BOOST_TEST(t.not_on_disk.empty(), t.not_on_disk.size() << " case(s) told saved were not");
  BOOST_TEST(t.saved.size() == out.ran);
  for (auto& [i, n] : t.ended) {
    const bool cancelled = t.cancelled.count(i) > 0;
    BOOST_TEST(n == 1);
    BOOST_TEST(t.to_be_saved.count(i) == (cancelled ? 0u : 1u), "case " << i);
    BOOST_TEST(t.saved.count(i) == (cancelled ? 0u : 1u), "case " << i);
  }
  for (auto& [i, n] : t.saved) BOOST_TEST(n == 1, "case " << i << " told saved " << n << " times");
}

}  // namespace

BOOST_AUTO_TEST_SUITE(session_tests)

BOOST_DATA_TEST_CASE(a_cancellation_in_each_state_of_a_session, bdata::make(cancel_table), row) {
  temp_dir dir;
  auto results = dir.path / "results";
  // The slow study waits 20 s per case unless cancelled: only a cancellation ends it early.
  auto o = slow_session(results, row.at == when::never ? 0 : 20000);
  asio::cancellation_signal cancel;
  if (row.at == when::at_first_attempt)
    o.hooks.on_attempt = [&](std::size_t) { cancel.emit(asio::cancellation_type::terminal); };
  auto result = run_co(
      [&](asio::io_context& ctx) -> asio::awaitable<tl::expected<session_outcome, session_error>> {
        if (row.at == when::while_starting)  // once the session has begun to start the study
          asio::post(ctx, [&] {
            asio::post(ctx, [&] { cancel.emit(asio::cancellation_type::terminal); });
          });
        co_return co_await async_run_session(
            ctx.get_executor(), std::move(o),
            asio::bind_cancellation_slot(cancel.slot(), asio::use_awaitable));
      });
  BOOST_TEST(result.has_value() == row.opened, (result ? "" : result.error().message()));
  if (result) {
    BOOST_TEST(result->stopped() == row.stopped);
    BOOST_TEST(result->resumable() == row.resumable);
    BOOST_TEST(!result->run_id.empty());
    // Every finished case is saved; what was cancelled is not, so a resume runs it.
    auto saved = store::load_run(results, result->run_id);
    BOOST_REQUIRE(saved);
    BOOST_TEST(saved->cases.size() == result->ran);
    BOOST_TEST(saved->meta.sessions.back().stopped ==
               (row.stopped == schedule::stop_reason::none ? "" : "interrupted"));
  } else {
    BOOST_TEST(result.error().code == make_error_code(session_errc::cancelled));
  }
  BOOST_TEST(runs_in(results) == row.folders);
  BOOST_TEST(no_children_left());
}

// A dropped awaitable (the loser of `||`) stops the run as a cancellation does, and the run it
// saved is resumed by a second session, which runs only what the first lacked.
BOOST_AUTO_TEST_CASE(a_dropped_session_leaves_a_run_that_a_second_session_finishes) {
  temp_dir dir;
  auto results = dir.path / "results";
  run_co([&](asio::io_context& ctx) -> asio::awaitable<void> {
    asio::steady_timer timer(ctx, std::chrono::milliseconds(300));
    auto raced = co_await (run_session(slow_session(results, 20000)) ||
                           timer.async_wait(asio::as_tuple(asio::use_awaitable)));
    BOOST_TEST(raced.index() == 1u);
  });
  BOOST_REQUIRE(runs_in(results) == 1u);
  auto id = fs::directory_iterator(results)->path().filename().string();
  auto first = store::load_run(results, id);
  BOOST_REQUIRE(first);
  BOOST_TEST(first->meta.sessions.back().stopped == "interrupted");

  auto o = slow_session(results, 0);
  o.save->resume = id;
  auto second = run_co(
      [&](asio::io_context&) -> asio::awaitable<tl::expected<session_outcome, session_error>> {
        return run_session(std::move(o));
      });
  BOOST_REQUIRE(second.has_value());
  BOOST_TEST(second->run_id == id);
  BOOST_TEST(second->stopped() == schedule::stop_reason::none);
  BOOST_TEST(second->reused + second->ran == second->plan.cases.size());
  BOOST_TEST(!second->resumable());
  BOOST_TEST(store::load_run(results, id)->cases.size() == second->plan.cases.size());
}

// A session keeps the whole records of its first kept_records cases only; its summary, the run's
// report.json and a resume's summary still cover every case (a resume reads the saved records
// into its summary and keeps none of them beyond those).
BOOST_AUTO_TEST_CASE(only_the_first_records_are_kept_and_the_summaries_cover_every_case) {
  temp_dir dir;
  auto results = dir.path / "results";
  auto run = [&](std::string resume) {
    auto o = slow_session(results, 0);
    o.kept_records = 2;
    o.save->resume = std::move(resume);
    return run_co(
        [&](asio::io_context&) -> asio::awaitable<tl::expected<session_outcome, session_error>> {
          return run_session(std::move(o));
        });
  };
  auto total = [](const aggregate::summary& s) {
    std::size_t n = 0;
    for (auto c : s.counts) n += c;
    return n;
  };
  auto first = run("");
  BOOST_REQUIRE(first.has_value());
  const auto planned = first->plan.cases.size();
  BOOST_REQUIRE(planned > 2u);
  BOOST_TEST(first->report.cases.size() == 2u);
  BOOST_TEST(first->report.cases[0].attempts > 0);
  BOOST_TEST(total(first->summary) == planned);
  auto report = boost::json::parse(read_file((first->folder / "report.json").string()));
  BOOST_TEST(report.at("records").at("count").as_int64() == static_cast<std::int64_t>(planned));
  BOOST_TEST(!report.as_object().contains("cases"));

  auto again = run(first->run_id);
  BOOST_REQUIRE(again.has_value());
  BOOST_TEST(again->ran == 0u);
  BOOST_TEST(again->reused == planned);
  BOOST_TEST(again->report.cases.size() == 2u);
  BOOST_TEST(again->report.cases[0].state == first->report.cases[0].state);
  BOOST_TEST(total(again->summary) == planned);
  BOOST_TEST(again->summary.overall.passed == first->summary.overall.passed);
}

// Errors are typed: a caller decides on the code, never on the text.
BOOST_AUTO_TEST_CASE(errors_carry_the_layer_code_that_caused_them) {
  temp_dir dir;
  auto run = [&](session_options o) {
    return run_co(
        [&](asio::io_context&) -> asio::awaitable<tl::expected<session_outcome, session_error>> {
          return run_session(std::move(o));
        });
  };
  auto bad_glob = slow_session(dir.path / "results", 0);
  bad_glob.selection.evals = {"no-such-eval"};
  auto e = run(std::move(bad_glob));
  BOOST_REQUIRE(!e);
  BOOST_TEST(e.error().code == make_error_code(session_errc::invalid_selection),
             e.error().message());
  // The field the plan refused, as data, and the plan's words (no command-line flag).
  BOOST_TEST((e.error().field == mira::plan::field::evals));
  BOOST_TEST(e.error().message().find("evals: \"no-such-eval\"") == 0u, e.error().message());

  auto missing = slow_session(dir.path / "results", 0);
  missing.save->resume = "20990101T000000Z-0000";
  e = run(std::move(missing));
  BOOST_REQUIRE(!e);
  BOOST_TEST(e.error().code == store::make_error_code(store::errc::not_found), e.error().message());

  auto capped = slow_session(dir.path / "results", 0);
  capped.max_cases = 1;
  e = run(std::move(capped));
  BOOST_REQUIRE(!e);
  BOOST_TEST(e.error().code == make_error_code(session_errc::too_many_cases), e.error().message());

  session_options no_study;
  no_study.study.command.argv = {"/nonexistent/study"};
  e = run(std::move(no_study));
  BOOST_REQUIRE(!e);
  // The host's own code is kept, and matches the session's condition.
  BOOST_TEST(e.error().code == mira::errc::spawn_failed, e.error().message());
  BOOST_TEST((e.error().code == session_condition::study_failed));
  BOOST_TEST(runs_in(dir.path / "results") == 0u);
}

// hooks.on_saved (#36, item 8: `mira run --format jsonl` prints a case only then): in both
// layouts, each case the session saves is told once, after its on_case, when its record reads
// back from the run folder; a cancelled case (not run) never is.
BOOST_AUTO_TEST_CASE(a_case_is_told_saved_once_its_record_reads_back) {
  for (auto layout : {store::layout::per_case, store::layout::compact}) {
    BOOST_TEST_CONTEXT((layout == store::layout::compact ? "compact" : "per-case")) {
      temp_dir dir;
      auto results = dir.path / "results";
      auto o = slow_session(results, 20);
      o.study.command.argv.insert(o.study.command.argv.end(), {"--samples", "12"});
      o.save->layout = layout;
      o.policy.concurrency.max_concurrent = 2;
      told t;
      // Cancelled at the third case: the cases not started end cancelled.
      auto out = run_telling(std::move(o), t, 3, [&](const session& s, const std::string& key) {
        auto saved = store::load_run(results, s.run_id());
        if (!saved) return false;
        return std::any_of(saved->cases.begin(), saved->cases.end(),
                           [&](const store::saved_case& c) { return c.key == key; });
      });
      BOOST_TEST(out.stopped() == schedule::stop_reason::interrupted);
      BOOST_TEST(t.ended.size() == 12u);
      BOOST_TEST(!t.cancelled.empty());
      BOOST_TEST(out.ran >= 3u);
      check_told(t, out);
      BOOST_TEST(store::load_run(results, out.run_id)->cases.size() == t.saved.size());
    }
  }
}

// The same in execute mode, whose cases are saved as artifacts; and a session that saves
// nothing tells nothing (`mira run --dry-run --format jsonl` prints each case as it ends).
BOOST_AUTO_TEST_CASE(an_artifact_is_told_saved_and_a_session_without_a_store_tells_nothing) {
  temp_dir dir;
  session_options o;
  o.study.command = py_study({"--samples", "6", "--caps", "cancel,execute"});
  o.mode = session_mode::execute;
  o.artifacts = dir.path / "artifacts";
  told t;
  auto out = run_telling(std::move(o), t, 0, [&](const session&, const std::string& key) {
    return fs::exists(store::artifact_dir::open(dir.path / "artifacts")->file_for(key));
  });
  BOOST_TEST(out.summary.count(schedule::case_state::executed) == 6u);
  check_told(t, out);

  session_options dry;
  dry.study.command = py_study({"--samples", "6"});
  told none;
  auto unsaved = run_telling(std::move(dry), none, 0,
                             [](const session&, const std::string&) { return false; });
  BOOST_TEST(unsaved.ran == 6u);
  BOOST_TEST(none.ended.size() == 6u);
  BOOST_TEST(none.to_be_saved.empty());
  BOOST_TEST(none.saved.empty());
}

BOOST_AUTO_TEST_SUITE_END()
