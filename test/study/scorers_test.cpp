// The scorers: the N/A rule, the scorer type, every built-in scorer passing and failing, the
// combinators, the model-graded judge, and the protocol's conformance vectors
// (conformance/scorers.json), which pin the Rust SDK's verdicts.
#include <mira/protocol/codec.hpp>
#include <mira/study/scorers.hpp>

#include "common/run_co.hpp"
#include "common/schema.hpp"

#include <boost/asio/post.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/system/system_error.hpp>
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>

namespace asio = boost::asio;
namespace json = boost::json;
namespace protocol = mira::protocol;
namespace study = mira::study;
namespace sc = mira::study::scorers;

namespace {

// The conformance vectors' "base" transcript, by hand.
protocol::transcript base() {
  protocol::transcript t;
  t.final_response = "The answer is 42.";
  t.iterations = 2;
  t.tool_calls_count = 2;
  t.tool_calls = {"read", "calc"};
  t.usage.input_tokens = 5;
  t.usage.output_tokens = 3;
  t.usage.cost_usd = 0.01;
  t.timing.duration_ms = 120;
  t.timing.time_to_first_token_ms = 40;
  t.files = {{"out.txt", "hello world"}};
  t.metrics = {{"recall@5", 0.8}, {"p95_ms", 250.0}};
  return t;
}

protocol::transcript response(std::string text) {
  protocol::transcript t;
  t.final_response = std::move(text);
  return t;
}

// A transcript from its wire JSON, read by the protocol's own decoder (an execute result's).
protocol::transcript transcript_from(const json::value& v) {
  auto r = protocol::decode_execute_result(json::object{{"transcript", v}});
  if (!r) throw std::runtime_error("transcript: " + r.error().message());
  return std::move(r->transcript);
}

// Tool calls with arguments and observations, one answered in plain text, one in parts.
protocol::transcript with_trajectory() {
  return transcript_from(json::parse(R"({
    "final_response": "GOOGL is at $185.35.",
    "tool_calls": ["financial_search", "fetch"],
    "trajectory": {
      "schema_version": "ATIF-v1.7",
      "agent": {"name": "demo-agent", "version": "1.0"},
      "steps": [
        {"step_id": 1, "source": "user", "message": "price of GOOGL?"},
        {"step_id": 2, "source": "agent", "message": "",
         "tool_calls": [
           {"tool_call_id": "c1", "function_name": "financial_search",
            "arguments": {"ticker": "GOOGL", "metric": "price", "count": 3}},
           {"tool_call_id": "c2", "function_name": "fetch",
            "arguments": {"url": "https://example.com/q"}}],
         "observation": {"results": [
           {"source_call_id": "c1", "content": "GOOGL: $185.35"},
           {"source_call_id": "c2", "content": [{"type": "text", "text": "page body"},
                                                {"type": "image", "source": {"path": "p.png"}},
                                                {"type": "text", "text": "more"}]}]}},
        {"step_id": 3, "source": "agent", "message": "GOOGL is at $185.35."}]}})"));
}

const study::sample& plain_sample() {
  static const study::sample s{"s", json::array{"q"}, std::nullopt, {}, {}};
  return s;
}

protocol::score score(const study::scorer& x, const protocol::transcript& t,
                      const study::sample& s = plain_sample()) {
  return x.score(s, t);
}

bool passes(const study::scorer& x, const protocol::transcript& t,
            const study::sample& s = plain_sample()) {
  auto r = x.score(s, t);
  BOOST_TEST(!r.na, x.name() << " gave N/A: " << r.reason);
  BOOST_TEST(r.value == (r.pass ? 1.0 : 0.0), x.name() << " gave " << r.value);
  return r.pass;
}

study::scorer na_scorer(std::string name = "infra") {
  return study::make_scorer(name, [name](const study::sample&, const protocol::transcript&) {
    return study::not_applicable(name, "unreachable");
  });
}

protocol::score co_score(const study::scorer& x, const protocol::transcript& t,
                         const study::sample& s = plain_sample()) {
  return mira::test::run_co([&](asio::io_context&) { return x.co_score(s, t); });
}

// A judge that answers after a turn of the event loop, keeping what it was asked.
class fake_judge final : public sc::judge {
 public:
  explicit fake_judge(std::function<sc::judgement(const sc::judge_request&)> answer)
      : answer_(std::move(answer)) {}

  asio::awaitable<sc::judgement> grade(const sc::judge_request& request) override {
    auto ex = co_await asio::this_coro::executor;
    co_await asio::post(ex, asio::use_awaitable);
    rubric = request.rubric;
    prompt = request.prompt;
    response = request.response;
    sample_id = request.sample.id;
    co_return answer_(request);
  }

  std::string rubric, prompt, response, sample_id;

