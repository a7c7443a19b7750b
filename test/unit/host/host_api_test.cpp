// The host API as its consumers use it (issue #12): requests before initialize, the request id at
// send time, per-request deadlines, fail-fast groups through mira::as_expected, which requests get
// `cancel`, the answer that beats a cancellation, the HostHandle spelling, connect() over one
// full-duplex socket, and the default token and as_expected with request_options (issue #37).
#include "common/fake_study.hpp"
#include "common/run_co.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/parallel_group.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/steady_timer.hpp>

#include <optional>
#include <type_traits>

using namespace mira;
using namespace mira::test;
using std::chrono::milliseconds;

static_assert(std::is_same_v<mira::HostHandle, mira::host_handle>);

BOOST_AUTO_TEST_SUITE(host_api)

BOOST_AUTO_TEST_CASE(a_request_before_initialize_fails_and_is_not_sent) {
  run_co([](asio::io_context& ctx) -> asio::awaitable<void> {
    fake_pair fp(ctx.get_executor());
    auto early = co_await fp.host->run(run_case("early"));
    BOOST_REQUIRE(!early);
    BOOST_TEST(early.error().code == errc::not_initialized);
    BOOST_TEST(early.error().message().find("before initialize()") != std::string::npos);
    auto [ec, l] = co_await fp.host->list(asio::as_tuple(asio::use_awaitable));
    BOOST_TEST(ec == errc::not_initialized);
    // Nothing reached the study: the first frame it reads is initialize.
    co_await initialized(fp);
    asio::co_spawn(
        ctx,
        [&]() -> asio::awaitable<void> {
          auto run = co_await fp.study->read();
          co_await fp.study->reply(run, run_result_for(run));
        },
        asio::detached);
    auto later = co_await fp.host->run(run_case("later"));
    BOOST_TEST(later.has_value());
  });
}

BOOST_AUTO_TEST_CASE(a_failed_initialize_still_refuses_requests) {
  run_co([](asio::io_context& ctx) -> asio::awaitable<void> {
    captured_log log;
    fake_pair fp(ctx.get_executor(), quiet_options(&log));
    asio::co_spawn(ctx, fp.study->accept_initialize("cancel", "2.0"), asio::detached);
    auto init = co_await fp.host->initialize();
    BOOST_REQUIRE(!init);
    BOOST_TEST(init.error().code == errc::incompatible_protocol);
    BOOST_TEST(init.error().message().find("speaks protocol 2.0") != std::string::npos);
    // The mismatch is in the error the caller prints; logging it too printed it twice.
    BOOST_TEST(log.count(log_level::error, "speaks protocol") == 0u);
    BOOST_TEST(log.count(log_level::warning, "speaks protocol") == 0u);
    auto r = co_await fp.host->run(run_case("x"));
    BOOST_REQUIRE(!r);
    BOOST_TEST(r.error().code == errc::not_initialized);
  });
}

BOOST_AUTO_TEST_CASE(the_request_id_is_known_at_send_time) {
  run_co([](asio::io_context& ctx) -> asio::awaitable<void> {
    fake_pair fp(ctx.get_executor());
    co_await initialized(fp);
    std::int64_t id = 0;
    request_options o;
    o.request_id = &id;
    std::optional<error_code> run_ec;
    event run_done(ctx.get_executor());
    fp.host->run(run_case("slow"), o, [&](error_code ec, protocol::run_result) {
      run_ec = ec;
      run_done.set();
    });
    BOOST_TEST(id > 0);  // set by the initiating call, before anything was written
    auto run = co_await fp.study->read();
    BOOST_TEST(run.at("id").as_int64() == id);
    // The study never echoes the id; the caller cancels by the one it was given.
    asio::co_spawn(
        ctx,
        [&]() -> asio::awaitable<void> {
          auto c = co_await fp.study->read();
          BOOST_TEST(c.at("method").as_string() == "cancel");
          BOOST_TEST(c.at("params").at("id").as_int64() == id);
          co_await fp.study->reply(c, json::parse(R"({"cancelled":true})"));
          co_await fp.study->reply_error(run, "cancelled");
        },
        asio::detached);
    auto found = co_await fp.host->cancel(id, asio::use_awaitable);
    BOOST_TEST(found);
    co_await run_done.wait();
    BOOST_TEST(*run_ec == errc::study_error);  // the study's own answer to the cancelled run
  });
}

