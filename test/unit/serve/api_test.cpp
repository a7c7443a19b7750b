// The server's sans-I/O layer, driven directly: targets, the route table and its OpenAPI
// document, run ids, the bearer check, request bodies (415/400/422), Idempotency-Key
// bookkeeping, the event log behind Last-Event-ID, and the dashboard's page rules.
#include "serve/api.hpp"
#include <mira/serve/server.hpp>
#include "serve/dashboard.hpp"

#include <boost/json/parse.hpp>
#include <boost/test/unit_test.hpp>

using namespace mira::serve;
namespace json = boost::json;

BOOST_AUTO_TEST_SUITE(serve_api)

BOOST_AUTO_TEST_CASE(targets_are_split_and_percent_decoded) {
  auto t = parse_target("/v1/runs/abc%2Dd/cases?state=passed%2Cfailed&x=a+b&empty");
  BOOST_REQUIRE(t);
  BOOST_TEST(t->path == "/v1/runs/abc-d/cases");
  BOOST_TEST(*t->param("state") == "passed,failed");
  BOOST_TEST(*t->param("x") == "a b");
  BOOST_TEST(*t->param("empty") == "");
  BOOST_TEST(!t->param("missing"));
  for (auto bad : {"", "v1/runs", "/a/%zz", "/a/%2", "/a/%00b", "/a/../b", "/a/%2e%2e/b", "/a?x=%",
                   "/a/./b"}) {
    auto r = parse_target(bad);
    BOOST_TEST(!r.has_value(), bad);
    if (!r) BOOST_TEST(r.error().status == 400u);
  }
}

BOOST_AUTO_TEST_CASE(routes_match_by_method_and_path_and_check_run_ids_first) {
  auto m = match_route("GET", "/v1/runs/20261201T101010Z-00ff/events");
  BOOST_REQUIRE(m);
  BOOST_TEST(static_cast<int>(m->spec->r) == static_cast<int>(route::run_events));
  BOOST_TEST(m->run_id == "20261201T101010Z-00ff");
  auto c = match_route("GET", "/v1/studies/demo/catalog");
  BOOST_REQUIRE(c);
  BOOST_TEST(c->study == "demo");
  BOOST_TEST(match_route("POST", "/v1/runs").has_value());
  BOOST_TEST(match_route("GET", "/v1/runs/x/cancel").error().status == 405u);
  BOOST_TEST(match_route("DELETE", "/v1/runs").error().status == 405u);
  BOOST_TEST(match_route("GET", "/v1/nothing").error().status == 404u);
  BOOST_TEST(match_route("GET", "/v1/runs//events").error().status == 404u);
  auto bad = match_route("GET", "/v1/runs/..x/report");
  BOOST_REQUIRE(!bad);
  BOOST_TEST(bad.error().status == 400u);
  BOOST_TEST(bad.error().code == "invalid_run_id");
  BOOST_TEST(match_route("GET", "/v1/runs/a%2Fb").error().status == 400u);  // checked as is
}

BOOST_AUTO_TEST_CASE(run_ids_follow_a_strict_pattern) {
  BOOST_TEST(!check_run_id("20261201T101010Z-00ff"));
  BOOST_TEST(!check_run_id("nightly.2"));
  for (auto bad : {"", ".hidden", "-x", "a/b", "a\\b", "..", "a..b", "a b", "\xc3\xa9",
                   "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"})
    BOOST_TEST(check_run_id(bad).has_value(), bad);
}

BOOST_AUTO_TEST_CASE(the_bearer_token_must_match_exactly) {
  const std::string token = "s3cret-token-0123456789";
  BOOST_TEST(bearer_matches("Bearer " + token, token));
  BOOST_TEST(bearer_matches("bearer " + token, token));  // the scheme is case-insensitive
  BOOST_TEST(!bearer_matches("Bearer " + token + "x", token));
  BOOST_TEST(!bearer_matches("Bearer " + token.substr(1), token));
  BOOST_TEST(!bearer_matches("Basic " + token, token));
  BOOST_TEST(!bearer_matches("", token));
  BOOST_TEST(!bearer_matches("Bearer ", ""));  // no token configured: nothing matches
}

