// The study's side of the codec: the params it decodes, the answers and notifications it writes
// as text (read back by the host's decoders), the frames around them, and those frames checked
// against the protocol's schema.
#include "common/run_result_diff.hpp"
#include "common/schema.hpp"
#include "common/temp_dir.hpp"

#include <mira/protocol/codec.hpp>
#include <mira/protocol/json_text.hpp>
#include <mira/protocol/trajectory.hpp>

#include <boost/json/monotonic_resource.hpp>
#include <boost/json/parse.hpp>
#include <boost/test/unit_test.hpp>

#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <sstream>

namespace json = boost::json;
using namespace mira::protocol;

namespace {

// One agent step with one tool call and per-step metrics: projects to final_response
// "GOOGL is at $185.35.", tool_calls ["financial_search"], 1 iteration, 520/80 tokens.
constexpr const char* trajectory_text =
    R"({"schema_version":"ATIF-v1.7","agent":{"name":"a","version":"1"},"steps":[)"
    R"({"step_id":1,"source":"user","message":"What is GOOGL trading at?"},)"
    R"({"step_id":2,"source":"agent","message":"GOOGL is at $185.35.","tool_calls":[)"
    R"({"tool_call_id":"c1","function_name":"financial_search","arguments":{"ticker":"GOOGL"}}],)"
    R"("observation":{"results":[{"source_call_id":"c1","content":"$185.35"}]},)"
    R"("metrics":{"prompt_tokens":520,"completion_tokens":80}}]})";

// Every optional member set, strings that need escapes, doubles that are not short decimals.
run_result full_result() {
  run_result r;
  r.eval = "greet";
  r.sample = "hi \"there\"";
  r.target = "anthropic/claude-opus";
  r.params = {{"effort", "high"}, {"lang", "fr"}};
  r.trial = 2;
  r.trials = 8;
  r.seed = 44;
  r.input = json::array{"What is the answer?", "And why?"};
  r.expected = lazy_json<json::value>(json::value("42"));
  r.passed = false;
  r.aggregate = 0.1;
  r.scores = {{"contains", 1.0, true, false, "found \"42\""},
              {"judge", 0.0, false, true, "judge unreachable\n(503)\t\x01"}};
  auto& t = r.transcript;
  t.final_response = "Hi! The answer is 42.\n\xc3\xa9 \xe2\x80\xa8 \\";
  t.iterations = 3;
  t.tool_calls_count = 2;
  t.tool_calls = {"search", "calc"};
  t.usage = {120, 48, 64, 12, 0.00042};
  t.timing = {420, 180};
  t.metrics = {{"recall@5", 0.83}, {"energy_joules", 1e-7}};
  t.metadata = json::object{{"trace", "https://example.invalid/t/1"}, {"n", 3}};
  t.error = "provider overloaded";
  t.error_kind = error_kind::infra;
  t.output = json::array{json::object{{"kind", "text"}, {"text", "42"}},
                         json::object{{"kind", "image"},
                                      {"media_type", "image/png"},
                                      {"source", json::object{{"uri", "https://x/cat.png"}}}}};
  r.skipped = true;
  return r;
}

run_result minimal_result() {
  run_result r;
  r.eval = "e";
  r.sample = "s";
  r.target = "t";
  return r;
}

// The full transcript of an execute: a trajectory, the flat fields projected from it, events,
// files. Doubles with short binary forms: the host's DOM decoder reads it back.
execute_result full_execute() {
  execute_result x;
  x.eval = "greet";
  x.sample = "hi";
  x.target = "sim";
  x.trial = 1;
  x.trials = 3;
  x.seed = 0;
  x.transcript.trajectory = json::parse(trajectory_text);
  x.transcript.metadata = json::object{{"run", "r-1"}};
  x.transcript.timing.duration_ms = 7;
  x.transcript.metrics = {{"recall", 0.5}};
  x.transcript.events = json::array{json::object{{"type", "message"}, {"n", 1}}, "raw"};
  x.transcript.files = json::object{{"out.txt", "hello\n"}};
  BOOST_REQUIRE(!project_trajectory(x.transcript));
  return x;
}

template <class T>
std::string text_of(const T& v) {
  std::string out;
  append_json(out, v);
  return out;
}

// Runs validate_ndjson.py --deep over `file`: its exit status and what it printed.
std::pair<int, std::string> validate_ndjson(const std::string& file) {
  auto cmd = std::string(MIRA_PYTHON3) + " " + mira::test::ndjson_validator()->string() + " " +
             (*mira::test::schema_dir() / "schema.json").string() + " " + file + " --deep 2>&1";
  std::string out;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return {-1, "cannot run " + cmd};
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  int status = ::pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

}  // namespace

BOOST_AUTO_TEST_SUITE(study_codec)

BOOST_AUTO_TEST_CASE(run_result_with_every_member_reads_back_through_the_host_decoders) {
  auto r = full_result();
  auto text = text_of(r);
  BOOST_TEST_MESSAGE(text);
  // The host's hot path takes it whole, without falling back to the DOM.
  run_result fast;
  BOOST_TEST(mira::protocol::detail::read_run_result_text(text, fast));
  auto back = decode_run_result_text(text);
  BOOST_REQUIRE(back);
  r.raw_json = text;  // what the host keeps of it
  BOOST_TEST(mira::test::run_result_diff(r, *back) == "");
  BOOST_TEST(mira::test::run_result_diff(r, fast) == "");
  // Decoded and written again: the same text (doubles included).
  BOOST_TEST(text_of(*back) == text);
  BOOST_TEST(text.find(R"("na":true)") != std::string::npos);
  BOOST_TEST(text.find(R"("error_kind":"infra")") != std::string::npos);
  BOOST_TEST(text.find("raw") == std::string::npos);
}

BOOST_AUTO_TEST_CASE(run_result_with_no_optional_member_is_the_schema_minimum) {
  auto r = minimal_result();
  auto text = text_of(r);
  BOOST_TEST(text == R"({"eval":"e","sample":"s","target":"t","passed":false,"aggregate":0,)"
                     R"("scores":[],"transcript":{"final_response":"","iterations":0,)"
                     R"("tool_calls_count":0,"usage":{"input_tokens":0,"output_tokens":0,)"
                     R"("cost_usd":0}},"skipped":false})");
  auto back = decode_run_result_text(text);
  BOOST_REQUIRE(back);
  r.raw_json = text;
  BOOST_TEST(mira::test::run_result_diff(r, *back) == "");
  // trials 0 is written as 1 is (left out); a single timing member alone; a set empty error.
  r.trials = 0;
  r.transcript.timing.time_to_first_token_ms = 5;
  r.transcript.error = "";
  r.transcript.metadata = json::object{};
  r.scores = {{"s", 0.5, false, false, ""}};
  BOOST_TEST(text_of(r) ==
             R"({"eval":"e","sample":"s","target":"t","passed":false,"aggregate":0,)"
             R"("scores":[{"scorer":"s","value":0.5,"pass":false,"reason":""}],)"
             R"("transcript":{"final_response":"","iterations":0,"tool_calls_count":0,)"
             R"("usage":{"input_tokens":0,"output_tokens":0,"cost_usd":0},)"
             R"("timing":{"time_to_first_token_ms":5},"error":""},"skipped":false})");
}

BOOST_AUTO_TEST_CASE(run_params_text_is_what_encode_makes) {
  run_params p;
  p.eval = "greet";
  p.sample = "hi";
  p.target = "sim";
  BOOST_TEST(text_of(p) == to_json_text(encode(p)));
  p.params = {{"effort", "high"}, {"b", "\"q\""}};
  p.trial = 2;
  p.trials = 8;
  p.seed = -1;
  BOOST_TEST(text_of(p) == to_json_text(encode(p)));
}

BOOST_AUTO_TEST_CASE(run_params_carry_the_hosts_timeout_and_read_back_from_text) {
  run_params p;
  p.eval = "greet";
  p.sample = "hi";
  p.target = "sim";
  BOOST_TEST(text_of(p).find("timeout_ms") == std::string::npos);
  p.timeout_ms = 1500;
  p.params = {{"effort", "high"}};
  auto text = text_of(p);
  BOOST_TEST(text.find(R"("timeout_ms":1500)") != std::string::npos);
  auto back = decode_run_params_text(text);
  BOOST_REQUIRE(back);
  BOOST_TEST(back->timeout_ms.value_or(0) == 1500);
  BOOST_TEST(back->params.at("effort") == "high");
  // The DOM decoder behind the text reader gives the same answers and the same errors.
  auto dom = decode_run_params(json::parse(text));
  BOOST_REQUIRE(dom);
  BOOST_TEST(dom->timeout_ms.value_or(0) == 1500);
  for (auto bad : {R"({"eval":"e","sample":"s","target":"t","timeout_ms":-5})",
                   R"({"eval":"e","sample":"s","target":"t","timeout_ms":"soon"})"}) {
    auto t = decode_run_params_text(bad);
    auto d = decode_run_params(json::parse(bad));
    BOOST_REQUIRE(!t);
    BOOST_REQUIRE(!d);
    BOOST_TEST(t.error().message() == d.error().message());
    BOOST_TEST(t.error().path == "timeout_ms");
  }
  BOOST_TEST(!decode_run_params_text("{not json"));
}

// The text reader a study uses for run and execute params agrees with the DOM decoder on
// values and on errors, whatever the host sends.
BOOST_AUTO_TEST_CASE(run_params_text_and_dom_agree) {
  const char* rows[] = {
      R"({"eval":"e","sample":"s","target":"t"})",
      R"({ "eval" : "e" , "sample" : "s" , "target" : "t" , "params" : { } })",
      R"({"eval":"\u00e9\"q\"\n","sample":"\ud83d\ude00","target":"a/b","params":{"k":"v","\u006b2":"w"}})",
      R"({"eval":"e","sample":"s","target":"t","trial":3,"trials":0,"seed":-9223372036854775808})",
      R"({"eval":"e","sample":"s","target":"t","trial":1.0})",
      R"({"eval":"e","sample":"s","target":"t","trial":1e2})",
      R"({"eval":"e","sample":"s","target":"t","trial":-1})",
      R"({"eval":"e","sample":"s","target":"t","trials":-2})",
      R"({"eval":"e","sample":"s","target":"t","trial":9223372036854775808})",
      R"({"eval":"e","sample":"s","target":"t","seed":null,"timeout_ms":null})",
      R"({"eval":"e","sample":"s","target":"t","seed":1.5})",
      R"({"eval":"e","sample":"s","target":"t","timeout_ms":0})",
      R"({"eval":"e","sample":"s","target":"t","timeout_ms":18446744073709551615})",
      R"({"eval":"e","sample":"s","target":"t","params":{"k":1}})",
      R"({"eval":"e","sample":"s","target":"t","params":{"k":null}})",
      R"({"eval":"e","sample":"s","target":"t","params":[]})",
      R"({"eval":"e","sample":"s","target":"t","params":null})",
      R"({"eval":"e","eval":"f","sample":"s","target":"t"})",
      R"({"eval":"e","sample":"s","target":"t","params":{"k":"a","k":"b"}})",
      R"({"eval":"e","sample":"s","target":"t","extra":{"deep":[1,{"x":[true,null]}]}})",
      R"({"eval":1,"sample":"s","target":"t"})",
      R"({"sample":"s","target":"t"})",
      R"({"eval":"","sample":"","target":""})",
      R"({"eval":"e","sample":"s","target":"t"} )",
      R"({"eval":"e","sample":"s","target":"t"}x)",
      R"([])",
      R"("run")",
      R"({})",
      "",
  };
  for (auto row : rows) BOOST_TEST(mira::test::run_params_text_and_dom_disagree(row) == "", row);
}

