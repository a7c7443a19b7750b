// The study SDK's serving, in one process: a study served on one end of a socket pair, and on
// the other this library's host (for what a host sees) or raw protocol lines (for the exact
// frames: cancel answers, errors, notifications).
#include "common/run_co.hpp"
#include "common/temp_dir.hpp"

#include <mira/host.hpp>
#include <mira/study.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/local/connect_pair.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/write.hpp>
#include <boost/json/parse.hpp>
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <mutex>
#include <set>
#include <stop_token>
#include <string>
#include <thread>

namespace asio = boost::asio;
namespace json = boost::json;
namespace study = mira::study;
using mira::protocol::transcript;
using mira::test::run_co;
using socket_t = asio::local::stream_protocol::socket;
using namespace std::chrono_literals;

namespace {

// A study of one eval "e" (samples s0..s{n-1}, target sim) whose subject is `subject`, scored
// by one scorer that passes a response "ok".
study::registry one_eval(study::subject subject, std::size_t samples = 3) {
  study::registry r("test-study", "1.0");
  r.default_target({"sim", "sim", true, {}});
  auto& e = r.add("e");
  for (std::size_t i = 0; i < samples; ++i)
    e.add_sample(
        {"s" + std::to_string(i), json::array{"q" + std::to_string(i)}, json::value("ok"), {}, {}});
  e.score_with(study::make_scorer(
      "is_ok", [](const study::sample&, const transcript& t) { return t.final_response == "ok"; }));
  e.subject(std::move(subject));
  return r;
}

std::string read_text(const std::filesystem::path& file) {
  std::ifstream in(file);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

study::subject answers(std::string text) {
  return [text](study::run_context&) -> asio::awaitable<transcript> {
    transcript t;
    t.final_response = text;
    co_return t;
  };
}

// Waits until cancelled (or an hour), noting that the cancellation reached it. The SDK's
// `started` event, queued before the subject runs and written once it waits, says it is waiting.
study::subject waits_for_cancel(bool* saw_cancel, int* started = nullptr) {
  return [saw_cancel, started](study::run_context& c) -> asio::awaitable<transcript> {
    if (started) ++*started;
    asio::steady_timer t(c.get_executor(), 1h);
    auto [ec] = co_await t.async_wait(asio::as_tuple(asio::use_awaitable));
    *saw_cancel = ec == asio::error::operation_aborted && c.cancelled();
    throw boost::system::system_error(ec);
  };
}

mira::protocol::run_params case_of(std::string sample, std::string eval = "e") {
  mira::protocol::run_params p;
  p.eval = std::move(eval);
  p.sample = std::move(sample);
  p.target = "sim";
  return p;
}

// A study served on one end of a socket pair (on the test's io_context) and the other end.
// The sockets live as long as the serve coroutine: a test that ends early (a failed
// BOOST_REQUIRE) closes the host's end, and the study winds down on its own.
struct served {
  struct pair {
    explicit pair(asio::io_context& io) : study_end(io), host_end(io) {}
    socket_t study_end, host_end;
  };

  served(asio::io_context& io, const study::registry& r, study::serve_options o = {})
      : sockets(std::make_shared<pair>(io)) {
    asio::local::connect_pair(sockets->study_end, sockets->host_end);
    asio::co_spawn(io, study::serve(r, study::stream_of(sockets->study_end), o),
                   [keep = sockets](std::exception_ptr) {
                     boost::system::error_code ignored;
                     keep->study_end.shutdown(socket_t::shutdown_both, ignored);
                   });
  }
  ~served() {
    boost::system::error_code ignored;
    sockets->host_end.close(ignored);
  }
  served(const served&) = delete;
  served& operator=(const served&) = delete;

  std::shared_ptr<pair> sockets;
  socket_t& host_end = sockets->host_end;
};

// Raw protocol lines over the host's end.
struct wire {
  socket_t& s;
  std::string buf;

  asio::awaitable<void> send(std::string line) {
    line += '\n';
    co_await asio::async_write(s, asio::buffer(line), asio::use_awaitable);
  }
  // The next line the study wrote, parsed; a null value at the end of its output.
  asio::awaitable<json::value> next() {
    auto [ec, n] = co_await asio::async_read_until(s, asio::dynamic_buffer(buf), '\n',
                                                   asio::as_tuple(asio::use_awaitable));
    if (ec) co_return json::value();
    auto v = json::parse(std::string_view(buf).substr(0, n - 1));
    buf.erase(0, n);
    co_return v;
  }
  // The next line that is not a notification.
  asio::awaitable<json::object> answer() {
    for (;;) {
      auto v = co_await next();
      if (v.is_null()) co_return json::object();
      if (!v.as_object().contains("method")) co_return v.as_object();
    }
  }
};

// A timer made on run_co's io_context, in an optional the subjects see: reset when the test's
// coroutine ends, before the io_context goes.
struct timer_slot {
  std::optional<asio::steady_timer>& timer;
  timer_slot(std::optional<asio::steady_timer>& t, asio::io_context& io) : timer(t) {
    timer.emplace(io, asio::steady_timer::time_point::max());
  }
  ~timer_slot() { timer.reset(); }
  timer_slot(const timer_slot&) = delete;
  timer_slot& operator=(const timer_slot&) = delete;
};

std::string run_line(int id, std::string_view sample, std::string_view eval = "e") {
  return R"({"id":)" + std::to_string(id) + R"(,"method":"run","params":{"eval":")" +
         std::string(eval) + R"(","sample":")" + std::string(sample) + R"(","target":"sim"}})";
}

}  // namespace

BOOST_AUTO_TEST_SUITE(study_serve)

BOOST_AUTO_TEST_CASE(initialize_advertises_what_the_study_has) {
  auto plain = one_eval(answers("ok"));
  auto caps = plain.describe(1000, true).capabilities;
  BOOST_TEST((caps == std::vector<std::string>{"usage", "execute", "score", "trials", "cancel"}));
  // serve_options::case_events (on unless turned off) adds the SDK's own two kinds.
  auto with_case_events = plain.describe(1000, true, true);
  BOOST_TEST(with_case_events.has_capability("events"));
  BOOST_TEST((with_case_events.capability_params.at("events").at("kinds") ==
              json::array{"started", "finished"}));
  plain.emits_events({"turn", "finished"});
  BOOST_TEST((plain.describe(1000, true, true).capability_params.at("events").at("kinds") ==
              json::array{"started", "turn", "finished"}));

  auto rich = one_eval(answers("ok"), 11);
  rich.add("axes").axis("effort", {"low", "high"}).add_sample({"x"}).subject(answers("ok"));
  rich.emits_events({"started", "finished"});
  rich.emits_trajectories();
  auto d = rich.describe(10, false);
  BOOST_TEST(
      (d.capabilities == std::vector<std::string>{"usage", "execute", "score", "trials", "axes",
                                                  "paginate", "events", "trajectory"}));
  BOOST_TEST(d.capability_params.at("events").at("kinds").as_array().size() == 2U);
  BOOST_TEST(d.capability_params.at("trajectory").at("version") == "1.7");
  BOOST_TEST(d.evals == 2);
  BOOST_TEST(d.study == "test-study");
}