BOOST_AUTO_TEST_CASE(a_deadline_cancels_like_a_dropped_awaitable) {
  for (std::string caps : {"cancel", ""}) {
    BOOST_TEST_CONTEXT("capabilities '" << caps << "'") {
      run_co([caps](asio::io_context& ctx) -> asio::awaitable<void> {
        fake_pair fp(ctx.get_executor());
        co_await initialized(fp, caps);
        std::int64_t id = 0;
        std::string second_method;
        asio::co_spawn(
            ctx,
            [&]() -> asio::awaitable<void> {
              auto run = co_await fp.study->read();
              auto next = co_await fp.study->read();
              second_method = std::string(next.at("method").as_string());
              if (second_method == "cancel") {
                BOOST_TEST(next.at("params").at("id") == run.at("id"));
                co_await fp.study->reply(next, json::parse(R"({"cancelled":true})"));
                next = co_await fp.study->read();
              }
              co_await fp.study->reply(next, run_result_for(next));
            },
            asio::detached);
        diagnostics d;
        request_options o;
        o.diag = &d;
        o.request_id = &id;
        o.deadline = std::chrono::steady_clock::now() + milliseconds(20);
        auto [ec, r] =
            co_await fp.host->run(run_case("slow"), o, asio::as_tuple(asio::use_awaitable));
        BOOST_TEST(ec == errc::timed_out);
        BOOST_TEST(d.message.find("deadline") != std::string::npos);
        auto next = co_await fp.host->run(run_case("next"));
        BOOST_REQUIRE(next);
        BOOST_TEST(second_method == (caps == "cancel" ? "cancel" : "run"));
        BOOST_TEST(fp.host->abandoned() == 1u);  // the study never answered the slow run
      });
    }
  }
}

BOOST_AUTO_TEST_CASE(an_answer_before_the_deadline_disarms_it) {
  run_co([](asio::io_context& ctx) -> asio::awaitable<void> {
    fake_pair fp(ctx.get_executor());
    co_await initialized(fp);
    asio::co_spawn(
        ctx,
        [&]() -> asio::awaitable<void> {
          auto run = co_await fp.study->read();
          co_await fp.study->reply(run, run_result_for(run));
          auto next = co_await fp.study->read();  // a cancel would come first
          BOOST_TEST(next.at("method").as_string() == "run");
          co_await fp.study->reply(next, run_result_for(next));
        },
        asio::detached);
    request_options o;
    o.deadline = std::chrono::steady_clock::now() + milliseconds(30);
    auto [ec, r] = co_await fp.host->run(run_case("quick"), o, asio::as_tuple(asio::use_awaitable));
    BOOST_TEST(!ec);
    asio::steady_timer past_deadline(ctx, milliseconds(60));
    co_await past_deadline.async_wait(asio::use_awaitable);
    auto next = co_await fp.host->run(run_case("next"));
    BOOST_TEST(next.has_value());
  });
}

