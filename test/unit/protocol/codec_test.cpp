// Lenient decoding and default-omitting encoding of the wire types.
#include <mira/protocol/codec.hpp>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/test/unit_test.hpp>

namespace json = boost::json;
using namespace mira::protocol;

BOOST_AUTO_TEST_SUITE(codec)

BOOST_AUTO_TEST_CASE(run_result_defaults_missing_fields_and_keeps_unknown_ones) {
  auto v = json::parse(R"({"eval":"greet","sample":"hi","target":"sim","passed":true,
      "aggregate":1,"scores":[{"scorer":"contains","value":1,"pass":true,"reason":"ok"}],
      "transcript":{"final_response":"42","usage":{"input_tokens":3},"energy_joules":7},
      "future_field":{"x":1}})");
  auto r = decode_run_result(v);
  BOOST_REQUIRE(r);
  BOOST_TEST(r->passed);
  BOOST_TEST(r->aggregate == 1.0);  // an integer where a number is expected
  BOOST_TEST(r->trials == 1);
  BOOST_TEST(!r->seed);
  BOOST_TEST(r->transcript.usage.input_tokens == 3);
  BOOST_TEST(r->transcript.usage.output_tokens == 0);
  BOOST_TEST((r->transcript.error_kind == error_kind::subject));
  BOOST_TEST(!r->is_na());
  // Unknown fields travel with the raw JSON, at every level.
  auto raw = r->raw();
  BOOST_TEST(raw.contains("future_field"));
  BOOST_TEST(raw.at("transcript").as_object().contains("energy_joules"));
  // Text handed in is kept byte for byte.
  auto exact = decode_run_result(v, "{ \"as\": \"sent\" }");
  BOOST_REQUIRE(exact);
  BOOST_TEST(exact->raw_json == "{ \"as\": \"sent\" }");
}

BOOST_AUTO_TEST_CASE(a_result_built_by_hand_has_an_empty_raw_view) {
  run_result r;
  BOOST_TEST(r.raw().empty());
  r.raw_json = R"({"eval":"e"})";
  BOOST_TEST(r.raw().at("eval").as_string() == "e");
}

BOOST_AUTO_TEST_CASE(trials_zero_or_absent_means_one) {
  auto e = decode_list_result(json::parse(
      R"({"evals":[{"name":"a","samples":[],"scorers":[],"targets":[],"trials":0},
                   {"name":"b","samples":[],"scorers":[],"targets":[]}]})"));
  BOOST_REQUIRE(e);
  BOOST_TEST(e->evals[0].trials == 1);
  BOOST_TEST(e->evals[1].trials == 1);
}

BOOST_AUTO_TEST_CASE(decode_errors_name_the_field_path) {
  auto e = decode_list_result(json::parse(
      R"({"evals":[{"name":"a","samples":[],"scorers":[],"targets":[{"label":"x"},{"label":5}]}]})"));
  BOOST_REQUIRE(!e);
  BOOST_TEST(e.error().path == "evals[0].targets[1].label");
  BOOST_TEST(e.error().message() == "evals[0].targets[1].label: expected a string, got number");

  auto missing = decode_list_result(json::parse(R"({"evals":[{"samples":[]}]})"));
  BOOST_REQUIRE(!missing);
  BOOST_TEST(missing.error().path == "evals[0].name");

  auto not_obj = decode_run_result(json::parse("[1]"));
  BOOST_REQUIRE(!not_obj);
  BOOST_TEST(not_obj.error().what == "expected an object, got array");

  auto bad_metric =
      decode_run_result(json::parse(R"({"transcript":{"metrics":{"recall":"high"}}})"));
  BOOST_REQUIRE(!bad_metric);
  BOOST_TEST(bad_metric.error().path == "transcript.metrics.recall");

  auto negative = decode_run_result(json::parse(R"({"trials":-2})"));
  BOOST_REQUIRE(!negative);
  BOOST_TEST(negative.error().path == "trials");

  auto fractional = decode_run_result(json::parse(R"({"trial":1.5})"));
  BOOST_REQUIRE(!fractional);
  BOOST_TEST(fractional.error().path == "trial");
}

BOOST_AUTO_TEST_CASE(null_fields_are_absent) {
  auto r = decode_list_samples_result(
      json::parse(R"({"samples":[{"id":"a","tags":null}],"next_cursor":null})"));
  BOOST_REQUIRE(r);
  BOOST_TEST(!r->next_cursor);
  BOOST_TEST(r->samples[0].tags.empty());
}

