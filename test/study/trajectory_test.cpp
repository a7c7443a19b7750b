// The typed ATIF builder (trajectory.hpp): what it writes, that the host's projection reads it as
// the flat fields, and that its documents (built by hand, or from an agent's events stream)
// validate against the protocol's schema when the schema and python3-jsonschema are there.
#include <mira/protocol/codec.hpp>
#include <mira/protocol/trajectory.hpp>
#include <mira/study/trajectory.hpp>

#include "common/schema.hpp"
#include "common/temp_dir.hpp"
#include "study/agent_io.hpp"

#include <boost/test/unit_test.hpp>

#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>

namespace json = boost::json;
namespace study = mira::study;
using mira::protocol::transcript;

namespace {

study::trajectory_builder sample_trajectory() {
  study::trajectory_builder tb("tester", "1.2");
  tb.model("m-large").tool_definitions({json::object{{"name", "read"}}});
  tb.system("Be brief.");
  tb.user("What does a.txt say?");
  tb.agent("Reading it.")
      .reasoning("read first")
      .call("read", {{"path", "a.txt"}})
      .result("alpha")
      .call("stat", {{"path", "a.txt"}}, "s-1")
      .result("5 bytes", "s-1")
      .usage({.input_tokens = 100, .output_tokens = 20, .cost_usd = 0.25});
  tb.agent("It says alpha.").usage({.input_tokens = 50, .output_tokens = 4, .reasoning_tokens = 2});
  return tb;
}

// Whether python3 can import jsonschema, which validate_ndjson.py needs.
boost::test_tools::assertion_result needs_jsonschema(boost::unit_test::test_unit_id id) {
  if (auto r = mira::test::needs_schema_and_validator(id); !r) return r;
  const std::string cmd = std::string(MIRA_PYTHON3) + " -c 'import jsonschema' 2>/dev/null";
  const int status = std::system(cmd.c_str());
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return true;
  return mira::test::skip_test_because("python3 has no jsonschema module (python3-jsonschema)");
}

}  // namespace

BOOST_AUTO_TEST_SUITE(trajectory)

BOOST_AUTO_TEST_CASE(the_builder_writes_atif_steps_in_order) {
  auto doc = sample_trajectory().to_json();
  BOOST_TEST(doc.at("schema_version").as_string() == "ATIF-v1.7");
  BOOST_TEST(doc.at("agent").at("name").as_string() == "tester");
  BOOST_TEST(doc.at("agent").at("model_name").as_string() == "m-large");
  const auto& steps = doc.at("steps").as_array();
  BOOST_REQUIRE(steps.size() == 4u);
  for (std::size_t i = 0; i < steps.size(); ++i)
    BOOST_TEST(steps[i].at("step_id").as_int64() == static_cast<std::int64_t>(i + 1));
  BOOST_TEST(steps[0].at("source").as_string() == "system");
  BOOST_TEST(steps[1].at("source").as_string() == "user");
  const auto& turn = steps[2].as_object();
  BOOST_TEST(turn.at("source").as_string() == "agent");
  BOOST_TEST(turn.at("reasoning_content").as_string() == "read first");
  const auto& calls = turn.at("tool_calls").as_array();
  BOOST_TEST(calls[0].at("tool_call_id").as_string() == "call-1");
  BOOST_TEST(calls[0].at("arguments").at("path").as_string() == "a.txt");
  BOOST_TEST(calls[1].at("tool_call_id").as_string() == "s-1");
  const auto& results = turn.at("observation").at("results").as_array();
  BOOST_TEST(results[0].at("source_call_id").as_string() == "call-1");
  BOOST_TEST(results[1].at("source_call_id").as_string() == "s-1");
  BOOST_TEST(turn.at("metrics").at("prompt_tokens").as_int64() == 100);
  BOOST_TEST(steps[3].at("metrics").at("extra").at("reasoning_tokens").as_int64() == 2);
  const auto& totals = doc.at("final_metrics").as_object();
  BOOST_TEST(totals.at("total_prompt_tokens").as_int64() == 150);
  BOOST_TEST(totals.at("total_completion_tokens").as_int64() == 24);
  BOOST_TEST(totals.at("total_steps").as_int64() == 4);
}