 private:
  std::function<sc::judgement(const sc::judge_request&)> answer_;
};

}  // namespace

BOOST_AUTO_TEST_SUITE(study_scorers)

BOOST_AUTO_TEST_CASE(the_verdict_follows_the_na_rule) {
  using study::fail;
  using study::not_applicable;
  using study::pass;
  // No score at all: neither passed nor N/A.
  auto none = study::judge_scores({});
  BOOST_TEST(!none.passed);
  BOOST_TEST(none.aggregate == 0.0);
  BOOST_TEST(!none.na);
  // Every score N/A: N/A, not passed, aggregate 0.
  std::vector<protocol::score> all_na{not_applicable("a"), not_applicable("b")};
  auto na = study::judge_scores(all_na);
  BOOST_TEST(!na.passed);
  BOOST_TEST(na.aggregate == 0.0);
  BOOST_TEST(na.na);
  // N/A scores are left out of the verdict and the mean.
  std::vector<protocol::score> mixed{pass("a"), not_applicable("b"), study::graded("c", 0.5, 0.4)};
  auto m = study::judge_scores(mixed);
  BOOST_TEST(m.passed);
  BOOST_TEST(m.aggregate == 0.75);
  BOOST_TEST(!m.na);
  std::vector<protocol::score> failing{pass("a"), not_applicable("b"), fail("c")};
  auto f = study::judge_scores(failing);
  BOOST_TEST(!f.passed);
  BOOST_TEST(f.aggregate == 0.5);
  BOOST_TEST(!f.na);
}

BOOST_AUTO_TEST_CASE(the_builders) {
  auto p = study::pass("s", "ok");
  BOOST_TEST((p.scorer == "s" && p.value == 1.0 && p.pass && !p.na && p.reason == "ok"));
  auto f = study::fail("s");
  BOOST_TEST((f.value == 0.0 && !f.pass && !f.na));
  auto n = study::not_applicable("s", "down");
  BOOST_TEST((n.value == 0.0 && !n.pass && n.na && n.reason == "down"));
  BOOST_TEST(study::graded("s", 0.8, 0.7).pass);
  BOOST_TEST(!study::graded("s", 0.6, 0.7).pass);
  BOOST_TEST(study::graded("s", 2.0, 0.7).value == 1.0);
  BOOST_TEST(study::graded("s", -1.0, 0.0).value == 0.0);
  auto nan = study::graded("s", std::nan(""), 0.0);
  BOOST_TEST(nan.value == 0.0);
}

BOOST_AUTO_TEST_CASE(make_scorer_takes_a_bool_or_a_score) {
  auto is_short =
      study::make_scorer("short", [](const study::sample&, const protocol::transcript& t) {
        return t.final_response.size() < 10;
      });
  BOOST_TEST(is_short.name() == "short");
  BOOST_TEST(!is_short.is_coroutine());
  auto yes = score(is_short, response("hi"));
  BOOST_TEST((yes.scorer == "short" && yes.pass && yes.value == 1.0));
  auto no = score(is_short, base());
  BOOST_TEST((no.scorer == "short" && !no.pass && no.value == 0.0));

  auto half = study::make_scorer("half", [](const study::sample& s, const protocol::transcript&) {
    return study::graded("half", 0.5, 0.5, s.id);
  });
  auto h = score(half, base());
  BOOST_TEST((h.pass && h.value == 0.5 && h.reason == "s"));
  // A plain scorer is awaited too.
  BOOST_TEST(co_score(half, base()).value == 0.5);

  BOOST_CHECK_THROW(study::scorer("empty", study::scorer::function()), std::invalid_argument);
}

BOOST_AUTO_TEST_CASE(the_final_response) {
  auto t = base();
  BOOST_TEST(passes(sc::succeeded(), t));
  auto errored = response("");
  errored.error = "boom";
  BOOST_TEST(!passes(sc::succeeded(), errored));
  BOOST_TEST(score(sc::succeeded(), errored).reason == "error: boom");

  BOOST_TEST(passes(sc::non_empty(), t));
  BOOST_TEST(!passes(sc::non_empty(), response(" \t\n\u00a0\u3000")));

  BOOST_TEST(passes(sc::contains("42"), t));
  BOOST_TEST(!passes(sc::contains("99"), t));
  BOOST_TEST(passes(sc::not_contains("99"), t));
  BOOST_TEST(!passes(sc::not_contains("42"), t));

  BOOST_TEST(passes(sc::equals("  the ANSWER is 42.\n"), t));
  BOOST_TEST(!passes(sc::equals("the answer is 43."), t));
  // Only ASCII letters fold: Rust's eq_ignore_ascii_case.
  BOOST_TEST(!passes(sc::equals("\u00c9t\u00e9"), response("\u00e9t\u00e9")));

  BOOST_TEST(passes(sc::regex(R"(answer is \d+)"), t));
  BOOST_TEST(!passes(sc::regex(R"(^\d+$)"), t));
  BOOST_TEST(passes(sc::regex("(?i)THE ANSWER"), t));

  study::sample with_expected{"s", json::array{"q"}, json::value("The answer is 42. "), {}, {}};
  BOOST_TEST(passes(sc::matches_expected(), t, with_expected));
  BOOST_TEST(!passes(sc::matches_expected(), response("the answer is 42."), with_expected));
  BOOST_TEST(!passes(sc::matches_expected(), t));
  study::sample number_expected{"s", json::array{"q"}, json::value(42), {}, {}};
  auto not_string = score(sc::matches_expected(), response("42"), number_expected);
  BOOST_TEST(!not_string.pass);
  BOOST_TEST(not_string.reason == "sample has no string expected answer");
}