BOOST_AUTO_TEST_CASE(execute_result_with_a_trajectory_reads_back_through_the_host_decoder) {
  auto x = full_execute();
  BOOST_TEST(x.transcript.final_response == "GOOGL is at $185.35.");
  BOOST_TEST(x.transcript.usage.input_tokens == 520);
  auto text = text_of(x);
  BOOST_TEST_MESSAGE(text);
  auto back = decode_execute_result(json::parse(text), text);
  BOOST_REQUIRE(back);
  BOOST_TEST(back->raw_json == text);  // nothing left to project: the host keeps it as sent
  BOOST_TEST((back->transcript.trajectory == x.transcript.trajectory));
  BOOST_TEST((back->transcript.events == x.transcript.events));
  BOOST_TEST((back->transcript.files == x.transcript.files));
  BOOST_TEST(back->seed.value() == 0);
  BOOST_TEST(text_of(*back) == text);
  // The summary alone leaves out what only the full transcript has.
  auto summary = text_of(static_cast<const transcript_summary&>(x.transcript));
  BOOST_TEST(summary.find("trajectory") == std::string::npos);
  BOOST_TEST(summary.find("events") == std::string::npos);
  BOOST_TEST(text_of(x.transcript).find(R"("events":[)") != std::string::npos);
  // A transcript with neither still has its (empty) events and files.
  execute_result bare;
  BOOST_TEST(
      text_of(bare.transcript) ==
      R"({"final_response":"","iterations":0,"tool_calls_count":0,)"
      R"("usage":{"input_tokens":0,"output_tokens":0,"cost_usd":0},"events":[],"files":{}})");
}

