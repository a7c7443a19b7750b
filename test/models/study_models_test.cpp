// A study whose subject and judge are models (the local provider-shaped server over TLS),
// served in process to this library's host: key-gated targets as `list` shows them, the case's
// model answering, the judge's verdicts and its N/A without a key, a rate-limited judge as the
// case's infra error, and cache hits in the transcript.
#include <mira/host.hpp>
#include <mira/models/judge.hpp>
#include <mira/models/targets.hpp>
#include <mira/study.hpp>

#include "common/run_co.hpp"
#include "common/scoped_env.hpp"
#include "common/temp_dir.hpp"
#include "models/fake_server.hpp"
#include "models/request_counts.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/local/connect_pair.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/json.hpp>
#include <boost/test/unit_test.hpp>

namespace asio = boost::asio;
namespace json = boost::json;
namespace models = mira::models;
namespace study = mira::study;
using mira::protocol::transcript;
using mira::test::run_co;
using mira::test::scoped_env;
using mira::test::temp_dir;
using socket_t = asio::local::stream_protocol::socket;

namespace {

// The fake server as OPENAI_BASE_URL and ANTHROPIC_BASE_URL, with no cache and no judge
// chosen by the environment but the test's.
struct study_fixture : mira::test::provider_fixture {
  scoped_env openai_url{"OPENAI_BASE_URL", url("/v1").c_str()};
  scoped_env anthropic_url{"ANTHROPIC_BASE_URL", url("").c_str()};
  scoped_env no_cache{"MIRA_CACHE_DIR", nullptr};
  models::client http;

  models::provider_options options() const {
    models::provider_options o;
    o.http = http;
    return o;
  }
  json::object paths() const { return mira::test::request_counts(*this); }
};

study::sample question(std::string id, std::string text, std::string expected) {
  return {std::move(id), json::array{json::string(text)}, json::value(std::move(expected))};
}

// An eval "qa" whose target is openai/m-1, answered by that model (the fake echoes the
// question: "Say Paris" passes the judge, "Name the capital of France" does not), judged by
// `judge`.
study::registry qa_study(const study_fixture& f, models::provider judge) {
  study::registry r("models-study", "1.0");
  r.add("qa")
      .samples({question("say", "Say Paris", "Paris"),
                question("capital", "Name the capital of France", "Paris")})
      .add_target(models::openai_target("m-1"))
      .score_with(models::model_graded(std::move(judge), "Is the answer right?"))
      .subject([o = f.options()](study::run_context& c) -> asio::awaitable<transcript> {
        auto model = models::for_target(c, o);
        co_return co_await model.answer(c);
      });
  return r;
}

mira::protocol::run_params case_of(std::string sample) {
  mira::protocol::run_params p;
  p.eval = "qa";
  p.sample = std::move(sample);
  p.target = "openai/m-1";
  return p;
}

// The study served on one end of a socket pair, this library's host on the other; `body` runs
// with the host.
template <class F>
void with_host(const study::registry& r, F body) {
  run_co([&](asio::io_context& io) -> asio::awaitable<void> {
    auto study_end = std::make_shared<socket_t>(io);
    socket_t host_end(io);
    asio::local::connect_pair(*study_end, host_end);
    asio::co_spawn(io, study::serve(r, study::stream_of(*study_end)),
                   [study_end](std::exception_ptr) {
                     boost::system::error_code ignored;
                     study_end->shutdown(socket_t::shutdown_both, ignored);
                   });
    auto host = mira::host_handle::connect(std::move(host_end));
    auto init = co_await host.initialize();
    BOOST_REQUIRE(init);
    co_await body(host);
    co_await host.shutdown();
  });
}

}  // namespace

BOOST_AUTO_TEST_SUITE(models_in_a_study, *boost::unit_test::precondition(mira::test::needs_openssl))

BOOST_FIXTURE_TEST_CASE(the_cases_model_answers_and_the_judge_grades, study_fixture) {
  scoped_env key("OPENAI_API_KEY", "sk-test");
  auto r = qa_study(*this, models::openai_chat("judge-1", options()));
  with_host(r, [](mira::host_handle& host) -> asio::awaitable<void> {
    auto list = co_await host.list_all();
    BOOST_REQUIRE(list);
    const auto& target = list->evals.at(0).targets.at(0);
    BOOST_TEST(target.label == "openai/m-1");
    BOOST_TEST(target.provider == "openai");
    BOOST_TEST(target.available);
    BOOST_TEST(target.metadata.at("model") == "m-1");
    BOOST_TEST(!target.metadata.contains("unavailable_reason"));

    auto say = co_await host.run(case_of("say"));
    BOOST_REQUIRE(say);
    BOOST_TEST(say->passed);
    BOOST_TEST(say->transcript.final_response == "echo: Say Paris");
    BOOST_TEST(say->scores.at(0).reason == "the response contains the expected text");
    BOOST_TEST(say->transcript.usage.output_tokens == 3);
    auto capital = co_await host.run(case_of("capital"));
    BOOST_REQUIRE(capital);
    BOOST_TEST(!capital->passed);
    BOOST_TEST(!capital->is_na());

    auto x = co_await host.execute(case_of("say"));
    BOOST_REQUIRE(x);
    const auto& steps = x->transcript.trajectory->at("steps").as_array();
    BOOST_REQUIRE(steps.size() == 2U);
    BOOST_TEST(steps[0].at("source") == "user");
    BOOST_TEST(steps[0].at("message") == "Say Paris");
    BOOST_TEST(steps[1].at("source") == "agent");
    BOOST_TEST(steps[1].at("model_name") == "m-1");
  });
}

