// host_handle over in-memory streams: completion tokens, routing, per-request cancellation,
// notifications, pagination, EOF, a study that stops reading, and many threads.
#include "common/fake_study.hpp"
#include "common/run_co.hpp"

#include <mira/plan/plan.hpp>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/experimental/parallel_group.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_future.hpp>

#include <atomic>
#include <future>
#include <thread>

using namespace mira;
using namespace mira::test;
using namespace boost::asio::experimental::awaitable_operators;
using std::chrono::milliseconds;

BOOST_AUTO_TEST_SUITE(host_stream)

BOOST_AUTO_TEST_CASE(initialize_sends_version_and_host_name) {
  run_co([](asio::io_context& ctx) -> asio::awaitable<void> {
    auto opts = quiet_options();
    opts.host_name = "unit-host";
    fake_pair fp(ctx.get_executor(), opts);
    asio::co_spawn(
        ctx,
        [&]() -> asio::awaitable<void> {
          auto req = co_await fp.study->read();
          BOOST_TEST(req.at("id").as_int64() == 1);
          BOOST_TEST(req.at("params").at("protocol_version").as_string() == "1.1");
          BOOST_TEST(req.at("params").at("host").as_string() == "unit-host");
          co_await fp.study->reply(
              req,
              json::parse(
                  R"({"protocol_version":"1.4","study":"s","evals":0,"capabilities":["cancel"]})"));
        },
        asio::detached);
    auto init = co_await fp.host->initialize();
    BOOST_REQUIRE(init);
    BOOST_TEST(init->protocol_version == "1.4");  // a newer minor is fine
    BOOST_TEST(fp.host->study()->has_capability("cancel"));
  });
}

BOOST_AUTO_TEST_CASE(a_different_major_is_refused) {
  run_co([](asio::io_context& ctx) -> asio::awaitable<void> {
    fake_pair fp(ctx.get_executor());
    asio::co_spawn(ctx, fp.study->accept_initialize("", "2.0"), asio::detached);
    auto init = co_await fp.host->initialize();
    BOOST_REQUIRE(!init);
    BOOST_TEST(init.error().code == errc::incompatible_protocol);
    BOOST_TEST(init.error().diag.message.find("speaks protocol 2.0") != std::string::npos);
    BOOST_TEST(!fp.host->study());
  });
}

BOOST_AUTO_TEST_CASE(responses_route_by_id_in_any_order) {
  run_co([](asio::io_context& ctx) -> asio::awaitable<void> {
    fake_pair fp(ctx.get_executor());
    co_await initialized(fp);
    asio::co_spawn(
        ctx,
        [&]() -> asio::awaitable<void> {
          std::vector<json::object> reqs;
          for (int i = 0; i < 3; ++i) reqs.push_back(co_await fp.study->read());
          for (int i = 2; i >= 0; --i) co_await fp.study->reply(reqs[i], run_result_for(reqs[i]));
        },
        asio::detached);
    // Not a structured binding: g++ 12 rejects one over a co_await result holding a std::array.
    auto res = co_await asio::experimental::make_parallel_group(
                   fp.host->run(run_case("a"), asio::deferred),
                   fp.host->run(run_case("b"), asio::deferred),
                   fp.host->run(run_case("c"), asio::deferred))
                   .async_wait(asio::experimental::wait_for_all(), asio::use_awaitable);
    auto& [order, e1, r1, e2, r2, e3, r3] = res;
    BOOST_TEST(!e1);
    BOOST_TEST(!e2);
    BOOST_TEST(!e3);
    BOOST_TEST(r1.sample == "a");
    BOOST_TEST(r2.sample == "b");
    BOOST_TEST(r3.sample == "c");
    BOOST_TEST(order[0] == 2u);                // the last request was answered first
    BOOST_TEST(r1.raw().contains("echo_id"));  // unknown fields kept
  });
}

