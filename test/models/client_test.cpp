// The HTTP client against the local provider-shaped server (fake_provider.py) over real TLS,
// trusted through SSL_CERT_FILE: round trips, keep-alive, certificates, deadlines, cancellation,
// bounds, gzip, proxies.
#include <mira/models/http.hpp>

#include "common/run_co.hpp"
#include "models/fake_server.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json.hpp>
#include <boost/test/unit_test.hpp>

#include <fstream>

namespace asio = boost::asio;
namespace json = boost::json;
namespace models = mira::models;
using namespace std::chrono_literals;
using mira::test::provider_fixture;
using mira::test::run_co;
using models::errc;
using outcome = tl::expected<models::http_response, models::error>;
using steady = std::chrono::steady_clock;

namespace {

models::http_request chat(const std::string& url, const std::string& model,
                          const std::string& key = "sk-test") {
  models::http_request r;
  r.url = url;
  r.headers = {{"Authorization", "Bearer " + key, true},
               {"Content-Type", "application/json", false}};
  json::object body{
      {"model", model},
      {"messages", json::array{json::object{{"role", "user"}, {"content", "hello there"}}}}};
  r.body = json::serialize(body);
  return r;
}

// A request to completion on a fresh io_context (see run_co).
outcome send(models::client& c, models::http_request r) {
  return run_co([&](asio::io_context&) -> asio::awaitable<outcome> {
    auto out = co_await c.request(r);
    co_return out;
  });
}

// Requests one after the other on one io_context: the connections they leave idle are pooled
// for the next (a pool lives as long as its execution context).
std::vector<outcome> send_all(models::client& c, std::vector<models::http_request> rs) {
  return run_co([&](asio::io_context&) -> asio::awaitable<std::vector<outcome>> {
    std::vector<outcome> out;
    for (auto& r : rs) {
      auto one = co_await c.request(r);
      out.push_back(std::move(one));
    }
    co_return out;
  });
}

// The server's (or the proxy's) /__stats, through a client of its own.
json::object stats_of(const std::string& url) {
  models::client_options o;
  o.proxy = "";
  models::client c(o);
  models::http_request r;
  r.method = "GET";
  r.url = url;
  auto res = send(c, r);
  if (!res) throw std::runtime_error("stats: " + res.error().message);
  return json::parse(res->body).as_object();
}

std::int64_t path_count(const json::object& stats, const std::string& path) {
  const auto& paths = stats.at("paths").as_object();
  auto it = paths.find(path);
  return it == paths.end() ? 0 : it->value().as_int64();
}

long rss_kb() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  return 0;
}

// Polls `done` every 10 ms (on the caller's executor) for up to five seconds.
template <class F>
asio::awaitable<bool> eventually(F done) {
  asio::steady_timer t(co_await asio::this_coro::executor);
  for (int i = 0; i < 500; ++i) {
    if (done()) co_return true;
    t.expires_after(10ms);
    co_await t.async_wait(asio::use_awaitable);
  }
  co_return done();
}

}  // namespace

BOOST_AUTO_TEST_SUITE(client_over_tls, *boost::unit_test::precondition(mira::test::needs_openssl))

BOOST_FIXTURE_TEST_CASE(a_round_trip, provider_fixture) {
  models::client c;
  auto res = send(c, chat(url("/v1/chat/completions"), "gpt-test"));
  BOOST_REQUIRE_MESSAGE(res, (res ? "" : res.error().message));
  BOOST_TEST(res->status == 200);
  BOOST_TEST(*res->header("CONTENT-TYPE") == "application/json");
  auto body = json::parse(res->body).as_object();
  BOOST_TEST(body.at("choices").as_array()[0].at("message").at("content").as_string() ==
             "echo: hello there");
  BOOST_TEST(body.at("usage").at("completion_tokens").as_int64() == 3);
}

BOOST_FIXTURE_TEST_CASE(an_error_status_is_a_response_not_an_error, provider_fixture) {
  models::client c;
  auto unauthorized = send(c, chat(url("/v1/chat/completions"), "m", "sk-wrong"));
  BOOST_REQUIRE(unauthorized);
  BOOST_TEST(unauthorized->status == 401);
  auto limited = send(c, chat(url("/v1/chat/completions"), "fault-429"));
  BOOST_REQUIRE(limited);
  BOOST_TEST(limited->status == 429);
  BOOST_TEST(models::parse_retry_after(*limited->header("retry-after"), {})->count() == 1000);
}