BOOST_AUTO_TEST_CASE(infra_error_kind_and_na_scores) {
  auto r = decode_run_result(json::parse(
      R"({"scores":[{"scorer":"infra","value":0,"pass":false,"na":true,"reason":"503"}],
          "transcript":{"error":"503","error_kind":"infra"}})"));
  BOOST_REQUIRE(r);
  BOOST_TEST(r->is_na());
  BOOST_TEST((r->transcript.error_kind == error_kind::infra));
  BOOST_TEST(*r->transcript.error == "503");
  auto future = decode_run_result(json::parse(R"({"transcript":{"error_kind":"cosmic_ray"}})"));
  BOOST_REQUIRE(future);
  BOOST_TEST((future->transcript.error_kind == error_kind::subject));
}

BOOST_AUTO_TEST_CASE(rpc_error_needs_only_a_message) {
  auto e = decode_rpc_error(json::parse(R"({"message":"boom"})"));
  BOOST_REQUIRE(e);
  BOOST_TEST(e->code == 0);
  BOOST_TEST(!e->retryable);
  BOOST_TEST(!e->data);
  auto full = decode_rpc_error(
      json::parse(R"({"code":-32602,"message":"x","retryable":true,"data":{"http_status":429}})"));
  BOOST_REQUIRE(full);
  BOOST_TEST(full->retryable);
  BOOST_TEST(full->data->at("http_status").as_int64() == 429);
  BOOST_TEST(!decode_rpc_error(json::parse(R"({"code":1})")));
  BOOST_TEST(!decode_rpc_error(json::parse(R"("text")")));
}

BOOST_AUTO_TEST_CASE(run_params_encoding_omits_defaults) {
  run_params p;
  p.eval = "greet";
  p.sample = "hi";
  p.target = "sim";
  BOOST_TEST(json::serialize(encode(p)) == R"({"eval":"greet","sample":"hi","target":"sim"})");
  p.params = {{"effort", "high"}};
  p.trial = 2;
  p.trials = 8;
  p.seed = 44;
  BOOST_TEST(
      json::serialize(encode(p)) ==
      R"({"eval":"greet","sample":"hi","target":"sim","params":{"effort":"high"},"trial":2,"trials":8,"seed":44})");
  auto back = decode_run_params(encode(p));
  BOOST_REQUIRE(back);
  BOOST_TEST(back->params.at("effort") == "high");
  BOOST_TEST(back->seed.value() == 44);
}

BOOST_AUTO_TEST_CASE(initialize_result_and_capabilities) {
  auto r = decode_initialize_result(json::parse(
      R"({"protocol_version":"1.1","study":"s","evals":3,"capabilities":["cancel","axes"],"extra":1})"));
  BOOST_REQUIRE(r);
  BOOST_TEST(r->has_capability("cancel"));
  BOOST_TEST(!r->has_capability("execute"));
  BOOST_TEST(r->raw.contains("extra"));
  BOOST_TEST(!decode_initialize_result(json::parse(R"({"study":"s"})")));
}

BOOST_AUTO_TEST_CASE(parts_need_exactly_one_source) {
  BOOST_TEST(decode_part(json::parse(R"({"kind":"text","text":"hi"})")).has_value());
  BOOST_TEST(
      decode_part(json::parse(R"({"kind":"image","media_type":"image/png","source":{"uri":"x"}})"))
          .has_value());
  BOOST_TEST(!decode_part(json::parse(R"({"kind":"image","media_type":"image/png"})")));
  BOOST_TEST(!decode_part(
      json::parse(R"({"kind":"file","media_type":"a/b","source":{"uri":"x","data":"eA=="}})")));
}

BOOST_AUTO_TEST_CASE(event_params_keep_unknown_kinds) {
  auto e = decode_event_params(json::parse(
      R"({"request_id":7,"eval":"e","sample":"s","target":"t","kind":"thinking","budget":3})"));
  BOOST_REQUIRE(e);
  BOOST_TEST(e->request_id == 7);
  BOOST_TEST(e->kind == "thinking");
  BOOST_TEST(e->raw.contains("budget"));
  auto uncorrelated = decode_log_params(json::parse(R"({"message":"hi"})"));
  BOOST_REQUIRE(uncorrelated);
  BOOST_TEST(uncorrelated->request_id == 0);
}