BOOST_AUTO_TEST_CASE(study_errors_carry_their_diagnostics) {
  run_co([](asio::io_context& ctx) -> asio::awaitable<void> {
    fake_pair fp(ctx.get_executor());
    co_await initialized(fp);
    asio::co_spawn(
        ctx,
        [&]() -> asio::awaitable<void> {
          auto a = co_await fp.study->read();
          co_await fp.study->reply_error(a, "provider overloaded", true);
          auto b = co_await fp.study->read();
          co_await fp.study->reply_error(b, "no such eval");
          auto c = co_await fp.study->read();
          co_await fp.study->reply(c, json::parse(R"({"passed":"yes"})"));
        },
        asio::detached);
    diagnostics d;
    request_options o;
    o.diag = &d;
    auto [ec, r] = co_await fp.host->run(run_case("a"), o, asio::as_tuple(asio::use_awaitable));
    BOOST_TEST(ec == errc::study_error_retryable);
    BOOST_TEST(is_retryable(ec));
    BOOST_TEST(d.study_error->message == "provider overloaded");
    auto plain = co_await fp.host->run(run_case("b"));
    BOOST_REQUIRE(!plain);
    BOOST_TEST(plain.error().code == errc::study_error);
    BOOST_TEST(!is_retryable(plain.error().code));
    BOOST_TEST(plain.error().message().find("no such eval") != std::string::npos);
    auto bad = co_await fp.host->run(run_case("c"));
    BOOST_REQUIRE(!bad);
    BOOST_TEST(bad.error().code == errc::bad_response);
    BOOST_TEST(bad.error().diag.message.find("passed: expected a boolean") != std::string::npos);
  });
}

BOOST_AUTO_TEST_CASE(a_deadline_sends_cancel_for_the_right_id) {
  run_co([](asio::io_context& ctx) -> asio::awaitable<void> {
    fake_pair fp(ctx.get_executor());
    co_await initialized(fp);
    std::int64_t run_id = 0, cancelled_id = 0;
    asio::co_spawn(
        ctx,
        [&]() -> asio::awaitable<void> {
          auto run = co_await fp.study->read();
          run_id = run.at("id").as_int64();
          auto cancel = co_await fp.study->read();
          BOOST_TEST(cancel.at("method").as_string() == "cancel");
          cancelled_id = cancel.at("params").at("id").as_int64();
          co_await fp.study->reply(cancel, json::parse(R"({"cancelled":true})"));
          co_await fp.study->reply_error(run, "cancelled");  // late: dropped
          auto next = co_await fp.study->read();
          co_await fp.study->reply(next, run_result_for(next));
        },
        asio::detached);
    asio::steady_timer timer(ctx, milliseconds(30));
    auto t0 = std::chrono::steady_clock::now();
    auto raced = co_await (fp.host->run(run_case("slow")) || timer.async_wait(asio::use_awaitable));
    BOOST_TEST(raced.index() == 1u);
    BOOST_TEST((std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5)));
    // The connection stays usable and the late answer did not reach this request.
    auto next = co_await fp.host->run(run_case("next"));
    BOOST_REQUIRE(next);
    BOOST_TEST(next->sample == "next");
    BOOST_TEST(cancelled_id == run_id);
  });
}

BOOST_AUTO_TEST_CASE(no_cancel_frame_without_the_capability) {
  run_co([](asio::io_context& ctx) -> asio::awaitable<void> {
    fake_pair fp(ctx.get_executor());
    co_await initialized(fp, "");
    std::string second_method;
    asio::co_spawn(
        ctx,
        [&]() -> asio::awaitable<void> {
          auto run = co_await fp.study->read();
          auto next = co_await fp.study->read();
          second_method = std::string(next.at("method").as_string());
          co_await fp.study->reply(next, run_result_for(next));
        },
        asio::detached);
    asio::steady_timer timer(ctx, milliseconds(10));
    auto raced = co_await (fp.host->run(run_case("slow")) || timer.async_wait(asio::use_awaitable));
    BOOST_TEST(raced.index() == 1u);
    auto next = co_await fp.host->run(run_case("next"));
    BOOST_REQUIRE(next);
    BOOST_TEST(second_method == "run");
  });
}

