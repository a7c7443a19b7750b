// What an attempt's outcome means for retries and rate limits.
#include <mira/schedule/classify.hpp>

#include <boost/json/parse.hpp>
#include <boost/test/unit_test.hpp>

using namespace mira;
using namespace mira::schedule;

namespace {

mira::error study_error(std::string message, bool retryable = false,
                        std::optional<boost::json::value> data = {}) {
  mira::error e;
  e.code = make_error_code(retryable ? errc::study_error_retryable : errc::study_error);
  e.diag.study_error = protocol::rpc_error{0, std::move(message), retryable, std::move(data)};
  return e;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(classify_tests)

BOOST_AUTO_TEST_CASE(rate_limit_words_need_word_boundaries) {
  BOOST_TEST(mentions_rate_limit("HTTP 429 Too Many Requests"));
  BOOST_TEST(mentions_rate_limit("provider overloaded, try later"));
  BOOST_TEST(mentions_rate_limit("Rate limit reached for gpt-4o"));
  BOOST_TEST(mentions_rate_limit("monthly quota exceeded"));
  BOOST_TEST(!mentions_rate_limit("connect to port 4290 refused"));
  BOOST_TEST(!mentions_rate_limit("id 14299"));
  BOOST_TEST(!mentions_rate_limit("disk quota nearly full"));
  BOOST_TEST(!mentions_rate_limit("the model answered 42"));
}

BOOST_AUTO_TEST_CASE(structured_signals_come_first) {
  auto e = study_error("upstream said no", false,
                       boost::json::parse(R"({"http_status":429,"retry_after_ms":1500})"));
  attempt a;
  a.error = &e;
  auto v = classify(a, false);
  BOOST_TEST(v.rate_limited);
  BOOST_TEST(v.retry);
  BOOST_REQUIRE(v.retry_after);
  BOOST_TEST((*v.retry_after == std::chrono::milliseconds(1500)));

  auto flag =
      study_error("busy", false, boost::json::parse(R"({"rate_limited":true,"retry_after":2})"));
  a.error = &flag;
  v = classify(a, false);
  BOOST_TEST(v.rate_limited);
  BOOST_TEST((*v.retry_after == std::chrono::seconds(2)));
}

BOOST_AUTO_TEST_CASE(what_is_retried) {
  attempt a;
  auto retryable = study_error("flaky network", true);
  a.error = &retryable;
  BOOST_TEST(classify(a, false).retry);
  BOOST_TEST(!classify(a, false).rate_limited);

  auto bad_params = study_error("no such eval");
  a.error = &bad_params;
  BOOST_TEST(!classify(a, false).retry);

  mira::error died;
  died.code = make_error_code(errc::study_exited);
  a.error = &died;
  BOOST_TEST(classify(a, false).retry);

  protocol::run_result infra;
  infra.transcript.error_kind = protocol::error_kind::infra;
  infra.transcript.metadata = boost::json::parse(R"({"retry_after_ms":250})").as_object();
  attempt r;
  r.result = &infra;
  auto v = classify(r, false);
  BOOST_TEST(v.retry);
  BOOST_TEST((*v.retry_after == std::chrono::milliseconds(250)));

  protocol::run_result failed;  // a subject failure is never retried
  failed.passed = false;
  r.result = &failed;
  BOOST_TEST(!classify(r, false).retry);

  protocol::run_result limited;
  limited.transcript.error = "429 from provider";
  r.result = &limited;
  BOOST_TEST(classify(r, false).rate_limited);

  attempt timeout;
  timeout.timed_out = true;
  BOOST_TEST(!classify(timeout, false).retry);
  BOOST_TEST(classify(timeout, true).retry);
}

BOOST_AUTO_TEST_CASE(custom_classifiers_replace_the_defaults) {
  protocol::run_result r;
  r.transcript.error = "E_SLOWDOWN";
  attempt a;
  a.result = &r;
  auto v = classify(a, false, [](const attempt& x) {
    return x.result && x.result->transcript.error == std::optional<std::string>("E_SLOWDOWN");
  });
  BOOST_TEST(v.rate_limited);
  BOOST_TEST(v.retry);
  auto never = classify(a, false, {}, [](const attempt&) { return false; });
  BOOST_TEST(!never.retry);
}

BOOST_AUTO_TEST_SUITE_END()
