// `mira run` end to end: N cases against the echo study, with the run folder off (--dry-run)
// and on (--store compact; the per-case layout when asked, a results directory on local disk),
// beside a 1-case run of each mode for the fixed cost and beside the same cases through a
// host_handle alone, so the orchestration's own cost per case can be read off side by side.
// Several sizes in one invocation show whether the cost per case stays flat as runs grow
// (issue #27: a 1 000 000-case dry run within 1.2x the time per case of a 100 000-case one).
//
//   run_end_to_end [-n N[,N...]] [-j J] [-r ROUNDS] [--targets K] [--trials T] [--dry-only]
//                  [--per-case] [--no-host-alone] MIRA_BIN ECHO_STUDY
//   run_end_to_end --scale [D,P] [-j J] MIRA_BIN ECHO_STUDY
//
// --scale sets the two shapes of issue #40 beside their goals, dry runs at -j J: D cases of
// distinct samples (default 10M: one target, one trial; peak <= 1 GB, aim 512 MB) and P cases
// of a product (default 100M: P/100 samples x 10 targets x 10 trials; peak <= 1 GB and time per
// case within 1.2x of 1M cases of the same shape). Each is measured beside 1M cases of its shape.
//
// N takes k and M suffixes (-n 100k,1M,10M). The study lists N / (K * T) samples, K targets
// and `trials: T`, so a 10M-case plan needs no 10M-sample listing; N is rounded down to a
// multiple of K * T. Prints per size and mode the wall time, µs per case of wall time and of
// the host's and the study's CPU (the study writes its own), the host's peak RSS, its bytes per
// case beyond the same mode's 1-case run and, for a saved mode, the run folder's bytes per case
// (every file under it). The `host-alone` row is a child process that spawns the study through
// host_handle, lists it and runs every planned case with J in flight, keeping no results: what
// `mira run` costs beyond it (planning, scheduling, records, aggregation, the table) is the
// orchestration's cost. With -r, the host-alone and dry-run rows are repeated in alternation and
// the orchestration's cost is given from the best rounds and as the median of the rounds' paired
// differences. A closing table sets the sizes side by side: each dry run's µs per case against
// the smallest size's, and each saved run's wall time against the dry run's of its size.
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
#include <cctype>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace {

namespace asio = boost::asio;
namespace fs = std::filesystem;

struct outcome {
  double wall = 0, cpu = 0, study_cpu = 0, rss_mib = 0;
  int status = 0;
  std::uint64_t folder_bytes = 0;  // saved modes: every file under the run folder
  double host_cpu() const { return cpu - study_cpu; }
  bool ok() const { return WIFEXITED(status) && WEXITSTATUS(status) == 0; }
};

double seconds(const timeval& t) {
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6;
}