BOOST_AUTO_TEST_CASE(the_projection_reads_it_as_the_flat_fields) {
  auto tb = sample_trajectory();
  auto p = mira::protocol::project(json::value(tb.to_json()));
  BOOST_REQUIRE(p);
  transcript t;
  tb.fill(t);
  BOOST_REQUIRE(t.trajectory);
  BOOST_TEST(t.final_response == "It says alpha.");
  BOOST_TEST(t.tool_calls == (std::vector<std::string>{"read", "stat"}));
  BOOST_TEST(t.tool_calls_count == 2);
  BOOST_TEST(t.iterations == 2);
  BOOST_TEST(t.usage.input_tokens == 150);
  BOOST_TEST(t.usage.output_tokens == 24);
  BOOST_TEST(t.usage.reasoning_tokens == 2);
  BOOST_TEST(t.usage.cost_usd == 0.25);
}

BOOST_AUTO_TEST_CASE(what_the_subject_set_stays_and_scripted_steps_are_no_iterations) {
  study::trajectory_builder tb("tester");
  tb.user("go");
  tb.agent("dispatching").llm_calls(0).call("run");
  tb.agent("done").llm_calls(1);
  transcript t;
  t.final_response = "mine";
  tb.fill(t);
  BOOST_TEST(t.final_response == "mine");
  BOOST_TEST(t.iterations == 1);
  BOOST_TEST(t.tool_calls == std::vector<std::string>{"run"});
  BOOST_TEST(t.usage.is_default());
}

BOOST_AUTO_TEST_CASE(steps_carry_time_parts_and_extra) {
  using namespace std::chrono;
  study::step s(study::step_source::user, "look");
  s.at(system_clock::time_point(milliseconds(1700000000123)))
      .parts({json::object{{"kind", "image"}, {"media_type", "image/png"}}})
      .extra({{"k", 1}})
      .append(" here");
  auto o = s.to_json(7);
  BOOST_TEST(o.at("timestamp").as_string() == "2023-11-14T22:13:20.123Z");
  BOOST_TEST(o.at("message").as_string() == "look here");
  BOOST_TEST(o.at("extra").at("k").as_int64() == 1);
  BOOST_TEST(o.at("extra").at("parts").as_array().size() == 1u);
  BOOST_TEST(!o.contains("metrics"));
  BOOST_TEST(!o.contains("tool_calls"));
}

BOOST_AUTO_TEST_CASE(built_documents_validate_against_the_schema,
                     *boost::unit_test::precondition(needs_jsonschema)) {
  std::vector<transcript> transcripts(3);
  sample_trajectory().fill(transcripts[0]);
  auto e = study::detail::read_events(
      R"({"kind":"user","text":"hi"}
{"kind":"tool_call","tool":"ls","arguments":{"dir":"."}}
{"kind":"tool_result","content":{"files":["a"]}}
{"kind":"output","text":"one file"}
{"kind":"usage","input_tokens":3,"output_tokens":1,"cache_read_tokens":1,"reasoning_tokens":1}
)",
      "events-agent", transcripts[1]);
  BOOST_REQUIRE(!e);
  study::trajectory_builder minimal("m");
  minimal.agent("").at(std::chrono::system_clock::now());
  minimal.fill(transcripts[2]);

  std::string lines;
  std::int64_t id = 0;
  for (auto& t : transcripts) {
    ++id;
    lines += R"({"id":)" + std::to_string(id) +
             R"(,"method":"execute","params":{"eval":"e","sample":"s","target":"t"}})"
             "\n";
    mira::protocol::execute_result x;
    x.eval = "e";
    x.sample = "s";
    x.target = "t";
    x.transcript = t;
    std::string result;
    mira::protocol::append_json(result, x);
    mira::protocol::append_result_frame(lines, id, result);
  }
  mira::test::temp_dir dir;
  const auto file = dir / "frames.ndjson";
  std::ofstream(file) << lines;
  const auto cmd = std::string(MIRA_PYTHON3) + " " + mira::test::ndjson_validator()->string() +
                   " " + (*mira::test::schema_dir() / "schema.json").string() + " " + file +
                   " --deep 2>&1";
  std::string out;
  FILE* p = ::popen(cmd.c_str(), "r");
  BOOST_REQUIRE(p);
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int status = ::pclose(p);
  BOOST_TEST((WIFEXITED(status) && WEXITSTATUS(status) == 0), out << "\n" << lines);
}

BOOST_AUTO_TEST_SUITE_END()