// A bound signal, a plain callback handler, each cancellation type.
BOOST_AUTO_TEST_CASE(bound_signal_terminal_partial_and_total) {
  for (auto type : {asio::cancellation_type::terminal, asio::cancellation_type::partial,
                    asio::cancellation_type::total}) {
    BOOST_TEST_CONTEXT("type " << static_cast<int>(type)) {
      run_co([type](asio::io_context& ctx) -> asio::awaitable<void> {
        fake_pair fp(ctx.get_executor());
        co_await initialized(fp);
        asio::cancellation_signal sig;
        std::optional<error_code> got;
        std::string sample;
        event done(ctx.get_executor());
        fp.host->run(run_case("x"), asio::bind_cancellation_slot(
                                        sig.slot(), [&](error_code ec, protocol::run_result r) {
                                          got = ec;
                                          sample = r.sample;
                                          done.set();
                                        }));
        auto run = co_await fp.study->read();  // it is written now
        sig.emit(type);
        if (type == asio::cancellation_type::total) {
          // Total cancellation cannot be honoured once the study has the request.
          co_await fp.study->reply(run, run_result_for(run));
        } else {
          auto cancel = co_await fp.study->read();
          BOOST_TEST(cancel.at("params").at("id") == run.at("id"));
        }
        co_await done.wait();
        if (type == asio::cancellation_type::total) {
          BOOST_TEST(!*got);
          BOOST_TEST(sample == "x");
        } else {
          BOOST_TEST(*got == asio::error::operation_aborted);
        }
      });
    }
  }
}

BOOST_AUTO_TEST_CASE(fail_fast_group_cancels_the_siblings) {
  run_co([](asio::io_context& ctx) -> asio::awaitable<void> {
    fake_pair fp(ctx.get_executor());
    co_await initialized(fp);
    std::vector<std::int64_t> cancelled;
    event both_cancelled(ctx.get_executor());
    asio::co_spawn(ctx, fail_second_of_three(*fp.study, cancelled, both_cancelled), asio::detached);
    auto res = co_await asio::experimental::make_parallel_group(
                   fp.host->run(run_case("a"), asio::deferred),
                   fp.host->run(run_case("b"), asio::deferred),
                   fp.host->run(run_case("c"), asio::deferred))
                   .async_wait(asio::experimental::wait_for_one_error(), asio::use_awaitable);
    auto& [order, e1, r1, e2, r2, e3, r3] = res;
    BOOST_TEST(order[0] == 1u);
    BOOST_TEST(e2 == errc::study_error);
    BOOST_TEST(e1 == asio::error::operation_aborted);
    BOOST_TEST(e3 == asio::error::operation_aborted);
    co_await both_cancelled.wait();
    std::sort(cancelled.begin(), cancelled.end());
    BOOST_TEST(cancelled == (std::vector<std::int64_t>{2, 4}), boost::test_tools::per_element());
  });
}

BOOST_AUTO_TEST_CASE(use_future_from_another_thread) {
  asio::io_context ctx;
  fake_pair fp(ctx.get_executor());
  asio::co_spawn(
      ctx,
      [&]() -> asio::awaitable<void> {
        co_await fp.study->accept_initialize();
        auto run = co_await fp.study->read();
        co_await fp.study->reply(run, run_result_for(run));
      },
      asio::detached);
  auto guard = asio::make_work_guard(ctx);
  std::thread io([&] { ctx.run(); });
  auto init = fp.host->initialize(asio::use_future);
  BOOST_TEST(init.get().study == "fake");
  auto r = fp.host->run(run_case("f"), asio::use_future);
  BOOST_TEST(r.get().sample == "f");
  fp.host.reset();
  guard.reset();
  ctx.stop();
  io.join();
}

