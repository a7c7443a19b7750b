// The default log sink, the one place the library writes to stderr: the host's records from the
// level asked for, the study's stderr lines always, each under its label.
#include <mira/log.hpp>

#include <boost/test/unit_test.hpp>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

using namespace mira;

namespace {

// What `write` sends to stderr (descriptor 2), read back from a temporary file.
template <class F>
std::string stderr_of(F write) {
  char path[] = "/tmp/mira-log-test-XXXXXX";
  int fd = ::mkstemp(path);
  BOOST_REQUIRE(fd >= 0);
  std::fflush(stderr);
  int saved = ::dup(2);
  ::dup2(fd, 2);
  write();
  std::fflush(stderr);
  ::dup2(saved, 2);
  ::close(saved);
  ::close(fd);
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  ::unlink(path);
  return text.str();
}

log_record host_record(log_level level, std::string_view message) {
  log_record r;
  r.level = level;
  r.message = message;
  return r;
}

log_record study_line(std::string_view line) {
  log_record r;
  r.message = line;
  r.source = log_source::study_stderr;
  return r;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(log_sink_tests)

BOOST_AUTO_TEST_CASE(the_stderr_sink_writes_the_study_s_lines_whatever_the_level) {
  auto out = stderr_of([] {
    auto sink = stderr_log_sink();
    sink(host_record(log_level::info, "not shown"));
    sink(host_record(log_level::warning, "skipped a line"));
    sink(study_line("Traceback (most recent call last):"));
  });
  BOOST_TEST(out ==
             "mira: warning: skipped a line\n"
             "[study] Traceback (most recent call last):\n");
}

BOOST_AUTO_TEST_CASE(a_pool_s_sink_labels_each_process_s_lines) {
  auto out = stderr_of([] {
    auto sink = stderr_log_sink(log_level::error, "study 2");
    sink(host_record(log_level::warning, "not shown"));
    sink(study_line("loading"));
  });
  BOOST_TEST(out == "[study 2] loading\n");
}

BOOST_AUTO_TEST_SUITE_END()