BOOST_AUTO_TEST_CASE(a_bad_pattern_fails_each_case_and_says_why) {
  study::scorer bad = sc::regex("(");  // must not throw
  auto r = score(bad, base());
  BOOST_TEST((!r.pass && !r.na && r.value == 0.0));
  BOOST_TEST(r.reason.starts_with("bad pattern: "), r.reason);
  auto arg = score(sc::tool_arg_matches("fetch", "/url", "("), with_trajectory());
  BOOST_TEST((!arg.pass && !arg.na));
  BOOST_TEST(arg.reason.starts_with("bad pattern: "), arg.reason);
}

BOOST_AUTO_TEST_CASE(json_responses) {
  auto t = response(R"( {"answer": "42", "ok": true, "n": 3} )");
  BOOST_TEST(passes(sc::json_valid(), t));
  BOOST_TEST(passes(sc::json_valid(), response("3")));
  BOOST_TEST(!passes(sc::json_valid(), base()));
  BOOST_TEST(!passes(sc::json_valid(), response(R"({"a": 1} trailing)")));
  BOOST_TEST(passes(sc::json_field_equals("answer", "42"), t));
  BOOST_TEST(!passes(sc::json_field_equals("answer", "43"), t));
  // Only a string equals the value: 3 is not "3".
  BOOST_TEST(!passes(sc::json_field_equals("n", "3"), t));
  BOOST_TEST(score(sc::json_field_equals("n", "3"), t).reason == R"(n is 3, expected "3")");
  BOOST_TEST(!passes(sc::json_field_equals("missing", "x"), t));
  BOOST_TEST(!passes(sc::json_field_equals("answer", "42"), response(R"(["answer"])")));
}

BOOST_AUTO_TEST_CASE(the_workspace) {
  auto t = base();
  BOOST_TEST(passes(sc::file_exists("out.txt"), t));
  BOOST_TEST(!passes(sc::file_exists("nope.txt"), t));
  BOOST_TEST(passes(sc::file_contains("out.txt", "hello"), t));
  BOOST_TEST(!passes(sc::file_contains("out.txt", "bye"), t));
  auto missing = score(sc::file_contains("nope.txt", "hello"), t);
  BOOST_TEST(missing.reason == "no such file: nope.txt");
}

BOOST_AUTO_TEST_CASE(tools_by_name) {
  auto t = base();
  t.tool_calls = {"read", "calc", "read"};
  BOOST_TEST(passes(sc::tool_called("calc"), t));
  BOOST_TEST(!passes(sc::tool_called("grep"), t));
  BOOST_TEST(passes(sc::tool_not_called("grep"), t));
  BOOST_TEST(!passes(sc::tool_not_called("calc"), t));
  BOOST_TEST(passes(sc::tools_used_exactly({"calc", "read", "calc"}), t));
  BOOST_TEST(!passes(sc::tools_used_exactly({"calc"}), t));
  BOOST_TEST(!passes(sc::tools_used_exactly({"calc", "read", "grep"}), t));
  BOOST_TEST(score(sc::tools_used_exactly({"calc"}), t).reason ==
             "expected [calc], used [calc,read]");
  BOOST_TEST(passes(sc::tool_called_before("read", "calc"), t));
  BOOST_TEST(!passes(sc::tool_called_before("calc", "read"), t));
  BOOST_TEST(!passes(sc::tool_called_before("read", "grep"), t));
  BOOST_TEST(!passes(sc::tool_called_before("read", "read"), t));
  BOOST_TEST(passes(sc::tool_calls_within(2), t));
  BOOST_TEST(!passes(sc::tool_calls_within(1), t));
  BOOST_TEST(passes(sc::turns_within(2), t));
  BOOST_TEST(!passes(sc::turns_within(1), t));
}