// wait_for_one_error through mira::as_expected, with no coroutine per run.
BOOST_AUTO_TEST_CASE(fail_fast_group_over_the_expected_layer) {
  run_co([](asio::io_context& ctx) -> asio::awaitable<void> {
    fake_pair fp(ctx.get_executor());
    co_await initialized(fp);
    std::vector<std::int64_t> cancelled;
    event both_cancelled(ctx.get_executor());
    asio::co_spawn(ctx, fail_second_of_three(*fp.study, cancelled, both_cancelled), asio::detached);
    using op = decltype(fp.host->run(run_case("a"), as_expected(asio::deferred)));
    std::vector<op> ops;
    for (auto s : {"a", "b", "c"})
      ops.push_back(fp.host->run(run_case(s), as_expected(asio::deferred)));
    auto [order, codes, results] =
        co_await asio::experimental::make_parallel_group(std::move(ops))
            .async_wait(asio::experimental::wait_for_one_error(), asio::use_awaitable);
    BOOST_TEST(order[0] == 1u);
    BOOST_TEST(codes[1] == errc::study_error);
    BOOST_REQUIRE(!results[1]);
    BOOST_TEST(results[1].error().diag.study_error->message == "subject crashed");
    for (std::size_t i : {0u, 2u}) {
      BOOST_TEST(codes[i] == asio::error::operation_aborted);
      BOOST_TEST(!results[i]);
    }
    co_await both_cancelled.wait();
    std::sort(cancelled.begin(), cancelled.end());
    BOOST_TEST(cancelled == (std::vector<std::int64_t>{2, 4}), boost::test_tools::per_element());
  });
}

// The protocol defines `cancel` for run, execute and score only.
BOOST_AUTO_TEST_CASE(a_cancelled_list_sends_no_cancel) {
  run_co([](asio::io_context& ctx) -> asio::awaitable<void> {
    fake_pair fp(ctx.get_executor());
    co_await initialized(fp);
    asio::cancellation_signal sig;
    std::optional<error_code> got;
    event done(ctx.get_executor());
    fp.host->list(asio::bind_cancellation_slot(sig.slot(), [&](error_code ec, auto) {
      got = ec;
      done.set();
    }));
    auto list = co_await fp.study->read();
    BOOST_TEST(list.at("method").as_string() == "list");
    sig.emit(asio::cancellation_type::terminal);
    co_await done.wait();
    BOOST_TEST(*got == asio::error::operation_aborted);
    BOOST_TEST(fp.host->abandoned() == 1u);  // abandoned all the same: the study may answer
    asio::co_spawn(
        ctx,
        [&]() -> asio::awaitable<void> {
          auto next = co_await fp.study->read();
          BOOST_TEST(next.at("method").as_string() == "run");  // no cancel went ahead of it
          co_await fp.study->reply(next, run_result_for(next));
        },
        asio::detached);
    auto r = co_await fp.host->run(run_case("next"));
    BOOST_TEST(r.has_value());
  });
}

// The race docs/cancellation.md names: the answer was routed before the cancellation reached
// the connection's strand. The operation has its result; no `cancel` is sent.
BOOST_AUTO_TEST_CASE(an_answer_that_beats_the_cancellation_wins) {
  run_co([](asio::io_context& ctx) -> asio::awaitable<void> {
    fake_pair fp(ctx.get_executor());
    co_await initialized(fp);
    asio::cancellation_signal sig;
    std::optional<error_code> got;
    event done(ctx.get_executor());
    fp.host->run(run_case("x"), asio::bind_cancellation_slot(sig.slot(), [&](error_code ec, auto) {
                   got = ec;
                   done.set();
                 }));
    auto run = co_await fp.study->read();
    co_await fp.study->reply(run, run_result_for(run));
    co_await done.wait();
    sig.emit(asio::cancellation_type::terminal);  // the timer fired after the answer came
    BOOST_TEST(!*got);
    asio::co_spawn(
        ctx,
        [&]() -> asio::awaitable<void> {
          auto next = co_await fp.study->read();
          BOOST_TEST(next.at("method").as_string() == "run");
          co_await fp.study->reply(next, run_result_for(next));
        },
        asio::detached);
    auto r = co_await fp.host->run(run_case("next"));
    BOOST_TEST(r.has_value());
    BOOST_TEST(fp.host->abandoned() == 0u);
  });
}