BOOST_AUTO_TEST_CASE(check_names_what_a_host_would_refuse) {
  struct row {
    const char* what;
    std::function<void(study::registry&)> make;
    const char* message;
  };
  for (auto& r : std::vector<row>{
           {"no subject", [](study::registry& s) { s.add("a").add_target("sim"); },
            "eval 'a' has no subject"},
           {"no target", [](study::registry& s) { s.add("a").subject(answers("ok")); },
            "eval 'a' has no target (add one to it, or a default target to the study)"},
           {"two evals",
            [](study::registry& s) {
              s.default_target({"sim", "", true, {}});
              s.add("a").subject(answers("ok"));
              s.add("a").subject(answers("ok"));
            },
            "two evals are named 'a'"},
           {"two samples",
            [](study::registry& s) {
              s.add("a").add_target("sim").subject(answers("ok")).samples({{"x"}, {"x"}});
            },
            "eval 'a' has two samples with id 'x'"},
           {"axis named target",
            [](study::registry& s) {
              s.add("a").add_target("sim").subject(answers("ok")).axis("target", {"1"});
            },
            "eval 'a' has an axis named 'target', which keys collide with"},
       }) {
    BOOST_TEST_CONTEXT(r.what) {
      study::registry s("s");
      r.make(s);
      BOOST_TEST(s.check() == r.message);
    }
  }
}

BOOST_AUTO_TEST_CASE(a_host_lists_and_runs_the_study) {
  auto r = one_eval(answers("ok"), 2500);
  study::serve_options o;
  o.page_size = 1000;
  run_co([&](asio::io_context& io) -> asio::awaitable<void> {
    served s(io, r, o);
    auto host = mira::host_handle::connect(std::move(s.host_end));
    auto init = co_await host.initialize();
    BOOST_REQUIRE(init);
    BOOST_TEST(init->has_capability("paginate"));
    auto list = co_await host.list_all();
    BOOST_REQUIRE(list);
    BOOST_REQUIRE(list->evals.size() == 1U);
    BOOST_TEST(list->evals[0].samples.size() == 2500U);
    BOOST_TEST(list->evals[0].samples[2499].id == "s2499");
    BOOST_TEST(list->evals[0].scorers == std::vector<std::string>{"is_ok"});
    auto p = case_of("s7");
    p.params = {{"k", "v"}};
    p.trial = 2;
    p.trials = 4;
    p.seed = 44;
    auto res = co_await host.run(p);
    BOOST_REQUIRE(res);
    BOOST_TEST(res->passed);
    BOOST_TEST(res->aggregate == 1.0);
    BOOST_TEST(res->sample == "s7");
    BOOST_TEST((res->params == mira::protocol::axis_params{{"k", "v"}}));
    BOOST_TEST(res->trial == 2);
    BOOST_TEST(res->trials == 4);
    BOOST_TEST(res->seed.value_or(0) == 44);
    BOOST_TEST(res->input.get() == (json::array{"q7"}));
    BOOST_TEST(res->expected->get() == json::value("ok"));
    BOOST_TEST(res->scores.size() == 1U);
    BOOST_TEST(res->transcript.timing.duration_ms.has_value());
    co_await host.shutdown();
  });
}

BOOST_AUTO_TEST_CASE(an_infra_error_is_scored_na_and_a_failed_case_fails) {
  study::registry r("s");
  r.default_target({"sim", "", true, {}});
  auto ok = [](const study::sample&, const transcript& t) { return t.final_response == "ok"; };
  r.add("down")
      .add_sample({"x"})
      .score_with(study::make_scorer("is_ok", ok))
      .subject([](study::run_context&) -> asio::awaitable<transcript> {
        transcript t;
        t.error = "503";
        t.error_kind = mira::protocol::error_kind::infra;
        co_return t;
      });
  r.add("wrong")
      .add_sample({"x"})
      .score_with(study::make_scorer("is_ok", ok))
      .subject(answers("no"));
  run_co([&](asio::io_context& io) -> asio::awaitable<void> {
    served s(io, r);
    auto host = mira::host_handle::connect(std::move(s.host_end));
    co_await host.initialize();
    auto down = co_await host.run(case_of("x", "down"));
    BOOST_REQUIRE(down);
    BOOST_TEST(down->is_na());
    BOOST_TEST(!down->passed);
    BOOST_TEST(down->scores.at(0).reason == "503");
    auto wrong = co_await host.run(case_of("x", "wrong"));
    BOOST_REQUIRE(wrong);
    BOOST_TEST(!wrong->passed);
    BOOST_TEST(!wrong->is_na());
    co_await host.shutdown();
  });
}

// A judge whose provider is rate-limited: not a verdict, the case's infra error.
struct rate_limited_judge : study::scorers::judge {
  asio::awaitable<study::scorers::judgement> grade(const study::scorers::judge_request&) override {
    throw study::infra_error("rate limited (HTTP 429)", 1500ms);
    co_return study::scorers::judgement{};
  }
};