BOOST_FIXTURE_TEST_CASE(two_requests_one_connection, provider_fixture) {
  models::client c;
  auto res =
      send_all(c, {chat(url("/v1/chat/completions"), "m"),
                   chat(url("/v1/messages", "localhost"), "m"),  // another host, another pool
                   chat(url("/v1/chat/completions"), "m")});
  for (const auto& r : res) BOOST_REQUIRE_MESSAGE(r, (r ? "" : r.error().message));
  auto stats = stats_of(url("/__stats"));
  BOOST_TEST(path_count(stats, "/v1/chat/completions") == 2);
  BOOST_TEST(stats.at("connections").as_int64() == 2);
  // Pools live with their io_context: a request on another one opens its own connection.
  BOOST_REQUIRE(send(c, chat(url("/v1/chat/completions"), "m")));
  BOOST_TEST(stats_of(url("/__stats")).at("connections").as_int64() == 3);
}

BOOST_FIXTURE_TEST_CASE(concurrent_requests_each_get_a_connection_then_share_the_pool,
                        provider_fixture) {
  models::client c;
  auto req = chat(url("/v1/chat/completions"), "m");
  int ok = run_co([&](asio::io_context& ctx) -> asio::awaitable<int> {
    int done = 0, good = 0;
    asio::steady_timer wake(ctx, 20s);
    for (int i = 0; i < 4; ++i)
      asio::co_spawn(ctx, c.request(req), [&](std::exception_ptr, outcome r) {
        good += r && r->status == 200;
        if (++done == 4) wake.cancel();
      });
    co_await wake.async_wait(asio::as_tuple(asio::use_awaitable));
    for (int i = 0; i < 4; ++i) {
      auto r = co_await c.request(req);
      good += r && r->status == 200;
    }
    co_return good;
  });
  BOOST_TEST(ok == 8);
  auto stats = stats_of(url("/__stats"));
  BOOST_TEST(path_count(stats, "/v1/chat/completions") == 8);
  BOOST_TEST(stats.at("connections").as_int64() == 4);
}

BOOST_FIXTURE_TEST_CASE(a_pooled_connection_the_server_dropped_is_replaced_once, provider_fixture) {
  models::client c;
  auto res = send_all(c, {chat(url("/v1/chat/completions"), "fault-drop-next"),
                          chat(url("/v1/chat/completions"), "m")});
  BOOST_REQUIRE(res[0]);
  BOOST_REQUIRE_MESSAGE(res[1], (res[1] ? "" : res[1].error().message));
  BOOST_TEST(res[1]->status == 200);
  auto stats = stats_of(url("/__stats"));
  BOOST_TEST(stats.at("dropped").as_int64() == 1);
  BOOST_TEST(stats.at("connections").as_int64() == 2);
}

BOOST_FIXTURE_TEST_CASE(an_untrusted_certificate_fails_the_handshake, provider_fixture) {
  ::unsetenv("SSL_CERT_FILE");  // the system store: it knows nothing of the throwaway CA
  models::client c;
  auto res = send(c, chat(url("/v1/chat/completions"), "m"));
  BOOST_REQUIRE(!res);
  BOOST_TEST((res.error().code == errc::tls_failed));
  BOOST_TEST(res.error().message.find("certificate") != std::string::npos, res.error().message);
  BOOST_TEST(models::is_transient(res.error().code));
  ::setenv("SSL_CERT_FILE", pki.ca.c_str(), 1);
  BOOST_TEST(path_count(stats_of(url("/__stats")), "/v1/chat/completions") == 0);
}

BOOST_FIXTURE_TEST_CASE(the_host_name_is_verified, provider_fixture) {
  // A certificate of the trusted CA for localhost alone, reached as 127.0.0.1.
  mira::test::test_pki named("DNS:localhost");
  ::setenv("SSL_CERT_FILE", named.ca.c_str(), 1);
  mira::test::fake_process other({"--cert", named.cert, "--key", named.key});
  models::client c;
  const std::string base = "https://127.0.0.1:" + std::to_string(other.port());
  auto res = send(c, chat(base + "/v1/chat/completions", "m"));
  BOOST_REQUIRE(!res);
  BOOST_TEST((res.error().code == errc::tls_failed), res.error().message);
  auto by_name = send(
      c, chat("https://localhost:" + std::to_string(other.port()) + "/v1/chat/completions", "m"));
  BOOST_TEST(by_name.has_value(), (by_name ? "" : by_name.error().message));
}