// The abandoned count is signalled: a waiter wakes when a request is abandoned and again when
// its late answer comes, and a cancelled wait completes with operation_aborted.
BOOST_AUTO_TEST_CASE(the_abandoned_count_is_signalled) {
  run_co([](asio::io_context& ctx) -> asio::awaitable<void> {
    fake_pair fp(ctx.get_executor());
    co_await initialized(fp, "");
    std::vector<std::size_t> seen;
    std::optional<error_code> first;
    fp.host->async_wait_abandoned(0, [&](error_code ec, std::size_t n) {
      first = ec;
      seen.push_back(n);
    });
    asio::cancellation_signal sig;
    std::optional<error_code> run_ec;
    fp.host->run(run_case("x"), asio::bind_cancellation_slot(
                                    sig.slot(), [&](error_code ec, auto) { run_ec = ec; }));
    auto run = co_await fp.study->read();
    BOOST_TEST(seen.empty());
    sig.emit(asio::cancellation_type::terminal);
    auto [ec1, n1] = co_await fp.host->async_wait_abandoned(0, asio::as_tuple(asio::use_awaitable));
    BOOST_TEST(!ec1);
    BOOST_TEST(n1 == 1u);
    BOOST_TEST(!*first);
    BOOST_TEST(seen == std::vector<std::size_t>{1});
    co_await fp.study->reply(run, run_result_for(run));  // late
    auto [ec2, n2] = co_await fp.host->async_wait_abandoned(1, asio::as_tuple(asio::use_awaitable));
    BOOST_TEST(!ec2);
    BOOST_TEST(n2 == 0u);
    asio::cancellation_signal stop;
    std::optional<error_code> stopped;
    event stopped_event(ctx.get_executor());
    fp.host->async_wait_abandoned(
        0, asio::bind_cancellation_slot(stop.slot(), [&](error_code ec, std::size_t) {
          stopped = ec;
          stopped_event.set();
        }));
    stop.emit(asio::cancellation_type::terminal);
    co_await stopped_event.wait();
    BOOST_TEST(*stopped == asio::error::operation_aborted);
  });
}

// A study on the other end of one socket: answers initialize at once, holds each run until the
// host half-closes, then answers what it holds and closes its end.
asio::awaitable<void> socket_study(socket_t s, std::shared_ptr<event> got_run) {
  std::string buf;
  std::vector<json::object> held;
  for (;;) {
    auto [ec, n] = co_await asio::async_read_until(s, asio::dynamic_buffer(buf), '\n',
                                                   asio::as_tuple(asio::use_awaitable));
    if (ec) break;
    auto req = json::parse(std::string_view(buf).substr(0, n - 1)).as_object();
    buf.erase(0, n);
    if (req.at("method") == "initialize") {
      json::object result{{"protocol_version", "1.1"},
                          {"study", "socket"},
                          {"evals", 1},
                          {"capabilities", json::array{}}};
      json::object answer{{"id", req.at("id")}, {"result", std::move(result)}};
      auto line = json::serialize(answer) + "\n";
      co_await asio::async_write(s, asio::buffer(line), asio::use_awaitable);
    } else {
      held.push_back(std::move(req));
      got_run->set();
    }
  }
  for (auto& req : held) {
    json::object answer{{"id", req.at("id")}, {"result", run_result_for(req)}};
    auto line = json::serialize(answer) + "\n";
    co_await asio::async_write(s, asio::buffer(line), asio::use_awaitable);
  }
  s.close();
}