BOOST_AUTO_TEST_CASE(an_infra_error_thrown_by_a_subject_or_a_scorer_ends_the_case_as_infra) {
  study::registry r("s");
  r.default_target({"sim", "", true, {}});
  r.add("subject")
      .add_sample({"x"})
      .score_with(study::scorers::succeeded())
      .subject([](study::run_context&) -> asio::awaitable<transcript> {
        throw study::infra_error("connection refused");
        co_return transcript{};
      });
  r.add("judge")
      .add_sample({"x"})
      .score_with(study::scorers::succeeded())
      .score_with(study::scorers::model_graded(std::make_shared<rate_limited_judge>(), "ok?"))
      .subject(answers("ok"));
  run_co([&](asio::io_context& io) -> asio::awaitable<void> {
    served s(io, r);
    auto host = mira::host_handle::connect(std::move(s.host_end));
    co_await host.initialize();
    auto down = co_await host.run(case_of("x", "subject"));
    BOOST_REQUIRE(down);
    BOOST_TEST(down->is_na());
    BOOST_TEST(down->scores.size() == 1U);
    BOOST_TEST(down->transcript.error.value_or("") == "connection refused");
    BOOST_TEST((down->transcript.error_kind == mira::protocol::error_kind::infra));
    BOOST_TEST(!down->transcript.metadata.get().contains("retry_after_ms"));
    auto judged = co_await host.run(case_of("x", "judge"));
    BOOST_REQUIRE(judged);
    BOOST_TEST(judged->is_na());
    BOOST_TEST(judged->scores.size() == 1U);  // the scores before the judge's are dropped
    BOOST_TEST(judged->scores.at(0).reason == "rate limited (HTTP 429)");
    BOOST_TEST(judged->transcript.final_response == "ok");
    BOOST_TEST((judged->transcript.error_kind == mira::protocol::error_kind::infra));
    BOOST_TEST(judged->transcript.metadata.get().at("retry_after_ms").to_number<int>() == 1500);
    auto x = co_await host.execute(case_of("x", "subject"));
    BOOST_REQUIRE(x);
    BOOST_TEST(x->transcript.error.value_or("") == "connection refused");
    co_await host.shutdown();
  });
}

BOOST_AUTO_TEST_CASE(execute_runs_the_subject_and_score_only_the_scorers) {
  int runs = 0;
  auto r = one_eval([&runs](study::run_context&) -> asio::awaitable<transcript> {
    ++runs;
    transcript t;
    t.trajectory = json::object{
        {"schema_version", "ATIF-v1.7"},
        {"agent", json::object{{"name", "a"}, {"version", "1"}}},
        {"steps",
         json::array{json::object{{"step_id", 1}, {"source", "agent"}, {"message", "ok"}}}}};
    co_return t;
  });
  run_co([&](asio::io_context& io) -> asio::awaitable<void> {
    served s(io, r);
    auto host = mira::host_handle::connect(std::move(s.host_end));
    co_await host.initialize();
    auto x = co_await host.execute(case_of("s1"));
    BOOST_REQUIRE(x);
    BOOST_TEST(runs == 1);
    BOOST_TEST(x->transcript.final_response == "ok");  // projected from the trajectory
    BOOST_TEST(x->transcript.trajectory.has_value());
    mira::protocol::score_params sp;
    sp.identity = case_of("s1");
    sp.transcript = x->raw().at("transcript").as_object();
    auto scored = co_await host.score(sp);
    BOOST_REQUIRE(scored);
    BOOST_TEST(runs == 1);
    BOOST_TEST(scored->passed);
    sp.transcript["final_response"] = "changed";
    auto rescored = co_await host.score(sp);
    BOOST_REQUIRE(rescored);
    BOOST_TEST(!rescored->passed);
    co_await host.shutdown();
  });
}

// What the study writes until `answers` answers have come, in order, space-separated:
// "event:KIND:ID", "log:ID", "answer:ID" or "error:ID".
asio::awaitable<std::string> frames_until_answer(wire& w, int answers = 1) {
  std::string seen;
  while (answers > 0) {
    auto v = co_await w.next();
    if (v.is_null()) break;
    auto& o = v.as_object();
    if (!seen.empty()) seen += ' ';
    if (auto* m = o.if_contains("method")) {
      auto& params = o.at("params").as_object();
      auto id = std::to_string(params.at("request_id").as_int64());
      seen += *m == "event" ? "event:" + std::string(params.at("kind").as_string()) + ":" + id
                            : std::string(m->as_string()) + ":" + id;
      continue;
    }
    --answers;
    seen += (o.contains("error") ? "error:" : "answer:") + std::to_string(o.at("id").as_int64());
  }
  co_return seen;
}

BOOST_AUTO_TEST_CASE(the_sdk_brackets_each_case_with_started_and_finished) {
  bool saw_cancel = false;
  auto r = one_eval(answers("ok"));
  r.add("waits").add_sample({"w"}).subject(waits_for_cancel(&saw_cancel));
  run_co([&](asio::io_context& io) -> asio::awaitable<void> {
    served s(io, r);
    wire w{s.host_end, {}};
    co_await w.send(R"({"id":9,"method":"initialize","params":{}})");
    auto init = co_await w.answer();
    auto kinds = init.at("result").at("capability_params").at("events").at("kinds");
    BOOST_TEST((kinds == json::array{"started", "finished"}));
    co_await w.send(run_line(1, "s0"));
    auto ran = co_await frames_until_answer(w);
    BOOST_TEST(ran == "event:started:1 event:finished:1 answer:1");
    co_await w.send(run_line(2, "no-such-sample"));
    auto failed = co_await frames_until_answer(w);
    BOOST_TEST(failed == "event:started:2 event:finished:2 error:2");
    co_await w.send(
        R"({"id":3,"method":"execute","params":{"eval":"e","sample":"s1","target":"sim"}})");
    auto executed = co_await frames_until_answer(w);
    BOOST_TEST(executed == "event:started:3 event:finished:3 answer:3");
    co_await w.send(R"({"id":4,"method":"score","params":{"eval":"e","sample":"s1","target":"sim",)"
                    R"("transcript":{"final_response":"ok"}}})");
    auto scored = co_await frames_until_answer(w);
    BOOST_TEST(scored == "answer:4");
    // A cancelled case: its finished event comes before the cancelled error, whichever of the
    // two answers comes first.
    co_await w.send(run_line(5, "w", "waits"));
    auto first = co_await w.next();
    BOOST_TEST(first.at("params").at("kind") == "started");
    co_await w.send(R"({"id":6,"method":"cancel","params":{"id":5}})");
    auto rest = co_await frames_until_answer(w, 2);
    BOOST_TEST(rest.find("event:finished:5") < rest.find("error:5"), rest);
    BOOST_TEST(rest.find("error:5") != std::string::npos, rest);
    BOOST_TEST(saw_cancel);
    // The event carries the case, as the protocol's example does.
    co_await w.send(run_line(7, "s2"));
    auto started = co_await w.next();
    auto want = json::parse(R"({"request_id":7,"eval":"e","sample":"s2","target":"sim",)"
                            R"("kind":"started"})");
    BOOST_TEST((started.at("params") == want));
    co_await frames_until_answer(w);
    s.host_end.shutdown(socket_t::shutdown_send);
    auto end = co_await w.next();
    BOOST_TEST(end.is_null());
  });

  study::serve_options off;
  off.case_events = false;
  run_co([&](asio::io_context& io) -> asio::awaitable<void> {
    served s(io, r, off);
    wire w{s.host_end, {}};
    co_await w.send(R"({"id":9,"method":"initialize","params":{}})");
    auto init = co_await w.answer();
    BOOST_TEST(!init.at("result").as_object().contains("capability_params"));
    co_await w.send(run_line(1, "s0"));
    auto ran = co_await frames_until_answer(w);
    BOOST_TEST(ran == "answer:1");
    s.host_end.shutdown(socket_t::shutdown_send);
    BOOST_TEST((co_await w.next()).is_null());
  });
}