BOOST_FIXTURE_TEST_CASE(a_ca_file_in_the_options, provider_fixture) {
  ::unsetenv("SSL_CERT_FILE");
  models::client_options o;
  o.ca_file = pki.ca;
  models::client c(o);
  auto res = send(c, chat(url("/v1/chat/completions", "localhost"), "m"));
  BOOST_REQUIRE_MESSAGE(res, (res ? "" : res.error().message));
  BOOST_TEST(res->status == 200);
  models::client_options missing;
  missing.ca_file = pki.dir / "no-such.pem";
  models::client d(missing);
  auto refused = send(d, chat(url("/v1/chat/completions"), "m"));
  BOOST_REQUIRE(!refused);
  BOOST_TEST((refused.error().code == errc::tls_failed));
}

BOOST_FIXTURE_TEST_CASE(a_stalled_body_hits_the_deadline, provider_fixture) {
  models::client c;
  auto req = chat(url("/v1/chat/completions"), "fault-stall");
  req.timeout = 300ms;
  const auto t0 = steady::now();
  auto res = send(c, req);
  const auto took = steady::now() - t0;
  BOOST_REQUIRE(!res);
  BOOST_TEST((res.error().code == errc::timed_out), res.error().message);
  BOOST_TEST((took >= 300ms));
  BOOST_TEST((took < 5s));
}

BOOST_FIXTURE_TEST_CASE(a_cancel_closes_the_request_within_50ms, provider_fixture) {
  models::client c;
  auto req = chat(url("/v1/chat/completions"), "fault-stall");
  const std::string stats_url = url("/__stats");
  std::optional<outcome> result;
  steady::duration took{};
  run_co([&](asio::io_context& ctx) -> asio::awaitable<void> {
    asio::cancellation_signal cancel;
    asio::steady_timer wake(ctx, 20s);
    steady::time_point done_at;
    asio::co_spawn(ctx, c.request(req),
                   asio::bind_cancellation_slot(cancel.slot(), [&](std::exception_ptr, outcome r) {
                     done_at = steady::now();
                     result = std::move(r);
                     wake.cancel();
                   }));
    // Once the server has the request it has sent the header and stalls the body.
    auto request_arrived = [&] {
      return path_count(stats_of(stats_url), "/v1/chat/completions") == 1;
    };
    const bool arrived = co_await eventually(request_arrived);
    BOOST_REQUIRE(arrived);
    BOOST_REQUIRE(!result);
    const auto emitted = steady::now();
    cancel.emit(asio::cancellation_type::terminal);
    co_await wake.async_wait(asio::as_tuple(asio::use_awaitable));
    took = done_at - emitted;
  });
  BOOST_REQUIRE(result);
  BOOST_REQUIRE(!*result);
  BOOST_TEST((result->error().code == errc::cancelled), result->error().message);
  BOOST_TEST_MESSAGE("cancel to completion: "
                     << std::chrono::duration_cast<std::chrono::microseconds>(took).count()
                     << " us");
  BOOST_TEST((took < 50ms));
  // The server saw the connection close (its stalled answer ended).
  bool aborted = run_co([&](asio::io_context&) -> asio::awaitable<bool> {
    auto stall_ended = [&] { return stats_of(stats_url).at("aborted").as_int64() == 1; };
    const bool ended = co_await eventually(stall_ended);
    co_return ended;
  });
  BOOST_TEST(aborted);
}