BOOST_AUTO_TEST_CASE(connect_over_one_socket_drains_on_shutdown) {
  run_co([](asio::io_context& ctx) -> asio::awaitable<void> {
    socket_t host_end(ctx), study_end(ctx);
    asio::local::connect_pair(host_end, study_end);
    auto got_run = std::make_shared<event>(ctx.get_executor());
    asio::co_spawn(ctx, socket_study(std::move(study_end), got_run), asio::detached);
    auto host = host_handle::connect(std::move(host_end), quiet_options());
    auto init = co_await host.initialize();
    BOOST_REQUIRE(init);
    std::optional<error_code> run_ec;
    std::string sample;
    event run_done(ctx.get_executor());
    host.run(run_case("in-flight"), [&](error_code ec, protocol::run_result r) {
      run_ec = ec;
      sample = r.sample;
      run_done.set();
    });
    co_await got_run->wait();
    auto status = co_await host.shutdown();
    BOOST_REQUIRE(status);
    BOOST_TEST(status->no_process);
    BOOST_TEST(status->to_string() == "no process");
    co_await run_done.wait();
    BOOST_TEST(!*run_ec);  // answered after the half-close, not failed by the shutdown
    BOOST_TEST(sample == "in-flight");
    auto after = co_await host.run(run_case("after"));
    BOOST_REQUIRE(!after);
    BOOST_TEST(after.error().code == errc::study_exited);
  });
}

// A request given up on after shutdown() closed the study's input: no `cancel` can be sent
// any more, and none is tried (writing it to the closed input failed the connection, and with
// it the request the study was still answering).
BOOST_AUTO_TEST_CASE(a_cancellation_during_shutdown_spares_what_the_study_still_answers) {
  run_co([](asio::io_context& ctx) -> asio::awaitable<void> {
    auto opts = quiet_options();
    opts.exit_wait = milliseconds(1);
    fake_pair fp(ctx.get_executor(), opts);
    co_await initialized(fp);
    asio::cancellation_signal sig;
    std::optional<error_code> a_ec, b_ec;
    event a_done(ctx.get_executor()), b_done(ctx.get_executor());
    fp.host->run(run_case("a"),
                 asio::bind_cancellation_slot(sig.slot(), [&](error_code ec, protocol::run_result) {
                   a_ec = ec;
                   a_done.set();
                 }));
    fp.host->run(run_case("b"), [&](error_code ec, protocol::run_result) {
      b_ec = ec;
      b_done.set();
    });
    co_await fp.study->read();
    auto b = co_await fp.study->read();
    std::optional<exit_status> status;
    event shut(ctx.get_executor());
    asio::co_spawn(ctx, fp.host->shutdown(), [&](std::exception_ptr, auto r) {
      if (r) status = *r;
      shut.set();
    });
    char byte = 0;
    auto [eof, n] = co_await asio::async_read(fp.study->input(), asio::buffer(&byte, 1),
                                              asio::as_tuple(asio::use_awaitable));
    BOOST_TEST(eof == asio::error::eof);  // the host closed the study's input
    sig.emit(asio::cancellation_type::terminal);
    co_await a_done.wait();
    BOOST_TEST(*a_ec == asio::error::operation_aborted);
    asio::steady_timer later(ctx, milliseconds(200));  // well past exit_wait
    co_await later.async_wait(asio::use_awaitable);
    co_await fp.study->reply(b, run_result_for(b));
    fp.study->close_output();
    co_await b_done.wait();
    BOOST_TEST(!*b_ec);
    co_await shut.wait();
    BOOST_REQUIRE(status);
    BOOST_TEST(status->no_process);
  });
}

// A `cancel` queued when shutdown() begins is written before the study's input closes, so the
// study stops that work instead of finishing it during the grace.
BOOST_AUTO_TEST_CASE(shutdown_sends_a_queued_cancel_before_closing_the_input) {
  run_co([](asio::io_context& ctx) -> asio::awaitable<void> {
    fake_pair fp(ctx.get_executor());
    co_await initialized(fp);
    asio::cancellation_signal sig;
    fp.host->run(run_case("a"), asio::bind_cancellation_slot(sig.slot(), [](error_code, auto) {}));
    auto run = co_await fp.study->read();
    sig.emit(asio::cancellation_type::terminal);
    event shut(ctx.get_executor());
    asio::co_spawn(ctx, fp.host->shutdown(), [&](std::exception_ptr, auto) { shut.set(); });
    auto cancel = co_await fp.study->read();
    BOOST_TEST(cancel.at("method").as_string() == "cancel");
    BOOST_TEST(cancel.at("params").at("id") == run.at("id"));
    char byte = 0;
    auto [eof, n] = co_await asio::async_read(fp.study->input(), asio::buffer(&byte, 1),
                                              asio::as_tuple(asio::use_awaitable));
    BOOST_TEST(eof == asio::error::eof);
    fp.study->close_output();
    co_await shut.wait();
  });
}