BOOST_AUTO_TEST_CASE(the_token_cookie_must_match_exactly) {
  const std::string token = "s3cret token;0123456789";
  const std::string encoded = "s3cret%20token%3B0123456789";  // as encodeURIComponent has it
  BOOST_TEST(cookie_token_matches("mira_token=" + encoded, token));
  BOOST_TEST(cookie_token_matches("theme=dark; mira_token=" + encoded + "; x=1", token));
  BOOST_TEST(!cookie_token_matches("mira_token=" + encoded + "x", token));
  BOOST_TEST(!cookie_token_matches("xmira_token=" + encoded, token));
  BOOST_TEST(!cookie_token_matches("mira_token=%zz", token));  // a bad escape
  BOOST_TEST(!cookie_token_matches("", token));
  BOOST_TEST(!cookie_token_matches("mira_token=", ""));
}

BOOST_AUTO_TEST_CASE(the_host_must_name_this_server) {
  const std::vector<std::string> none;
  for (auto ok : {"localhost", "LOCALHOST:8750", "127.0.0.1", "127.0.0.1:8750", "127.8.9.10:1",
                  "[::1]", "[::1]:8750"})
    BOOST_TEST(host_allowed(ok, "127.0.0.1", none), ok);
  for (auto bad : {"", "evil.example", "evil.example:8750", "localhost.evil.example", "::1", "[::1",
                   "127.0.0.1:80x", "10.0.0.5", "0.0.0.0", "127.0.0.1:123456"})
    BOOST_TEST(!host_allowed(bad, "127.0.0.1", none), bad);
  // The literal listen address counts, the unspecified one does not; --allow-host names do.
  BOOST_TEST(host_allowed("10.0.0.5:8750", "10.0.0.5", none));
  BOOST_TEST(host_allowed("[fd00::5]:8750", "fd00::5", none));
  BOOST_TEST(!host_allowed("0.0.0.0:8750", "0.0.0.0", none));
  const std::vector<std::string> named{"Mira.Internal", "[fd00::7]"};
  BOOST_TEST(host_allowed("mira.internal:443", "0.0.0.0", named));
  BOOST_TEST(host_allowed("[fd00::7]", "0.0.0.0", named));
  BOOST_TEST(!host_allowed("other.internal", "0.0.0.0", named));
}

BOOST_AUTO_TEST_CASE(a_state_changing_request_must_come_from_this_origin) {
  const std::vector<std::string> named{"mira.internal"};
  BOOST_TEST(origin_allowed("http://127.0.0.1:8750", "127.0.0.1:8750", named));
  BOOST_TEST(origin_allowed("HTTP://LocalHost:8750", "localhost:8750", named));
  BOOST_TEST(origin_allowed("https://mira.internal", "127.0.0.1:8750", named));
  for (auto bad : {"null", "http://evil.example", "http://localhost:3000", "file://",
                   "ftp://127.0.0.1:8750", "127.0.0.1:8750", "http://127.0.0.1:8750/x"})
    BOOST_TEST(!origin_allowed(bad, "127.0.0.1:8750", named), bad);
}

BOOST_AUTO_TEST_CASE(media_types_are_recognised_with_parameters) {
  BOOST_TEST(is_json_media_type("application/json"));
  BOOST_TEST(is_json_media_type("Application/JSON; charset=utf-8"));
  for (auto bad : {"", "text/plain", "application/x-www-form-urlencoded", "multipart/form-data",
                   "application/jsonx"})
    BOOST_TEST(!is_json_media_type(bad), bad);
  BOOST_TEST(has_media_type("Text/HTML; charset=utf-8", "text/html"));
  BOOST_TEST(!has_media_type("text/htmlx", "text/html"));
  // The server's 415 for any POST body and the decoders' are one error.
  auto refused = decode_run_request("text/plain", R"({"study":"demo"})");
  BOOST_TEST(refused.error().message == body_not_json("text/plain").message);
  BOOST_TEST(refused.error().details == body_not_json("text/plain").details);
}

BOOST_AUTO_TEST_CASE(errors_have_one_shape) {
  auto e = make_error(422, "invalid_request", "selection.trials: must be an integer",
                      json::object{{"member", "selection.trials"}});
  auto v = json::parse(error_body(e));
  BOOST_TEST(v.at("error").at("code").as_string() == "invalid_request");
  BOOST_TEST(v.at("error").at("message").as_string() == "selection.trials: must be an integer");
  BOOST_TEST(v.at("error").at("details").at("member").as_string() == "selection.trials");
  BOOST_TEST(
      json::parse(error_body(make_error(404, "x", "y"))).at("error").at("details").is_null());
}

