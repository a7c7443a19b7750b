// The HTTP client's plain parts: Retry-After, header lookup, the error category, gzip and the
// idle pool's bookkeeping.
#include <mira/models/error.hpp>
#include <mira/models/http.hpp>
#include "models/gzip.hpp"
#include "models/idle_pool.hpp"

#include <zlib.h>
#include <boost/test/unit_test.hpp>

#include <memory>

namespace models = mira::models;
using namespace std::chrono_literals;
using models::errc;

namespace {

// 2024-03-01 12:00:00 UTC.
const auto noon = std::chrono::sys_days(std::chrono::year(2024) / 3 / 1) + 12h;

std::string gzip_of(const std::string& data) {
  z_stream z{};
  BOOST_REQUIRE(deflateInit2(&z, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) == Z_OK);
  std::string out(deflateBound(&z, data.size()) + 32, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  BOOST_REQUIRE(deflate(&z, Z_FINISH) == Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(retry_after)

BOOST_AUTO_TEST_CASE(delta_seconds) {
  BOOST_TEST(models::parse_retry_after("1", noon)->count() == 1000);
  BOOST_TEST(models::parse_retry_after(" 120 ", noon)->count() == 120000);
  BOOST_TEST(models::parse_retry_after("0", noon)->count() == 0);
  // Saturated rather than overflowed.
  auto huge = models::parse_retry_after("99999999999999999999999", noon);
  BOOST_REQUIRE(huge);
  BOOST_TEST(huge->count() > 0);
}

BOOST_AUTO_TEST_CASE(http_dates_in_the_three_forms) {
  BOOST_TEST(models::parse_retry_after("Fri, 01 Mar 2024 12:00:30 GMT", noon)->count() == 30000);
  BOOST_TEST(models::parse_retry_after("Friday, 01-Mar-24 12:01:00 GMT", noon)->count() == 60000);
  BOOST_TEST(models::parse_retry_after("Fri Mar  1 12:00:05 2024", noon)->count() == 5000);
  // A date already past means now.
  BOOST_TEST(models::parse_retry_after("Thu, 29 Feb 2024 12:00:00 GMT", noon)->count() == 0);
}

BOOST_AUTO_TEST_CASE(anything_else_is_not_a_retry_after) {
  for (const char* bad : {"", "  ", "-1", "1.5", "soon", "Fri, 01 Mar 2024 12:00:30 UTC",
                          "Fri, 31 Feb 2024 12:00:30 GMT", "Fri, 01 Foo 2024 12:00:30 GMT",
                          "Fri, 01 Mar 2024 25:00:00 GMT"})
    BOOST_TEST(!models::parse_retry_after(bad, noon), bad);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(response_and_errors)

BOOST_AUTO_TEST_CASE(header_lookup_ignores_case_and_gives_the_first) {
  models::http_response r;
  r.headers = {
      {"Content-Type", "application/json", false}, {"x-a", "1", false}, {"X-A", "2", false}};
  BOOST_TEST(*r.header("content-type") == "application/json");
  BOOST_TEST(*r.header("X-a") == "1");
  BOOST_TEST(!r.header("retry-after"));
}

BOOST_AUTO_TEST_CASE(the_category_and_what_is_transient) {
  BOOST_TEST(models::category().name() == std::string("mira.models"));
  boost::system::error_code ec = errc::timed_out;
  BOOST_TEST((ec.category() == models::category()));
  for (auto e : {errc::resolve_failed, errc::connect_failed, errc::tls_failed, errc::proxy_failed,
                 errc::timed_out, errc::connection_closed, errc::rate_limited, errc::server_error})
    BOOST_TEST(models::is_transient(e), models::make_error_code(e).message());
  for (auto e :
       {errc::bad_url, errc::body_too_large, errc::malformed_response, errc::cancelled,
        errc::no_api_key, errc::client_error, errc::bad_provider_response, errc::bad_request})
    BOOST_TEST(!models::is_transient(e), models::make_error_code(e).message());
  // Another category's code of the same value is not one of ours.
  BOOST_TEST(
      !models::is_transient(boost::system::error_code(6, boost::system::generic_category())));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(gzip)

BOOST_AUTO_TEST_CASE(inflates_one_member_and_several) {
  const std::string text(100000, 'a');
  auto one = models::detail::gunzip(gzip_of(text), 1 << 20);
  BOOST_REQUIRE(one);
  BOOST_TEST(*one == text);
  auto two = models::detail::gunzip(gzip_of("hello ") + gzip_of("world"), 100);
  BOOST_REQUIRE(two);
  BOOST_TEST(*two == "hello world");
}

BOOST_AUTO_TEST_CASE(bounded_while_inflating) {
  const std::string zeros(10 << 20, '\0');
  const auto packed = gzip_of(zeros);
  BOOST_TEST(packed.size() < 64 * 1024);
  auto r = models::detail::gunzip(packed, 1 << 20);
  BOOST_REQUIRE(!r);
  BOOST_TEST((r.error() == errc::body_too_large));
  // Exactly the bound is fine.
  BOOST_TEST(models::detail::gunzip(gzip_of("12345"), 5).has_value());
  BOOST_TEST(!models::detail::gunzip(gzip_of("123456"), 5).has_value());
}

BOOST_AUTO_TEST_CASE(corrupt_or_cut_short_is_malformed) {
  auto packed = gzip_of("some text that is long enough to matter, some text");
  for (auto bad : {std::string("not gzip at all"), packed.substr(0, packed.size() / 2),
                   packed.substr(0, packed.size() - 1), packed + "trailing junk"}) {
    auto r = models::detail::gunzip(bad, 1 << 20);
    BOOST_REQUIRE(!r);
    BOOST_TEST((r.error() == errc::malformed_response));
  }
  packed[packed.size() / 2] ^= 0x55;
  BOOST_TEST(!models::detail::gunzip(packed, 1 << 20).has_value());
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(idle_pool)

using pool_t = models::detail::idle_pool<std::unique_ptr<int>>;
using clock_t_ = pool_t::clock;

BOOST_AUTO_TEST_CASE(newest_first_per_key) {
  pool_t p;
  const auto t0 = clock_t_::time_point{} + 1h;
  BOOST_TEST(p.put("a", std::make_unique<int>(1), t0 + 60s, 4).empty());
  BOOST_TEST(p.put("a", std::make_unique<int>(2), t0 + 61s, 4).empty());
  BOOST_TEST(p.put("b", std::make_unique<int>(3), t0 + 60s, 4).empty());
  BOOST_TEST(p.size() == 3u);
  BOOST_TEST(**p.take("a", t0) == 2);
  BOOST_TEST(**p.take("a", t0) == 1);
  BOOST_TEST(!p.take("a", t0));
  BOOST_TEST(p.size("b") == 1u);
  BOOST_TEST(!p.take("c", t0));
}

BOOST_AUTO_TEST_CASE(an_expired_entry_is_never_given_out) {
  pool_t p;
  const auto t0 = clock_t_::time_point{} + 1h;
  p.put("a", std::make_unique<int>(1), t0 + 10s, 4);
  p.put("a", std::make_unique<int>(2), t0 + 20s, 4);
  BOOST_TEST(!p.take("a", t0 + 20s));  // the newest expired: so did the older one
  BOOST_TEST(p.size() == 0u);
  p.put("a", std::make_unique<int>(3), t0 + 10s, 4);
  p.put("b", std::make_unique<int>(4), t0 + 30s, 4);
  auto swept = p.sweep(t0 + 15s);
  BOOST_REQUIRE(swept.size() == 1u);
  BOOST_TEST(*swept[0] == 3);
  BOOST_TEST(p.size() == 1u);
}

BOOST_AUTO_TEST_CASE(a_full_key_drops_its_oldest) {
  pool_t p;
  const auto t = clock_t_::time_point{} + 1h;
  p.put("a", std::make_unique<int>(1), t, 2);
  p.put("a", std::make_unique<int>(2), t, 2);
  auto dropped = p.put("a", std::make_unique<int>(3), t, 2);
  BOOST_REQUIRE(dropped.size() == 1u);
  BOOST_TEST(*dropped[0] == 1);
  BOOST_TEST(p.size("a") == 2u);
  // A bound of zero keeps nothing.
  auto refused = p.put("b", std::make_unique<int>(9), t, 0);
  BOOST_TEST(refused.size() == 1u);
  BOOST_TEST(p.size("b") == 0u);
  BOOST_TEST(p.clear().size() == 2u);
  BOOST_TEST(p.size() == 0u);
}

BOOST_AUTO_TEST_SUITE_END()