BOOST_AUTO_TEST_CASE(initialize_result_reads_back) {
  initialize_result r;
  r.protocol_version = "1.1";
  r.study = "my-evals";
  BOOST_TEST(text_of(r) == R"({"protocol_version":"1.1","study":"my-evals","evals":0})");
  r.evals = 3;
  r.study_version = "0.1.0";
  r.capabilities = {"events", "cancel"};
  r.capability_params = json::object{{"events", json::object{{"kinds", json::array{"started"}}}}};
  r.raw = json::object{{"not", "written"}};
  auto text = text_of(r);
  BOOST_TEST(text.find("not") == std::string::npos);
  auto back = decode_initialize_result(json::parse(text));
  BOOST_REQUIRE(back);
  BOOST_TEST(back->evals == 3);
  BOOST_TEST(back->has_capability("cancel"));
  BOOST_TEST(text_of(*back) == text);
}

BOOST_AUTO_TEST_CASE(listings_read_back_and_agree_with_encode) {
  list_samples_result page;
  page.samples = {{"a", {}, {}}, {"b", {"smoke"}, json::object{{"difficulty", "easy"}}}};
  BOOST_TEST(text_of(page) == R"({"samples":[{"id":"a"},{"id":"b","tags":["smoke"],)"
                              R"("metadata":{"difficulty":"easy"}}]})");
  page.next_cursor = "2";
  auto text = text_of(page);
  auto back = decode_list_samples_result_text(text);
  BOOST_REQUIRE(back);
  BOOST_TEST(back->next_cursor.value() == "2");
  BOOST_TEST(text_of(*back) == text);

  auto l = decode_list_result(json::parse(
      R"({"evals":[{"name":"e","description":"d","samples":[{"id":"a","tags":["t"]}],
          "next_cursor":"1","scorers":["s"],
          "targets":[{"label":"sim","provider":"p","available":false,"metadata":{"x":1}},
                     {"label":"t2"}],
          "axes":[{"name":"k","values":["1","2"]}],"max_turns":12,"trials":3,"seed":9,
          "metadata":{"suite":"smoke"}},
         {"name":"bare","samples":[],"scorers":[],"targets":[]}]})"));
  BOOST_REQUIRE(l);
  auto list_text = text_of(*l);
  BOOST_TEST((json::parse(list_text) == json::value(encode(*l))));
  auto list_back = decode_list_result_text(list_text);
  BOOST_REQUIRE(list_back);
  BOOST_TEST(text_of(*list_back) == list_text);
  BOOST_TEST(text_of(l->evals[1]) == R"({"name":"bare","samples":[],"scorers":[],"targets":[]})");
}

