// `mira run` end to end: N cases against the echo study, with the run folder off (--dry-run)
// and on in both layouts (per-case files, --store compact; a results directory on local
// disk), beside a 1-case run for the fixed cost.
//
//   run_end_to_end [-n N] [-j J] MIRA_BIN ECHO_STUDY
//
// Prints per mode the wall time, CPU seconds of the host and of the study (the study writes
// its own), peak RSS of the host, and the host's bytes per case beyond the 1-case run.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

namespace {

struct outcome {
  double wall = 0, cpu = 0, study_cpu = 0, rss_mib = 0;
  int status = 0;
};

double seconds(const timeval& t) {
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6;
}

outcome run(const std::vector<std::string>& argv, const std::string& cpu_file) {
  auto t0 = std::chrono::steady_clock::now();
  pid_t pid = ::fork();
  if (pid == 0) {
    if (!std::freopen("/dev/null", "w", stdout) || !std::freopen("/dev/null", "w", stderr))
      _exit(126);
    std::vector<char*> args;
    for (auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    _exit(127);
  }
  outcome o;
  rusage ru{};
  ::wait4(pid, &o.status, 0, &ru);
  o.wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // The host's own usage includes the study it waited for; the study reports its share.
  o.cpu = seconds(ru.ru_utime) + seconds(ru.ru_stime);
  o.rss_mib = static_cast<double>(ru.ru_maxrss) / 1024.0;
  std::ifstream in(cpu_file);
  in >> o.study_cpu;
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t n = 100000, j = 64;
  std::vector<std::string> pos;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-n" && i + 1 < argc)
      n = std::strtoull(argv[++i], nullptr, 10);
    else if (a == "-j" && i + 1 < argc)
      j = std::strtoull(argv[++i], nullptr, 10);
    else
      pos.push_back(a);
  }
  if (pos.size() != 2) {
    std::fprintf(stderr, "usage: run_end_to_end [-n N] [-j J] MIRA_BIN ECHO_STUDY\n");
    return 2;
  }
  char tmpl[] = "/tmp/mira-e2e-XXXXXX";
  std::string dir = ::mkdtemp(tmpl);
  std::string cpu_file = dir + "/study.cpu";
  enum class mode { dry, per_case, compact };
  auto argv_for = [&](std::size_t cases, mode m) {
    std::vector<std::string> a{pos[0], "run", "-j", std::to_string(j), "--max-retries", "0"};
    if (m == mode::dry)
      a.push_back("--dry-run");
    else
      a.insert(a.end(), {"--results-dir", dir + "/results", "--store",
                         m == mode::compact ? "compact" : "per-case"});
    a.insert(a.end(), {"--", pos[1], "--samples", std::to_string(cases), "--cpu-report", cpu_file});
    return a;
  };
  std::fflush(stdout);  // a forked child must not inherit unwritten output
  auto one = run(argv_for(1, mode::dry), cpu_file);
  std::printf("run_end_to_end n=%zu -j %zu (1-case run: %.1f MiB peak RSS)\n", n, j, one.rss_mib);
  std::printf("%-9s %8s %10s %10s %10s %9s %14s\n", "mode", "wall_s", "host_cpu_s", "study_cpu_s",
              "cases/s", "rss_mib", "bytes_per_case");
  for (auto m : {mode::dry, mode::per_case, mode::compact}) {
    std::fflush(stdout);
    auto o = run(argv_for(n, m), cpu_file);
    if (!WIFEXITED(o.status) || WEXITSTATUS(o.status) != 0)
      std::fprintf(stderr, "run_end_to_end: mira exited with status %d\n", o.status);
    std::printf("%-9s %8.2f %10.2f %10.2f %10.0f %9.1f %14.0f\n",
                m == mode::dry        ? "dry-run"
                : m == mode::per_case ? "per-case"
                                      : "compact",
                o.wall, o.cpu - o.study_cpu, o.study_cpu, static_cast<double>(n) / o.wall,
                o.rss_mib, (o.rss_mib - one.rss_mib) * 1048576.0 / static_cast<double>(n));
  }
  std::string cleanup = "rm -rf " + dir;
  return std::system(cleanup.c_str()) == 0 ? 0 : 1;
}