BOOST_FIXTURE_TEST_CASE(a_50mb_body_past_the_bound_is_refused_without_holding_it,
                        provider_fixture) {
  models::client_options o;
  o.max_response_bytes = 1 << 20;
  models::client c(o);
  std::vector<long> grew_kb;
  auto res = run_co([&](asio::io_context&) -> asio::awaitable<std::vector<outcome>> {
    std::vector<outcome> out;
    auto warm_up = chat(url("/v1/chat/completions"), "m");  // TLS and the pool warmed up
    auto first = co_await c.request(warm_up);
    out.push_back(std::move(first));
    for (const char* fault : {"fault-huge-chunked", "fault-huge"}) {
      auto huge = chat(url("/v1/chat/completions"), fault);
      const long before = rss_kb();
      auto refused = co_await c.request(huge);
      out.push_back(std::move(refused));
      grew_kb.push_back(rss_kb() - before);
    }
    // The connection that carried each was closed, not pooled: this opens a third.
    auto last = co_await c.request(warm_up);
    out.push_back(std::move(last));
    co_return out;
  });
  BOOST_REQUIRE(res[0] && res[3]);
  for (int i : {1, 2}) {
    BOOST_REQUIRE(!res[i]);
    BOOST_TEST((res[i].error().code == errc::body_too_large), res[i].error().message);
    BOOST_TEST_MESSAGE("a 50 MB body: resident memory grew by " << grew_kb[i - 1] << " kB");
    BOOST_TEST(grew_kb[i - 1] < 20 * 1024);
  }
  BOOST_TEST(stats_of(url("/__stats")).at("connections").as_int64() == 3);
}

BOOST_FIXTURE_TEST_CASE(gzip_bodies_are_inflated_within_the_bound, provider_fixture) {
  models::client_options o;
  o.max_response_bytes = 1 << 20;
  models::client c(o);
  auto res = send(c, chat(url("/v1/chat/completions"), "fault-gzip"));
  BOOST_REQUIRE_MESSAGE(res, (res ? "" : res.error().message));
  BOOST_TEST(!res->header("content-encoding"));
  BOOST_TEST(json::parse(res->body).at("object").as_string() == "chat.completion");
  auto bomb = send(c, chat(url("/v1/chat/completions"), "fault-gzip-bomb"));
  BOOST_REQUIRE(!bomb);
  BOOST_TEST((bomb.error().code == errc::body_too_large), bomb.error().message);
}

BOOST_FIXTURE_TEST_CASE(transport_failures_are_errors_naming_the_origin, provider_fixture) {
  models::client c;
  // A port nothing listens on: bound, then closed.
  int port = 0;
  {
    asio::io_context ctx;
    asio::ip::tcp::acceptor a(ctx, {asio::ip::make_address("127.0.0.1"), 0});
    port = a.local_endpoint().port();
  }
  auto refused = send(c, chat("https://127.0.0.1:" + std::to_string(port) + "/v1?key=sk-q", "m"));
  BOOST_REQUIRE(!refused);
  BOOST_TEST((refused.error().code == errc::connect_failed));
  BOOST_TEST(refused.error().message.find("127.0.0.1:" + std::to_string(port)) !=
             std::string::npos);
  BOOST_TEST(refused.error().message.find("sk-q") == std::string::npos);

  auto closed = send(c, chat(url("/v1/chat/completions"), "fault-close"));
  BOOST_REQUIRE(!closed);
  BOOST_TEST((closed.error().code == errc::connection_closed), closed.error().message);

  auto bad = send(c, chat("https//no-scheme", "m"));
  BOOST_REQUIRE(!bad);
  BOOST_TEST((bad.error().code == errc::bad_url));

  auto injected = chat(url("/v1/chat/completions"), "m");
  injected.headers.push_back({"X-Evil", "a\r\nX-Injected: 1", false});
  auto refused_header = send(c, injected);
  BOOST_REQUIRE(!refused_header);
  BOOST_TEST((refused_header.error().code == errc::bad_request));
}