BOOST_AUTO_TEST_CASE(notifications_read_back) {
  event_params e;
  e.request_id = 7;
  e.eval = "greet";
  e.sample = "hi";
  e.target = "sim";
  e.kind = "started";
  BOOST_TEST(text_of(e) ==
             R"({"request_id":7,"eval":"greet","sample":"hi","target":"sim","kind":"started"})");
  e.params = {{"effort", "high"}};
  e.kind = "output";
  e.turn = 2;
  e.tool = "search";
  e.text = "delta\n";
  e.raw = json::object{{"not", "written"}};
  auto text = text_of(e);
  BOOST_TEST(text.find("not") == std::string::npos);
  auto back = decode_event_params(json::parse(text));
  BOOST_REQUIRE(back);
  BOOST_TEST(back->turn.value() == 2);
  BOOST_TEST(back->text.value() == "delta\n");
  BOOST_TEST(text_of(*back) == text);

  log_params l;
  BOOST_TEST(text_of(l) == R"({"request_id":0,"message":""})");
  l.request_id = 3;
  l.message = "warming up \"driver\"";
  auto log_back = decode_log_params(json::parse(text_of(l)));
  BOOST_REQUIRE(log_back);
  BOOST_TEST(log_back->message == l.message);
  BOOST_TEST(log_back->request_id == 3);
}

