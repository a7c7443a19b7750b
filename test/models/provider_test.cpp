// Providers, the judge and model targets against the local provider-shaped server
// (fake_provider.py) over TLS: each API's round trip, what each failure is thrown as, the
// response cache, and a study whose subject and judge are models, served to this library's host.
#include <mira/host.hpp>
#include <mira/models/judge.hpp>
#include <mira/models/provider.hpp>
#include <mira/models/targets.hpp>
#include <mira/study.hpp>

#include "common/run_co.hpp"
#include "common/temp_dir.hpp"
#include "models/fake_server.hpp"
#include "models/request_counts.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/local/connect_pair.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/json.hpp>
#include <boost/test/unit_test.hpp>

namespace asio = boost::asio;
namespace json = boost::json;
namespace models = mira::models;
namespace study = mira::study;
using namespace std::chrono_literals;
using mira::protocol::transcript;
using mira::test::provider_fixture;
using mira::test::run_co;
using mira::test::temp_dir;

namespace {

// The fake server as a provider's base URL, a client made after the fixture trusts its CA, and
// no cache unless a test gives one.
struct models_fixture : provider_fixture {
  models::client http;

  models::provider_options options(std::string key = "sk-test") const {
    models::provider_options o;
    o.api_key = std::move(key);
    o.http = http;
    o.cache = models::response_cache();
    return o;
  }
  models::provider of(models::api a, std::string model, models::provider_options o) const {
    o.base_url = a == models::api::anthropic_messages ? url("") : url("/v1");
    return {a, std::move(model), std::move(o)};
  }
  models::provider of(models::api a, std::string model = "m-1") const {
    return of(a, std::move(model), options());
  }
  json::object paths() const { return mira::test::request_counts(*this); }
};

// What a coroutine throws, as the exception_ptr run_co rethrows.
template <class E, class F>
E thrown(F&& make) {
  try {
    run_co(std::forward<F>(make));
  } catch (const E& e) {
    return e;
  }
  throw std::runtime_error("nothing was thrown");
}

}  // namespace

BOOST_AUTO_TEST_SUITE(models_providers, *boost::unit_test::precondition(mira::test::needs_openssl))

BOOST_FIXTURE_TEST_CASE(each_api_round_trips, models_fixture) {
  for (auto a :
       {models::api::openai_chat, models::api::openai_responses, models::api::anthropic_messages}) {
    auto p = of(a);
    auto r = run_co([&](asio::io_context&) -> asio::awaitable<models::reply> {
      co_return co_await p.complete("hello there");
    });
    BOOST_TEST(r.text == "echo: hello there", models::name_of(a));
    BOOST_TEST(r.model == "m-1");
    BOOST_TEST(r.finish_reason == "stop");
    BOOST_TEST(r.usage.input_tokens == 2);
    BOOST_TEST(r.usage.output_tokens == 3);
    BOOST_TEST(!r.from_cache);
  }
  auto counts = paths();
  BOOST_TEST(counts.at("/v1/chat/completions") == 1);
  BOOST_TEST(counts.at("/v1/responses") == 1);
  BOOST_TEST(counts.at("/v1/messages") == 1);
}

// The one-line use, a temporary provider awaited at once (g++ 12 and temporaries in co_await:
// docs/toolchain-notes.md).
BOOST_FIXTURE_TEST_CASE(a_temporary_provider_may_be_awaited, models_fixture) {
  auto o = options();
  o.base_url = url("/v1");
  auto r = run_co([&](asio::io_context&) -> asio::awaitable<models::reply> {
    co_return co_await models::openai_chat("m-1", o).complete("one line");
  });
  BOOST_TEST(r.text == "echo: one line");
}