BOOST_AUTO_TEST_CASE(run_requests_are_decoded_or_refused_naming_the_member) {
  auto ok = decode_run_request(
      "application/json; charset=utf-8",
      R"({"study":"demo","selection":{"evals":["arith*"],"samples":"s1","trials":3,"seed":7,)"
      R"("axes":{"temp":["0.*"]}},"options":{"concurrency":4,"retries":1,"case_timeout_s":2.5,)"
      R"("fail_fast":true,"max_cost_usd":1.5,"procs":2}})");
  BOOST_REQUIRE(ok);
  BOOST_TEST(ok->study == "demo");
  BOOST_TEST(ok->selection.evals.at(0) == "arith*");
  BOOST_TEST(ok->selection.samples.at(0) == "s1");
  BOOST_TEST(*ok->selection.trials == 3);
  BOOST_TEST(ok->selection.axes.at(0).first == "temp");
  BOOST_TEST(*ok->options.concurrency == 4u);
  BOOST_TEST(*ok->options.procs == 2u);
  auto policy = to_policy(ok->options);
  BOOST_TEST(policy.concurrency.max_concurrent == 4u);
  BOOST_TEST(policy.retry.max_retries == 1);
  BOOST_TEST(policy.fail_fast);
  BOOST_TEST(policy.case_timeout.has_value());

  auto status = [](std::string_view type, std::string_view body) {
    auto r = decode_run_request(type, body);
    return r ? 0u : r.error().status;
  };
  BOOST_TEST(status("text/plain", R"({"study":"demo"})") == 415u);
  BOOST_TEST(status("", R"({"study":"demo"})") == 415u);
  BOOST_TEST(status("application/json", "{") == 400u);
  BOOST_TEST(status("application/json", "[1]") == 400u);
  BOOST_TEST(status("application/json", "{}") == 422u);
  BOOST_TEST(status("application/json", R"({"study":"d","command":"rm -rf /"})") == 422u);
  BOOST_TEST(status("application/json", R"({"study":"d","selection":{"trials":-1}})") == 422u);
  BOOST_TEST(status("application/json", R"({"study":"d","selection":{"evals":[1]}})") == 422u);
  BOOST_TEST(status("application/json", R"({"study":"d","options":{"concurrency":0}})") == 422u);
  BOOST_TEST(status("application/json", R"({"study":"d","options":{"fail_fast":1}})") == 422u);
  auto named = decode_run_request("application/json", R"({"study":"d","options":{"bogus":1}})");
  BOOST_TEST(named.error().message == "options.bogus: unknown member");

  BOOST_TEST(decode_resume_request("", "")->retry_errors == false);
  BOOST_TEST(decode_resume_request("application/json", R"({"retry_failed":true})")->retry_failed);
  BOOST_TEST(decode_resume_request("application/json", R"({"x":1})").error().status == 422u);
}

BOOST_AUTO_TEST_CASE(an_idempotency_key_names_one_body_and_its_run) {
  idempotency_keys keys;
  using o = idempotency_keys::outcome;
  BOOST_TEST(idempotency_keys::valid_key("client-1:req/7"));
  BOOST_TEST(!idempotency_keys::valid_key("has space"));
  BOOST_TEST(!idempotency_keys::valid_key(std::string(257, 'k')));
  BOOST_TEST((keys.begin("k", "A").what == o::fresh));
  BOOST_TEST((keys.begin("k", "A").what == o::in_progress));
  BOOST_TEST((keys.begin("k", "B").what == o::conflict));
  keys.complete("k", "run-1");
  auto again = keys.begin("k", "A");
  BOOST_TEST((again.what == o::replay));
  BOOST_TEST(again.run_id == "run-1");
  BOOST_TEST((keys.begin("k", "B").what == o::conflict));
  BOOST_TEST((keys.begin("other", "B").what == o::fresh));
  keys.release("other");  // that request failed: the key may be used again, with any body
  BOOST_TEST((keys.begin("other", "C").what == o::fresh));
}

