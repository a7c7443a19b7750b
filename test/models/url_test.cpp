// URLs, NO_PROXY, where proxies come from, and the route of a request (src/models/url.hpp).
#include "models/url.hpp"

#include <boost/test/unit_test.hpp>

#include <map>

using namespace mira::models::detail;

BOOST_AUTO_TEST_SUITE(url_parsing)

BOOST_AUTO_TEST_CASE(splits_scheme_host_port_and_target) {
  auto u = parse_url("HTTPS://Api.OpenAI.com/v1/chat/completions?x=1#frag");
  BOOST_REQUIRE(u);
  BOOST_TEST(u->tls);
  BOOST_TEST(u->host == "api.openai.com");
  BOOST_TEST(u->port == 443);
  BOOST_TEST(u->target == "/v1/chat/completions?x=1");
  BOOST_TEST(host_header(*u) == "api.openai.com");
  BOOST_TEST(origin(*u) == "https://api.openai.com:443");

  auto v = parse_url("http://127.0.0.1:8080");
  BOOST_REQUIRE(v);
  BOOST_TEST(!v->tls);
  BOOST_TEST(v->port == 8080);
  BOOST_TEST(v->target == "/");
  BOOST_TEST(host_header(*v) == "127.0.0.1:8080");

  auto w = parse_url("http://[::1]:9000?q");
  BOOST_REQUIRE(w);
  BOOST_TEST(w->ipv6);
  BOOST_TEST(w->host == "::1");
  BOOST_TEST(w->target == "/?q");
  BOOST_TEST(host_port(*w) == "[::1]:9000");
}

BOOST_AUTO_TEST_CASE(refuses_what_it_cannot_send) {
  for (const char* bad :
       {"ftp://host/", "api.openai.com/v1", "https://", "https://host:0/", "https://host:65536/",
        "https://host:x/", "https://user:pw@host/", "https://ho st/", "https://host/a b",
        "https://host/a\r\nX: y", "https://[::1/", "https://[nothost]/", "https://host/\xc3\xa9"})
    BOOST_TEST(!parse_url(bad), bad);
}

BOOST_AUTO_TEST_CASE(the_error_does_not_repeat_the_url) {
  auto u = parse_url("https://host/a b?key=sk-secret");
  BOOST_REQUIRE(!u);
  BOOST_TEST(u.error().find("sk-secret") == std::string::npos);
}

BOOST_AUTO_TEST_CASE(proxy_urls_may_omit_the_scheme_and_carry_credentials) {
  auto p = parse_proxy_url("proxy.corp:3128");
  BOOST_REQUIRE(p);
  BOOST_TEST(p->host == "proxy.corp");
  BOOST_TEST(p->port == 3128);
  auto q = parse_proxy_url("http://us%40er:p%3Ass@10.0.0.1:8080/");
  BOOST_REQUIRE(q);
  BOOST_TEST(q->userinfo == "us@er:p:ss");
  BOOST_TEST(!parse_proxy_url("https://proxy:443"));
  BOOST_TEST(!parse_proxy_url("socks5://proxy:1080"));
  BOOST_TEST(parse_proxy_url("http://proxy")->port == 80);
}