BOOST_AUTO_TEST_CASE(the_trajectory) {
  auto t = with_trajectory();
  BOOST_TEST(passes(sc::tool_called_with("financial_search", "/ticker", "GOOGL"), t));
  BOOST_TEST(passes(sc::tool_called_with("financial_search", "/count", 3), t));
  BOOST_TEST(
      passes(sc::tool_called_with("financial_search", "",
                                  json::parse(R"({"ticker":"GOOGL","metric":"price","count":3})")),
             t));
  // JSON equality: 3.0 is not 3, and the tool must be the one named.
  BOOST_TEST(!passes(sc::tool_called_with("financial_search", "/count", 3.0), t));
  BOOST_TEST(!passes(sc::tool_called_with("fetch", "/ticker", "GOOGL"), t));
  BOOST_TEST(!passes(sc::tool_called_with("financial_search", "/ticker", "AAPL"), t));
  BOOST_TEST(!passes(sc::tool_called_with("financial_search", "/absent", "GOOGL"), t));
  BOOST_TEST(!passes(sc::tool_called_with("financial_search", "ticker", "GOOGL"), t));

  BOOST_TEST(passes(sc::tool_arg_matches("fetch", "/url", "^https://"), t));
  BOOST_TEST(!passes(sc::tool_arg_matches("fetch", "/url", "^ftp://"), t));
  auto non_string = score(sc::tool_arg_matches("financial_search", "/count", R"(\d+)"), t);
  BOOST_TEST(!non_string.pass);
  BOOST_TEST(non_string.reason == "non-string value at /count in financial_search arguments");

  BOOST_TEST(passes(sc::observation_contains("financial_search", "$185.35"), t));
  BOOST_TEST(passes(sc::observation_contains("fetch", "page body\nmore"), t));
  BOOST_TEST(!passes(sc::observation_contains("fetch", "p.png"), t));
  BOOST_TEST(!passes(sc::observation_contains("financial_search", "AAPL"), t));
  BOOST_TEST(!passes(sc::observation_contains("financial_search", "page body"), t));

  BOOST_TEST(passes(sc::steps_within(3), t));
  BOOST_TEST(!passes(sc::steps_within(2), t));

  // Without a trajectory each fails (an unverifiable check is no N/A), saying why.
  for (const auto& x :
       {sc::tool_called_with("calc", "/x", 1), sc::tool_arg_matches("calc", "/x", "1"),
        sc::observation_contains("calc", "42"), sc::steps_within(10)}) {
    auto r = score(x, base());
    BOOST_TEST((!r.pass && !r.na && r.value == 0.0), x.name());
    BOOST_TEST(r.reason == "subject reported no trajectory", x.name());
  }
  auto null_trajectory = base();
  null_trajectory.trajectory = json::value(nullptr);
  BOOST_TEST(score(sc::steps_within(10), null_trajectory).reason ==
             "subject reported no trajectory");
}

BOOST_AUTO_TEST_CASE(budgets) {
  auto t = base();
  BOOST_TEST(passes(sc::tokens_within(8), t));
  BOOST_TEST(!passes(sc::tokens_within(7), t));
  BOOST_TEST(passes(sc::output_tokens_within(3), t));
  BOOST_TEST(!passes(sc::output_tokens_within(2), t));
  BOOST_TEST(passes(sc::cost_within(0.05), t));
  BOOST_TEST(!passes(sc::cost_within(0.001), t));
  BOOST_TEST(score(sc::cost_within(0.001), t).reason == "$0.0100 > $0.001");
  BOOST_TEST(passes(sc::latency_within(200), t));
  BOOST_TEST(!passes(sc::latency_within(100), t));
  BOOST_TEST(passes(sc::latency_within(0), response("no timing")));
  BOOST_TEST(passes(sc::ttft_within(50), t));
  BOOST_TEST(!passes(sc::ttft_within(30), t));
  auto no_ttft = score(sc::ttft_within(50), response("ok"));
  BOOST_TEST((!no_ttft.pass && !no_ttft.na));
  BOOST_TEST(no_ttft.reason == "subject did not report TTFT");
  BOOST_TEST(passes(sc::metric_at_least("recall@5", 0.75), t));
  BOOST_TEST(!passes(sc::metric_at_least("recall@5", 0.9), t));
  BOOST_TEST(passes(sc::metric_within("p95_ms", 300.0), t));
  BOOST_TEST(!passes(sc::metric_within("p95_ms", 200.0), t));
  BOOST_TEST(!passes(sc::metric_within("absent", 1.0), t));
  BOOST_TEST(!passes(sc::metric_at_least("absent", 0.0), t));
  BOOST_TEST(score(sc::metric_within("absent", 1.0), t).reason == "subject did not report absent");
}