BOOST_FIXTURE_TEST_CASE(without_a_key_the_target_is_unavailable_and_the_judge_na, study_fixture) {
  scoped_env key("OPENAI_API_KEY", nullptr);
  auto gated = models::openai_target("m-1");
  BOOST_TEST(!gated.available);
  BOOST_TEST(gated.metadata.at("unavailable_reason") == "OPENAI_API_KEY is not set");
  BOOST_TEST(!models::anthropic_target("c-1").available ==
             (std::getenv("ANTHROPIC_API_KEY") == nullptr));

  study::registry r("judged", "1.0");
  r.add("qa")
      .samples({question("say", "Say Paris", "Paris")})
      .add_target("stand-in", "sim")
      .score_with(models::model_graded(models::openai_chat("judge-1", options()), "Right?"))
      .subject([](study::run_context&) -> asio::awaitable<transcript> {
        transcript t;
        t.final_response = "Paris";
        co_return t;
      });
  with_host(r, [](mira::host_handle& host) -> asio::awaitable<void> {
    auto p = case_of("say");
    p.target = "stand-in";
    auto res = co_await host.run(p);
    BOOST_REQUIRE(res);
    BOOST_TEST(res->is_na());
    BOOST_TEST(res->scores.at(0).reason == "judge unavailable: OPENAI_API_KEY is not set");
  });
  BOOST_TEST(paths().empty());
}

BOOST_FIXTURE_TEST_CASE(a_rate_limited_judge_ends_the_case_as_infra_for_the_hosts_retry,
                        study_fixture) {
  scoped_env key("ANTHROPIC_API_KEY", "sk-test");
  scoped_env openai_key("OPENAI_API_KEY", "sk-test");
  auto r = qa_study(*this, models::anthropic("fault-429", options()));
  with_host(r, [](mira::host_handle& host) -> asio::awaitable<void> {
    auto res = co_await host.run(case_of("say"));
    BOOST_REQUIRE(res);
    BOOST_TEST(res->is_na());
    BOOST_TEST((res->transcript.error_kind == mira::protocol::error_kind::infra));
    BOOST_TEST(res->transcript.error.value_or("") ==
               "judge: Anthropic Messages: rate limited (HTTP 429): rate limit reached");
    BOOST_TEST(res->transcript.metadata.get().at("retry_after_ms") == 1000);
  });
}

BOOST_FIXTURE_TEST_CASE(a_reply_from_the_cache_is_counted_in_the_transcript, study_fixture) {
  scoped_env key("OPENAI_API_KEY", "sk-test");
  temp_dir dir;
  scoped_env cache("MIRA_CACHE_DIR", dir.path.c_str());
  auto r = qa_study(*this, models::openai_responses("judge-1", options()));
  with_host(r, [](mira::host_handle& host) -> asio::awaitable<void> {
    auto first = co_await host.execute(case_of("say"));
    BOOST_REQUIRE(first);
    BOOST_TEST(!first->transcript.metadata.get().contains("cache_hits"));
    auto second = co_await host.execute(case_of("say"));
    BOOST_REQUIRE(second);
    BOOST_TEST(second->transcript.metadata.get().at("cache_hits") == 1);
    const auto& steps = second->transcript.trajectory->at("steps").as_array();
    BOOST_TEST(steps.at(1).at("extra").at("from_cache") == true);
    BOOST_TEST(second->transcript.final_response == first->transcript.final_response);
    auto judged = co_await host.run(case_of("say"));
    BOOST_REQUIRE(judged);
    BOOST_TEST(judged->passed);
    auto again = co_await host.run(case_of("say"));
    BOOST_REQUIRE(again);
    BOOST_TEST(again->passed);
  });
  auto counts = paths();
  BOOST_TEST(counts.at("/v1/chat/completions") == 1);  // the subject's question, asked once
  BOOST_TEST(counts.at("/v1/responses") == 1);         // the judge's, asked once
}

BOOST_AUTO_TEST_SUITE_END()