BOOST_AUTO_TEST_CASE(errors_and_cancel_results_are_what_encode_makes) {
  rpc_error e;
  e.message = "no such eval: greet";
  BOOST_TEST(text_of(e) == R"({"message":"no such eval: greet"})");
  BOOST_TEST(text_of(e) == to_json_text(encode(e)));
  e.code = -32602;
  e.retryable = true;
  e.data = json::object{{"http_status", 429}, {"retry_after", 1.5}};
  BOOST_TEST(text_of(e) == to_json_text(encode(e)));
  auto back = decode_rpc_error(json::parse(text_of(e)));
  BOOST_REQUIRE(back);
  BOOST_TEST(text_of(*back) == text_of(e));

  BOOST_TEST(text_of(cancel_result{true}) == R"({"cancelled":true})");
  BOOST_TEST(text_of(cancel_result{}) == R"({"cancelled":false})");
}

BOOST_AUTO_TEST_CASE(frames_are_whole_lines) {
  std::string out = "previous line\n";
  append_result_frame(out, 7, R"({"cancelled":true})");
  BOOST_TEST(out == "previous line\n{\"id\":7,\"result\":{\"cancelled\":true}}\n");
  out.clear();
  rpc_error e;
  e.code = -32601;
  e.message = "unknown method: \"x\"";
  append_error_frame(out, 12, e);
  BOOST_TEST(out ==
             "{\"id\":12,\"error\":{\"code\":-32601,\"message\":\"unknown method: \\\"x\\\"\"}}\n");
  out.clear();
  append_notification_frame(out, "log", R"({"request_id":0,"message":"hi"})");
  BOOST_TEST(out == "{\"method\":\"log\",\"params\":{\"request_id\":0,\"message\":\"hi\"}}\n");
}

BOOST_AUTO_TEST_CASE(initialize_params_leave_what_is_missing_empty) {
  auto p = decode_initialize_params(
      json::parse(R"({"protocol_version":"1.0","host":"mira-cli","host_requests":true})"));
  BOOST_REQUIRE(p);
  BOOST_TEST(p->protocol_version == "1.0");
  BOOST_TEST(p->host == "mira-cli");
  auto none = decode_initialize_params(json::object{});
  BOOST_REQUIRE(none);
  BOOST_TEST(none->protocol_version == "");
  BOOST_TEST(none->host == "");
  auto bad = decode_initialize_params(json::parse(R"({"protocol_version":1.1})"));
  BOOST_REQUIRE(!bad);
  BOOST_TEST(bad.error().message() == "protocol_version: expected a string, got number");
  BOOST_TEST(!decode_initialize_params(json::parse("[]")));
}