BOOST_AUTO_TEST_CASE(a_metric_json_cannot_carry_is_dropped_with_a_warning) {
  auto r = one_eval([](study::run_context&) -> asio::awaitable<transcript> {
    transcript t;
    t.final_response = "ok";
    t.metrics = {{"recall", 0.5},
                 {"ratio", std::numeric_limits<double>::quiet_NaN()},
                 {"speed", -std::numeric_limits<double>::infinity()}};
    co_return t;
  });
  run_co([&](asio::io_context& io) -> asio::awaitable<void> {
    served s(io, r);
    auto host = mira::host_handle::connect(std::move(s.host_end));
    co_await host.initialize();
    std::vector<std::string> logs;
    mira::request_options o;
    o.on_notification = [&logs](const mira::notification& n) {
      if (n.method == "log") logs.emplace_back(n.params.at("message").as_string());
    };
    // Built outside the co_await: g++ 12 mishandles argument objects inside one
    // (docs/toolchain-notes.md).
    auto running = host.run(case_of("s1"), std::move(o));
    auto res = co_await std::move(running);
    BOOST_REQUIRE_MESSAGE(res, (res ? "" : res.error().message()));
    BOOST_TEST(res->passed);
    BOOST_TEST((res->transcript.metrics == std::map<std::string, double>{{"recall", 0.5}}));
    BOOST_TEST(
        (logs == std::vector<std::string>{
                     "case e/s1@sim: metric 'ratio' is NaN, which JSON cannot carry: dropped",
                     "case e/s1@sim: metric 'speed' is infinite, which JSON cannot carry: "
                     "dropped"}));
    auto x = co_await host.execute(case_of("s1"));
    BOOST_REQUIRE(x);
    BOOST_TEST(x->transcript.metrics.size() == 1U);
    co_await host.shutdown();
  });
}

// A dataset file served: listed in pages, a case found by its id, its seeded files written into
// a work folder by the subject, and a record broken since the load failing its case alone.
BOOST_AUTO_TEST_CASE(a_host_lists_and_runs_a_dataset) {
  mira::test::temp_dir d;
  auto file = d.path / "data.jsonl";
  std::string lines;
  for (int i = 0; i < 25; ++i)
    lines += R"({"id": "q)" + std::to_string(i) + R"(", "input": "question )" + std::to_string(i) +
             R"(", "expected": "ok", "files": {"in/q.txt": "file of q)" + std::to_string(i) +
             "\"}}\n";
  std::ofstream(file) << lines;
  auto data = study::jsonl(file);
  BOOST_REQUIRE_MESSAGE(data, (data ? "" : data.error().message()));
  study::registry r("datasets");
  r.add("qa")
      .dataset(*data)
      .add_target("sim", "sim")
      .score_with(study::make_scorer(
          "is_ok",
          [](const study::sample&, const transcript& t) { return t.final_response == "ok"; }))
      .subject([&d](study::run_context& c) -> asio::awaitable<transcript> {
        auto folder = d.path / ("work-" + c.sample().id);
        std::filesystem::create_directories(folder);
        auto written = study::materialize_files(c.sample().files, folder);
        transcript t;
        t.final_response = written ? "ok" : written.error().message();
        t.metadata = json::object{{"seen", written ? read_text(folder / "in/q.txt") : ""}};
        co_return t;
      });
  study::serve_options o;
  o.page_size = 10;
  run_co([&](asio::io_context& io) -> asio::awaitable<void> {
    served s(io, r, o);
    auto host = mira::host_handle::connect(std::move(s.host_end));
    co_await host.initialize();
    auto list = co_await host.list_all();
    BOOST_REQUIRE(list);
    BOOST_REQUIRE(list->evals.at(0).samples.size() == 25U);
    BOOST_TEST(list->evals.at(0).samples[24].id == "q24");
    auto p = case_of("q17", "qa");
    auto res = co_await host.run(p);
    BOOST_REQUIRE_MESSAGE(res, (res ? "" : res.error().message()));
    BOOST_TEST(res->passed);
    BOOST_TEST((res->input.get() == json::array{"question 17"}));
    BOOST_TEST((res->transcript.metadata.get().at("seen") == "file of q17"));
    // The record is rewritten, same length, into one the loader would refuse.
    std::string broken = lines;
    std::string was = R"("input": "question 3")";
    std::string now = R"("input": 7)";
    now.resize(was.size(), ' ');
    broken.replace(broken.find(was), was.size(), now);
    std::ofstream(file) << broken;
    auto bad = co_await host.run(case_of("q3", "qa"));
    BOOST_REQUIRE(!bad);
    BOOST_TEST(bad.error().diag.study_error->message ==
               "sample qa/q3 could not be made: " + file.string() +
                   ":4: input: expected a string or an array of turns, got a number");
    co_await host.shutdown();
  });
}

BOOST_AUTO_TEST_CASE(errors_name_what_was_wrong) {
  study::registry r("s");
  r.default_target({"sim", "", true, {}});
  r.add("throws").add_sample({"x"}).subject([](study::run_context&) -> asio::awaitable<transcript> {
    throw std::runtime_error("boom");
    co_return transcript();
  });
  r.add("outage").add_sample({"x"}).subject([](study::run_context&) -> asio::awaitable<transcript> {
    throw study::request_error(study::errc::subject_failed, "provider down", true);
    co_return transcript();
  });
  r.add("badscorer")
      .add_sample({"x"})
      .score_with(study::make_scorer("broken",
                                     [](const study::sample&, const transcript&) -> bool {
                                       throw std::runtime_error("no judge");
                                     }))
      .subject(answers("ok"));
  run_co([&](asio::io_context& io) -> asio::awaitable<void> {
    served s(io, r);
    auto host = mira::host_handle::connect(std::move(s.host_end));
    co_await host.initialize();
    struct row {
      mira::protocol::run_params p;
      std::int64_t code;
      const char* message;
      bool retryable;
    };
    auto unknown_target = case_of("x", "throws");
    unknown_target.target = "gone";
    for (auto& c : std::vector<row>{
             {case_of("x", "nope"), -32602, "no such eval: nope", false},
             {case_of("y", "throws"), -32602, "no such sample: throws/y", false},
             {unknown_target, -32602, "no such target: throws@gone", false},
             {case_of("x", "throws"), -32603, "the subject failed: boom", false},
             {case_of("x", "outage"), -32603, "provider down", true},
             {case_of("x", "badscorer"), -32603, "scorer broken failed: no judge", false}}) {
      BOOST_TEST_CONTEXT(c.message) {
        auto res = co_await host.run(c.p);
        BOOST_REQUIRE(!res);
        BOOST_TEST((res.error().code ==
                    (c.retryable ? mira::errc::study_error_retryable : mira::errc::study_error)));
        BOOST_REQUIRE(res.error().diag.study_error.has_value());
        BOOST_TEST(res.error().diag.study_error->code == c.code);
        BOOST_TEST(res.error().diag.study_error->message == c.message);
      }
    }
    co_await host.shutdown();
  });
}

