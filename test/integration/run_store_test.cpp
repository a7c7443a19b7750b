// The run store through the real CLI: sessions appended, a resume that selects less keeps the
// whole run, one writer at a time, report.html in the folder, study log lines shown, and run
// folders written by the Rust mira CLI reported, exported and resumed in place.
#include "integration/process_util.hpp"

#include <mira/store/run_store.hpp>

#include <boost/json/parse.hpp>
#include <boost/test/unit_test.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>

using namespace mira::test;
namespace json = boost::json;
namespace fs = std::filesystem;

namespace {

const std::string mira_bin = MIRA_CLI;
const std::string example = MIRA_EXAMPLE_STUDY;
const std::string py = std::string(MIRA_PYTHON3) + " " MIRA_PY_STUDY;

std::size_t count_of(const std::string& text, const std::string& needle) {
  std::size_t n = 0;
  for (auto at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

void write(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(run_store)

// Defects 2 and 6: a resume used to replace events.ndjson and study.stderr.log with its own
// session's; report.html was not kept in the folder.
BOOST_AUTO_TEST_CASE(a_resume_appends_events_and_stderr_and_the_folder_keeps_report_html) {
  temp_dir dir;
  auto results = dir / "results";
  auto first = run_command(mira_bin + " run --evals events --results-dir " + results + " -- " +
                           example + " 2>/dev/null");
  BOOST_TEST(first.code == 0);
  auto id = only_run(results).filename().string();
  auto folder = fs::path(results) / id;
  auto second = run_command(mira_bin + " run --evals greet --resume " + id + " --results-dir " +
                            results + " -- " + example + " 2>/dev/null");
  BOOST_TEST(second.code == 0);
  auto events = read_file((folder / "events.ndjson").string());
  BOOST_TEST(events.find("{\"key\":\"events/tool-use@sim\",\"method\":\"event\"") !=
             std::string::npos);
  BOOST_TEST(count_of(events, "{\"session\":") == 2u);
  auto log = read_file((folder / "study.stderr.log").string());
  BOOST_TEST(log.find("--- session 1 started ") != std::string::npos);
  BOOST_TEST(log.find("--- session 2 started ") != std::string::npos);
  auto html = read_file((folder / "report.html").string());
  BOOST_TEST(html.find("<!DOCTYPE html>") == 0u);
}

// A resume appended its session marker onto a torn last line (`{"session":1,"trunc{"session":2`),
// and wrote through a link where its logs were expected.
BOOST_AUTO_TEST_CASE(a_resume_starts_its_logs_on_a_new_line_and_never_through_a_link) {
  temp_dir dir;
  auto results = dir / "results";
  BOOST_TEST(run_command(mira_bin + " run --evals greet --results-dir " + results + " -- " +
                         example + " 2>/dev/null")
                 .code == 0);
  auto id = only_run(results).filename().string();
  auto folder = fs::path(results) / id;
  std::ofstream(folder / "events.ndjson", std::ios::app) << "{\"session\":1,\"trunc";
  std::ofstream(folder / "study.stderr.log", std::ios::app) << "half a line";
  const std::string resume = mira_bin + " run --evals greet --resume " + id + " --results-dir " +
                             results + " -- " + example;
  BOOST_TEST(run_command(resume + " 2>/dev/null").code == 0);
  auto events = read_file((folder / "events.ndjson").string());
  BOOST_TEST(events.find("\"trunc\n{\"session\":2") != std::string::npos, events);
  BOOST_TEST(read_file((folder / "study.stderr.log").string()).find("half a line\n--- session 2") !=
             std::string::npos);

  // A link where the log is: named, and the file it points at left alone.
  const auto outside = dir / "outside.txt";
  write(outside, "not the store's\n");
  fs::remove(folder / "study.stderr.log");
  fs::create_symlink(outside, folder / "study.stderr.log");
  auto linked = run_command(resume + " 2>&1");
  BOOST_TEST(linked.out.find((folder / "study.stderr.log").string()) != std::string::npos,
             linked.out);
  BOOST_TEST(read_file(outside) == "not the store's\n");
}

// Defect 3: a resume that selects less rewrote report.json and meta.json's summary with only
// its selection, kept only the first selection, and `mira report` showed 0.00 s.
BOOST_AUTO_TEST_CASE(a_narrower_resume_keeps_the_whole_run_in_report_and_meta) {
  temp_dir dir;
  auto results = dir / "results";
  BOOST_TEST(run_command(mira_bin + " run --max-retries 1 --results-dir " + results + " -- " +
                         example + " >/dev/null 2>&1")
                 .code == 0);
  auto id = only_run(results).filename().string();
  auto folder = fs::path(results) / id;
  auto resumed = run_command(mira_bin + " run --evals coin --retry-failed --resume " + id +
                             " --results-dir " + results + " -- " + example + " 2>/dev/null");
  BOOST_TEST(resumed.code == 0);
  auto report = json::parse(read_file((folder / "report.json").string())).as_object();
  BOOST_TEST(report.at("records").at("count").as_int64() == 41);
  auto meta = json::parse(read_file((folder / "meta.json").string())).as_object();
  BOOST_TEST(meta.at("summary").at("counts").at("passed").as_int64() == 37);
  BOOST_TEST(meta.at("summary").at("seconds").to_number<double>() > 0);
  auto& sessions = meta.at("sessions").as_array();
  BOOST_REQUIRE(sessions.size() == 2u);
  BOOST_TEST(sessions[0].at("config").at("selection").at("evals").as_array().empty());
  BOOST_TEST(sessions[1].at("config").at("selection").at("evals").at(0).as_string() == "coin");
  BOOST_TEST(sessions[1].at("reused").as_int64() == 3);
  auto again = run_command(mira_bin + " report " + id + " --results-dir " + results);
  BOOST_TEST(again.code == 0);
  BOOST_TEST(again.out.find("(41 cases)") != std::string::npos);
}

// Defect 5: two writers of one run folder both ran. The folder is locked for a session; the
// second writer exits 3 naming the holder, and proceeds once the lock is gone.
BOOST_AUTO_TEST_CASE(one_writer_at_a_time) {
  temp_dir dir;
  auto results = dir / "results";
  BOOST_TEST(run_command(mira_bin + " run --samples a --results-dir " + results + " -- " + py +
                         " >/dev/null 2>&1")
                 .code == 0);
  auto id = only_run(results).filename().string();
  {
    auto holder = mira::store::run_store::open(results, id);
    BOOST_REQUIRE(holder.has_value());
    auto second = run_command(mira_bin + " run --samples a --resume " + id + " --results-dir " +
                              results + " -- " + py + " 2>&1");
    BOOST_TEST(second.code == 3);
    BOOST_TEST(second.out.find("is in use by pid " + std::to_string(::getpid()) + " on host ") !=
               std::string::npos);
    // A reader needs no lock.
    BOOST_TEST(
        run_command(mira_bin + " report " + id + " --results-dir " + results + " >/dev/null 2>&1")
            .code == 0);
    // The lock is the folder's: with .lock deleted the run is still held, and the refused
    // writer changes nothing (it used to run, or rewrite meta.json first).
    auto meta = read_file((fs::path(results) / id / "meta.json").string());
    fs::remove(fs::path(results) / id / ".lock");
    auto without_file = run_command(mira_bin + " run --samples a --resume " + id +
                                    " --results-dir " + results + " -- " + py + " 2>&1");
    BOOST_TEST(without_file.code == 3);
    BOOST_TEST(without_file.out.find("is in use by another process") != std::string::npos,
               without_file.out);
    BOOST_TEST(read_file((fs::path(results) / id / "meta.json").string()) == meta);
  }
  auto third = run_command(mira_bin + " run --samples a --resume " + id + " --results-dir " +
                           results + " -- " + py + " 2>&1");
  BOOST_TEST(third.code == 0);
  BOOST_TEST(third.out.find("1 of 1 case(s) already saved") != std::string::npos);
}

// Defect 7: `log` notifications correlated with a request were never printed.
BOOST_AUTO_TEST_CASE(a_study_log_line_for_a_case_is_shown_with_its_key) {
  auto r = run_command(mira_bin + " run --dry-run --evals events -- " + example + " 2>&1");
  BOOST_TEST(r.code == 0);
  BOOST_TEST(r.out.find("study [events/tool-use@sim]: used two tools") != std::string::npos);
}

// Defect 8 (part): a second --execute-only over the same artifacts said it executed every case.
BOOST_AUTO_TEST_CASE(execute_only_counts_what_this_session_executed) {
  temp_dir dir;
  auto arts = dir / "artifacts";
  auto base = mira_bin + " run --execute-only --artifacts " + arts + " -- " + py +
              " --caps execute,score 2>&1";
  auto first = run_command(base);
  BOOST_TEST(first.out.find("executed 3 case(s) in this session") != std::string::npos);
  auto second = run_command(base);
  BOOST_TEST(second.out.find("executed 0 case(s) in this session") != std::string::npos);
}

// A run folder as the Rust mira CLI writes it: meta.json with the study's name as a string and
// Unix times, bare RunResults (no key) under its own key encoding ('-' as _2d).
BOOST_AUTO_TEST_CASE(a_rust_run_folder_is_reported_exported_and_resumed_in_place) {
  temp_dir dir;
  auto results = fs::path(dir / "results");
  const std::string id = "20261130T081502Z-3fa9";
  auto folder = results / id;
  write(folder / "meta.json",
        R"({"format":1,"run_id":")" + id +
            R"(","study":"example-study","study_version":"0.1.0","started_unix":1764490502,)"
            R"("finished_unix":1764490510,"summary":{"scored":1,"passed":1,"failed":0,"na":0,)"
            R"("skipped":0,"total_tokens":2,"total_cost_usd":0.0,"total_tool_calls":0,)"
            R"("total_duration_ms":3}})");
  const std::string rust_dir = "arithmetic_2fcase_2d1_40sim";
  const std::string result =
      R"({"eval":"arithmetic","sample":"case-1","target":"sim","passed":true,"aggregate":1.0,)"
      R"("scores":[{"scorer":"exact","value":1.0,"pass":true,"reason":"from the Rust host"}],)"
      R"("transcript":{"final_response":"2","iterations":1,"tool_calls_count":0,)"
      R"("usage":{"input_tokens":1,"output_tokens":1,"cost_usd":0.0}},"skipped":false})";
  write(folder / "cases" / rust_dir / "result.json", result);

  auto report =
      run_command(mira_bin + " report " + id + " --results-dir " + results.string() + " 2>&1");
  BOOST_TEST(report.code == 0);
  BOOST_TEST(report.out.find("PASS  arithmetic/case-1@sim") != std::string::npos);
  auto exported = run_command(mira_bin + " export " + id + " --format atif --out - --results-dir " +
                              results.string());
  BOOST_TEST(exported.code == 0);
  BOOST_TEST(exported.out.find("\"trajectory_id\":\"arithmetic/case-1@sim\"") != std::string::npos);

  auto resumed = run_command(mira_bin + " run --evals arithmetic --resume " + id +
                             " --results-dir " + results.string() + " -- " + example + " 2>&1");
  BOOST_TEST(resumed.code == 0);
  BOOST_TEST(resumed.out.find("1 of 25 case(s) already saved") != std::string::npos);
  // 25 cases, 25 folders: the Rust host's folder was reused, not doubled.
  BOOST_TEST(std::distance(fs::directory_iterator(folder / "cases"), fs::directory_iterator{}) ==
             25);
  BOOST_TEST(read_file((folder / "cases" / rust_dir / "result.json").string()) == result);
  BOOST_TEST(!fs::exists(folder / "cases" / "arithmetic_2fcase-1_40sim"));
  // meta.json still reads as the Rust host's, with this session appended.
  auto meta = json::parse(read_file((folder / "meta.json").string())).as_object();
  BOOST_TEST(meta.at("study").as_string() == "example-study");
  BOOST_TEST(meta.at("started_unix").as_int64() == 1764490502);
  BOOST_TEST(meta.at("sessions").as_array().size() == 1u);
  BOOST_TEST(meta.at("summary").at("counts").at("passed").as_int64() == 25);
}

// A finished compact run of more cases than a table lists: `mira report` takes the run's own
// summary (every case counted) and lists the first 10 000, as the run did; --format csv and a
// FILTER read the records.
BOOST_AUTO_TEST_CASE(a_big_finished_runs_report_lists_the_first_cases_over_its_saved_summary) {
  temp_dir dir;
  auto results = dir / "results";
  const std::string py = std::string(MIRA_PYTHON3) + " " MIRA_PY_STUDY;
  auto ran = run_command(mira_bin + " run --store compact -j 64 --results-dir " + results + " -- " +
                         py + " --samples 10003 > /dev/null 2>&1");
  BOOST_TEST_REQUIRE(ran.code == 0);
  auto id = only_run(results).filename().string();
  auto table = run_command(mira_bin + " report " + id + " --results-dir " + results);
  BOOST_TEST(table.code == 0);
  BOOST_TEST(count_of(table.out, "PASS  echo/") == 10000u);
  BOOST_TEST(table.out.find("... the first 10000 of 10003 cases are listed") != std::string::npos);
  BOOST_TEST(table.out.find("10003 passed, 0 failed") != std::string::npos);
  auto csv = run_command(mira_bin + " report " + id + " --format csv --results-dir " + results);
  BOOST_TEST(count_of(csv.out, "\r\n") == 10004u);  // the header and every case
  auto some = run_command(mira_bin + " report " + id + " s1000 --results-dir " + results);
  BOOST_TEST(count_of(some.out, "PASS  echo/") == 4u);  // s1000, s10000, s10001, s10002
  BOOST_TEST(some.out.find("the first") == std::string::npos);
}

// The compact layout through the CLI: run, report, export, resume, and conversion both ways
// with the same report before and after.
BOOST_AUTO_TEST_CASE(a_compact_run_reports_resumes_and_converts_both_ways) {
  temp_dir dir;
  auto results = dir / "results";
  auto first =
      run_command(mira_bin + " run --store compact --max-retries 1 --evals arithmetic,coin" +
                  " --results-dir " + results + " -- " + example + " 2>/dev/null");
  BOOST_TEST(first.code == 0);
  auto id = only_run(results).filename().string();
  auto folder = fs::path(results) / id;
  BOOST_TEST(fs::exists(folder / "segments" / "000001.ndjson"));
  BOOST_TEST(!fs::exists(folder / "cases"));
  auto report = [&] {
    return run_command(mira_bin + " report " + id + " --format jsonl --results-dir " + results);
  };
  auto before = report();
  BOOST_TEST(before.code == 0);
  BOOST_TEST(count_of(before.out, "\"attempts\":") == 28u);
  auto exported = run_command(mira_bin + " export " + id + " --out - --results-dir " + results);
  BOOST_TEST(count_of(exported.out, "\"trajectory_id\"") == 28u);
  auto resumed = run_command(mira_bin + " run --evals greet --resume " + id + " --results-dir " +
                             results + " -- " + example + " 2>&1");
  BOOST_TEST(resumed.code == 0);
  auto meta = json::parse(read_file((folder / "meta.json").string())).as_object();
  BOOST_TEST(meta.at("layout").as_string() == "compact");
  auto whole = report();

  auto convert = [&](const std::string& to) {
    return run_command(mira_bin + " store convert " + id + " --to " + to + " --results-dir " +
                       results + " 2>&1");
  };
  auto to_files = convert("per-case");
  BOOST_TEST(to_files.code == 0);
  BOOST_TEST(to_files.out.find("converted run " + id + " to the per-case layout") !=
             std::string::npos);
  BOOST_TEST(!fs::exists(folder / "segments"));
  BOOST_TEST(report().out == whole.out);
  BOOST_TEST(convert("compact").code == 0);
  BOOST_TEST(!fs::exists(folder / "cases"));
  BOOST_TEST(report().out == whole.out);
  BOOST_TEST(convert("compact").out.find("already has the compact layout") != std::string::npos);
  BOOST_TEST(convert("zip").code == 2);
  {
    auto holder = mira::store::run_store::open(results, id);
    BOOST_REQUIRE(holder.has_value());
    BOOST_TEST(convert("per-case").code == 3);  // a run in use is not converted
  }
}

// A flipped byte in one compact record: the resume runs that case again, after which the damaged
// record is superseded. `mira report` kept exiting 3 ("1 of N saved result(s) cannot be read")
// for a run that was complete.
BOOST_AUTO_TEST_CASE(a_damaged_compact_record_run_again_no_longer_fails_the_report) {
  temp_dir dir;
  auto results = dir / "results";
  const std::string run =
      " --store compact --results-dir " + results + " -- " + py + " --samples 20 2>&1";
  BOOST_TEST(run_command(mira_bin + " run" + run).code == 0);
  auto id = only_run(results).filename().string();
  auto segment = fs::path(results) / id / "segments" / "000001.ndjson";
  auto bytes = read_file(segment.string());
  std::size_t line_start = 0;
  for (int line = 1; line < 5; ++line) line_start = bytes.find('\n', line_start) + 1;
  auto flip = bytes.find('\n', line_start) - 3;  // inside the record, away from its key
  bytes[flip] = static_cast<char>(bytes[flip] ^ 1);
  std::ofstream(segment, std::ios::binary | std::ios::trunc) << bytes;
  auto report = [&] {
    return run_command(mira_bin + " report " + id + " --results-dir " + results + " 2>&1");
  };
  auto damaged = report();
  BOOST_TEST(damaged.code == 3);
  BOOST_TEST(damaged.out.find("1 of 20 saved result(s)") != std::string::npos, damaged.out);

  auto resumed = run_command(mira_bin + " run --resume " + id + run);
  BOOST_TEST(resumed.code == 0);
  BOOST_TEST(resumed.out.find("19 of 20 case(s) already saved") != std::string::npos, resumed.out);
  auto after = report();
  BOOST_TEST(after.code == 0, after.out);
  BOOST_TEST(after.out.find("20 passed") != std::string::npos, after.out);
  BOOST_TEST(after.out.find("superseded by a later record of echo/") != std::string::npos,
             after.out);
  BOOST_TEST(after.out.find("cannot be read") == std::string::npos, after.out);
}

BOOST_AUTO_TEST_SUITE_END()