BOOST_AUTO_TEST_CASE(list_samples_and_cancel_params_require_their_members) {
  auto p = decode_list_samples_params(json::parse(R"({"eval":"e","cursor":"500","x":[1]})"));
  BOOST_REQUIRE(p);
  BOOST_TEST(p->eval == "e");
  BOOST_TEST(p->cursor == "500");
  auto no_cursor = decode_list_samples_params(json::parse(R"({"eval":"e"})"));
  BOOST_REQUIRE(!no_cursor);
  BOOST_TEST(no_cursor.error().message() == "cursor: missing required field");
  auto bad = decode_list_samples_params(json::parse(R"({"eval":["e"],"cursor":"1"})"));
  BOOST_REQUIRE(!bad);
  BOOST_TEST(bad.error().path == "eval");

  auto c = decode_cancel_params(json::parse(R"({"id":7,"why":"timeout"})"));
  BOOST_REQUIRE(c);
  BOOST_TEST(c->id == 7);
  BOOST_TEST(decode_cancel_params(json::parse(R"({"id":7.0})")).value().id == 7);
  BOOST_TEST(decode_cancel_params(json::object{}).error().message() ==
             "id: missing required field");
  BOOST_TEST(decode_cancel_params(json::parse(R"({"id":null})")).error().path == "id");
  BOOST_TEST(decode_cancel_params(json::parse(R"({"id":-1})")).error().message() ==
             "id: must not be negative");
  BOOST_TEST(decode_cancel_params(json::parse(R"({"id":"7"})")).error().message() ==
             "id: expected an integer, got string");
}

BOOST_AUTO_TEST_CASE(score_params_carry_the_identity_and_the_transcript) {
  // Parsed into an arena, as a server parses its lines: the transcript is copied out of it.
  json::monotonic_resource arena;
  auto v = json::parse(R"({"eval":"greet","sample":"hi","target":"sim","params":{},"trial":2,
      "trials":0,"seed":44,"future":1,"transcript":{"final_response":"42","energy":3}})",
                       &arena);
  auto p = decode_score_params(v);
  BOOST_REQUIRE(p);
  BOOST_TEST(p->identity.eval == "greet");
  BOOST_TEST(p->identity.trial == 2);
  BOOST_TEST(p->identity.trials == 1);
  BOOST_TEST(p->identity.seed.value() == 44);
  BOOST_TEST(p->transcript.at("energy").as_int64() == 3);  // kept as received
  BOOST_TEST(p->transcript.storage().get() == json::storage_ptr().get());
  auto t = decode_transcript(p->transcript);
  BOOST_REQUIRE(t);
  BOOST_TEST(t->final_response == "42");

  auto missing = decode_score_params(json::parse(R"({"eval":"greet"})"));
  BOOST_REQUIRE(!missing);
  BOOST_TEST(missing.error().message() == "transcript: missing required field");
  auto not_object = decode_score_params(json::parse(R"({"transcript":"42"})"));
  BOOST_REQUIRE(!not_object);
  BOOST_TEST(not_object.error().message() == "transcript: expected an object, got string");
  auto bad_identity = decode_score_params(json::parse(R"({"trial":-1,"transcript":{}})"));
  BOOST_REQUIRE(!bad_identity);
  BOOST_TEST(bad_identity.error().path == "trial");
  auto bad_params = decode_score_params(json::parse(R"({"params":{"k":1},"transcript":{}})"));
  BOOST_REQUIRE(!bad_params);
  BOOST_TEST(bad_params.error().path == "params.k");
}

