// `mira run --store compact` killed with SIGKILL from outside, at points chosen by what its run
// folder shows (records saved, the lock taken by a resume), then resumed with --resume until it
// finishes: every planned case is listed once by `mira report --format jsonl`, passed, and its
// record is in the segments exactly once. crash_resume_test has the study kill its host when
// the k-th run request arrives, with the host waiting on it; here the kill lands wherever the
// host is when the saved records reach a count: mid-batch, in a resume's start-up, while the
// report is written (issue #27: a SIGKILL at any point of a compact run loses and duplicates
// nothing).
#include "integration/process_util.hpp"
#include "store/segment_log.hpp"

#include <boost/json/parse.hpp>
#include <boost/test/unit_test.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

using namespace mira::test;
namespace fs = std::filesystem;
namespace json = boost::json;

namespace {

constexpr std::size_t samples = 1000, trials = 3, cases = samples * trials;

// The run folder under `results`, once the first invocation has made it.
std::optional<fs::path> find_run(const fs::path& results) {
  std::error_code ec;
  for (fs::directory_iterator it(results, ec), end; !ec && it != end; it.increment(ec))
    if (it->path().filename().string()[0] != '.') return it->path();
  return std::nullopt;
}

// How many records the segments hold, read as they grow: only to choose when to kill, so it
// counts whole lines and does not check them (the check is read_segments' and the report's). A
// segment only grows, but for the torn tail a resume truncates: a file found shorter than what
// was read of it is counted again.
class record_counter {
 public:
  std::size_t count(const fs::path& segments) {
    std::error_code ec;
    for (fs::directory_iterator it(segments, ec), end; !ec && it != end; it.increment(ec)) {
      auto& seen = files_[it->path().filename().string()];
      auto size = it->file_size(ec);
      if (ec) continue;
      if (size < seen.bytes) seen = {};
      std::ifstream in(it->path(), std::ios::binary);
      in.seekg(static_cast<std::streamoff>(seen.bytes));
      std::string chunk(size - seen.bytes, '\0');
      in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
      chunk.resize(static_cast<std::size_t>(in.gcount()));
      seen.bytes += chunk.size();
      seen.lines += static_cast<std::size_t>(std::count(chunk.begin(), chunk.end(), '\n'));
    }
    std::size_t total = 0;
    for (auto& [name, seen] : files_) total += seen.lines;
    return total;
  }