BOOST_AUTO_TEST_CASE(eof_fails_every_pending_request) {
  run_co([](asio::io_context& ctx) -> asio::awaitable<void> {
    fake_pair fp(ctx.get_executor());
    co_await initialized(fp);
    constexpr int n = 50;
    asio::co_spawn(
        ctx,
        [&]() -> asio::awaitable<void> {
          for (int i = 0; i < n; ++i) co_await fp.study->read();
          fp.study->close_output();
        },
        asio::detached);
    using op_t = decltype(asio::co_spawn(ctx, fp.host->run(run_case("x")), asio::deferred));
    std::vector<op_t> ops;
    for (int i = 0; i < n; ++i)
      ops.push_back(asio::co_spawn(ctx, fp.host->run(run_case(std::to_string(i))), asio::deferred));
    auto [order, excs, results] =
        co_await asio::experimental::make_parallel_group(std::move(ops))
            .async_wait(asio::experimental::wait_for_all(), asio::use_awaitable);
    for (auto& r : results) {
      BOOST_REQUIRE(!r);
      BOOST_TEST(r.error().code == errc::study_exited);
      BOOST_TEST(r.error().diag.message == "the study closed its output");
    }
    // Later requests fail at once with the same reason.
    auto late = co_await fp.host->run(run_case("late"));
    BOOST_REQUIRE(!late);
    BOOST_TEST(late.error().code == errc::study_exited);
  });
}

BOOST_AUTO_TEST_CASE(notifications_reach_whoever_asked) {
  run_co([](asio::io_context& ctx) -> asio::awaitable<void> {
    std::vector<notification> host_wide;
    auto opts = quiet_options();
    opts.on_notification = [&](const notification& n) { host_wide.push_back(n); };
    fake_pair fp(ctx.get_executor(), opts);
    co_await initialized(fp);
    asio::co_spawn(
        ctx,
        [&]() -> asio::awaitable<void> {
          auto run = co_await fp.study->read();
          auto id = run.at("id").as_int64();
          co_await fp.study->write(R"({"method":"log","params":{"message":"warming up"}})");
          auto event = [id](std::string kind) {
            return json::serialize(json::object{{"method", "event"},
                                                {"params", json::object{{"request_id", id},
                                                                        {"eval", "e"},
                                                                        {"sample", "s"},
                                                                        {"target", "sim"},
                                                                        {"kind", kind}}}});
          };
          co_await fp.study->write(event("started"));
          co_await fp.study->write(event("future_kind"));
          co_await fp.study->reply(run, run_result_for(run));
        },
        asio::detached);
    std::vector<notification> mine;
    request_options o;
    o.on_notification = [&](const notification& n) { mine.push_back(n); };
    auto r = co_await fp.host->run(run_case("s"), std::move(o));
    BOOST_REQUIRE(r);
    // Notifications are posted before the response completes the request, in order.
    BOOST_REQUIRE(mine.size() == 2u);
    BOOST_TEST(mine[0].params.at("kind").as_string() == "started");
    BOOST_TEST(mine[1].params.at("kind").as_string() == "future_kind");
    BOOST_REQUIRE(host_wide.size() == 1u);
    BOOST_TEST(host_wide[0].method == "log");
    BOOST_TEST(host_wide[0].request_id == 0);
  });
}

BOOST_AUTO_TEST_CASE(list_all_follows_cursors_and_stops_a_loop) {
  run_co([](asio::io_context& ctx) -> asio::awaitable<void> {
    fake_pair fp(ctx.get_executor());
    co_await initialized(fp);
    asio::co_spawn(
        ctx,
        [&]() -> asio::awaitable<void> {
          for (int round = 0; round < 2; ++round) {
            auto list = co_await fp.study->read();
            co_await fp.study->reply(list,
                                     json::parse(R"({"evals":[{"name":"big","samples":[{"id":"0"}],
            "next_cursor":"1","scorers":[],"targets":[]}]})"));
            for (int page = 1;; ++page) {
              auto req = co_await fp.study->read();
              BOOST_TEST(req.at("method").as_string() == "list_samples");
              auto cursor = std::string(req.at("params").at("cursor").as_string());
              json::object res{{"samples", json::array{json::object{{"id", cursor}}}}};
              if (round == 0 && page < 4) res["next_cursor"] = std::to_string(page + 1);
              if (round == 1) res["next_cursor"] = page % 2 ? "2" : "1";  // 1 -> 2 -> 1: a loop
              co_await fp.study->reply(req, res);
              if (round == 0 && page == 4) break;
              if (round == 1 && page == 2) break;
            }
          }
        },
        asio::detached);
    auto all = co_await fp.host->list_all();
    BOOST_REQUIRE(all);
    BOOST_TEST(all->evals[0].samples.size() == 5u);
    BOOST_TEST(!all->evals[0].next_cursor);
    auto loop = co_await fp.host->list_all();
    BOOST_REQUIRE(!loop);
    BOOST_TEST(loop.error().code == errc::cursor_loop);
    BOOST_TEST(loop.error().diag.message.find("'big'") != std::string::npos);
  });
}