BOOST_AUTO_TEST_CASE(multimodal_output) {
  auto t = response("here you go");
  t.output = json::array{json::object{{"kind", "text"}, {"text", "here you go"}},
                         json::object{{"kind", "image"}, {"media_type", "image/png"}}};
  BOOST_TEST(passes(sc::produced_modality("image"), t));
  BOOST_TEST(passes(sc::produced_modality("text"), t));
  BOOST_TEST(!passes(sc::produced_modality("audio"), t));
  BOOST_TEST(!passes(sc::produced_modality("text"), base()));
}

BOOST_AUTO_TEST_CASE(names_read_as_rust_writes_them) {
  BOOST_TEST(sc::succeeded().name() == "succeeded");
  BOOST_TEST(sc::non_empty().name() == "non_empty");
  BOOST_TEST(sc::contains("42").name() == R"(contains("42"))");
  BOOST_TEST(sc::contains("say \"hi\"\n\\").name() == R"(contains("say \"hi\"\n\\"))");
  BOOST_TEST(sc::contains(std::string("\x01\x1b", 2)).name() == R"(contains("\u{1}\u{1b}"))");
  BOOST_TEST(sc::not_contains("x").name() == R"(not_contains("x"))");
  BOOST_TEST(sc::equals("x").name() == R"(equals("x"))");
  BOOST_TEST(sc::regex(R"(\d+)").name() == R"(regex("\\d+"))");
  BOOST_TEST(sc::matches_expected().name() == "matches_expected");
  BOOST_TEST(sc::json_valid().name() == "json_valid");
  BOOST_TEST(sc::json_field_equals("k", "v").name() == R"(json_field_equals(k="v"))");
  BOOST_TEST(sc::file_exists("a.txt").name() == "file_exists(a.txt)");
  BOOST_TEST(sc::file_contains("a.txt", "x").name() == R"(file_contains(a.txt, "x"))");
  BOOST_TEST(sc::tool_called("calc").name() == "tool_called(calc)");
  BOOST_TEST(sc::tool_not_called("calc").name() == "tool_not_called(calc)");
  BOOST_TEST(sc::tools_used_exactly({"read", "calc", "read"}).name() ==
             "tools_used_exactly([calc,read])");
  BOOST_TEST(sc::tool_called_before("a", "b").name() == "tool_called_before(a, b)");
  BOOST_TEST(sc::tool_called_with("t", "/x", "v").name() == R"(tool_called_with(t, /x, "v"))");
  BOOST_TEST(sc::tool_called_with("t", "/n", 3).name() == "tool_called_with(t, /n, 3)");
  BOOST_TEST(sc::tool_arg_matches("t", "/x", "^a").name() == R"(tool_arg_matches(t, /x, "^a"))");
  BOOST_TEST(sc::observation_contains("t", "x").name() == R"(observation_contains(t, "x"))");
  BOOST_TEST(sc::steps_within(3).name() == "steps_within(3)");
  BOOST_TEST(sc::tool_calls_within(2).name() == "tool_calls_within(2)");
  BOOST_TEST(sc::turns_within(2).name() == "turns_within(2)");
  BOOST_TEST(sc::tokens_within(8).name() == "tokens_within(8)");
  BOOST_TEST(sc::output_tokens_within(3).name() == "output_tokens_within(3)");
  BOOST_TEST(sc::cost_within(0.05).name() == "cost_within($0.05)");
  BOOST_TEST(sc::cost_within(1.0).name() == "cost_within($1)");
  BOOST_TEST(sc::latency_within(200).name() == "latency_within(200ms)");
  BOOST_TEST(sc::ttft_within(50).name() == "ttft_within(50ms)");
  BOOST_TEST(sc::metric_at_least("recall@5", 0.75).name() == "metric_at_least(recall@5 >= 0.75)");
  BOOST_TEST(sc::metric_within("p95_ms", 300.0).name() == "metric_within(p95_ms <= 300)");
  BOOST_TEST(sc::metric_within("m", 1e-7).name() == "metric_within(m <= 0.0000001)");
  BOOST_TEST(sc::produced_modality("image").name() == "produced_modality(image)");
  BOOST_TEST(sc::all_of("both", {sc::succeeded()}).name() == "both");
  BOOST_TEST(sc::any_of("either", {sc::succeeded()}).name() == "either");
  BOOST_TEST(sc::not_(sc::contains("42")).name() == R"(not(contains("42")))");
  // The score is named by the kind.
  BOOST_TEST(score(sc::contains("42"), base()).scorer == "contains");
  BOOST_TEST(score(sc::cost_within(1.0), base()).scorer == "cost_within");
}