BOOST_FIXTURE_TEST_CASE(each_failure_is_thrown_as_a_study_answers_it, models_fixture) {
  auto limited = of(models::api::openai_chat, "fault-429");
  auto e = thrown<study::infra_error>(
      [&](asio::io_context&) -> asio::awaitable<void> { co_await limited.complete("hi"); });
  BOOST_TEST(std::string(e.what()) ==
             "OpenAI Chat Completions: rate limited (HTTP 429): rate limit reached");
  BOOST_TEST(e.retry_after().value_or(0ms).count() == 1000);

  auto down = of(models::api::anthropic_messages, "fault-500");
  auto d = thrown<study::infra_error>(
      [&](asio::io_context&) -> asio::awaitable<void> { co_await down.complete("hi"); });
  BOOST_TEST(std::string(d.what()).starts_with("Anthropic Messages: server error (HTTP 500)"));

  auto wrong_key = of(models::api::openai_responses, "m-1", options("sk-wrong-key"));
  auto r = thrown<study::request_error>(
      [&](asio::io_context&) -> asio::awaitable<void> { co_await wrong_key.complete("hi"); });
  BOOST_TEST(std::string(r.what()) == "OpenAI Responses: HTTP 401: invalid API key");
  BOOST_TEST(!r.retryable());

  auto broken = of(models::api::openai_chat, "fault-malformed");
  auto b =
      run_co([&](asio::io_context&) -> asio::awaitable<tl::expected<models::reply, models::error>> {
        co_return co_await broken.send(models::request::of("hi"));
      });
  BOOST_REQUIRE(!b);
  BOOST_TEST((b.error().code == models::errc::bad_provider_response));
  BOOST_TEST(b.error().http_status == 200);

  auto keyless = of(models::api::openai_chat, "m-1", options(" "));
  BOOST_TEST(!keyless.has_key());
  auto k =
      run_co([&](asio::io_context&) -> asio::awaitable<tl::expected<models::reply, models::error>> {
        co_return co_await keyless.send(models::request::of("hi"));
      });
  BOOST_REQUIRE(!k);
  BOOST_TEST((k.error().code == models::errc::no_api_key));
  BOOST_TEST(k.error().message == "OPENAI_API_KEY is not set");
}

BOOST_FIXTURE_TEST_CASE(a_cancelled_request_is_thrown_as_the_cancel_it_is, models_fixture) {
  auto stalled = of(models::api::openai_chat, "fault-stall");
  auto e = thrown<boost::system::system_error>([&](asio::io_context& io) -> asio::awaitable<void> {
    asio::cancellation_signal cancel;
    asio::steady_timer soon(io, 50ms);
    soon.async_wait([&](auto) { cancel.emit(asio::cancellation_type::terminal); });
    co_await asio::co_spawn(io, stalled.complete("hi"),
                            asio::bind_cancellation_slot(cancel.slot(), asio::use_awaitable));
  });
  BOOST_TEST(e.code() == asio::error::operation_aborted);
}

BOOST_FIXTURE_TEST_CASE(the_cache_answers_a_repeated_request_without_the_provider, models_fixture) {
  temp_dir dir;
  auto cached = options();
  cached.cache = models::response_cache(dir.path);
  auto p = of(models::api::openai_chat, "m-1", cached);
  auto other_key = of(models::api::openai_chat, "m-1", [&] {
    auto o = cached;
    o.api_key = "sk-another";  // the key is no part of the request's identity
    return o;
  }());
  auto replies = run_co([&](asio::io_context&) -> asio::awaitable<std::vector<models::reply>> {
    std::vector<models::reply> out;
    for (const auto* q : {&p, &p, &other_key}) {
      auto r = co_await q->complete("same question");
      out.push_back(std::move(r));
    }
    auto changed = models::request::of("same question");
    changed.temperature = 0.5;  // the parameters are
    auto r = co_await p.complete(changed);
    out.push_back(std::move(r));
    co_return out;
  });
  BOOST_TEST(!replies[0].from_cache);
  BOOST_TEST(replies[1].from_cache);
  BOOST_TEST(replies[2].from_cache);
  BOOST_TEST(!replies[3].from_cache);
  BOOST_TEST(replies[1].text == replies[0].text);
  BOOST_TEST(replies[1].usage.input_tokens == replies[0].usage.input_tokens);
  BOOST_TEST(paths().at("/v1/chat/completions") == 2);

  // Read-only: answers from the entries there, stores nothing new; without a key, the cache
  // still answers what it holds.
  auto read_only = options("");
  read_only.cache = models::response_cache(dir.path, models::cache_mode::read_only);
  auto replay = of(models::api::openai_chat, "m-1", read_only);
  auto again = run_co([&](asio::io_context&) -> asio::awaitable<models::reply> {
    co_return co_await replay.complete("same question");
  });
  BOOST_TEST(again.from_cache);
  BOOST_TEST(paths().at("/v1/chat/completions") == 2);
}

BOOST_AUTO_TEST_SUITE_END()