// A second shutdown() while one runs waits for it: it does not restart the first one's waits
// (which ended the first at once and failed what the study was still answering).
BOOST_AUTO_TEST_CASE(two_shutdowns_at_once_end_together_after_the_study) {
  run_co([](asio::io_context& ctx) -> asio::awaitable<void> {
    fake_pair fp(ctx.get_executor());
    co_await initialized(fp);
    std::optional<error_code> run_ec;
    event run_done(ctx.get_executor());
    fp.host->run(run_case("b"), [&](error_code ec, protocol::run_result) {
      run_ec = ec;
      run_done.set();
    });
    auto b = co_await fp.study->read();
    int ended = 0;
    std::vector<exit_status> statuses;
    event both(ctx.get_executor());
    for (int i = 0; i < 2; ++i)
      asio::co_spawn(ctx, fp.host->shutdown(), [&](std::exception_ptr, auto r) {
        if (r) statuses.push_back(*r);
        if (++ended == 2) both.set();
      });
    char byte = 0;
    auto [eof, n] = co_await asio::async_read(fp.study->input(), asio::buffer(&byte, 1),
                                              asio::as_tuple(asio::use_awaitable));
    BOOST_TEST(eof == asio::error::eof);
    asio::steady_timer later(ctx, milliseconds(100));
    co_await later.async_wait(asio::use_awaitable);
    BOOST_TEST(ended == 0);  // both still wait for the study
    co_await fp.study->reply(b, run_result_for(b));
    fp.study->close_output();
    co_await run_done.wait();
    BOOST_TEST(!*run_ec);
    co_await both.wait();
    BOOST_REQUIRE(statuses.size() == 2u);
    for (auto& st : statuses) BOOST_TEST(st.no_process);
  });
}

BOOST_AUTO_TEST_CASE(connect_shutdown_gives_up_after_the_grace) {
  run_co([](asio::io_context& ctx) -> asio::awaitable<void> {
    socket_t host_end(ctx), study_end(ctx);
    asio::local::connect_pair(host_end, study_end);
    auto opts = quiet_options();
    opts.shutdown_grace = milliseconds(30);
    auto host = host_handle::connect(std::move(host_end), opts);
    asio::co_spawn(
        ctx,
        [&]() -> asio::awaitable<void> {
          // Answers initialize, then reads on but never answers and never closes.
          std::string buf;
          auto [ec, n] = co_await asio::async_read_until(study_end, asio::dynamic_buffer(buf), '\n',
                                                         asio::as_tuple(asio::use_awaitable));
          auto req = json::parse(std::string_view(buf).substr(0, n - 1)).as_object();
          json::object result{{"protocol_version", "1.1"},
                              {"study", "mute"},
                              {"evals", 1},
                              {"capabilities", json::array{}}};
          json::object answer{{"id", req.at("id")}, {"result", std::move(result)}};
          auto line = json::serialize(answer) + "\n";
          co_await asio::async_write(study_end, asio::buffer(line), asio::use_awaitable);
        },
        asio::detached);
    BOOST_REQUIRE(co_await host.initialize());
    diagnostics d;
    request_options o;
    o.diag = &d;
    std::optional<error_code> run_ec;
    event run_done(ctx.get_executor());
    host.run(run_case("never"), o, [&](error_code ec, protocol::run_result) {
      run_ec = ec;
      run_done.set();
    });
    auto status = co_await host.shutdown();
    BOOST_REQUIRE(status);
    BOOST_TEST(status->no_process);
    co_await run_done.wait();
    BOOST_TEST(*run_ec == errc::study_exited);
    BOOST_TEST(d.message.find("did not close its output") != std::string::npos);
    BOOST_TEST(!d.exit);  // no process, no exit status: not "exit code -1"
  });
}