BOOST_AUTO_TEST_CASE(cancel_reaches_the_running_subject_and_the_host_gets_its_answer) {
  bool saw_cancel = false;
  auto r = one_eval(waits_for_cancel(&saw_cancel));
  run_co([&](asio::io_context& io) -> asio::awaitable<void> {
    served s(io, r);
    wire w{s.host_end, {}};
    co_await w.send(run_line(1, "s0"));
    auto started = co_await w.next();  // the SDK's `started` event: the subject is waiting
    BOOST_TEST(started.at("params").at("kind") == "started");
    BOOST_TEST(started.at("params").at("request_id") == 1);
    co_await w.send(R"({"id":2,"method":"cancel","params":{"id":1}})");
    auto a = co_await w.answer();
    auto b = co_await w.answer();
    if (a.at("id") == 1) std::swap(a, b);
    BOOST_TEST(a.at("id") == 2);
    BOOST_TEST(a.at("result").at("cancelled") == true);
    BOOST_TEST(b.at("id") == 1);
    BOOST_TEST(b.at("error").at("code") == -32800);
    BOOST_TEST(b.at("error").at("message") == "cancelled");
    BOOST_TEST(saw_cancel);
    co_await w.send(R"({"id":3,"method":"cancel","params":{"id":1}})");
    auto late = co_await w.answer();
    BOOST_TEST(late.at("result").at("cancelled") == false);
    s.host_end.shutdown(socket_t::shutdown_send);
    BOOST_TEST((co_await w.next()).is_null());
  });
}

BOOST_AUTO_TEST_CASE(a_request_waiting_for_a_slot_is_cancelled_without_running) {
  bool saw_cancel = false;
  int started = 0;
  auto r = one_eval(waits_for_cancel(&saw_cancel, &started));
  study::serve_options o;
  o.max_in_flight = 1;
  run_co([&](asio::io_context& io) -> asio::awaitable<void> {
    served s(io, r, o);
    wire w{s.host_end, {}};
    co_await w.send(run_line(1, "s0"));
    co_await w.next();  // 1 started
    co_await w.send(run_line(2, "s1"));
    co_await w.send(R"({"id":3,"method":"cancel","params":{"id":2}})");
    auto a = co_await w.answer();
    auto b = co_await w.answer();
    if (a.at("id") == 3) std::swap(a, b);
    BOOST_TEST(a.at("id") == 2);
    BOOST_TEST(a.at("error").at("code") == -32800);
    BOOST_TEST(b.at("result").at("cancelled") == true);
    BOOST_TEST(started == 1);
    // The end of the input ends the one still running.
    s.host_end.shutdown(socket_t::shutdown_send);
    auto last = co_await w.answer();
    BOOST_TEST(last.at("id") == 1);
    BOOST_TEST(last.at("error").at("code") == -32800);
    BOOST_TEST((co_await w.next()).is_null());
    BOOST_TEST(saw_cancel);
  });
}

BOOST_AUTO_TEST_CASE(bad_lines_are_reported_and_the_loop_goes_on) {
  auto r = one_eval(answers("ok"));
  run_co([&](asio::io_context& io) -> asio::awaitable<void> {
    served s(io, r);
    wire w{s.host_end, {}};
    co_await w.send("this is not json");
    auto log = co_await w.next();
    BOOST_TEST(log.at("method") == "log");
    co_await w.send(R"({"id":"seven","method":"run"})");
    BOOST_TEST((co_await w.next()).at("method") == "log");
    co_await w.send(R"({"id":1,"method":"frobnicate"})");
    auto unknown = co_await w.answer();
    BOOST_TEST(unknown.at("error").at("code") == -32601);
    BOOST_TEST(unknown.at("error").at("message") == "unknown method: frobnicate");
    co_await w.send(R"({"id":2,"method":"run","params":{"eval":7}})");
    auto bad = co_await w.answer();
    BOOST_TEST(bad.at("error").at("code") == -32602);
    co_await w.send(R"({"id":3,"method":"list_samples","params":{"eval":"e","cursor":"x"}})");
    BOOST_TEST((co_await w.answer()).at("error").at("code") == -32602);
    co_await w.send(run_line(4, "s0"));
    auto ok = co_await w.answer();
    BOOST_TEST(ok.at("result").at("passed") == true);
    s.host_end.shutdown(socket_t::shutdown_send);
    BOOST_TEST((co_await w.next()).is_null());
  });
}

BOOST_AUTO_TEST_CASE(the_hosts_timeout_is_the_subjects_deadline) {
  std::vector<std::optional<std::chrono::milliseconds>> seen;
  auto r = one_eval([&](study::run_context& c) -> asio::awaitable<transcript> {
    auto d = c.deadline();
    seen.push_back(d ? std::optional(std::chrono::duration_cast<std::chrono::milliseconds>(
                           *d - study::run_context::clock::now()))
                     : std::nullopt);
    transcript t;
    t.final_response = "ok";
    co_return t;
  });
  run_co([&](asio::io_context& io) -> asio::awaitable<void> {
    served s(io, r);
    wire w{s.host_end, {}};
    co_await w.send(
        R"({"id":1,"method":"run","params":{"eval":"e","sample":"s0","target":"sim","timeout_ms":5000}})");
    auto with = co_await w.answer();
    // Not echoed: the timeout is no part of the case's identity.
    BOOST_TEST(!with.at("result").as_object().contains("timeout_ms"));
    co_await w.send(run_line(2, "s0"));
    co_await w.answer();
    co_await w.send(
        R"({"id":3,"method":"run","params":{"eval":"e","sample":"s0","target":"sim","timeout_ms":-1}})");
    auto bad = co_await w.answer();
    BOOST_TEST(bad.at("error").at("message") == "timeout_ms: must not be negative");
    // Beyond what the clock can add (UBSan reports the overflow): a century at most.
    co_await w.send(
        R"({"id":4,"method":"run","params":{"eval":"e","sample":"s0","target":"sim","timeout_ms":9000000000000000000}})");
    BOOST_TEST((co_await w.answer()).contains("result"));
    s.host_end.shutdown(socket_t::shutdown_send);
    BOOST_TEST((co_await w.next()).is_null());
  });
  BOOST_REQUIRE(seen.size() == 3U);
  BOOST_REQUIRE(seen[0].has_value());
  BOOST_TEST(seen[0]->count() > 4000);  // generous: the case ran at once
  BOOST_TEST(seen[0]->count() <= 5000);
  BOOST_TEST(!seen[1].has_value());
  BOOST_REQUIRE(seen[2].has_value());
  BOOST_TEST(seen[2]->count() > std::int64_t{99} * 365 * 24 * 3600 * 1000);
}