BOOST_AUTO_TEST_CASE(combinators) {
  auto t = base();
  auto both = score(sc::all_of("both", {sc::contains("42"), sc::succeeded()}), t);
  BOOST_TEST((both.scorer == "both" && both.pass && both.value == 1.0 && !both.na));
  auto one = score(sc::all_of("both", {sc::contains("42"), sc::contains("zzz")}), t);
  BOOST_TEST((!one.pass && one.value == 0.5));
  BOOST_TEST(one.reason == "✓contains, ✗contains");
  auto either = score(sc::any_of("either", {sc::contains("zzz"), sc::contains("42")}), t);
  BOOST_TEST((either.pass && either.value == 1.0));
  auto neither = score(sc::any_of("either", {sc::contains("zzz"), sc::contains("yyy")}), t);
  BOOST_TEST((!neither.pass && neither.value == 0.0));
  auto graded_max = study::make_scorer("g", [](const study::sample&, const protocol::transcript&) {
    return study::graded("g", 0.3, 0.5);
  });
  auto best = score(sc::any_of("best", {graded_max, sc::contains("zzz")}), t);
  BOOST_TEST((!best.pass && best.value == 0.3));

  auto inverted = score(sc::not_(sc::contains("zzz")), t);
  BOOST_TEST((inverted.scorer == "not(contains)" && inverted.pass && inverted.value == 1.0));
  BOOST_TEST(inverted.reason == "inverted: missing \"zzz\"");
  auto not_graded = score(sc::not_(graded_max), t);
  BOOST_TEST((not_graded.pass && std::abs(not_graded.value - 0.7) < 1e-12));
  BOOST_TEST(!score(sc::not_(sc::contains("42")), t).pass);
}

BOOST_AUTO_TEST_CASE(combinators_leave_na_scores_out) {
  auto t = base();
  // all_of passes on the applicable score alone.
  auto mix = score(sc::all_of("mix", {sc::contains("42"), na_scorer()}), t);
  BOOST_TEST((mix.pass && !mix.na && mix.value == 1.0));
  BOOST_TEST(mix.reason == "✓contains, –infra");
  auto failing = score(sc::any_of("mix", {na_scorer(), sc::contains("zzz")}), t);
  BOOST_TEST((!failing.pass && !failing.na && failing.value == 0.0));
  // Nothing applicable: the combination is N/A, as is one of nothing.
  auto all_na = score(sc::all_of("all_na", {na_scorer(), na_scorer()}), t);
  BOOST_TEST((all_na.na && !all_na.pass && all_na.scorer == "all_na"));
  BOOST_TEST(score(sc::any_of("none", {}), t).na);
  // not_ keeps N/A N/A.
  auto not_na = score(sc::not_(na_scorer()), t);
  BOOST_TEST((not_na.na && !not_na.pass && not_na.scorer == "not(infra)"));
  BOOST_TEST(not_na.reason == "inner N/A: unreachable");
  // A case of N/A combinations only is N/A.
  std::vector<protocol::score> scores{all_na, not_na};
  BOOST_TEST(study::judge_scores(scores).na);
}

BOOST_AUTO_TEST_CASE(a_model_graded_scorer_awaits_its_judge) {
  auto judge = std::make_shared<fake_judge>([](const sc::judge_request& r) {
    bool answered = r.response.find("42") != std::string::npos;
    return sc::judgement{answered ? 0.8 : 0.2, answered ? "answered" : "not answered"};
  });
  auto graded = sc::model_graded(judge, "is it answered?");
  BOOST_TEST(graded.name() == R"(model_graded("is it answered?"))");
  BOOST_TEST(graded.is_coroutine());
  BOOST_CHECK_THROW(score(graded, base()), std::logic_error);

  study::sample s{"capital", json::array{"What is 6 x 7?"}, json::value("42"), {}, {}};
  auto yes = co_score(graded, base(), s);
  BOOST_TEST((yes.scorer == "model_graded" && yes.pass && !yes.na && yes.value == 0.8));
  BOOST_TEST(yes.reason == "answered");
  BOOST_TEST(judge->rubric == "is it answered?");
  BOOST_TEST(judge->response == "The answer is 42.");
  BOOST_TEST(judge->sample_id == "capital");
  for (const char* part : {"is it answered?", "What is 6 x 7?", "# Expected answer\n42",
                           "The answer is 42.", "read, calc"})
    BOOST_TEST(judge->prompt.find(part) != std::string::npos, part << " in " << judge->prompt);
  auto no = co_score(graded, response("no idea"), s);
  BOOST_TEST((!no.pass && !no.na && no.value == 0.2));
  // The threshold decides.
  BOOST_TEST(!co_score(sc::model_graded(judge, "r", 0.9), base()).pass);
  BOOST_CHECK_THROW(sc::model_graded(nullptr, "r"), std::invalid_argument);
}