// The default token with request_options: the expected carries the study's error, and the
// caller's own diag and request_id are filled as well.
BOOST_AUTO_TEST_CASE(the_default_token_takes_request_options) {
  run_co([](asio::io_context& ctx) -> asio::awaitable<void> {
    fake_pair fp(ctx.get_executor());
    co_await initialized(fp);
    asio::co_spawn(
        ctx,
        [&]() -> asio::awaitable<void> {
          auto run = co_await fp.study->read();
          co_await fp.study->reply_error(run, "subject crashed");
        },
        asio::detached);
    diagnostics mine;
    std::int64_t id = 0;
    request_options o;
    o.diag = &mine;
    o.request_id = &id;
    tl::expected<protocol::run_result, error> r = co_await fp.host->run(run_case("a"), o);
    BOOST_REQUIRE(!r);
    BOOST_TEST(r.error().code == errc::study_error);
    BOOST_REQUIRE(r.error().diag.study_error);
    BOOST_TEST(r.error().diag.study_error->message == "subject crashed");
    BOOST_REQUIRE(mine.study_error);
    BOOST_TEST(mine.study_error->message == "subject crashed");
    BOOST_TEST(id != 0);
  });
}

// as_expected(token): the code leads (for parallel_group), the expected holds the error with the
// diagnostics of its own the adapter gave the request.
BOOST_AUTO_TEST_CASE(as_expected_leads_with_the_code_and_keeps_the_diagnostics) {
  run_co([](asio::io_context& ctx) -> asio::awaitable<void> {
    fake_pair fp(ctx.get_executor());
    co_await initialized(fp);
    asio::co_spawn(
        ctx,
        [&]() -> asio::awaitable<void> {
          auto run = co_await fp.study->read();
          co_await fp.study->reply_error(run, "subject crashed");
          run = co_await fp.study->read();
          co_await fp.study->reply(run, run_result_for(run));
        },
        asio::detached);
    auto token = as_expected(asio::as_tuple(asio::use_awaitable));
    auto [ec, failed] = co_await fp.host->run(run_case("a"), token);
    BOOST_TEST(ec == errc::study_error);
    BOOST_REQUIRE(!failed);
    BOOST_TEST(failed.error().code == errc::study_error);
    BOOST_REQUIRE(failed.error().diag.study_error);
    BOOST_TEST(failed.error().diag.study_error->message == "subject crashed");
    auto [ok_ec, passed] = co_await fp.host->run(run_case("b"), token);
    BOOST_TEST(!ok_ec);
    BOOST_REQUIRE(passed);
    BOOST_TEST(passed->sample == "b");
  });
}

// as_expected adapts any `void(error_code[, T])` operation; without mira's request_options the
// error has the code alone.
BOOST_AUTO_TEST_CASE(as_expected_adapts_any_operation) {
  asio::io_context ctx;
  asio::steady_timer long_wait(ctx, std::chrono::hours(1));
  asio::steady_timer expired(ctx, std::chrono::steady_clock::now());
  std::optional<tl::expected<void, error>> cancelled, waited;
  long_wait.async_wait(as_expected([&](error_code ec, tl::expected<void, error> e) {
    BOOST_TEST(ec == asio::error::operation_aborted);
    cancelled = std::move(e);
  }));
  expired.async_wait(
      as_expected([&](error_code, tl::expected<void, error> e) { waited = std::move(e); }));
  long_wait.cancel();
  ctx.run();
  BOOST_REQUIRE(cancelled);
  BOOST_REQUIRE(!*cancelled);
  BOOST_TEST(cancelled->error().code == asio::error::operation_aborted);
  BOOST_TEST(cancelled->error().diag.message.empty());
  BOOST_REQUIRE(waited);
  BOOST_TEST(waited->has_value());
}

BOOST_AUTO_TEST_SUITE_END()