 private:
  struct seen_file {
    std::uintmax_t bytes = 0;
    std::size_t lines = 0;
  };
  std::map<std::string, seen_file> files_;
};

// `mira run` as a child of this test (its pid is what gets killed): stdout dropped (the table of
// every case), stderr appended to `log`.
pid_t spawn(const std::vector<std::string>& argv, const fs::path& log) {
  std::vector<char*> args;
  for (auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid == 0) {
    int out = ::open("/dev/null", O_WRONLY);
    int err = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (out < 0 || err < 0 || ::dup2(out, 1) < 0 || ::dup2(err, 2) < 0) ::_exit(126);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  return pid;
}

// Where a kill lands: once the segments hold at least `saved` records, or once a resume holds
// the run's lock (.lock names the holder's pid, docs/store.md), before it has saved anything.
struct kill_point {
  enum { saved_at_least, holds_lock } when;
  std::size_t saved = 0;
};

// The kills, in order, each in its own invocation. The last may come after the run has ended:
// every record saved and the report written, the process gone before the signal.
const std::vector<kill_point> kill_points{
    {kill_point::saved_at_least, 1},      // the first batch, the run just created
    {kill_point::saved_at_least, 400},    // mid-run
    {kill_point::holds_lock},             // a resume's start-up: torn tail, plan, todo
    {kill_point::saved_at_least, 1000},   // mid-run, in a resumed session
    {kill_point::holds_lock},             // a start-up again, after a mid-run kill
    {kill_point::saved_at_least, 1800},   // mid-run
    {kill_point::saved_at_least, 2600},   // mid-run, most cases saved
    {kill_point::saved_at_least, cases},  // every case saved: the summary and reports
};

enum class ending { killed, exited, timed_out };

struct invocation {
  ending how = ending::exited;
  int status = 0;
  std::size_t saved_at_kill = 0;
};

// Runs `argv` until `point` is reached (then SIGKILL) or it exits by itself. Polls every 2 ms;
// the two minutes are only a guard against a hung child.
invocation run_until(const std::vector<std::string>& argv, const fs::path& results,
                     std::optional<kill_point> point, const fs::path& log) {
  record_counter counter;
  invocation r;
  pid_t pid = spawn(argv, log);
  BOOST_REQUIRE(pid > 0);
  const std::string holder = "pid " + std::to_string(pid) + " ";
  auto give_up = std::chrono::steady_clock::now() + std::chrono::minutes(2);
  for (;;) {
    if (::waitpid(pid, &r.status, WNOHANG) == pid) return r;  // ended by itself
    bool reached = false;
    if (auto run = find_run(results); run && point) {
      if (point->when == kill_point::holds_lock)
        reached = read_file((*run / ".lock").string()).find(holder) != std::string::npos;
      else
        reached = (r.saved_at_kill = counter.count(*run / "segments")) >= point->saved;
    }
    bool late = std::chrono::steady_clock::now() > give_up;
    if (reached || late) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &r.status, 0);
      // It may have ended by itself between the last look and the signal.
      bool by_kill = WIFSIGNALED(r.status) && WTERMSIG(r.status) == SIGKILL;
      r.how = !by_kill ? ending::exited : late ? ending::timed_out : ending::killed;
      return r;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

// The saved records by key, and how many name each; read-only (a torn tail is left to the next
// resume, and is not damage).
std::map<std::string, int> saved_keys(const fs::path& run) {
  auto scan = mira::store::read_segments(run / "segments");
  BOOST_TEST(scan.damaged_lines == 0u);
  std::map<std::string, int> keys;
  for (auto& r : scan.records) ++keys[r.key];
  return keys;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(kill_resume)

BOOST_AUTO_TEST_CASE(compact_run_killed_at_eight_points_then_resumed_lists_every_case_once) {
  temp_dir dir;
  const fs::path results = dir / "results", log = dir / "mira.stderr";
  // Every invocation runs the same selection and study; a resume names the run first.
  auto argv = [&](const std::string& id) {
    std::vector<std::string> a{MIRA_CLI, "run"};
    if (!id.empty()) a.insert(a.end(), {"--resume", id});
    a.insert(a.end(), {"--trials", std::to_string(trials), "-j", "8", "--max-retries", "0"});
    a.insert(a.end(), {"--store", "compact", "--results-dir", results.string()});
    a.insert(a.end(), {"--", MIRA_PYTHON3, MIRA_PY_STUDY, "--samples", std::to_string(samples)});
    return a;
  };

  std::string id;
  std::map<std::string, int> before;  // saved when the last kill landed
  std::size_t kills = 0;
  bool finished = false;
  for (std::size_t i = 0; i < kill_points.size() && !finished; ++i) {
    auto r = run_until(argv(id), results, kill_points[i], log);
    BOOST_REQUIRE_MESSAGE(r.how != ending::timed_out, "kill point " << i << " never reached");
    auto run = find_run(results);
    BOOST_REQUIRE(run);
    id = run->filename().string();
    if (r.how == ending::killed) {
      ++kills;
    } else {
      // Only the last point may come too late: the run ended, and ended well.
      BOOST_TEST(i + 1 == kill_points.size(), "invocation " << i << " ended before its kill");
      BOOST_TEST((WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0), "status " << r.status);
      finished = true;
    }
    auto now = saved_keys(*run);
    BOOST_TEST_MESSAGE("kill point "
                       << i << ": " << (r.how == ending::killed ? "killed" : "ended by itself")
                       << " (" << r.saved_at_kill << " records seen), " << now.size() << " of "
                       << cases << " saved");
    for (auto& [key, n] : before) BOOST_TEST(now.count(key) == 1u, key << " lost at kill " << i);
    for (auto& [key, n] : now) BOOST_TEST(n == 1, key << " saved " << n << " times at kill " << i);
    before = std::move(now);
  }
  BOOST_TEST(kills + 1 >= kill_points.size());

  // Resumed until it finishes (one resume should do; a second is the margin for a run that
  // stops for a reason of its own, and is reported).
  int resumes = 0;
  for (; resumes < 2; ++resumes) {
    auto r = run_until(argv(id), results, std::nullopt, log);
    BOOST_REQUIRE(r.how == ending::exited);
    if (WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0) break;
    BOOST_TEST_MESSAGE("resume " << resumes << " exited with status " << r.status);
  }
  BOOST_TEST(resumes == 0, read_file(log.string()));

  // Every planned case once in the listing of the run, passed.
  auto report = run_command(std::string(MIRA_CLI) + " report " + id + " --results-dir " +
                            results.string() + " --format jsonl 2>/dev/null");
  BOOST_TEST(report.code == 0);
  std::map<std::string, int> listed;
  std::istringstream lines(report.out);
  for (std::string line; std::getline(lines, line);) {
    boost::system::error_code ec;
    auto v = json::parse(line, ec);
    BOOST_REQUIRE_MESSAGE(!ec && v.is_object(), "not a JSON object: " << line.substr(0, 200));
    auto& o = v.as_object();
    if (o.contains("summary")) continue;
    BOOST_REQUIRE_MESSAGE(o.contains("key"), "a line with no key: " << line.substr(0, 200));
    auto key = std::string(o.at("key").as_string());
    ++listed[key];
    BOOST_TEST(o.at("status").as_string() == "passed", key);
  }
  std::set<std::string> planned;
  for (std::size_t s = 0; s < samples; ++s)
    for (std::size_t t = 0; t < trials; ++t)
      planned.insert("echo/s" + std::to_string(s) + "@sim#" + std::to_string(t));
  BOOST_TEST(listed.size() == cases);
  for (auto& key : planned) BOOST_TEST(listed.count(key) == 1u, key << " not listed");
  for (auto& [key, n] : listed) {
    BOOST_TEST(n == 1, key << " listed " << n << " times");
    BOOST_TEST(planned.count(key) == 1u, key << " listed but never planned");
  }
  // And once in the store itself, where a listing might hide a second record of a key.
  auto all = saved_keys(fs::path(results) / id);
  BOOST_TEST(all.size() == cases);
  for (auto& [key, n] : all) BOOST_TEST(n == 1, key << " saved " << n << " times");
  for (auto& [key, n] : before) BOOST_TEST(all.count(key) == 1u, key << " lost by the resume");
}

BOOST_AUTO_TEST_SUITE_END()