BOOST_AUTO_TEST_CASE(an_unreachable_judge_gives_na) {
  auto down = std::make_shared<fake_judge>(
      [](const sc::judge_request&) -> sc::judgement { throw std::runtime_error("HTTP 503"); });
  auto r = co_score(sc::model_graded(down, "r"), base());
  BOOST_TEST((r.na && !r.pass && r.value == 0.0 && r.scorer == "model_graded"));
  BOOST_TEST(r.reason == "judge unavailable: HTTP 503");
  auto nan = std::make_shared<fake_judge>([](const sc::judge_request&) {
    return sc::judgement{std::nan(""), "?"};
  });
  BOOST_TEST(co_score(sc::model_graded(nan, "r"), base()).na);
  // A cancelled judge is no verdict: the cancellation reaches the caller.
  auto cancelled = std::make_shared<fake_judge>([](const sc::judge_request&) -> sc::judgement {
    throw boost::system::system_error(asio::error::operation_aborted);
  });
  BOOST_CHECK_THROW(co_score(sc::model_graded(cancelled, "r"), base()),
                    boost::system::system_error);
}

BOOST_AUTO_TEST_CASE(a_combination_of_a_coroutine_scorer_is_one) {
  auto down = std::make_shared<fake_judge>(
      [](const sc::judge_request&) -> sc::judgement { throw std::runtime_error("no key"); });
  auto half = std::make_shared<fake_judge>([](const sc::judge_request&) {
    return sc::judgement{0.5, "so so"};
  });
  auto mix = sc::all_of(
      "mix", {sc::contains("42"), sc::model_graded(half, "r", 0.4), sc::model_graded(down, "r")});
  BOOST_TEST(mix.is_coroutine());
  BOOST_CHECK_THROW(score(mix, base()), std::logic_error);
  auto r = co_score(mix, base());
  BOOST_TEST((r.pass && !r.na && r.value == 0.75));
  BOOST_TEST(r.reason == "✓contains, ✓model_graded, –model_graded");

  auto inverted = sc::not_(sc::model_graded(half, "r", 0.4));
  BOOST_TEST(inverted.is_coroutine());
  auto i = co_score(inverted, base());
  BOOST_TEST((!i.pass && i.value == 0.5 && i.scorer == "not(model_graded)"));
  auto not_down = co_score(sc::not_(sc::model_graded(down, "r")), base());
  BOOST_TEST(not_down.na);
  BOOST_TEST(!sc::not_(sc::contains("x")).is_coroutine());
}

// --- the conformance vectors -------------------------------------------------------------------

namespace {

using spec = json::object;

std::string text(const spec& s, std::string_view key) {
  return std::string(s.at(key).as_string());
}
std::int64_t integer(const spec& s, std::string_view key) {
  return s.at(key).to_number<std::int64_t>();
}
double real(const spec& s, std::string_view key) {
  return s.at(key).to_number<double>();
}

study::scorer build(const spec& s);

std::vector<study::scorer> build_all(const json::array& specs) {
  std::vector<study::scorer> out;
  for (const auto& x : specs) out.push_back(build(x.as_object()));
  return out;
}

// A scorer from the vectors' description of it: {"kind": ..., its arguments}.
const std::map<std::string, std::function<study::scorer(const spec&)>, std::less<>>& kinds() {
  static const std::map<std::string, std::function<study::scorer(const spec&)>, std::less<>> k{
      {"succeeded", [](const spec&) { return sc::succeeded(); }},
      {"non_empty", [](const spec&) { return sc::non_empty(); }},
      {"contains", [](const spec& s) { return sc::contains(text(s, "needle")); }},
      {"not_contains", [](const spec& s) { return sc::not_contains(text(s, "needle")); }},
      {"equals", [](const spec& s) { return sc::equals(text(s, "expected")); }},
      {"regex", [](const spec& s) { return sc::regex(text(s, "pattern")); }},
      {"matches_expected", [](const spec&) { return sc::matches_expected(); }},
      {"json_valid", [](const spec&) { return sc::json_valid(); }},
      {"json_field_equals",
       [](const spec& s) { return sc::json_field_equals(text(s, "key"), text(s, "value")); }},
      {"file_exists", [](const spec& s) { return sc::file_exists(text(s, "path")); }},
      {"file_contains",
       [](const spec& s) { return sc::file_contains(text(s, "path"), text(s, "needle")); }},
      {"tool_called", [](const spec& s) { return sc::tool_called(text(s, "tool")); }},
      {"tool_not_called", [](const spec& s) { return sc::tool_not_called(text(s, "tool")); }},
      {"tools_used_exactly",
       [](const spec& s) {
         std::vector<std::string> tools;
         for (const auto& t : s.at("tools").as_array()) tools.emplace_back(t.as_string());
         return sc::tools_used_exactly(std::move(tools));
       }},
      {"tool_called_before",
       [](const spec& s) { return sc::tool_called_before(text(s, "first"), text(s, "second")); }},
      {"tool_called_with",
       [](const spec& s) {
         return sc::tool_called_with(text(s, "tool"), text(s, "pointer"), s.at("expected"));
       }},
      {"tool_arg_matches",
       [](const spec& s) {
         return sc::tool_arg_matches(text(s, "tool"), text(s, "pointer"), text(s, "pattern"));
       }},
      {"observation_contains",
       [](const spec& s) { return sc::observation_contains(text(s, "tool"), text(s, "needle")); }},
      {"steps_within", [](const spec& s) { return sc::steps_within(integer(s, "max")); }},
      {"tool_calls_within", [](const spec& s) { return sc::tool_calls_within(integer(s, "max")); }},
      {"turns_within", [](const spec& s) { return sc::turns_within(integer(s, "max")); }},
      {"tokens_within", [](const spec& s) { return sc::tokens_within(integer(s, "max")); }},
      {"output_tokens_within",
       [](const spec& s) { return sc::output_tokens_within(integer(s, "max")); }},
      {"cost_within", [](const spec& s) { return sc::cost_within(real(s, "max_usd")); }},
      {"latency_within", [](const spec& s) { return sc::latency_within(integer(s, "max_ms")); }},
      {"ttft_within", [](const spec& s) { return sc::ttft_within(integer(s, "max_ms")); }},
      {"metric_at_least",
       [](const spec& s) { return sc::metric_at_least(text(s, "name"), real(s, "min")); }},
      {"metric_within",
       [](const spec& s) { return sc::metric_within(text(s, "name"), real(s, "max")); }},
      {"produced_modality",
       [](const spec& s) { return sc::produced_modality(text(s, "modality")); }},
      {"all_of",
       [](const spec& s) { return sc::all_of(text(s, "name"), build_all(s.at("of").as_array())); }},
      {"any_of",
       [](const spec& s) { return sc::any_of(text(s, "name"), build_all(s.at("of").as_array())); }},
      {"not", [](const spec& s) { return sc::not_(build(s.at("of").as_object())); }},
  };
  return k;
}

study::scorer build(const spec& s) {
  auto kind = text(s, "kind");
  auto it = kinds().find(kind);
  if (it == kinds().end()) throw std::invalid_argument("no scorer of kind " + kind);
  return it->second(s);
}

void collect_kinds(const spec& s, std::set<std::string>& out) {
  out.insert(text(s, "kind"));
  if (const auto* of = s.if_contains("of")) {
    if (of->is_object()) collect_kinds(of->get_object(), out);
    if (of->is_array())
      for (const auto& x : of->get_array()) collect_kinds(x.as_object(), out);
  }
}

}  // namespace