BOOST_AUTO_TEST_CASE(blocking_work_sees_its_stop_token) {
  std::mutex m;
  std::condition_variable_any cv;
  auto r = one_eval([&](study::run_context& c) -> asio::awaitable<transcript> {
    auto stopped = co_await c.blocking([&](std::stop_token st) {
      std::unique_lock lock(m);
      return cv.wait(lock, st, [] { return false; }) ? "woken" : "stopped";
    });
    transcript t;
    t.final_response = stopped;
    co_return t;  // a result despite the cancel: the host gets it (best effort)
  });
  run_co([&](asio::io_context& io) -> asio::awaitable<void> {
    served s(io, r);
    wire w{s.host_end, {}};
    co_await w.send(run_line(1, "s0"));
    co_await w.next();
    co_await w.send(R"({"id":2,"method":"cancel","params":{"id":1}})");
    auto a = co_await w.answer();
    auto b = co_await w.answer();
    if (a.at("id") == 2) std::swap(a, b);
    BOOST_TEST(a.at("result").at("transcript").at("final_response") == "stopped");
    s.host_end.shutdown(socket_t::shutdown_send);
    BOOST_TEST((co_await w.next()).is_null());
  });
}

// A stop token asked for off the I/O thread as the cancel comes: the subject's own thread waits
// until the request is marked cancelled and asks for the token at once, while the I/O thread,
// which has just marked it, looks for a token to stop. Not through blocking(), which makes the
// token on the I/O thread before it hands over. The token is stopped every time.
BOOST_AUTO_TEST_CASE(a_stop_token_made_off_the_io_thread_as_the_cancel_comes_is_stopped) {
  constexpr int cases = 200;
  auto r = one_eval([](study::run_context& c) -> asio::awaitable<transcript> {
    std::string seen = "not cancelled";
    std::jthread asker([&c, &seen](std::stop_token own) {
      const auto give_up = std::chrono::steady_clock::now() + 20s;
      while (!c.cancelled() && !own.stop_requested() && std::chrono::steady_clock::now() < give_up)
        std::this_thread::yield();
      if (c.cancelled()) seen = c.stop_token().stop_requested() ? "stopped" : "not stopped";
    });
    asio::steady_timer until_cancelled(c.get_executor(), 1h);
    co_await until_cancelled.async_wait(asio::as_tuple(asio::use_awaitable));
    asker.join();  // at once: the request is marked cancelled before its slot hears it
    transcript t;
    t.final_response = seen;
    co_return t;  // a result despite the cancel: the host gets it
  });
  run_co(
      [&](asio::io_context& io) -> asio::awaitable<void> {
        served s(io, r);
        wire w{s.host_end, {}};
        int stopped = 0;
        for (int id = 1; id < 2 * cases; id += 2) {
          co_await w.send(run_line(id, "s0"));
          co_await w.next();  // "started": the subject's thread waits for the cancel
          std::string cancel = R"({"id":)" + std::to_string(id + 1) +
                               R"(,"method":"cancel","params":{"id":)" + std::to_string(id) + "}}";
          co_await w.send(std::move(cancel));
          auto a = co_await w.answer();
          auto b = co_await w.answer();
          if (a.at("id") == id + 1) std::swap(a, b);
          BOOST_REQUIRE(a.contains("result"));
          const bool ok = a.at("result").at("transcript").at("final_response") == "stopped";
          BOOST_TEST(ok, "request " << id);
          stopped += static_cast<int>(ok);
        }
        BOOST_TEST(stopped == cases);
        s.host_end.shutdown(socket_t::shutdown_send);
        BOOST_TEST((co_await w.next()).is_null());
      },
      std::chrono::seconds(60));
}

BOOST_AUTO_TEST_CASE(a_torn_down_io_context_stops_blocking_work_in_flight) {
  std::mutex m;
  std::condition_variable_any cv;
  bool stopped = false;
  auto r = one_eval([&](study::run_context& c) -> asio::awaitable<transcript> {
    co_await c.blocking([&](std::stop_token st) {
      std::unique_lock lock(m);
      stopped = !cv.wait(lock, st, [] { return false; });
    });
    co_return transcript{};
  });
  {
    asio::io_context io;
    served s(io, r);
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
          wire w{s.host_end, {}};
          co_await w.send(run_line(1, "s0"));
          co_await w.next();  // "started": the subject waits on the pool
          io.stop();
        },
        asio::detached);
    io.run();
  }  // the io_context goes with the case in flight: the study's pool must not wait for ever
  BOOST_TEST(stopped);
}

