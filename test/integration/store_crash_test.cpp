// The store's writers killed with SIGKILL at twenty points of a run, resumed each time, in both
// layouts: every record reported durable before a kill is there after it, nothing is damaged
// beyond a torn tail, and in the end every key is saved exactly once.
#include "common/temp_dir.hpp"

#include "store/batch_writer.hpp"
#include "store/run_folder.hpp"
#include "store/segment_log.hpp"

#include <boost/test/unit_test.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using namespace mira::store;

namespace {

enum class kind { per_case, compact };

std::string record_of(const std::string& key) {
  return R"({"key":")" + key + R"(","status":"passed","padding":")" + std::string(200, 'x') + "\"}";
}

// The saved keys and how many records name each (per-case: at most one by construction).
std::map<std::string, int> saved(kind k, const fs::path& run, std::size_t& damaged) {
  std::map<std::string, int> out;
  if (k == kind::compact) {
    auto scan = read_segments(run / "segments");
    damaged += scan.damaged_lines;
    for (auto& r : scan.records) ++out[r.key];
  } else {
    std::vector<std::string> unreadable;
    for (auto& [key, record] : run_folder::open(run.parent_path(), "r")->load_cases(&unreadable))
      ++out[key];
    damaged += unreadable.size();
  }
  return out;
}

// In the child: saves `keys`, writing each key to `ack_fd` once its callback says it is
// durable. Never returns. A short queue keeps batches small, so that a kill lands mid-run and
// not after one batch of everything.
constexpr std::size_t queue = 16;
[[noreturn]] void save_all(kind k, const fs::path& run, const std::vector<std::string>& keys,
                           int ack_fd) {
  auto ack = [ack_fd](const std::string& key) {
    return [ack_fd, line = key + "\n"](boost::system::error_code ec) {
      if (!ec && ::write(ack_fd, line.data(), line.size()) < 0) ::_exit(3);
    };
  };
  if (k == kind::compact) {
    segment_options o;
    o.max_queued = queue;
    auto w = segment_writer::open(run / "segments", o);
    if (!w) ::_exit(2);
    for (auto& key : keys) (*w)->submit(key, record_of(key), ack(key));
    (*w)->drain();
  } else {
    auto folder = run_folder::open(run.parent_path(), "r");
    if (!folder) ::_exit(2);
    batch_writer w(folder->path(), queue);
    for (auto& key : keys) w.submit(folder->case_file(key), record_of(key) + "\n", ack(key));
    w.drain();
  }
  ::_exit(0);
}

// One run of a child over `todo`, killed once it has acknowledged `kill_after` records (never,
// when 0). Adds the keys it acknowledged to `acked`; true when SIGKILL ended it.
bool run_child(kind k, const fs::path& run, const std::vector<std::string>& todo,
               std::size_t kill_after, std::set<std::string>& acked) {
  int fds[2];
  BOOST_REQUIRE(::pipe(fds) == 0);
  pid_t pid = ::fork();
  BOOST_REQUIRE(pid >= 0);
  if (pid == 0) {
    ::close(fds[0]);
    save_all(k, run, todo, fds[1]);
  }
  ::close(fds[1]);
  std::string pending;
  bool killed = false;
  char buf[4096];
  for (;;) {
    auto n = ::read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // the child is gone and every acknowledgement is read
    pending.append(buf, static_cast<std::size_t>(n));
    for (auto nl = pending.find('\n'); nl != std::string::npos; nl = pending.find('\n')) {
      acked.insert(pending.substr(0, nl));
      pending.erase(0, nl + 1);
    }
    if (!killed && kill_after && acked.size() >= kill_after) {
      ::kill(pid, SIGKILL);
      killed = true;
    }
  }
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  BOOST_TEST(pending.empty());
  if (!killed) BOOST_TEST((WIFEXITED(status) && WEXITSTATUS(status) == 0));
  return WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
}

void kill_twenty_times(kind k) {
  mira::test::temp_dir dir;
  BOOST_REQUIRE(run_folder::create(dir.path, "r"));
  auto run = dir.path / "r";
  constexpr std::size_t n = 6000;
  std::vector<std::string> keys;
  for (std::size_t i = 0; i < n; ++i) keys.push_back("e/s" + std::to_string(i) + "@sim");

  std::set<std::string> acked;  // reported durable by some child so far
  std::size_t damaged = 0, kills = 0;
  // A child that finishes before its kill lands does not count; the cap only ends a test that
  // cannot get its twenty kills.
  for (int attempt = 0; attempt < 60; ++attempt) {
    auto now = saved(k, run, damaged);
    for (auto& key : acked) BOOST_TEST(now.count(key) == 1u, "lost: " << key);
    for (auto& [key, count] : now) BOOST_TEST(count == 1, "duplicated: " << key);
    std::vector<std::string> todo;
    for (auto& key : keys)
      if (!now.count(key)) todo.push_back(key);
    BOOST_REQUIRE_MESSAGE(!todo.empty(), "all saved after " << kills << " kills");
    // Kill after a share of what is left, so that the twenty kills spread over the run; the
    // run after them completes.
    auto kill_after = kills < 20 ? std::max<std::size_t>(1, todo.size() / (22 - kills)) : 0;
    kills += run_child(k, run, todo, kill_after, acked) ? 1 : 0;
    if (!kill_after) break;
  }
  auto final = saved(k, run, damaged);
  BOOST_TEST(final.size() == n);
  for (auto& [key, count] : final) BOOST_TEST(count == 1, "duplicated: " << key);
  for (auto& key : acked) BOOST_TEST(final.count(key) == 1u, "lost: " << key);
  BOOST_TEST(damaged == 0u);
  BOOST_TEST(kills == 20u);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(store_crash)

BOOST_AUTO_TEST_CASE(compact_layout_sigkill_at_twenty_points_loses_and_duplicates_nothing) {
  kill_twenty_times(kind::compact);
}

BOOST_AUTO_TEST_CASE(per_case_layout_sigkill_at_twenty_points_loses_and_duplicates_nothing) {
  kill_twenty_times(kind::per_case);
}

BOOST_AUTO_TEST_SUITE_END()