BOOST_AUTO_TEST_CASE(a_transcript_decodes_with_defaults_and_names_bad_fields) {
  auto t = decode_transcript(json::parse(R"({"final_response":"hi","usage":{"input_tokens":3},
      "events":[1,{"a":2}],"files":{"f":"x"},"future":true})"));
  BOOST_REQUIRE(t);
  BOOST_TEST(t->final_response == "hi");
  BOOST_TEST(t->usage.input_tokens == 3);
  BOOST_TEST(t->usage.output_tokens == 0);
  BOOST_TEST(!t->trajectory);
  BOOST_TEST(t->events.size() == 2u);
  BOOST_TEST(t->files.at("f").as_string() == "x");
  BOOST_TEST((t->error_kind == error_kind::subject));

  auto wrong = decode_transcript(json::parse(R"({"usage":{"input_tokens":"3"}})"));
  BOOST_REQUIRE(!wrong);
  BOOST_TEST(wrong.error().message() == "usage.input_tokens: expected an integer, got string");
  BOOST_TEST(decode_transcript(json::parse(R"({"events":{}})")).error().path == "events");
  BOOST_TEST(decode_transcript(json::parse("3")).error().what == "expected an object, got number");

  auto future_atif = decode_transcript(
      json::parse(R"({"trajectory":{"schema_version":"ATIF-v2.0","agent":{},"steps":[]}})"));
  BOOST_REQUIRE(!future_atif);
  BOOST_TEST(future_atif.error().path == "trajectory.schema_version");
  auto bad_step = decode_transcript(
      json::parse(R"({"trajectory":{"schema_version":"ATIF-v1.2","steps":[{},3]}})"));
  BOOST_REQUIRE(!bad_step);
  BOOST_TEST(bad_step.error().path == "trajectory.steps[1]");
  BOOST_TEST(decode_transcript(json::parse(R"({"trajectory":null})")).has_value());
}

BOOST_AUTO_TEST_CASE(a_trajectory_fills_only_the_flat_fields_left_unset) {
  auto only = decode_transcript(json::object{{"trajectory", json::parse(trajectory_text)}});
  BOOST_REQUIRE(only);
  BOOST_TEST(only->final_response == "GOOGL is at $185.35.");
  BOOST_TEST(only->tool_calls == std::vector<std::string>{"financial_search"},
             boost::test_tools::per_element());
  BOOST_TEST(only->tool_calls_count == 1);
  BOOST_TEST(only->iterations == 1);
  BOOST_TEST(only->usage.input_tokens == 520);
  BOOST_TEST(only->usage.output_tokens == 80);

  auto set = decode_transcript(json::object{{"trajectory", json::parse(trajectory_text)},
                                            {"final_response", "set by the study"},
                                            {"usage", json::object{{"input_tokens", 1}}},
                                            {"iterations", 4}});
  BOOST_REQUIRE(set);
  BOOST_TEST(set->final_response == "set by the study");
  BOOST_TEST(set->usage.input_tokens == 1);
  BOOST_TEST(set->usage.output_tokens == 0);
  BOOST_TEST(set->iterations == 4);
  BOOST_TEST(set->tool_calls_count == 1);
}