BOOST_AUTO_TEST_CASE(endless_empty_pages_are_stopped) {
  run_co([](asio::io_context& ctx) -> asio::awaitable<void> {
    fake_pair fp(ctx.get_executor());
    co_await initialized(fp);
    asio::co_spawn(
        ctx,
        [&]() -> asio::awaitable<void> {
          auto list = co_await fp.study->read();
          co_await fp.study->reply(list, json::parse(R"({"evals":[{"name":"void","samples":[],
            "next_cursor":"0","scorers":[],"targets":[]}]})"));
          for (int page = 1; page <= 100; ++page) {
            auto req = co_await fp.study->read();
            json::object res{{"samples", json::array{}}, {"next_cursor", std::to_string(page)}};
            co_await fp.study->reply(req, res);
          }
        },
        asio::detached);
    auto loop = co_await fp.host->list_all();
    BOOST_REQUIRE(!loop);
    BOOST_TEST(loop.error().code == errc::cursor_loop);
    BOOST_TEST(loop.error().diag.message.find("100 empty pages in a row") != std::string::npos);
  });
}

// 1 000 000 samples in 2 000 pages, listed and planned: linear work, done well inside the
// watchdog (a quadratic step would take hours).
BOOST_AUTO_TEST_CASE(a_million_samples_list_and_plan) {
  constexpr int pages = 2000, per_page = 500;
  run_co(
      [](asio::io_context& ctx) -> asio::awaitable<void> {
        fake_pair fp(ctx.get_executor());
        co_await initialized(fp);
        asio::co_spawn(
            ctx,
            [&]() -> asio::awaitable<void> {
              auto page_of = [](int p) {
                json::array samples;
                for (int i = 0; i < per_page; ++i)
                  samples.push_back(json::object{{"id", std::to_string(p * per_page + i)}});
                return samples;
              };
              auto list = co_await fp.study->read();
              json::object eval{{"name", "big"},
                                {"samples", page_of(0)},
                                {"next_cursor", "1"},
                                {"scorers", json::array{}},
                                {"targets", json::array{json::object{{"label", "sim"}}}}};
              json::object listing{{"evals", json::array{eval}}};
              co_await fp.study->reply(list, listing);
              for (int p = 1; p < pages; ++p) {
                auto req = co_await fp.study->read();
                json::object res{{"samples", page_of(p)}};
                if (p + 1 < pages) res["next_cursor"] = std::to_string(p + 1);
                co_await fp.study->reply(req, res);
              }
            },
            asio::detached);
        auto all = co_await fp.host->list_all();
        BOOST_REQUIRE(all);
        BOOST_TEST(all->evals[0].samples.size() == std::size_t{pages} * per_page);
        auto p = plan::make_plan(*all, {});
        BOOST_REQUIRE(p);
        BOOST_TEST(p->cases.size() == std::size_t{pages} * per_page);
        BOOST_TEST(p->cases.back().key == "big/999999@sim");
      },
      std::chrono::seconds(120));
}