BOOST_AUTO_TEST_CASE(the_event_log_resumes_after_any_id_without_a_gap) {
  event_log log;
  for (int i = 0; i < 5; ++i) log.append("case", "{\"i\":" + std::to_string(i) + "}");
  BOOST_TEST(log.last_id() == 5u);
  BOOST_TEST(log.after(0).size() == 5u);
  BOOST_TEST(log.after(3).size() == 2u);
  BOOST_TEST(log.after(3).front().id == 4u);
  BOOST_TEST(log.after(5).empty());
  BOOST_TEST(log.after(99).empty());
  BOOST_TEST(sse_frame(log.after(4).front()) == "id: 5\nevent: case\ndata: {\"i\":4}\n\n");
  BOOST_TEST(*parse_last_event_id(" 42 ") == 42u);
  BOOST_TEST(!parse_last_event_id("4x"));
  BOOST_TEST(!parse_last_event_id("-1"));
  BOOST_TEST(!parse_last_event_id(""));
  BOOST_TEST(!parse_last_event_id("123456789012345678901"));
}

// An ended run keeps its first event and its newest ones; ids stay, and a client resuming from
// a forgotten id gets what is left.
BOOST_AUTO_TEST_CASE(a_trimmed_event_log_keeps_its_first_and_newest_events_and_their_ids) {
  event_log log;
  for (int i = 0; i < 10; ++i) log.append(i == 0 ? "start" : "case", "{}");
  log.trim(4);
  BOOST_TEST(log.last_id() == 10u);
  auto all = log.after(0);
  BOOST_REQUIRE(all.size() == 4u);
  BOOST_TEST(all[0].id == 1u);
  BOOST_TEST(all[0].type == "start");
  BOOST_TEST(all[1].id == 8u);
  BOOST_TEST(log.after(1).front().id == 8u);
  BOOST_TEST(log.after(5).size() == 3u);  // 5 was forgotten: 8, 9, 10
  BOOST_TEST(log.after(9).front().id == 10u);
  BOOST_TEST(log.after(10).empty());
  log.append("end", "{}");
  BOOST_TEST(log.after(10).front().id == 11u);
}

BOOST_AUTO_TEST_CASE(allow_list_entries_split_their_command_like_a_shell) {
  auto e = parse_study_entry("demo=python3 'my study.py' --x \"a b\" c\\ d");
  BOOST_REQUIRE(e);
  BOOST_TEST(e->name == "demo");
  BOOST_TEST(e->argv.size() == 5u);
  BOOST_TEST(e->argv[1] == "my study.py");
  BOOST_TEST(e->argv[3] == "a b");
  BOOST_TEST(e->argv[4] == "c d");
  for (auto bad : {"nocommand", "=cmd", "a/b=cmd", "x='open", "x=   ", "x=cmd\\"}) {
    auto r = parse_study_entry(bad);
    BOOST_TEST(!r.has_value(), bad);
    if (!r) BOOST_TEST((r.error().code == errc::invalid_study_entry), bad);
  }
}

BOOST_AUTO_TEST_CASE(the_openapi_document_describes_every_route) {
  auto doc = json::parse(openapi_document());
  auto& paths = doc.at("paths").as_object();
  for (auto& r : routes()) {
    std::string method(r.method);
    for (auto& c : method) c = static_cast<char>(std::tolower(c));
    auto* p = paths.if_contains(r.path);
    BOOST_TEST_REQUIRE(p, r.path);
    BOOST_TEST(p->as_object().contains(method), r.path << " " << method);
  }
  auto& create = paths.at("/v1/runs").at("post").at("responses").as_object();
  for (auto code : {"201", "400", "401", "409", "413", "415", "422", "429", "503"})
    BOOST_TEST(create.contains(code), code);
}

BOOST_AUTO_TEST_CASE(the_dashboard_has_no_inline_script_and_escapes_the_run_id) {
  auto page = mira::serve::detail::dashboard_page("a\"><script>x</script>");
  BOOST_TEST(page.find("<script>") == std::string::npos);
  BOOST_TEST(page.find("<script src=\"/dashboard.js\"></script>") != std::string::npos);
  BOOST_TEST(page.find("&quot;&gt;&lt;script&gt;") != std::string::npos);
  auto csp = std::string(mira::serve::detail::dashboard_csp());
  BOOST_TEST(csp.find("script-src 'self'") != std::string::npos);
  BOOST_TEST(csp.find("unsafe-inline'; img") != std::string::npos);  // styles only
  BOOST_TEST(csp.find("script-src 'self' 'unsafe") == std::string::npos);
  // The script writes study text with textContent only.
  auto js = std::string(mira::serve::detail::dashboard_script());
  BOOST_TEST(js.find("innerHTML") == std::string::npos);
  BOOST_TEST(js.find("eval(") == std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()