// Runs `child` in a forked process (stdout and stderr to /dev/null) and measures it.
outcome measure(const std::function<int()>& child, const std::string& cpu_file) {
  std::fflush(stdout);   // a forked child must not inherit unwritten output
  fs::remove(cpu_file);  // a study that dies early must not be credited with the last one's CPU
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

// The host alone: every planned case (sample x target x trial, in the plan's order) through
// host_handle::run, J in flight, nothing kept.
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
        const std::size_t targets = eval.targets.size();
        const auto trials = static_cast<std::size_t>(std::max<std::int64_t>(1, eval.trials));
        const std::size_t cases = eval.samples.size() * targets * trials;
        std::size_t next = 0, failures = 0, workers_left = j;
        asio::steady_timer done(ctx, std::chrono::steady_clock::time_point::max());
        auto worker = [&]() -> asio::awaitable<void> {
          while (next < cases) {
            auto i = next++;
            mira::protocol::run_params p;
            p.eval = eval.name;
            p.sample = eval.samples.id(i / (targets * trials));
            p.target = eval.targets[i / trials % targets].label;
            p.trial = static_cast<std::int64_t>(i % trials);
            p.trials = static_cast<std::int64_t>(trials);
            auto [ec, r] = co_await host.run(std::move(p), asio::as_tuple(asio::use_awaitable));
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

// "100000", "100k", "1M" (the sizes of issue #27 are easier to type with a suffix).
std::optional<std::uint64_t> parse_size(const std::string& s) {
  char* end = nullptr;
  auto v = std::strtoull(s.c_str(), &end, 10);
  if (end == s.c_str()) return std::nullopt;
  std::string suffix(end);
  if (suffix == "k" || suffix == "K") return v * 1000;
  if (suffix == "M" || suffix == "m") return v * 1000000;
  if (!suffix.empty()) return std::nullopt;
  return v;
}

std::uint64_t bytes_under(const fs::path& dir) {
  std::uint64_t total = 0;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (it->is_regular_file(ec)) total += it->file_size(ec);
  return total;
}

enum class mode { host_alone, dry, per_case, compact };

const char* name_of(mode m) {
  switch (m) {
    case mode::host_alone:
      return "host-alone";
    case mode::dry:
      return "dry-run";
    case mode::per_case:
      return "per-case";
    case mode::compact:
      return "compact";
  }
  return "?";
}

bool saved(mode m) {
  return m == mode::per_case || m == mode::compact;
}

struct options {
  std::vector<std::uint64_t> sizes{100000};
  std::size_t j = 64, rounds = 1, targets = 1, trials = 1;
  bool dry_only = false, per_case = false, host_alone = true;
  // --scale: the distinct-sample and product case counts (empty: not asked).
  std::vector<std::uint64_t> scale;
  std::string mira, study;
};

const char* usage =
    "usage: run_end_to_end [-n N[,N...]] [-j J] [-r ROUNDS] [--targets K] [--trials T]\n"
    "                      [--dry-only] [--per-case] [--no-host-alone] MIRA_BIN ECHO_STUDY\n"
    "       run_end_to_end --scale [D,P] [-j J] MIRA_BIN ECHO_STUDY\n";

// "N[,N...]" with k and M suffixes, every N positive.
std::optional<std::vector<std::uint64_t>> parse_sizes(const std::string& list) {
  std::vector<std::uint64_t> out;
  for (std::size_t at = 0; at <= list.size();) {
    auto comma = std::min(list.find(',', at), list.size());
    auto n = parse_size(list.substr(at, comma - at));
    if (!n || *n == 0) return std::nullopt;
    out.push_back(*n);
    at = comma + 1;
  }
  return out;
}

std::optional<options> parse(int argc, char** argv) {
  options o;
  std::vector<std::string> pos;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    bool has_value = i + 1 < argc;
    if (a == "-n" && has_value) {
      auto sizes = parse_sizes(argv[++i]);
      if (!sizes) return std::nullopt;
      o.sizes = std::move(*sizes);
    } else if (a == "--scale") {
      o.scale = {10000000, 100000000};
      if (has_value && std::isdigit(static_cast<unsigned char>(argv[i + 1][0]))) {
        auto sizes = parse_sizes(argv[++i]);
        if (!sizes || sizes->size() != 2) return std::nullopt;
        o.scale = std::move(*sizes);
      }
    } else if (a == "-j" && has_value) {
      o.j = std::strtoull(argv[++i], nullptr, 10);
    } else if (a == "-r" && has_value) {
      o.rounds = std::max<std::size_t>(1, std::strtoull(argv[++i], nullptr, 10));
    } else if (a == "--targets" && has_value) {
      o.targets = std::max<std::size_t>(1, std::strtoull(argv[++i], nullptr, 10));
    } else if (a == "--trials" && has_value) {
      o.trials = std::max<std::size_t>(1, std::strtoull(argv[++i], nullptr, 10));
    } else if (a == "--dry-only") {
      o.dry_only = true;
    } else if (a == "--per-case") {
      o.per_case = true;
    } else if (a == "--no-host-alone") {
      o.host_alone = false;
    } else {
      pos.push_back(a);
    }
  }
  if (pos.size() != 2) return std::nullopt;
  o.mira = pos[0];
  o.study = pos[1];
  // Smallest first: the closing table compares every size with it.
  std::sort(o.sizes.begin(), o.sizes.end());
  o.sizes.erase(std::unique(o.sizes.begin(), o.sizes.end()), o.sizes.end());
  return o;
}

// A run's plan as the echo study lists it: samples x targets x trials cases.
struct grid {
  std::uint64_t samples = 1;
  std::size_t targets = 1, trials = 1;
  std::uint64_t cases() const { return samples * targets * trials; }
};

// Starts and measures the runs of one invocation; every run folder lives under `dir_` and is
// removed once measured (a 10M-case folder is gigabytes).
class bench_runs {
 public:
  explicit bench_runs(options o) : o_(std::move(o)) {
    char tmpl[] = "/tmp/mira-e2e-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    cpu_file_ = dir_ + "/study.cpu";
  }
  ~bench_runs() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  // About `n` cases in the shape asked for: N rounded down to whole samples.
  grid grid_for(std::uint64_t n) const { return grid_for(n, o_.targets, o_.trials); }
  static grid grid_for(std::uint64_t n, std::size_t targets, std::size_t trials) {
    return {std::max<std::uint64_t>(1, n / (targets * trials)), targets, trials};
  }

  outcome run(const grid& g, mode m) {
    if (m == mode::host_alone) {
      // mira run starts itself again with glibc.malloc.hugetlb=1 (tools/mira/main.cpp): the
      // host alone gets the same, unless MIRA_NO_HUGE_PAGES asks mira not to either.
      std::vector<std::string> a{"/proc/self/exe", "--host-alone-child", std::to_string(o_.j)};
      auto s = study_argv(g);
      a.insert(a.end(), s.begin(), s.end());
      return measure(
          [&] {
            const char* no = std::getenv("MIRA_NO_HUGE_PAGES");
            if (!(no && *no && std::string(no) != "0") && !std::getenv("GLIBC_TUNABLES"))
              ::setenv("GLIBC_TUNABLES", "glibc.malloc.hugetlb=1", 1);
            return exec(a);
          },
          cpu_file_);
    }
    auto results = dir_ + "/results";
    auto a = mira_argv(g, m, results);
    auto o = measure([&] { return exec(a); }, cpu_file_);
    if (saved(m)) o.folder_bytes = bytes_under(results);
    std::error_code ec;
    fs::remove_all(results, ec);
    return o;
  }

 private:
  std::vector<std::string> study_argv(const grid& g) const {
    std::vector<std::string> a{o_.study, "--samples", std::to_string(g.samples)};
    // Only when asked, so that the default command line is what it always was.
    if (g.targets > 1) a.insert(a.end(), {"--targets", std::to_string(g.targets)});
    if (g.trials > 1) a.insert(a.end(), {"--trials", std::to_string(g.trials)});
    a.insert(a.end(), {"--cpu-report", cpu_file_});
    return a;
  }

  std::vector<std::string> mira_argv(const grid& g, mode m, const std::string& results) const {
    std::vector<std::string> a{o_.mira, "run", "-j", std::to_string(o_.j), "--max-retries", "0"};
    if (m == mode::dry)
      a.push_back("--dry-run");
    else
      a.insert(a.end(),
               {"--results-dir", results, "--store", m == mode::compact ? "compact" : "per-case"});
    a.push_back("--");
    auto s = study_argv(g);
    a.insert(a.end(), s.begin(), s.end());
    return a;
  }

  options o_;
  std::string dir_, cpu_file_;
};

// What the closing table needs of one size.
struct size_figures {
  std::uint64_t cases = 0;
  std::optional<outcome> dry;           // the best round's (least wall time)
  std::map<mode, outcome> saved_modes;  // compact, and per-case when asked
};

// --scale: each shape's big run beside 1M cases of the same shape, dry, with its goals.
int scale_report(bench_runs& runs, const options& o) {
  struct shape {
    const char* name;
    std::uint64_t cases;
    std::size_t targets, trials;
    bool time_goal;  // time per case within 1.2x of the 1M run's
  };
  const shape shapes[] = {{"distinct samples", o.scale[0], 1, 1, false},
                          {"samples x 10 targets x 10 trials", o.scale[1], 10, 10, true}};
  const double goal_mb = 1000, aim_mb = 512, time_goal = 1.2;
  int rc = 0;
  std::printf("run_end_to_end --scale, dry runs, -j %zu (MB: 10^6 bytes of peak RSS)\n", o.j);
  std::printf("%-34s %11s %9s %8s %9s %9s  %s\n", "shape", "cases", "wall_s", "us/case", "x_1M",
              "peak_MB", "goals");
  for (const auto& sh : shapes) {
    auto base_grid = bench_runs::grid_for(1000000, sh.targets, sh.trials);
    auto big_grid = bench_runs::grid_for(sh.cases, sh.targets, sh.trials);
    auto base = runs.run(base_grid, mode::dry);
    auto big = runs.run(big_grid, mode::dry);
    auto us = [](const outcome& r, const grid& g) {
      return r.wall / static_cast<double>(g.cases()) * 1e6;
    };
    auto mb = [](const outcome& r) { return r.rss_mib * 1.048576; };
    for (auto* r : {&base, &big})
      if (!r->ok()) {
        std::fprintf(stderr, "run_end_to_end: a dry run of %s exited with status %d\n", sh.name,
                     r->status);
        rc = 1;
      }
    const double ratio = us(big, big_grid) / us(base, base_grid);
    std::printf("%-34s %11llu %9.2f %8.2f %9s %9.1f\n", sh.name,
                static_cast<unsigned long long>(base_grid.cases()), base.wall, us(base, base_grid),
                "", mb(base));
    std::string goals = "peak <= " + std::to_string(static_cast<int>(goal_mb)) +
                        " MB: " + (mb(big) <= goal_mb ? "met" : "NOT MET");
    if (!sh.time_goal)
      goals += std::string(", aim <= 512 MB: ") + (mb(big) <= aim_mb ? "met" : "not met");
    else
      goals +=
          std::string(", time per case <= 1.2x 1M's: ") + (ratio <= time_goal ? "met" : "NOT MET");
    std::printf("%-34s %11llu %9.2f %8.2f %9.2f %9.1f  %s\n", sh.name,
                static_cast<unsigned long long>(big_grid.cases()), big.wall, us(big, big_grid),
                ratio, mb(big), goals.c_str());
  }
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  // The host-alone child, started again by the parent (below) so that it runs under the same
  // malloc settings as `mira run`: --host-alone-child J STUDY_ARGV...
  if (argc > 3 && std::string(argv[1]) == "--host-alone-child")
    return host_alone({argv + 3, argv + argc}, std::strtoull(argv[2], nullptr, 10));
  auto opts = parse(argc, argv);
  if (!opts) {
    std::fputs(usage, stderr);
    return 2;
  }
  const options& o = *opts;
  bench_runs runs(o);
  if (!o.scale.empty()) return scale_report(runs, o);
  int rc = 0;

  std::vector<mode> saved_modes;
  if (!o.dry_only) {
    saved_modes.push_back(mode::compact);
    if (o.per_case) saved_modes.push_back(mode::per_case);
  }
  // Each mode's fixed cost (start-up, listing, writer threads), subtracted from its bytes kept
  // per case so that they say what a case costs and not what a run does.
  std::map<mode, outcome> one;
  std::vector<mode> modes;
  if (o.host_alone) modes.push_back(mode::host_alone);
  modes.push_back(mode::dry);
  modes.insert(modes.end(), saved_modes.begin(), saved_modes.end());
  for (auto m : modes) one[m] = runs.run(grid{}, m);

  std::printf("run_end_to_end -j %zu, %zu target(s) x %zu trial(s), %zu round(s); 1-case runs:",
              o.j, o.targets, o.trials, o.rounds);
  for (auto m : modes) std::printf(" %s %.1f MiB", name_of(m), one[m].rss_mib);
  std::printf(" peak RSS\n");
  std::printf("%10s %-10s %8s %11s %11s %12s %9s %14s %13s\n", "cases", "mode", "wall_s",
              "wall_us/case", "host_cpu_us", "study_cpu_us", "rss_mib", "kept_B/case",
              "folder_B/case");

  auto print = [&](std::uint64_t cases, mode m, const outcome& r) {
    auto per_case = [&](double x) { return x / static_cast<double>(cases); };
    if (!r.ok()) {
      std::fprintf(stderr, "run_end_to_end: %s of %llu cases exited with status %d\n", name_of(m),
                   static_cast<unsigned long long>(cases), r.status);
      rc = 1;
    }
    std::printf("%10llu %-10s %8.2f %11.2f %11.2f %12.2f %9.1f %14.0f ",
                static_cast<unsigned long long>(cases), name_of(m), r.wall, per_case(r.wall) * 1e6,
                per_case(r.host_cpu()) * 1e6, per_case(r.study_cpu) * 1e6, r.rss_mib,
                per_case((r.rss_mib - one[m].rss_mib) * 1048576.0));
    if (saved(m))
      std::printf("%13.0f\n", per_case(static_cast<double>(r.folder_bytes)));
    else
      std::printf("%13s\n", "-");
  };

  std::vector<size_figures> figures;
  for (auto n : o.sizes) {
    size_figures f;
    auto g = runs.grid_for(n);
    f.cases = g.cases();
    if (f.cases != n)
      std::printf("(-n %llu: %llu cases, whole samples of %zu x %zu)\n",
                  static_cast<unsigned long long>(n), static_cast<unsigned long long>(f.cases),
                  o.targets, o.trials);
    auto us = [&](double s) { return s / static_cast<double>(f.cases) * 1e6; };
    // Host alone and dry run in alternation, so both see the same load on a shared machine.
    std::vector<outcome> alone, dry;
    for (std::size_t r = 0; r < o.rounds; ++r) {
      if (o.host_alone) {
        alone.push_back(runs.run(g, mode::host_alone));
        print(f.cases, mode::host_alone, alone.back());
      }
      dry.push_back(runs.run(g, mode::dry));
      print(f.cases, mode::dry, dry.back());
    }
    auto best = [](const std::vector<outcome>& v, auto field) {
      double b = field(v[0]);
      for (auto& r : v) b = std::min(b, field(r));
      return b;
    };
    auto cpu = [](const outcome& r) { return r.host_cpu(); };
    auto wall = [](const outcome& r) { return r.wall; };
    auto rss = [](const outcome& r) { return r.rss_mib; };
    f.dry = *std::min_element(dry.begin(), dry.end(),
                              [](const outcome& a, const outcome& b) { return a.wall < b.wall; });
    if (o.host_alone) {
      std::vector<double> paired;
      for (std::size_t r = 0; r < o.rounds; ++r)
        paired.push_back(us(dry[r].host_cpu() - alone[r].host_cpu()));
      std::printf(
          "  host alone: %.2f us of CPU per case (best round), %.2f s wall; mira run --dry-run: "
          "%.2f us, %.2f s, %.1f MiB peak\n",
          us(best(alone, cpu)), best(alone, wall), us(best(dry, cpu)), best(dry, wall),
          best(dry, rss));
      std::printf(
          "  orchestration's own cost: %.2f us of CPU per case (best rounds), %.2f (median of "
          "the paired rounds); kept: %.0f bytes per case beyond the 1-case run\n",
          us(best(dry, cpu)) - us(best(alone, cpu)), median(paired),
          (best(dry, rss) - one[mode::dry].rss_mib) * 1048576.0 / static_cast<double>(f.cases));
    }
    for (auto m : saved_modes) {
      f.saved_modes[m] = runs.run(g, m);
      print(f.cases, m, f.saved_modes[m]);
    }
    figures.push_back(std::move(f));
  }

  // The sizes side by side, as issue #27 states its bounds: the dry run's time per case against
  // the smallest size's (best rounds), and each saved run's wall time against its size's dry run.
  std::printf("\nby size (dry: best round; x smallest: us/case over the smallest size's)\n");
  std::printf("%10s %12s %10s %11s %10s %9s %14s", "cases", "dry_wall_us", "x_smallest",
              "dry_cpu_us", "x_smallest", "dry_rss", "dry_kept_B");
  for (auto m : saved_modes) {
    std::string name = name_of(m);
    std::printf(" %15s %12s %15s", (name + "_x_dry").c_str(), (name + "_rss").c_str(),
                (name + "_B/case").c_str());
  }
  std::printf("\n");
  auto& base = *figures.front().dry;
  auto per = [](double x, std::uint64_t n) { return x / static_cast<double>(n) * 1e6; };
  for (auto& f : figures) {
    auto& d = *f.dry;
    std::printf("%10llu %12.3f %10.2f %11.3f %10.2f %9.1f %14.0f",
                static_cast<unsigned long long>(f.cases), per(d.wall, f.cases),
                per(d.wall, f.cases) / per(base.wall, figures.front().cases),
                per(d.host_cpu(), f.cases),
                per(d.host_cpu(), f.cases) / per(base.host_cpu(), figures.front().cases), d.rss_mib,
                (d.rss_mib - one[mode::dry].rss_mib) * 1048576.0 / static_cast<double>(f.cases));
    for (auto m : saved_modes) {
      auto& s = f.saved_modes.at(m);
      std::printf(" %15.2f %12.1f %15.0f", s.wall / d.wall, s.rss_mib,
                  static_cast<double>(s.folder_bytes) / static_cast<double>(f.cases));
    }
    std::printf("\n");
  }
  return rc;
}
