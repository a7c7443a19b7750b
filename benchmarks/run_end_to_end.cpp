// `mira run` end to end: N cases against the echo study, with the run folder off (--dry-run)
// and on in both layouts (per-case files, --store compact; a results directory on local
// disk), beside a 1-case run for the fixed cost and beside the same cases through a
// host_handle alone, so the orchestration's own cost per case can be read off side by side.
//
//   run_end_to_end [-n N] [-j J] [-r ROUNDS] [--dry-only] MIRA_BIN ECHO_STUDY
//
// Prints per mode the wall time, CPU seconds of the host and of the study (the study writes
// its own), peak RSS of the host, and the host's bytes per case beyond the 1-case run. The
// `host-alone` row is a child process that spawns the study through host_handle, lists it and
// runs every listed case with J in flight, keeping no results: what `mira run` costs beyond
// it (planning, scheduling, records, aggregation, the table) is the orchestration's cost.
// With -r, the host-alone and dry-run rows are repeated in alternation and the orchestration's
// cost is given from the best rounds and as the median of the rounds' paired differences.
#include "bench_util.hpp"

#include <mira/host.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

namespace {

namespace asio = boost::asio;

struct outcome {
  double wall = 0, cpu = 0, study_cpu = 0, rss_mib = 0;
  int status = 0;
  double host_cpu() const { return cpu - study_cpu; }
};

double seconds(const timeval& t) {
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6;
}

// Runs `child` in a forked process (stdout and stderr to /dev/null) and measures it.
outcome measure(const std::function<int()>& child, const std::string& cpu_file) {
  std::fflush(stdout);  // a forked child must not inherit unwritten output
  auto t0 = std::chrono::steady_clock::now();
  pid_t pid = ::fork();
  if (pid == 0) {
    if (!std::freopen("/dev/null", "w", stdout) || !std::freopen("/dev/null", "w", stderr))
      _exit(126);
    _exit(child());
  }
  outcome o;
  rusage ru{};
  ::wait4(pid, &o.status, 0, &ru);
  o.wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // The child's usage includes the study it waited for; the study reports its share.
  o.cpu = seconds(ru.ru_utime) + seconds(ru.ru_stime);
  o.rss_mib = static_cast<double>(ru.ru_maxrss) / 1024.0;
  std::ifstream in(cpu_file);
  in >> o.study_cpu;
  return o;
}

int exec(const std::vector<std::string>& argv) {
  std::vector<char*> args;
  for (auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  ::execv(args[0], args.data());
  return 127;
}

// The host alone: every listed case through host_handle::async_run, J in flight, nothing kept.
int host_alone(const std::vector<std::string>& study, std::size_t j) {
  asio::io_context ctx;
  int rc = 1;
  asio::co_spawn(
      ctx,
      [&]() -> asio::awaitable<void> {
        auto host = co_await bench::start_study(ctx.get_executor(), study);
        auto list = co_await host.list_all();
        if (!list || list->evals.empty() || list->evals[0].targets.empty()) co_return;
        auto& eval = list->evals[0];
        std::size_t next = 0, failures = 0, workers_left = j;
        asio::steady_timer done(ctx, std::chrono::steady_clock::time_point::max());
        auto worker = [&]() -> asio::awaitable<void> {
          while (next < eval.samples.size()) {
            mira::protocol::run_params p;
            p.eval = eval.name;
            p.sample = eval.samples[next++].id;
            p.target = eval.targets[0].label;
            auto [ec, r] =
                co_await host.async_run(std::move(p), asio::as_tuple(asio::use_awaitable));
            if (ec || !r.passed) ++failures;
          }
          if (--workers_left == 0) done.cancel();
        };
        for (std::size_t i = 0; i < j; ++i) asio::co_spawn(ctx, worker(), asio::detached);
        co_await done.async_wait(asio::as_tuple(asio::use_awaitable));
        co_await host.shutdown();
        rc = failures == 0 ? 0 : 1;
      },
      asio::detached);
  ctx.run();
  return rc;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty()      ? 0
         : v.size() % 2 ? v[v.size() / 2]
                        : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

}  // namespace

int main(int argc, char** argv) {
  // The host-alone child, started again by the parent (below) so that it runs under the same
  // malloc settings as `mira run`: --host-alone-child J STUDY_ARGV...
  if (argc > 3 && std::string(argv[1]) == "--host-alone-child")
    return host_alone({argv + 3, argv + argc}, std::strtoull(argv[2], nullptr, 10));
  std::size_t n = 100000, j = 64, rounds = 1;
  bool dry_only = false;
  std::vector<std::string> pos;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-n" && i + 1 < argc)
      n = std::strtoull(argv[++i], nullptr, 10);
    else if (a == "-j" && i + 1 < argc)
      j = std::strtoull(argv[++i], nullptr, 10);
    else if (a == "-r" && i + 1 < argc)
      rounds = std::max<std::size_t>(1, std::strtoull(argv[++i], nullptr, 10));
    else if (a == "--dry-only")
      dry_only = true;
    else
      pos.push_back(a);
  }
  if (pos.size() != 2) {
    std::fprintf(stderr,
                 "usage: run_end_to_end [-n N] [-j J] [-r ROUNDS] [--dry-only] MIRA_BIN "
                 "ECHO_STUDY\n");
    return 2;
  }
  char tmpl[] = "/tmp/mira-e2e-XXXXXX";
  std::string dir = ::mkdtemp(tmpl);
  std::string cpu_file = dir + "/study.cpu";
  enum class mode { host_alone, dry, per_case, compact };
  auto study_argv = [&](std::size_t cases) {
    return std::vector<std::string>{pos[1], "--samples", std::to_string(cases), "--cpu-report",
                                    cpu_file};
  };
  auto argv_for = [&](std::size_t cases, mode m) {
    std::vector<std::string> a{pos[0], "run", "-j", std::to_string(j), "--max-retries", "0"};
    if (m == mode::dry)
      a.push_back("--dry-run");
    else
      a.insert(a.end(), {"--results-dir", dir + "/results", "--store",
                         m == mode::compact ? "compact" : "per-case"});
    a.push_back("--");
    auto s = study_argv(cases);
    a.insert(a.end(), s.begin(), s.end());
    return a;
  };
  auto run = [&](std::size_t cases, mode m) {
    if (m == mode::host_alone) {
      // mira run starts itself again with glibc.malloc.hugetlb=1 (tools/mira/main.cpp): the
      // host alone gets the same, unless MIRA_NO_HUGE_PAGES asks mira not to either.
      std::vector<std::string> a{"/proc/self/exe", "--host-alone-child", std::to_string(j)};
      auto s = study_argv(cases);
      a.insert(a.end(), s.begin(), s.end());
      return measure(
          [&] {
            const char* no = std::getenv("MIRA_NO_HUGE_PAGES");
            if (!(no && *no && std::string(no) != "0") && !std::getenv("GLIBC_TUNABLES"))
              ::setenv("GLIBC_TUNABLES", "glibc.malloc.hugetlb=1", 1);
            return exec(a);
          },
          cpu_file);
    }
    auto a = argv_for(cases, m);
    return measure([&] { return exec(a); }, cpu_file);
  };
  auto one = run(1, mode::dry);
  std::printf("run_end_to_end n=%zu -j %zu, %zu round(s) (1-case run: %.1f MiB peak RSS)\n", n, j,
              rounds, one.rss_mib);
  std::printf("%-10s %8s %10s %11s %10s %9s %14s %12s\n", "mode", "wall_s", "host_cpu_s",
              "study_cpu_s", "cases/s", "rss_mib", "bytes_per_case", "cpu_us/case");
  auto print = [&](const char* name, const outcome& o) {
    if (!WIFEXITED(o.status) || WEXITSTATUS(o.status) != 0)
      std::fprintf(stderr, "run_end_to_end: %s exited with status %d\n", name, o.status);
    std::printf("%-10s %8.2f %10.2f %11.2f %10.0f %9.1f %14.0f %12.2f\n", name, o.wall,
                o.host_cpu(), o.study_cpu, static_cast<double>(n) / o.wall, o.rss_mib,
                (o.rss_mib - one.rss_mib) * 1048576.0 / static_cast<double>(n),
                o.host_cpu() / static_cast<double>(n) * 1e6);
  };
  // Host alone and dry run in alternation, so both see the same load on a shared machine.
  std::vector<outcome> alone, dry;
  for (std::size_t r = 0; r < rounds; ++r) {
    alone.push_back(run(n, mode::host_alone));
    print("host-alone", alone.back());
    dry.push_back(run(n, mode::dry));
    print("dry-run", dry.back());
  }
  auto us = [&](double s) { return s / static_cast<double>(n) * 1e6; };
  auto best = [](const std::vector<outcome>& v, auto field) {
    double b = field(v[0]);
    for (auto& o : v) b = std::min(b, field(o));
    return b;
  };
  auto cpu = [](const outcome& o) { return o.host_cpu(); };
  auto wall = [](const outcome& o) { return o.wall; };
  std::vector<double> paired;
  for (std::size_t r = 0; r < rounds; ++r)
    paired.push_back(us(dry[r].host_cpu() - alone[r].host_cpu()));
  std::printf(
      "host alone: %.2f us of CPU per case (best round), %.2f s wall; mira run --dry-run: %.2f "
      "us, %.2f s, %.1f MiB peak\n",
      us(best(alone, cpu)), best(alone, wall), us(best(dry, cpu)), best(dry, wall),
      best(dry, [](const outcome& o) { return o.rss_mib; }));
  std::printf(
      "orchestration's own cost: %.2f us of CPU per case (best rounds), %.2f (median of the "
      "paired rounds); kept: %.0f bytes per case beyond the 1-case run\n",
      us(best(dry, cpu)) - us(best(alone, cpu)), median(paired),
      (best(dry, [](const outcome& o) { return o.rss_mib; }) - one.rss_mib) * 1048576.0 /
          static_cast<double>(n));
  if (!dry_only)
    for (auto m : {mode::per_case, mode::compact})
      print(m == mode::per_case ? "per-case" : "compact", run(n, m));
  std::string cleanup = "rm -rf " + dir;
  return std::system(cleanup.c_str()) == 0 ? 0 : 1;
}