BOOST_AUTO_TEST_CASE(conformance_vectors,
                     *boost::unit_test::precondition(mira::test::needs_schema)) {
  auto file = *mira::test::schema_dir() / "conformance" / "scorers.json";
  std::ifstream in(file);
  BOOST_TEST_REQUIRE(in.good(), "cannot read " << file);
  std::stringstream buf;
  buf << in.rdbuf();
  const auto doc = json::parse(buf.str()).as_object();

  std::map<std::string, protocol::transcript, std::less<>> transcripts;
  for (const auto& kv : doc.at("transcripts").as_object())
    transcripts.emplace(kv.key(), transcript_from(kv.value()));

  std::set<std::string> covered;
  std::size_t passed = 0;
  const auto& cases = doc.at("cases").as_array();
  for (const auto& c : cases) {
    const auto& v = c.as_object();
    const auto name = text(v, "name");
    BOOST_TEST_CONTEXT(name) {
      collect_kinds(v.at("scorer").as_object(), covered);
      auto x = build(v.at("scorer").as_object());
      const auto& t = transcripts.at(text(v, "transcript"));
      study::sample s{"s", json::array{"q"}, std::nullopt, {}, {}};
      if (const auto* sample = v.if_contains("sample"))
        if (const auto* expected = sample->as_object().if_contains("expected"))
          s.expected = *expected;
      const auto got = co_score(x, t, s);
      const auto& expect = v.at("expect").as_object();
      const bool ok = got.pass == expect.at("pass").as_bool() &&
                      got.na == expect.at("na").as_bool() &&
                      std::abs(got.value - expect.at("value").to_number<double>()) < 1e-9;
      BOOST_TEST(ok, x.name() << ": pass " << got.pass << ", value " << got.value << ", na "
                              << got.na << " (" << got.reason << "), expected "
                              << json::serialize(expect));
      passed += ok ? 1 : 0;
    }
  }
  BOOST_TEST_MESSAGE("scorer conformance: " << passed << " of " << cases.size() << " cases pass");
  BOOST_TEST(passed == cases.size());
  BOOST_TEST(!cases.empty());
  // Every built-in scorer has a vector.
  for (const auto& kind : kinds())
    BOOST_TEST(covered.contains(kind.first), kind.first << " has no vector");
}

BOOST_AUTO_TEST_SUITE_END()
