// What the benchmarks share: their command line, starting the study through the host, and
// what they measure about their own process (CPU time, resident memory).
#pragma once

#include <mira/host.hpp>

#include <boost/asio/awaitable.hpp>

#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <initializer_list>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace bench {

/// `-x VALUE` options and valueless `flags` before `--`, the study's command after it.
struct args {
  std::map<std::string, std::string> options;
  std::vector<std::string> study;

  std::uint64_t number(const std::string& key, std::uint64_t fallback) const {
    auto it = options.find(key);
    return it == options.end() ? fallback : std::strtoull(it->second.c_str(), nullptr, 10);
  }
  bool has(const std::string& key) const { return options.count(key) > 0; }
};

inline args parse_args(int argc, char** argv, std::initializer_list<std::string_view> flags = {}) {
  args out;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--") {
      out.study.assign(argv + i + 1, argv + argc);
      break;
    }
    bool flag = false;
    for (auto f : flags) flag = flag || a == f;
    if (flag)
      out.options[a] = "";
    else if (i + 1 < argc)
      out.options[a] = argv[++i];
  }
  return out;
}

/// Spawns and initializes the study; exits the benchmark with a message when it cannot.
inline boost::asio::awaitable<mira::host_handle> start_study(const boost::asio::any_io_executor& ex,
                                                             const std::vector<std::string>& argv) {
  mira::study_command cmd;
  cmd.argv = argv;
  auto host = mira::host_handle::spawn(ex, cmd);
  if (!host) {
    std::fprintf(stderr, "cannot start the study: %s\n", host.error().message().c_str());
    std::exit(1);
  }
  auto init = co_await host->initialize();
  if (!init) {
    std::fprintf(stderr, "initialize failed: %s\n", init.error().message().c_str());
    std::exit(1);
  }
  co_return std::move(*host);
}

/// User + system CPU seconds of this process so far.
inline double cpu_seconds() {
  rusage ru{};
  ::getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

/// Resident set now, in MiB.
inline double rss_mib() {
  std::ifstream statm("/proc/self/statm");
  long pages = 0, resident = 0;
  statm >> pages >> resident;
  return static_cast<double>(resident) * static_cast<double>(::sysconf(_SC_PAGESIZE)) / 1048576.0;
}

/// Peak resident set so far, in MiB.
inline double peak_rss_mib() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;
}

}  // namespace bench
