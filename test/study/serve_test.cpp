// The study SDK's serving, in one process: a study served on one end of a socket pair, and on
// the other this library's host (for what a host sees) or raw protocol lines (for the exact
// frames: cancel answers, errors, notifications).
#include "common/run_co.hpp"

#include <mira/host.hpp>
#include <mira/study.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/local/connect_pair.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/json/parse.hpp>
#include <boost/test/unit_test.hpp>

#include <condition_variable>
#include <mutex>

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

study::subject answers(std::string text) {
  return [text](study::run_context&) -> asio::awaitable<transcript> {
    transcript t;
    t.final_response = text;
    co_return t;
  };
}

// Waits until cancelled (or an hour), noting that the cancellation reached it.
study::subject waits_for_cancel(bool* saw_cancel, int* started = nullptr) {
  return [saw_cancel, started](study::run_context& c) -> asio::awaitable<transcript> {
    if (started) ++*started;
    c.started();
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
struct served {
  served(asio::io_context& io, const study::registry& r, study::serve_options o = {})
      : study_end(io), host_end(io) {
    asio::local::connect_pair(study_end, host_end);
    asio::co_spawn(io, study::serve(r, study::stream_of(study_end), o),
                   [this](std::exception_ptr e) {
                     error = e;
                     done = true;
                     boost::system::error_code ignored;
                     study_end.shutdown(socket_t::shutdown_both, ignored);
                   });
  }
  // The serve coroutine holds study_end and completes into this object: a test waits for the
  // end of the study's output before it lets this go.
  ~served() { BOOST_TEST(done, "the test ended while the study was still serving"); }
  served(const served&) = delete;
  served& operator=(const served&) = delete;

  socket_t study_end, host_end;
  bool done = false;
  std::exception_ptr error;
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
    auto started = co_await w.next();  // the subject's `started` event: it is running
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
    s.host_end.shutdown(socket_t::shutdown_send);
    BOOST_TEST((co_await w.next()).is_null());
  });
  BOOST_REQUIRE(seen.size() == 2U);
  BOOST_REQUIRE(seen[0].has_value());
  BOOST_TEST(seen[0]->count() > 4000);  // generous: the case ran at once
  BOOST_TEST(seen[0]->count() <= 5000);
  BOOST_TEST(!seen[1].has_value());
}

BOOST_AUTO_TEST_CASE(blocking_work_sees_its_stop_token) {
  std::mutex m;
  std::condition_variable_any cv;
  auto r = one_eval([&](study::run_context& c) -> asio::awaitable<transcript> {
    c.started();
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

BOOST_AUTO_TEST_CASE(ten_thousand_cases_with_a_thousand_in_flight) {
  int running = 0;
  int most = 0;
  auto r = one_eval(
      [&](study::run_context& c) -> asio::awaitable<transcript> {
        most = std::max(most, ++running);
        asio::steady_timer t(c.get_executor(), 1ms);
        co_await t.async_wait(asio::use_awaitable);
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
        co_await host.async_run(case_of("x", "hangs"), o, asio::as_tuple(asio::use_awaitable));
    BOOST_TEST((ec == mira::errc::timed_out));
    auto quick = co_await host.run(case_of("x", "quick"));
    BOOST_TEST(quick.has_value());
    // The cancel went out before the quick case's request, and the study answers in order.
    BOOST_TEST(saw_cancel);
    co_await host.shutdown();
  });
}

BOOST_AUTO_TEST_SUITE_END()