BOOST_AUTO_TEST_CASE(version_majors) {
  BOOST_TEST(version_major("1.1").value() == 1u);
  BOOST_TEST(version_major("2").value() == 2u);
  BOOST_TEST(!version_major("one.two"));
  BOOST_TEST(!version_major(""));
  BOOST_TEST(!version_major("1x.0"));
}

BOOST_AUTO_TEST_CASE(list_encoding_round_trips) {
  auto text = R"({"evals":[{"name":"e","samples":[{"id":"a","tags":["t"]}],"scorers":["s"],
      "targets":[{"label":"sim","provider":"p","available":false}],
      "axes":[{"name":"k","values":["1","2"]}],"trials":3,"seed":9}]})";
  auto l = decode_list_result(json::parse(text));
  BOOST_REQUIRE(l);
  auto again = decode_list_result(encode(*l));
  BOOST_REQUIRE(again);
  BOOST_TEST(json::serialize(encode(*again)) == json::serialize(encode(*l)));
  BOOST_TEST(!again->evals[0].targets[0].available);
  BOOST_TEST(again->evals[0].trials == 3);
}

// An eval's samples are held as one buffer of ids and a side table of those with tags or
// metadata: each sample reads back whole and by part, in order, however it was added.
BOOST_AUTO_TEST_CASE(a_sample_list_gives_back_what_it_was_given) {
  sample_list l{{"a", {}, {}}, {"", {"t1", "t2"}, {}}, {"ccc", {}, json::object{{"k", 1}}}};
  l.push_back({"dd", {"x"}, json::object{{"m", "v"}}});
  l.push_back({"e", {}, {}});
  BOOST_TEST(l.size() == 5u);
  const char* ids[] = {"a", "", "ccc", "dd", "e"};
  for (std::size_t i = 0; i < l.size(); ++i) BOOST_TEST(l.id(i) == ids[i]);
  BOOST_TEST(l.tags(0).empty());
  BOOST_TEST((l.tags(1) == std::vector<std::string>{"t1", "t2"}));
  BOOST_TEST(l.tags(2).empty());
  BOOST_TEST(l.metadata(2).at("k").as_int64() == 1);
  BOOST_TEST(l[3].id == "dd");
  BOOST_TEST((l[3].tags == std::vector<std::string>{"x"}));
  BOOST_TEST(l[3].metadata.at("m").as_string() == "v");
  BOOST_TEST(l.metadata(4).empty());
  BOOST_CHECK_THROW(l.at(5), std::out_of_range);
  std::vector<std::string> seen;
  for (const auto& s : l) seen.push_back(s.id);
  BOOST_TEST((seen == std::vector<std::string>{"a", "", "ccc", "dd", "e"}));

  auto copy = l;
  BOOST_TEST((copy == l));
  copy.push_back({"f", {}, {}});
  BOOST_TEST(!(copy == l));
  auto other = l;
  other.clear();
  BOOST_TEST(other.empty());
  BOOST_TEST(!(other == l));
}

// Both decoders (the DOM one and the text one the host reads the wire with) and the encoders
// carry an eval's samples, tags and metadata, and agree.
BOOST_AUTO_TEST_CASE(an_evals_samples_decode_and_encode_both_ways) {
  auto text = R"({"evals":[{"name":"e","samples":[{"id":"a"},{"id":"b","tags":["t"]},
      {"id":"c","metadata":{"n":2}}],"scorers":[],"targets":[]}]})";
  auto dom = decode_list_result(json::parse(text));
  auto fast = decode_list_result_text(text);
  BOOST_REQUIRE(dom);
  BOOST_REQUIRE(fast);
  BOOST_TEST((dom->evals[0].samples == fast->evals[0].samples));
  BOOST_TEST(fast->evals[0].samples.size() == 3u);
  BOOST_TEST(fast->evals[0].samples.id(1) == "b");
  BOOST_TEST(fast->evals[0].samples.tags(1).at(0) == "t");
  BOOST_TEST(fast->evals[0].samples.metadata(2).at("n").as_int64() == 2);
  std::string appended;
  append_json(appended, *fast);
  BOOST_TEST(json::parse(appended) == json::value(encode(*dom)));
  auto bad = decode_list_result(
      json::parse(R"({"evals":[{"name":"e","samples":[{"id":"a"},{"tags":[]}],"scorers":[],
      "targets":[]}]})"));
  BOOST_REQUIRE(!bad);
  BOOST_TEST(bad.error().path == "evals[0].samples[1].id");
}

BOOST_AUTO_TEST_SUITE_END()
