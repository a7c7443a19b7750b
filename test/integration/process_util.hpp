// Helpers for tests that run real processes.
#pragma once

#include "common/temp_dir.hpp"

#include <mira/host.hpp>

#include <boost/test/unit_test.hpp>

#include <sys/wait.h>
#include <unistd.h>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace mira::test {

struct command_result {
  int code = -1;
  std::string out;
};

/// Runs a shell command line, capturing stdout; stderr goes to the test log.
inline command_result run_command(const std::string& cmd) {
  command_result r;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  int status = ::pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

/// The one run folder under a results dir (its hidden entries aside).
inline std::filesystem::path only_run(const std::filesystem::path& results) {
  std::vector<std::filesystem::path> runs;
  for (auto& e : std::filesystem::directory_iterator(results))
    if (e.path().filename().string()[0] != '.') runs.push_back(e.path());
  BOOST_REQUIRE_EQUAL(runs.size(), 1u);
  return runs[0];
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// A unique path under the system temp directory, removed by the destructor.
struct temp_file {
  std::string path;
  temp_file() {
    char tmpl[] = "/tmp/mira-test-XXXXXX";
    int fd = ::mkstemp(tmpl);
    if (fd >= 0) ::close(fd);
    path = tmpl;
  }
  ~temp_file() { std::remove(path.c_str()); }
};

/// The Python study's echo eval: one of its cases.
inline protocol::run_params echo_case(std::string sample) {
  protocol::run_params p;
  p.eval = "echo";
  p.sample = std::move(sample);
  p.target = "sim";
  return p;
}

inline study_command py_study(std::vector<std::string> extra = {}) {
  study_command c;
  c.argv = {MIRA_PYTHON3, MIRA_PY_STUDY};
  c.argv.insert(c.argv.end(), extra.begin(), extra.end());
  return c;
}

/// True when every child of this process has been reaped (no zombie left behind).
inline bool no_children_left() {
  int status = 0;
  return ::waitpid(-1, &status, WNOHANG) == -1 && errno == ECHILD;
}

}  // namespace mira::test