// The typed projection and the JSON one (the host's, for execute results) fill the same fields
// with the same values.
BOOST_AUTO_TEST_CASE(typed_and_json_projections_agree) {
  std::vector<json::value> trajectories{json::parse(trajectory_text)};
  if (auto dir = mira::test::schema_dir()) {
    std::ifstream in(*dir / "conformance" / "trajectory.json");
    std::stringstream ss;
    ss << in.rdbuf();
    auto fixture = json::parse(ss.str());
    for (auto& c : fixture.at("cases").as_array())
      if (!c.as_object().contains("rejects")) trajectories.push_back(c.at("trajectory"));
  }
  const json::object flat_variants[] = {
      {},
      {{"final_response", "kept"}, {"tool_calls", json::array{"x", "y"}}},
      {{"iterations", 9}, {"usage", json::object{{"cost_usd", 0.5}}}},
      {{"tool_calls_count", 5}, {"final_response", ""}, {"usage", nullptr}},
  };
  for (std::size_t i = 0; i < trajectories.size(); ++i) {
    for (std::size_t k = 0; k < std::size(flat_variants); ++k) {
      BOOST_TEST_CONTEXT("trajectory " << i << ", variant " << k) {
        json::object o = flat_variants[k];
        o["trajectory"] = trajectories[i];
        auto typed = decode_transcript(o);
        BOOST_REQUIRE(typed);
        BOOST_REQUIRE(!project_trajectory(o));
        auto via_json = decode_transcript(o);
        BOOST_REQUIRE(via_json);
        BOOST_TEST(text_of(*typed) == text_of(*via_json));
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(written_frames_validate_against_the_schema,
                     *boost::unit_test::precondition(mira::test::needs_schema_and_validator)) {
  std::string lines;
  std::int64_t id = 0;
  // A host request, then the study's answer to it.
  auto exchange = [&](std::string_view method, const std::string& params, auto&& answer) {
    ++id;
    lines += R"({"id":)" + std::to_string(id) + R"(,"method":")" + std::string(method) + '"';
    if (!params.empty()) lines += R"(,"params":)" + params;
    lines += "}\n";
    std::string result;
    append_json(result, answer);
    append_result_frame(lines, id, result);
  };
  initialize_result init;
  init.protocol_version = "1.1";
  init.study = "s";
  init.evals = 1;
  init.study_version = "0.1.0";
  init.capabilities = {"events", "execute", "score", "cancel", "paginate", "trajectory"};
  init.capability_params =
      json::object{{"trajectory", json::object{{"format", "ATIF"}, {"version", "1.7"}}}};
  exchange("initialize", to_json_text(encode(initialize_params{})), init);
  auto listing = decode_list_result(json::parse(
      R"({"evals":[{"name":"greet","samples":[{"id":"hi","tags":["smoke"],"metadata":{"k":1}}],
          "next_cursor":"1","scorers":["contains"],
          "targets":[{"label":"sim","provider":"sim","available":true}],
          "axes":[{"name":"effort","values":["low","high"]}],"max_turns":3,"trials":2,"seed":4}]})"));
  BOOST_REQUIRE(listing);
  exchange("list", "", *listing);
  list_samples_result page;
  page.samples = {{"case-1", {"t"}, {}}};
  exchange("list_samples", to_json_text(encode(list_samples_params{"greet", "1"})), page);
  auto full = full_result();
  run_params full_case;
  static_cast<case_identity&>(full_case) = full;
  exchange("run", text_of(full_case), full);
  auto minimal = minimal_result();
  exchange("run", to_json_text(encode(run_params{})), minimal);
  auto x = full_execute();
  exchange("execute", to_json_text(encode(run_params{})), x);
  score_params sp;
  sp.transcript = json::object{{"trajectory", json::parse(trajectory_text)}};
  exchange("score", to_json_text(encode(sp)), minimal);
  exchange("cancel", R"({"id":4})", cancel_result{true});
  lines += R"({"id":99,"method":"run","params":{"eval":"x","sample":"y","target":"z"}})"
           "\n";
  rpc_error e;
  e.code = -32602;
  e.message = "no such eval: x";
  e.retryable = false;
  e.data = json::object{{"eval", "x"}};
  append_error_frame(lines, 99, e);
  event_params ev;
  ev.request_id = 4;
  ev.eval = "greet";
  ev.sample = "hi";
  ev.target = "sim";
  ev.params = {{"effort", "high"}};
  ev.kind = "turn";
  ev.turn = 1;
  ev.tool = "search";
  ev.text = "delta";
  std::string params;
  append_json(params, ev);
  append_notification_frame(lines, "event", params);
  log_params lg;
  lg.request_id = 4;
  lg.message = "warming up";
  params.clear();
  append_json(params, lg);
  append_notification_frame(lines, "log", params);

  mira::test::temp_dir dir;
  auto file = dir / "frames.ndjson";
  std::ofstream(file) << lines;
  auto [code, output] = validate_ndjson(file);
  BOOST_TEST_MESSAGE(output);
  BOOST_TEST(code == 0, "validate_ndjson: " << output << "\n" << lines);
}

BOOST_AUTO_TEST_SUITE_END()