// A study that stops reading: the host never blocks, a queued request can still be cancelled
// and never reaches the study, and the frame being written arrives whole.
BOOST_AUTO_TEST_CASE(queued_requests_cancel_without_reaching_the_study) {
  run_co([](asio::io_context& ctx) -> asio::awaitable<void> {
    fake_pair fp(ctx.get_executor());
    co_await initialized(fp, "cancel,score");
    protocol::score_params big;
    big.identity = run_case("big");
    big.transcript["final_response"] = std::string(8 << 20, 'x');  // far beyond socket buffers
    std::optional<error_code> big_done, queued_done;
    event big_event(ctx.get_executor()), queued_event(ctx.get_executor());
    fp.host->score(big, [&](error_code ec, protocol::run_result) {
      big_done = ec;
      big_event.set();
    });
    asio::cancellation_signal sig;
    fp.host->run(run_case("queued"),
                 asio::bind_cancellation_slot(sig.slot(), [&](error_code ec, protocol::run_result) {
                   queued_done = ec;
                   queued_event.set();
                 }));
    // The strand runs both submissions before this cancellation: the score frame is being
    // written (and blocks, nobody reads), the run is queued behind it.
    sig.emit(asio::cancellation_type::total);  // allowed: it was never written
    co_await queued_event.wait();
    BOOST_TEST(*queued_done == asio::error::operation_aborted);
    BOOST_TEST(!big_done);
    // Now the study reads: the big frame arrives intact, then the next request, nothing else.
    auto first = co_await fp.study->read();
    BOOST_TEST(first.at("params").at("transcript").at("final_response").as_string().size() ==
               (8u << 20));
    auto after = fp.host->run(run_case("after"));
    asio::co_spawn(
        ctx,
        [&]() -> asio::awaitable<void> {
          auto next = co_await fp.study->read();
          BOOST_TEST(next.at("params").at("sample").as_string() == "after");
          co_await fp.study->reply(next, run_result_for(next));
          co_await fp.study->reply(first, run_result_for(first));
        },
        asio::detached);
    auto r = co_await std::move(after);
    BOOST_REQUIRE(r);
    co_await big_event.wait();
    BOOST_TEST(!*big_done);
  });
}

BOOST_AUTO_TEST_CASE(capabilities_gate_execute_score_and_cancel) {
  run_co([](asio::io_context& ctx) -> asio::awaitable<void> {
    fake_pair fp(ctx.get_executor());
    co_await initialized(fp, "");
    auto ex = co_await fp.host->execute(run_case("x"));
    BOOST_REQUIRE(!ex);
    BOOST_TEST(ex.error().code == errc::not_supported);
    BOOST_TEST(ex.error().diag.message.find("'execute'") != std::string::npos);
    auto [ec, found] = co_await fp.host->cancel(1, asio::as_tuple(asio::use_awaitable));
    BOOST_TEST(ec == errc::not_supported);
  });
}

BOOST_AUTO_TEST_CASE(explicit_cancel_and_execute_projection) {
  run_co([](asio::io_context& ctx) -> asio::awaitable<void> {
    fake_pair fp(ctx.get_executor());
    co_await initialized(fp, "cancel,execute");
    asio::co_spawn(
        ctx,
        [&]() -> asio::awaitable<void> {
          auto c = co_await fp.study->read();
          BOOST_TEST(c.at("params").at("id").as_int64() == 41);
          co_await fp.study->reply(c, json::parse(R"({"cancelled":false})"));
          auto e = co_await fp.study->read();
          co_await fp.study->reply(e, json::parse(R"({"eval":"e","sample":"x","target":"sim",
          "transcript":{"trajectory":{"schema_version":"ATIF-v1.7","agent":{"name":"a","version":"1"},
          "steps":[{"step_id":1,"source":"agent","message":"done",
                    "tool_calls":[{"tool_call_id":"c","function_name":"grep","arguments":{}}]}]}}})"));
        },
        asio::detached);
    auto found = co_await fp.host->cancel(41, asio::use_awaitable);
    BOOST_TEST(!found);
    auto ex = co_await fp.host->execute(run_case("x"));
    BOOST_REQUIRE(ex);
    BOOST_TEST(ex->transcript.final_response == "done");
    BOOST_TEST(ex->transcript.tool_calls_count == 1);
    BOOST_TEST(ex->raw().at("transcript").at("tool_calls").as_array().size() == 1u);
  });
}