// Coroutine scorers of two cases wait at once, and an `initialize` is answered meanwhile:
// each answer is its own, whole.
BOOST_AUTO_TEST_CASE(coroutine_scorers_in_flight_answer_each_their_own) {
  std::optional<asio::steady_timer> gate;
  int waiting = 0;
  study::registry r("test-study", "1.0");
  r.default_target({"sim", "sim", true, {}});
  auto& e = r.add("e");
  e.add_sample({"s0"}).add_sample({"s1"}).subject(answers("ok"));
  e.score_with(study::scorer(
      "waits",
      study::scorer::coroutine(
          [&](const study::sample&, const transcript&) -> asio::awaitable<mira::protocol::score> {
            if (++waiting == 2)
              gate->cancel();
            else
              co_await gate->async_wait(asio::as_tuple(asio::use_awaitable));
            co_return study::pass("waits");
          })));
  run_co([&](asio::io_context& io) -> asio::awaitable<void> {
    timer_slot opens(gate, io);
    served s(io, r);
    wire w{s.host_end, {}};
    // One write: both scorers are waiting when the initialize is read.
    std::string lines = run_line(1, "s0") + "\n" + run_line(2, "s1") + "\n" +
                        R"({"id":3,"method":"initialize","params":{"protocol_version":"1"}})" +
                        "\n";
    co_await asio::async_write(s.host_end, asio::buffer(lines), asio::use_awaitable);
    std::map<std::int64_t, json::object> by_id;
    for (int i = 0; i < 3; ++i) {
      auto a = co_await w.answer();
      by_id[a.at("id").as_int64()] = a;
    }
    BOOST_TEST(by_id.at(1).at("result").at("sample") == "s0");
    BOOST_TEST(by_id.at(1).at("result").at("passed") == true);
    BOOST_TEST(by_id.at(2).at("result").at("sample") == "s1");
    BOOST_TEST(by_id.at(3).at("result").as_object().contains("capabilities"));
    s.host_end.shutdown(socket_t::shutdown_send);
    BOOST_TEST((co_await w.next()).is_null());
  });
  BOOST_TEST(waiting == 2);
}

BOOST_AUTO_TEST_CASE(a_cancel_that_reaches_a_coroutine_scorer_is_answered_as_cancelled) {
  study::registry r("test-study", "1.0");
  r.default_target({"sim", "sim", true, {}});
  auto& e = r.add("e");
  e.add_sample({"s0"}).subject(answers("ok"));
  e.score_with(study::scorer(
      "judge",
      study::scorer::coroutine(
          [](const study::sample&, const transcript&) -> asio::awaitable<mira::protocol::score> {
            asio::steady_timer t(co_await asio::this_coro::executor, 1h);
            co_await t.async_wait(asio::use_awaitable);
            co_return study::pass("judge");
          })));
  run_co([&](asio::io_context& io) -> asio::awaitable<void> {
    served s(io, r);
    wire w{s.host_end, {}};
    co_await w.send(run_line(1, "s0"));
    co_await w.send(R"({"id":2,"method":"cancel","params":{"id":1}})");
    auto a = co_await w.answer();
    auto b = co_await w.answer();
    if (a.at("id") == 1) std::swap(a, b);
    BOOST_TEST(a.at("result").at("cancelled") == true);
    BOOST_TEST(b.at("error").at("code") == -32800);
    s.host_end.shutdown(socket_t::shutdown_send);
    BOOST_TEST((co_await w.next()).is_null());
  });
}

// `cancel` says true exactly when the request is answered as cancelled: a request already
// answered (its entry not yet gone) is not.
BOOST_AUTO_TEST_CASE(a_cancel_says_whether_it_cancelled) {
  auto r = one_eval(answers("ok"));
  run_co([&](asio::io_context& io) -> asio::awaitable<void> {
    served s(io, r);
    wire w{s.host_end, {}};
    for (int id = 1; id <= 20; id += 2) {
      std::string lines = run_line(id, "s0") + "\n" + R"({"id":)" + std::to_string(id + 1) +
                          R"(,"method":"cancel","params":{"id":)" + std::to_string(id) + "}}\n";
      co_await asio::async_write(s.host_end, asio::buffer(lines), asio::use_awaitable);
      auto a = co_await w.answer();
      auto b = co_await w.answer();
      if (a.at("id") == id) std::swap(a, b);
      bool said = a.at("result").at("cancelled").as_bool();
      bool was = b.contains("error") && b.at("error").at("code") == -32800;
      BOOST_TEST(said == was, "request " << id);
    }
    s.host_end.shutdown(socket_t::shutdown_send);
    BOOST_TEST((co_await w.next()).is_null());
  });
}

BOOST_AUTO_TEST_CASE(a_sample_generator_that_throws_fails_only_its_request) {
  study::registry r("test-study", "1.0");
  r.default_target({"sim", "sim", true, {}});
  r.add("gen")
      .samples(study::sample_generator{10,
                                       [](std::size_t i) -> study::sample {
                                         if (i >= 3) throw std::runtime_error("dataset offline");
                                         return {"g" + std::to_string(i)};
                                       },
                                       [](std::string_view id) -> std::optional<std::size_t> {
                                         return static_cast<std::size_t>(id.back() - '0');
                                       }})
      .subject(answers("ok"));
  r.add("fixed").add_sample({"x"}).subject(answers("ok"));
  study::serve_options o;
  o.page_size = 2;
  run_co([&](asio::io_context& io) -> asio::awaitable<void> {
    served s(io, r, o);
    wire w{s.host_end, {}};
    co_await w.send(R"({"id":1,"method":"list"})");
    auto list = co_await w.answer();
    BOOST_TEST(list.at("result").at("evals").as_array().size() == 2U);
    co_await w.send(R"({"id":2,"method":"list_samples","params":{"eval":"gen","cursor":"2"}})");
    auto page = co_await w.answer();
    BOOST_TEST(page.at("error").at("code") == -32603);
    BOOST_TEST(page.at("error").at("message") ==
               "eval gen: making sample 3 failed: dataset offline");
    co_await w.send(run_line(3, "g5", "gen"));
    auto run = co_await w.answer();
    BOOST_TEST(run.at("error").at("code") == -32603);
    BOOST_TEST(run.at("error").at("message") == "sample gen/g5 could not be made: dataset offline");
    co_await w.send(run_line(4, "x", "fixed"));
    BOOST_TEST((co_await w.answer()).at("result").at("sample") == "x");
    s.host_end.shutdown(socket_t::shutdown_send);
    BOOST_TEST((co_await w.next()).is_null());
  });
}

// Without the SDK's own events: what the two below count is the subject's.
study::serve_options subject_events_only() {
  study::serve_options o;
  o.case_events = false;
  return o;
}

// A subject that sends its "started" event and answers at once.
study::subject starts_then_answers() {
  return [](study::run_context& c) -> asio::awaitable<transcript> {
    c.started();
    transcript t;
    t.final_response = "ok";
    co_return t;
  };
}

// The host's side of the two below: 300 cases in one write, then how many of the answers came
// after their subject's "started" event. The references outlive it.
asio::awaitable<void> count_events_before_answers(socket_t& host_end, int& answered,
                                                  int& after_their_event) {
  wire w{host_end, {}};
  std::string lines;
  for (int i = 1; i <= 300; ++i) lines += run_line(i, "s" + std::to_string(i % 3)) + "\n";
  co_await asio::async_write(host_end, asio::buffer(lines), asio::use_awaitable);
  std::set<std::int64_t> started;
  while (answered < 300) {
    auto v = co_await w.next();
    if (v.is_null()) break;
    auto& o = v.as_object();
    if (o.contains("method")) {
      started.insert(o.at("params").at("request_id").as_int64());
      continue;
    }
    ++answered;
    after_their_event += static_cast<int>(started.count(o.at("id").as_int64()));
  }
  host_end.shutdown(socket_t::shutdown_send);
  co_await w.next();  // the end of the study's output
}