BOOST_FIXTURE_TEST_CASE(no_error_message_holds_a_secret_header, provider_fixture) {
  models::client c;
  auto req = chat(url("/v1/chat/completions"), "fault-stall");
  req.headers.push_back({"X-Other-Key", "sk-very-secret", true});
  req.timeout = 100ms;
  auto res = send(c, req);
  BOOST_REQUIRE(!res);
  BOOST_TEST(res.error().message.find("sk-very-secret") == std::string::npos);
  req.headers.back().value += "\n";
  auto refused = send(c, req);
  BOOST_REQUIRE(!refused);
  BOOST_TEST(refused.error().message.find("sk-very-secret") == std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(client_through_a_proxy,
                      *boost::unit_test::precondition(mira::test::needs_openssl))

BOOST_FIXTURE_TEST_CASE(https_through_connect, provider_fixture) {
  mira::test::fake_process proxy({"--proxy"});
  const std::string proxy_url = "http://127.0.0.1:" + std::to_string(proxy.port());
  models::client_options o;
  o.proxy = proxy_url;
  models::client c(o);
  auto res = send_all(c, {chat(url("/v1/responses", "localhost"), "m"),
                          chat(url("/v1/responses", "localhost"), "m")});  // the tunnel is pooled
  BOOST_REQUIRE_MESSAGE(res[0], (res[0] ? "" : res[0].error().message));
  BOOST_TEST(res[0]->status == 200);
  BOOST_REQUIRE(res[1]);
  auto seen = stats_of(proxy_url + "/__stats");
  BOOST_TEST(seen.at("connect").as_int64() == 1);
  BOOST_TEST(seen.at("targets").as_array()[0].as_string() ==
             "localhost:" + std::to_string(server.port()));
  BOOST_TEST(path_count(stats_of(url("/__stats")), "/v1/responses") == 2);
}

BOOST_FIXTURE_TEST_CASE(no_proxy_goes_direct, provider_fixture) {
  mira::test::fake_process proxy({"--proxy"});
  const std::string proxy_url = "http://127.0.0.1:" + std::to_string(proxy.port());
  ::setenv("HTTPS_PROXY", proxy_url.c_str(), 1);  // read by the client made below
  ::setenv("NO_PROXY", "example.com, localhost", 1);
  models::client c;
  ::unsetenv("HTTPS_PROXY");
  ::unsetenv("NO_PROXY");
  auto direct = send(c, chat(url("/v1/messages", "localhost"), "m"));
  BOOST_REQUIRE_MESSAGE(direct, (direct ? "" : direct.error().message));
  BOOST_TEST(stats_of(proxy_url + "/__stats").at("connect").as_int64() == 0);
  auto proxied = send(c, chat(url("/v1/messages"), "m"));  // 127.0.0.1 is not in the list
  BOOST_REQUIRE_MESSAGE(proxied, (proxied ? "" : proxied.error().message));
  BOOST_TEST(stats_of(proxy_url + "/__stats").at("connect").as_int64() == 1);
}

BOOST_FIXTURE_TEST_CASE(proxy_credentials_and_refusals, provider_fixture) {
  mira::test::fake_process proxy({"--proxy", "--proxy-auth", "us@r:p:ss"});
  const std::string where = "127.0.0.1:" + std::to_string(proxy.port());
  models::client_options with;
  with.proxy = "http://us%40r:p%3Ass@" + where;
  models::client c(with);
  auto res = send(c, chat(url("/v1/chat/completions"), "m"));
  BOOST_REQUIRE_MESSAGE(res, (res ? "" : res.error().message));
  models::client_options without;
  without.proxy = "http://" + where;
  models::client d(without);
  auto refused = send(d, chat(url("/v1/chat/completions"), "m"));
  BOOST_REQUIRE(!refused);
  BOOST_TEST((refused.error().code == errc::proxy_failed));
  BOOST_TEST(refused.error().message.find("407") != std::string::npos, refused.error().message);
  BOOST_TEST(refused.error().http_status == 407);
}

BOOST_AUTO_TEST_CASE(plain_http_through_the_proxy) {
  mira::test::fake_process server({"--plain", "--api-key", "sk-test"});
  mira::test::fake_process proxy({"--proxy"});
  const std::string proxy_url = "http://127.0.0.1:" + std::to_string(proxy.port());
  models::client_options o;
  o.proxy = proxy_url;
  models::client c(o);
  const std::string base = "http://127.0.0.1:" + std::to_string(server.port());
  auto res = send(c, chat(base + "/v1/chat/completions", "m"));
  BOOST_REQUIRE_MESSAGE(res, (res ? "" : res.error().message));
  BOOST_TEST(res->status == 200);
  BOOST_TEST(stats_of(proxy_url + "/__stats").at("forward").as_int64() == 1);
  BOOST_TEST(path_count(stats_of(base + "/__stats"), "/v1/chat/completions") == 1);
}

BOOST_AUTO_TEST_SUITE_END()