BOOST_AUTO_TEST_CASE(garbage_is_logged_and_reading_continues) {
  run_co([](asio::io_context& ctx) -> asio::awaitable<void> {
    captured_log log;
    auto opts = quiet_options(&log);
    opts.max_line_bytes = 1024;
    fake_pair fp(ctx.get_executor(), opts);
    co_await initialized(fp);
    asio::co_spawn(
        ctx,
        [&]() -> asio::awaitable<void> {
          auto run = co_await fp.study->read();
          co_await fp.study->write("this is not json");
          co_await fp.study->write("\x1b[31mred\x1b[0m");
          co_await fp.study->write(std::string(5000, 'z'));
          co_await fp.study->write(R"({"id":12345,"result":{}})");
          co_await fp.study->write(R"({"id":1,"method":"sample_model","params":{}})");
          co_await fp.study->reply(run, run_result_for(run));
        },
        asio::detached);
    auto r = co_await fp.host->run(run_case("g"));
    BOOST_REQUIRE(r);
    BOOST_TEST(log.count(log_level::warning, "invalid JSON") == 1u);
    BOOST_TEST(log.count(log_level::debug, "invalid JSON") == 1u);  // the repeat
    BOOST_TEST(log.count(log_level::warning, "skipped a line of 5000 bytes") == 1u);
    BOOST_TEST(log.count(log_level::warning, "unknown request id") == 1u);
    BOOST_TEST(log.count(log_level::warning, "request from the study") == 1u);
    BOOST_TEST(log.count(log_level::warning, "\\x1b[31mred") == 0u);  // excerpt escaped...
    BOOST_TEST(log.count(log_level::debug, "\\x1b[31mred") == 1u);    // ...and present
  });
}

BOOST_AUTO_TEST_CASE(a_response_over_the_line_limit_fails_its_request) {
  run_co([](asio::io_context& ctx) -> asio::awaitable<void> {
    auto opts = quiet_options();
    opts.max_line_bytes = 1024;
    fake_pair fp(ctx.get_executor(), opts);
    co_await initialized(fp);
    asio::co_spawn(
        ctx,
        [&]() -> asio::awaitable<void> {
          auto big = co_await fp.study->read();
          auto id = big.at("id").as_int64();
          co_await fp.study->write("{\"id\":" + std::to_string(id) + ",\"result\":{\"final\":\"" +
                                   std::string(5000, 'x') + "\"}}");
          auto next = co_await fp.study->read();
          co_await fp.study->reply(next, run_result_for(next));
        },
        asio::detached);
    auto big = co_await fp.host->run(run_case("big"));
    BOOST_REQUIRE(!big);
    BOOST_TEST(big.error().code == errc::response_too_large);
    BOOST_TEST(big.error().diag.message.find("bytes from the study (limit 1024)") !=
               std::string::npos);
    auto next = co_await fp.host->run(run_case("next"));  // the connection goes on
    BOOST_TEST(next.has_value());
  });
}

BOOST_AUTO_TEST_CASE(many_threads_share_one_handle) {
  asio::io_context ctx;
  fake_pair fp(ctx.get_executor());
  constexpr int n = 300;
  asio::co_spawn(
      ctx,
      [&]() -> asio::awaitable<void> {
        co_await fp.study->accept_initialize();
        for (int i = 0; i < n; ++i) {
          auto run = co_await fp.study->read();
          co_await fp.study->reply(run, run_result_for(run));
        }
      },
      asio::detached);
  std::atomic<int> ok{0};
  auto guard = asio::make_work_guard(ctx);
  std::vector<std::thread> io;
  for (int i = 0; i < 3; ++i) io.emplace_back([&] { ctx.run(); });
  fp.host->initialize(asio::use_future).get();
  asio::thread_pool callers(3);
  std::atomic<int> done{0};
  std::promise<void> all_done;
  for (int i = 0; i < n; ++i)
    asio::post(callers, [&, i] {
      fp.host->run(run_case(std::to_string(i)), [&, i](error_code ec, protocol::run_result r) {
        if (!ec && r.sample == std::to_string(i)) ++ok;
        if (++done == n) all_done.set_value();
      });
    });
  callers.join();
  BOOST_REQUIRE(all_done.get_future().wait_for(std::chrono::seconds(20)) ==
                std::future_status::ready);
  BOOST_TEST(ok == n);
  fp.host.reset();
  guard.reset();
  ctx.stop();
  for (auto& t : io) t.join();
}

BOOST_AUTO_TEST_SUITE_END()