BOOST_AUTO_TEST_CASE(base64_of_credentials) {
  BOOST_TEST(base64("") == "");
  BOOST_TEST(base64("f") == "Zg==");
  BOOST_TEST(base64("fo") == "Zm8=");
  BOOST_TEST(base64("foo") == "Zm9v");
  BOOST_TEST(base64("user:pass") == "dXNlcjpwYXNz");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(no_proxy)

BOOST_AUTO_TEST_CASE(names_match_themselves_and_their_subdomains) {
  BOOST_TEST(no_proxy_matches("example.com", "example.com", 443));
  BOOST_TEST(no_proxy_matches("example.com", "api.example.com", 443));
  BOOST_TEST(no_proxy_matches(".example.com", "example.com", 443));
  BOOST_TEST(no_proxy_matches("*.example.com", "a.b.example.com", 443));
  BOOST_TEST(no_proxy_matches("EXAMPLE.com", "Api.Example.COM", 443));
  BOOST_TEST(!no_proxy_matches("example.com", "badexample.com", 443));
  BOOST_TEST(!no_proxy_matches("api.example.com", "example.com", 443));
  BOOST_TEST(!no_proxy_matches("", "example.com", 443));
}

BOOST_AUTO_TEST_CASE(a_list_with_blanks_ports_addresses_and_blocks) {
  const char* list = " foo.internal , localhost:8443,10.0.0.0/8, ::1, [fe80::1]:443 ,192.168.1.7";
  BOOST_TEST(no_proxy_matches(list, "foo.internal", 1));
  BOOST_TEST(no_proxy_matches(list, "localhost", 8443));
  BOOST_TEST(!no_proxy_matches(list, "localhost", 443));
  BOOST_TEST(no_proxy_matches(list, "10.20.30.40", 443));
  BOOST_TEST(!no_proxy_matches(list, "11.0.0.1", 443));
  BOOST_TEST(no_proxy_matches(list, "::1", 443));
  BOOST_TEST(no_proxy_matches(list, "fe80::1", 443));
  BOOST_TEST(!no_proxy_matches(list, "fe80::1", 80));
  BOOST_TEST(no_proxy_matches(list, "192.168.1.7", 80));
  BOOST_TEST(!no_proxy_matches(list, "192.168.1.8", 80));
  BOOST_TEST(no_proxy_matches("fd00::/8", "fd12::5", 443));
  BOOST_TEST(!no_proxy_matches("fd00::/8", "fe12::5", 443));
}

BOOST_AUTO_TEST_CASE(a_name_never_matches_an_address_nor_the_reverse) {
  BOOST_TEST(!no_proxy_matches("localhost", "127.0.0.1", 443));
  BOOST_TEST(!no_proxy_matches("127.0.0.1", "localhost", 443));
  BOOST_TEST(!no_proxy_matches("10.0.0.0/8", "ten.example", 443));
}

BOOST_AUTO_TEST_CASE(star_matches_everything) {
  BOOST_TEST(no_proxy_matches("*", "anything.example", 1));
  BOOST_TEST(no_proxy_matches("a.example, *", "10.1.2.3", 1));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(routes)

namespace {
auto env_of(std::map<std::string, std::string> vars) {
  return [vars](const char* name) -> std::optional<std::string> {
    auto it = vars.find(name);
    return it == vars.end() ? std::nullopt : std::optional<std::string>(it->second);
  };
}
}  // namespace

BOOST_AUTO_TEST_CASE(proxies_from_the_environment_lower_case_first) {
  auto s = read_proxy_settings(std::nullopt, std::nullopt,
                               env_of({{"HTTPS_PROXY", "http://upper:1"},
                                       {"https_proxy", "http://lower:2"},
                                       {"HTTP_PROXY", "http://plain:3"},
                                       {"NO_PROXY", "internal"}}));
  BOOST_TEST(*s.https == "http://lower:2");
  BOOST_TEST(s.https_source == "https_proxy");
  BOOST_TEST(*s.http == "http://plain:3");
  BOOST_TEST(s.no_proxy == "internal");
}

BOOST_AUTO_TEST_CASE(options_win_over_the_environment) {
  auto env = env_of({{"HTTPS_PROXY", "http://env:1"}, {"NO_PROXY", "x"}});
  auto s = read_proxy_settings(std::string("http://opt:2"), std::string("y"), env);
  BOOST_TEST(*s.https == "http://opt:2");
  BOOST_TEST(*s.http == "http://opt:2");
  BOOST_TEST(s.no_proxy == "y");
  auto none = read_proxy_settings(std::string(), std::nullopt, env);
  BOOST_TEST(!none.https);
  BOOST_TEST(!none.http);
}

BOOST_AUTO_TEST_CASE(a_route_through_the_proxy_unless_no_proxy_names_the_host) {
  auto s = read_proxy_settings(
      std::nullopt, std::nullopt,
      env_of({{"HTTPS_PROXY", "http://u:p@proxy:3128"}, {"NO_PROXY", "localhost"}}));
  auto r = make_route("https://api.example.com/v1", s);
  BOOST_REQUIRE(r);
  BOOST_REQUIRE(r->proxy);
  BOOST_TEST(r->proxy->host == "proxy");
  BOOST_TEST(r->pool_key != "https://api.example.com:443");
  auto direct = make_route("https://localhost:8443/v1", s);
  BOOST_REQUIRE(direct);
  BOOST_TEST(!direct->proxy);
  BOOST_TEST(direct->pool_key == "https://localhost:8443");
  // HTTP_PROXY is not set: http:// goes direct.
  BOOST_TEST(!make_route("http://api.example.com/", s)->proxy);
}

BOOST_AUTO_TEST_CASE(a_bad_proxy_url_is_named_by_its_source_not_repeated) {
  auto s = read_proxy_settings(std::nullopt, std::nullopt,
                               env_of({{"HTTPS_PROXY", "https://user:secret@proxy:443"}}));
  auto r = make_route("https://api.example.com/", s);
  BOOST_REQUIRE(!r);
  BOOST_TEST(r.error().find("HTTPS_PROXY") != std::string::npos);
  BOOST_TEST(r.error().find("secret") == std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()
