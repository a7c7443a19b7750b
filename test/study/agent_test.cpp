// External agents (agent.hpp) against real programs (sh, cat, python3): the work folder and its
// seeded files, the placeholders (no shell, one argument each), the capture and its bounds, each
// transcript source with malformed ones, and that a cancelled or timed-out case leaves no process
// and no folder behind.
#include <mira/protocol/trajectory.hpp>
#include <mira/study/agent.hpp>

#include "common/run_co.hpp"
#include "common/temp_dir.hpp"
#include "study/agent_io.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/json/parse.hpp>
#include <boost/system/system_error.hpp>
#include <boost/test/unit_test.hpp>

#include <poll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <tuple>

namespace asio = boost::asio;
namespace json = boost::json;
namespace study = mira::study;
namespace fs = std::filesystem;
using mira::protocol::transcript;
using mira::test::run_co;
using mira::test::temp_dir;
using namespace std::chrono_literals;

namespace {

transcript run(const study::agent_options& o, const study::agent_case& c = {}) {
  return run_co([&](asio::io_context&) { return study::run_agent(o, c); });
}

study::agent_options sh(const temp_dir& root, std::string script) {
  study::agent_options o;
  o.argv = {"sh", "-c", std::move(script)};
  o.temp_root = root.path;
  return o;
}

bool empty_dir(const fs::path& p) {
  return fs::is_empty(p);
}

std::string agent_error(const transcript& t) {
  const auto md = t.metadata.get();
  const auto* e = md.if_contains("agent_error");
  return e && e->is_string() ? std::string(e->get_string()) : std::string();
}

std::string file_text(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Whether a process has ended (a pidfd is readable once it has); a live one fails after 5 s.
bool ended(pid_t pid) {
  const int fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (fd < 0) return errno == ESRCH;
  pollfd p{fd, POLLIN, 0};
  const bool readable = ::poll(&p, 1, 5000) == 1;
  ::close(fd);
  return readable;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(agent)

BOOST_AUTO_TEST_CASE(the_work_folder_holds_the_seeded_files_and_goes_afterwards) {
  temp_dir root;
  auto o = sh(root, "find . -type f | sort; cat src/b/c.txt; printf '%s' \"$MIRA_WORKDIR\"");
  study::agent_case c;
  c.files = {{"a.txt", "alpha"}, {"src/b/c.txt", "gamma\n"}};
  auto t = run(o, c);
  BOOST_TEST(!t.error);
  BOOST_TEST(t.final_response.starts_with("./a.txt\n./src/b/c.txt\ngamma\n" + root.path.string()));
  BOOST_TEST(t.final_response.ends_with("/work"));
  BOOST_TEST(empty_dir(root.path));
}

BOOST_AUTO_TEST_CASE(a_seeded_path_leaving_the_folder_is_refused_before_the_agent_runs) {
  temp_dir root;
  for (std::string bad : {"", "/etc/x", "../x", "a/../../x", "a//b", "./a", "a/"}) {
    auto o = sh(root, "touch \"" + (root / "ran") + "\"");
    study::agent_case c;
    c.files = {{"fine.txt", "ok"}, {bad, "no"}};
    auto t = run(o, c);
    BOOST_TEST(t.error.has_value(), bad);
    BOOST_TEST(agent_error(t) == "bad_seed_path", bad);
    BOOST_TEST(empty_dir(root.path), bad);
  }
}

BOOST_AUTO_TEST_CASE(placeholders_fill_each_argument_whole_without_a_shell) {
  temp_dir root;
  study::agent_options o;
  o.temp_root = root.path;
  o.argv = {"python3",
            "-c",
            "import json, os, sys; print(json.dumps([sys.argv[1:], os.environ['P']]))",
            "{prompt}",
            "w={workdir}",
            "{unknown}",
            "{eval}/{sample}/{target}/{provider}",
            "{"};
  o.env = {{"P", "<{prompt}>"}};
  study::agent_case c;
  c.prompt = "it's \"quoted\" $(touch " + (root / "pwned") + ") ; `touch x` {workdir} *";
  c.eval = "e";
  c.sample = "s";
  c.target = "t";
  c.provider = "p";
  auto t = run(o, c);
  BOOST_REQUIRE(!t.error);
  auto v = json::parse(t.final_response).as_array();
  auto args = v[0].as_array();
  BOOST_REQUIRE(args.size() == 5u);
  BOOST_TEST(args[0].as_string() == c.prompt);
  BOOST_TEST(std::string(args[1].as_string()).starts_with("w=" + root.path.string()));
  BOOST_TEST(std::string(args[1].as_string()).ends_with("/work"));
  BOOST_TEST(args[2].as_string() == "{unknown}");
  BOOST_TEST(args[3].as_string() == "e/s/t/p");
  BOOST_TEST(args[4].as_string() == "{");
  BOOST_TEST(v[1].as_string() == "<" + c.prompt + ">");
  BOOST_TEST(empty_dir(root.path));  // no shell ran "touch .../pwned"
}

BOOST_AUTO_TEST_CASE(expansion_is_one_pass) {
  const study::detail::placeholders vars{{"prompt", "{workdir} and {prompt}"}, {"workdir", "/w"}};
  BOOST_TEST(study::detail::expand("[{prompt}] {workdir}", vars) == "[{workdir} and {prompt}] /w");
  BOOST_TEST(study::detail::expand("{prompt", vars) == "{prompt");
  BOOST_TEST(study::detail::expand("{{workdir}}", vars) == "{/w}");
  BOOST_TEST(study::detail::expand("", vars) == "");
}

BOOST_AUTO_TEST_CASE(the_prompt_is_the_inputs_strings_and_text_parts) {
  json::array input{"one", json::object{{"kind", "text"}, {"text", "two"}},
                    json::object{{"kind", "image"}, {"media_type", "image/png"}}, 3};
  BOOST_TEST(study::input_text(input) == "one\ntwo");
  input = {json::object{{"role", "user"}, {"content", "three"}},
           json::object{{"role", "user"},
                        {"content", json::array{json::object{{"kind", "text"}, {"text", "four"}},
                                                json::object{{"kind", "image"}}}}}};
  BOOST_TEST(study::input_text(input) == "three\nfour");
  BOOST_TEST(study::input_text({}) == "");
}

BOOST_AUTO_TEST_CASE(the_prompt_can_go_to_stdin) {
  temp_dir root;
  study::agent_options o;
  o.temp_root = root.path;
  o.argv = {"cat"};
  o.prompt_on_stdin = true;
  study::agent_case c;
  c.prompt = "line 1\nline 2";
  BOOST_TEST(run(o, c).final_response == "line 1\nline 2");
}

BOOST_AUTO_TEST_CASE(globs_match_within_segments_and_double_star_across_them) {
  using study::detail::glob_match;
  BOOST_TEST(glob_match("out.txt", "out.txt"));
  BOOST_TEST(!glob_match("out.txt", "sub/out.txt"));
  BOOST_TEST(glob_match("*.py", "a.py"));
  BOOST_TEST(!glob_match("*.py", "src/a.py"));
  BOOST_TEST(glob_match("src/*.py", "src/a.py"));
  BOOST_TEST(glob_match("src/**/*.py", "src/a.py"));
  BOOST_TEST(glob_match("src/**/*.py", "src/x/y/a.py"));
  BOOST_TEST(!glob_match("src/**/*.py", "lib/a.py"));
  BOOST_TEST(glob_match("**", "a/b/c"));
  BOOST_TEST(glob_match("**/c", "c"));
  BOOST_TEST(glob_match("a?c", "abc"));
  BOOST_TEST(!glob_match("a?c", "a/c"));
  BOOST_TEST(glob_match("*a*b*", "xaxxbx"));
  BOOST_TEST(!glob_match("*a*b*", "xbxxax"));
}

BOOST_AUTO_TEST_CASE(captured_files_are_bounded_and_links_are_not_followed) {
  temp_dir root;
  auto o =
      sh(root,
         "echo result > out.txt; mkdir -p src/deep; echo 1 > src/a.py; echo 2 > src/deep/b.py;"
         "head -c 2000 /dev/zero | tr '\\0' x > big.txt; printf '\\377\\376' > bin.dat;"
         "echo secret > \"" +
             (root / "outside") + "\"; ln -s \"" + (root / "outside") + "\" link; ln -s src ln");
  o.capture = {"out.txt", "src/**/*.py", "big.txt",     "bin.dat",
               "link",    "ln/*",        "missing.txt", "seed.txt"};
  o.limits.max_file_bytes = 1000;
  study::agent_case c;
  c.files = {{"seed.txt", "seeded"}};
  auto t = run(o, c);
  BOOST_REQUIRE(!t.error);
  BOOST_TEST(t.files.size() == 4u);
  BOOST_TEST(t.files.at("out.txt").as_string() == "result\n");
  BOOST_TEST(t.files.at("src/a.py").as_string() == "1\n");
  BOOST_TEST(t.files.at("src/deep/b.py").as_string() == "2\n");
  BOOST_TEST(t.files.at("seed.txt").as_string() == "seeded");
  const auto md = t.metadata.get();
  const auto& skipped = md.at("files_skipped").as_object();
  BOOST_TEST(skipped.size() == 2u);
  BOOST_TEST(skipped.contains("big.txt"));
  BOOST_TEST(skipped.contains("bin.dat"));
  fs::remove(root.path / "outside");
  BOOST_TEST(empty_dir(root.path));
}

BOOST_AUTO_TEST_CASE(capture_stops_at_the_total_and_the_count) {
  temp_dir dir;
  for (int i = 0; i < 5; ++i)
    std::ofstream(dir / ("f" + std::to_string(i))) << std::string(100, 'a');
  study::capture_limits limits;
  limits.max_total_bytes = 250;
  auto c = study::detail::capture(dir.path, {"*"}, limits);
  BOOST_TEST(c.files.size() == 2u);
  BOOST_TEST(c.skipped.size() == 3u);
  BOOST_TEST(c.files.contains("f0"));
  BOOST_TEST(c.files.contains("f1"));
  limits = {};
  limits.max_files = 1;
  c = study::detail::capture(dir.path, {"*"}, limits);
  BOOST_TEST(c.files.size() == 1u);
  BOOST_TEST(c.skipped.size() == 4u);
  BOOST_TEST(study::detail::capture(dir.path, {}, {}).files.empty());
}

BOOST_AUTO_TEST_CASE(stdout_text_is_the_response_trimmed_and_made_utf8) {
  temp_dir root;
  auto t = run(sh(root, "printf 'answer \\377\\n\\n'"));
  BOOST_TEST(t.final_response == "answer \xEF\xBF\xBD");
  BOOST_TEST(!t.trajectory);
}

BOOST_AUTO_TEST_SUITE(sources)

const char* const events_stream = R"({"kind":"started"}
{"kind":"turn","model":"m1"}
{"kind":"reasoning","text":"look first"}
{"kind":"tool_call","tool":"read_file","arguments":{"path":"a.txt"},"id":"c1"}
{"kind":"tool_result","id":"c1","content":"alpha"}
{"kind":"usage","input_tokens":100,"output_tokens":20,"cost_usd":0.5}
{"kind":"turn"}
{"kind":"output","text":"The file "}
{"kind":"output","text":"says alpha."}
{"kind":"usage","input_tokens":50,"output_tokens":5}

{"kind":"finished","note":"kinds it does not know are kept"}
)";

void check_events_transcript(const transcript& t) {
  BOOST_TEST(!t.error);
  BOOST_TEST(t.final_response == "The file says alpha.");
  BOOST_TEST(t.tool_calls == std::vector<std::string>{"read_file"});
  BOOST_TEST(t.tool_calls_count == 1);
  BOOST_TEST(t.iterations == 2);
  BOOST_TEST(t.usage.input_tokens == 150);
  BOOST_TEST(t.usage.output_tokens == 25);
  BOOST_TEST(t.usage.cost_usd == 0.5);
  BOOST_TEST(t.events.size() == 11u);
  BOOST_REQUIRE(t.trajectory);
  BOOST_REQUIRE(mira::protocol::project(*t.trajectory));
  const auto& steps = t.trajectory->at("steps").as_array();
  BOOST_REQUIRE(steps.size() == 2u);
  BOOST_TEST(steps[0].at("model_name").as_string() == "m1");
  BOOST_TEST(steps[0].at("reasoning_content").as_string() == "look first");
  BOOST_TEST(steps[0].at("tool_calls").at(0).at("arguments").at("path").as_string() == "a.txt");
  const auto& result = steps[0].at("observation").at("results").at(0);
  BOOST_TEST(result.at("source_call_id").as_string() == "c1");
  BOOST_TEST(result.at("content").as_string() == "alpha");
}

BOOST_AUTO_TEST_CASE(an_events_stream_on_stdout_becomes_a_trajectory) {
  temp_dir root;
  auto o = sh(root, std::string("cat <<'EOF'\n") + events_stream + "EOF\n");
  o.source = study::transcript_source::stdout_events;
  check_events_transcript(run(o));
}

BOOST_AUTO_TEST_CASE(an_events_file_becomes_a_trajectory) {
  temp_dir root;
  auto o = sh(root, std::string("echo not the response; cat > \"$MIRA_EVENTS_PATH\" <<'EOF'\n") +
                        events_stream + "EOF\n");
  o.source = study::transcript_source::events_file;
  o.capture = {"**"};
  auto t = run(o);
  check_events_transcript(t);
  BOOST_TEST(t.files.empty());  // the events file is beside the work folder, not in it
  o = sh(root, "true");
  o.source = study::transcript_source::events_file;
  t = run(o);
  BOOST_TEST(agent_error(t) == "no_transcript");
  BOOST_TEST(empty_dir(root.path));
}

BOOST_AUTO_TEST_CASE(an_error_line_is_the_cases_error) {
  temp_dir root;
  auto o = sh(root, R"(echo '{"kind":"error","message":"rate limited","error_kind":"infra"}';)"
                    R"(echo '{"kind":"error","message":"later"}')");
  o.source = study::transcript_source::stdout_events;
  auto t = run(o);
  BOOST_TEST(t.error.value_or("") == "rate limited");
  BOOST_TEST((t.error_kind == mira::protocol::error_kind::infra));
  BOOST_TEST(agent_error(t).empty());
}

BOOST_AUTO_TEST_CASE(a_malformed_events_line_is_named) {
  const std::vector<std::pair<std::string, std::string>> cases{
      {"not json", "events line 1: not JSON"},
      {"{\"kind\":\"started\"}\n\n[1]", "events line 3: not a JSON object"},
      {"{\"kind\":1}", "events line 1: no \"kind\" string"},
      {"{\"kind\":\"tool_call\"}", "events line 1: tool_call: \"tool\" is missing"},
      {"{\"kind\":\"usage\",\"input_tokens\":-1}", "events line 1: usage: \"input_tokens\""},
      {"{\"kind\":\"output\",\"text\":3}", "events line 1: output: \"text\" must be a string"},
      {"{\"kind\":\"error\",\"message\":\"x\",\"error_kind\":\"weird\"}", "events line 1: error:"},
  };
  for (const auto& [text, message] : cases) {
    transcript t;
    auto e = study::detail::read_events(text, "agent", t);
    BOOST_REQUIRE_MESSAGE(e, text);
    BOOST_TEST((e->code == study::agent_errc::malformed_events), text);
    BOOST_TEST(e->message.starts_with(message), e->message);
  }
  temp_dir root;
  auto o = sh(root, R"(echo '{"kind":"output","text":"a"}'; echo '{"kind":')");
  o.source = study::transcript_source::stdout_events;
  auto t = run(o);
  BOOST_TEST(agent_error(t) == "malformed_events");
  BOOST_TEST(t.error.value_or("").starts_with("events line 2: not JSON"));
}

const char* const atif =
    R"({"schema_version":"ATIF-v1.6","agent":{"name":"sh","version":"1"},"steps":[)"
    R"({"step_id":1,"source":"user","message":"hi"},{"step_id":2,"source":"agent",)"
    R"("message":"done","tool_calls":[{"tool_call_id":"a","function_name":"ls","arguments":{}}],)"
    R"("metrics":{"prompt_tokens":7,"completion_tokens":3}}]})";

BOOST_AUTO_TEST_CASE(an_atif_file_is_the_trajectory) {
  temp_dir root;
  auto o =
      sh(root, std::string("echo noise; printf '%s' '") + atif + "' > \"$MIRA_TRAJECTORY_PATH\"");
  o.source = study::transcript_source::trajectory_file;
  o.capture = {"**"};
  auto t = run(o);
  BOOST_TEST(!t.error);
  BOOST_TEST(t.final_response == "done");
  BOOST_TEST(t.tool_calls == std::vector<std::string>{"ls"});
  BOOST_TEST(t.iterations == 1);
  BOOST_TEST(t.usage.input_tokens == 7);
  BOOST_REQUIRE(t.trajectory);
  BOOST_TEST(t.trajectory->at("agent").at("name").as_string() == "sh");
  BOOST_TEST(t.files.empty());
}

BOOST_AUTO_TEST_CASE(a_bad_atif_file_is_the_cases_error_saying_why) {
  const std::string agent = R"("agent":{"name":"a","version":"1"})";
  const std::vector<std::tuple<std::string, std::string, std::string>> cases{
      {"not json", "malformed_trajectory", "is not JSON"},
      {R"({"schema_version":"ATIF-v2.0",)" + agent + R"(,"steps":[]})", "malformed_trajectory",
       "ATIF-v2.0"},
      {R"({"schema_version":"ATIF-v1.7","steps":[]})", "malformed_trajectory", "agent"},
      {R"({"schema_version":"ATIF-v1.7",)" + agent + R"(,"steps":[{"source":"agent"}]})",
       "malformed_trajectory", "steps[0].step_id"},
      {R"({"schema_version":"ATIF-v1.7",)" + agent + R"(,"steps":{}})", "malformed_trajectory",
       "steps"},
  };
  temp_dir root;
  for (const auto& [doc, code, why] : cases) {
    auto o = sh(root, "printf '%s' '" + doc + "' > \"$MIRA_TRAJECTORY_PATH\"");
    o.source = study::transcript_source::trajectory_file;
    auto t = run(o);
    BOOST_TEST(agent_error(t) == code, doc);
    BOOST_TEST(t.error.value_or("").find(why) != std::string::npos, t.error.value_or(""));
    BOOST_TEST(!t.trajectory);
  }
  auto o = sh(root, "true");
  o.source = study::transcript_source::trajectory_file;
  BOOST_TEST(agent_error(run(o)) == "no_transcript");
  o = sh(root, "ln -s /etc/hostname \"$MIRA_TRAJECTORY_PATH\"");
  o.source = study::transcript_source::trajectory_file;
  BOOST_TEST(agent_error(run(o)) == "no_transcript");
  o = sh(root, std::string("printf '%s' '") + atif + "' > \"$MIRA_TRAJECTORY_PATH\"");
  o.source = study::transcript_source::trajectory_file;
  o.max_transcript_bytes = 10;
  BOOST_TEST(agent_error(run(o)) == "transcript_too_large");
  BOOST_TEST(empty_dir(root.path));
}

BOOST_AUTO_TEST_CASE(the_programs_own_failure_comes_first_with_its_stderr) {
  temp_dir root;
  auto o = sh(root, "echo starting >&2; echo boom >&2; exit 3");
  o.source = study::transcript_source::trajectory_file;
  auto t = run(o);
  BOOST_TEST(t.error.value_or("") == "exited with code 3: starting\nboom");
  BOOST_TEST(agent_error(t).empty());
  BOOST_TEST((t.error_kind == mira::protocol::error_kind::subject));
}

BOOST_AUTO_TEST_CASE(a_program_that_cannot_start_is_the_cases_error) {
  temp_dir root;
  study::agent_options o;
  o.temp_root = root.path;
  o.argv = {"/nonexistent/agent"};
  auto t = run(o);
  BOOST_TEST(agent_error(t) == "cannot_start");
  BOOST_TEST(t.error.value_or("").find("/nonexistent/agent") != std::string::npos);
  BOOST_TEST(empty_dir(root.path));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(lifetime)

BOOST_AUTO_TEST_CASE(a_cancelled_case_kills_the_agent_and_removes_its_folder) {
  temp_dir root, side;
  auto o = sh(root, "{ echo $$; pwd; } > \"$INFO.tmp\"; mv \"$INFO.tmp\" \"$INFO\"; exec sleep 30");
  o.env = {{"INFO", side / "info"}};
  asio::io_context ctx;
  asio::cancellation_signal signal;
  bool done = false;
  std::exception_ptr error;
  asio::co_spawn(ctx, study::run_agent(o, study::agent_case{}),
                 asio::bind_cancellation_slot(signal.slot(), [&](std::exception_ptr e, transcript) {
                   done = true;
                   error = e;
                 }));
  // The agent says when it is running; until then the loop only turns the context.
  const auto give_up = std::chrono::steady_clock::now() + 10s;
  while (!done && !fs::exists(side.path / "info") && std::chrono::steady_clock::now() < give_up)
    ctx.run_for(5ms);
  BOOST_REQUIRE(fs::exists(side.path / "info"));
  std::istringstream info(file_text(side.path / "info"));
  pid_t pid = 0;
  std::string pwd;
  info >> pid >> pwd;
  BOOST_TEST(fs::exists(pwd));
  signal.emit(asio::cancellation_type::terminal);
  ctx.run_for(20s);
  BOOST_REQUIRE(done);
  BOOST_REQUIRE(error);
  try {
    std::rethrow_exception(error);
  } catch (const boost::system::system_error& e) {
    BOOST_TEST((e.code() == asio::error::operation_aborted));
  }
  BOOST_TEST(ended(pid));
  BOOST_TEST(!fs::exists(pwd));
  BOOST_TEST(empty_dir(root.path));
}

BOOST_AUTO_TEST_CASE(a_case_over_its_time_limit_is_an_infra_error_and_leaves_nothing) {
  temp_dir root;
  auto o = sh(root, "exec sleep 30");
  o.time_limit = 200ms;
  o.kill_grace = 200ms;
  const auto start = std::chrono::steady_clock::now();
  auto t = run(o);
  BOOST_TEST((std::chrono::steady_clock::now() - start < 10s));
  BOOST_TEST((t.error_kind == mira::protocol::error_kind::infra));
  BOOST_TEST(t.error.value_or("").starts_with("timed out"));
  BOOST_TEST(empty_dir(root.path));
}

BOOST_AUTO_TEST_CASE(a_failed_case_folder_can_be_kept) {
  temp_dir root;
  auto o = sh(root, "echo kept > f; exit 1");
  o.keep_failed = true;
  auto t = run(o);
  const auto md = t.metadata.get();
  BOOST_REQUIRE(md.contains("workdir"));
  const fs::path kept(std::string(md.at("workdir").as_string()));
  BOOST_TEST(file_text(kept / "work" / "f") == "kept\n");
  o = sh(root, "echo fine");
  o.keep_failed = true;
  t = run(o);
  BOOST_TEST(!t.metadata.get().contains("workdir"));
  fs::remove_all(kept);
  BOOST_TEST(empty_dir(root.path));
}

BOOST_AUTO_TEST_CASE(a_folder_the_agent_locked_is_removed_too) {
  temp_dir root;
  auto t = run(sh(root,
                  "mkdir -p locked/inner; touch locked/inner/x; chmod 000 locked/inner; "
                  "chmod 500 locked"));
  BOOST_TEST(!t.error);
  BOOST_TEST(empty_dir(root.path));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE_END()