// How many of 300 cases had their subject's "started" event written before their answer,
// when the study starts serving on this thread and its cases run on `threads` others: on a
// strand of the io_context, or on the io_context itself (one other thread).
int events_before_answers(bool on_strand, int threads) {
  auto r = one_eval(starts_then_answers());
  asio::io_context io(threads);
  asio::any_io_executor ex = io.get_executor();
  if (on_strand) ex = asio::make_strand(io);
  socket_t study_end(ex), host_end(ex);
  asio::local::connect_pair(study_end, host_end);
  asio::co_spawn(ex, study::serve(r, study::stream_of(study_end), subject_events_only()),
                 [&](std::exception_ptr) {
                   boost::system::error_code ignored;
                   study_end.shutdown(socket_t::shutdown_both, ignored);
                 });
  io.poll();  // serving starts here, then waits for requests
  int answered = 0;
  int after_their_event = 0;
  asio::co_spawn(ex, count_events_before_answers(host_end, answered, after_their_event),
                 asio::detached);
  std::vector<std::thread> others;
  for (int i = 0; i < threads; ++i) others.emplace_back([&] { io.run(); });
  for (auto& t : others) t.join();
  BOOST_TEST(answered == 300);
  return after_their_event;
}

// The same with the study served on a strand over a thread_pool of `threads` (serve.hpp allows
// any strand), which no io_context executor can ask: the threads running it change from one
// handler to the next. A watchdog closes the host's end after a minute.
int events_before_answers_on_a_pool_strand(int threads) {
  auto r = one_eval(starts_then_answers());
  asio::thread_pool pool(static_cast<std::size_t>(threads));
  asio::any_io_executor ex = asio::make_strand(pool);
  socket_t study_end(ex), host_end(ex);
  asio::local::connect_pair(study_end, host_end);
  asio::co_spawn(ex, study::serve(r, study::stream_of(study_end), subject_events_only()),
                 [&](std::exception_ptr) {
                   boost::system::error_code ignored;
                   study_end.shutdown(socket_t::shutdown_both, ignored);
                 });
  asio::steady_timer watchdog(ex, 60s);
  watchdog.async_wait(asio::bind_executor(ex, [&](boost::system::error_code ec) {
    boost::system::error_code ignored;
    if (!ec) host_end.close(ignored);
  }));
  int answered = 0;
  int after_their_event = 0;
  asio::co_spawn(ex, count_events_before_answers(host_end, answered, after_their_event),
                 asio::bind_executor(ex, [&](std::exception_ptr) { watchdog.cancel(); }));
  pool.join();
  BOOST_TEST(answered == 300);
  return after_their_event;
}

// A subject's own notifications are queued at once, whichever thread runs its executor.
BOOST_AUTO_TEST_CASE(events_precede_their_answer_on_any_thread_of_the_executor) {
  BOOST_TEST(events_before_answers(false, 1) == 300);
  BOOST_TEST(events_before_answers(true, 2) == 300);
}

// Also on a strand over a thread_pool, whose threads take turns at running the subjects.
BOOST_AUTO_TEST_CASE(events_precede_their_answer_on_a_strand_over_a_thread_pool) {
  BOOST_TEST(events_before_answers_on_a_pool_strand(4) == 300);
}

BOOST_AUTO_TEST_CASE(ten_thousand_cases_with_a_thousand_in_flight) {
  int running = 0;
  int most = 0;
  // Subjects wait until the study runs a thousand at once (never, and the watchdog fails the
  // test); from then on they answer at once.
  std::optional<asio::steady_timer> gate;
  bool open = false;
  auto r = one_eval(
      [&](study::run_context&) -> asio::awaitable<transcript> {
        most = std::max(most, ++running);
        if (running == 1000) {
          open = true;
          gate->cancel();
        }
        if (!open) co_await gate->async_wait(asio::as_tuple(asio::use_awaitable));
        --running;
        transcript out;
        out.final_response = "ok";
        co_return out;
      },
      10);
  study::serve_options o;
  o.max_in_flight = 1000;
  run_co(
      [&](asio::io_context& io) -> asio::awaitable<void> {
        timer_slot opens(gate, io);
        served s(io, r, o);
        auto host = mira::host_handle::connect(std::move(s.host_end));
        co_await host.initialize();
        int passed = 0;
        int done = 0;
        asio::steady_timer all_done(io, asio::steady_timer::time_point::max());
        for (int i = 0; i < 10000; ++i) {
          auto p = case_of("s" + std::to_string(i % 10));
          p.trial = i / 10;
          p.trials = 1000;
          asio::co_spawn(io, host.run(p), [&](std::exception_ptr, auto res) {
            passed += res && res->passed;
            if (++done == 10000) all_done.cancel();
          });
        }
        co_await all_done.async_wait(asio::as_tuple(asio::use_awaitable));
        BOOST_TEST(passed == 10000);
        BOOST_TEST(most == 1000);
        co_await host.shutdown();
      },
      std::chrono::seconds(120));
}

BOOST_AUTO_TEST_CASE(a_subject_that_never_finishes_is_cancelled_by_the_hosts_timeout) {
  bool saw_cancel = false;
  study::registry r("s");
  r.default_target({"sim", "", true, {}});
  r.add("hangs").add_sample({"x"}).subject(waits_for_cancel(&saw_cancel));
  r.add("quick").add_sample({"x"}).subject(answers("ok"));
  run_co([&](asio::io_context& io) -> asio::awaitable<void> {
    served s(io, r);
    auto host = mira::host_handle::connect(std::move(s.host_end));
    co_await host.initialize();
    mira::request_options o;
    o.deadline = std::chrono::steady_clock::now() + 100ms;
    auto [ec, res] =
        co_await host.run(case_of("x", "hangs"), o, asio::as_tuple(asio::use_awaitable));
    BOOST_TEST((ec == mira::errc::timed_out));
    auto quick = co_await host.run(case_of("x", "quick"));
    BOOST_TEST(quick.has_value());
    // The cancel went out before the quick case's request, and the study answers in order.
    BOOST_TEST(saw_cancel);
    co_await host.shutdown();
  });
}

BOOST_AUTO_TEST_SUITE_END()
