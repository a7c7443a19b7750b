// Host throughput against a study, side by side with its floor.
//
//   host_throughput -n N -c C [-r ROUNDS] [--pin] [--two-threads] [--host-only]
//                   [--versus ARG | --against STUDY2] -- STUDY_CMD [ARGS...]
//
// For each round: the baseline (a no-JSON client that writes pre-formatted `run` lines over the
// same pipes, keeps C in flight and matches answers by scanning for the id) and then the host
// (host_handle: initialize, list, then N `run` requests with C in flight). Prints cases/s and
// host CPU microseconds per case for both, and their ratio: of the best round of each, and the
// median of each round's side-by-side ratio. At c = 1 it also prints the round trip's p50/p99
// for both and the host's overhead. --pin puts this process on CPU 0 and the study on CPU 1;
// --two-threads runs the C callers on a second thread and io_context (the host stays on the
// first).
//
// --versus ARG: no baseline; each round runs the host against STUDY_CMD and against STUDY_CMD
// ARG, the two in alternating order, and prints each side's median and the median of the
// rounds' side-by-side ratios (`--versus --typical`: typical answers against minimal ones).
// On a shared machine single runs of one binary vary by ±15 %, so many short rounds, paired,
// are the figure to read.
//
// --against STUDY2: the same, the other side being the program STUDY2 given STUDY_CMD's
// arguments (`--against sdk_echo_study -- echo_study`: the study SDK against the hand-written
// echo study).
#include "bench_util.hpp"

#include <mira/host.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace asio = boost::asio;

namespace {

struct figures {
  double cases_per_sec = 0;
  double cpu_us_per_case = 0;
  double p50_us = 0, p99_us = 0;  // round trip of one request (measured at c = 1)
};

double percentile_us(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  auto k = static_cast<std::size_t>(p / 100 * static_cast<double>(v.size() - 1));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return v[k] * 1e6;
}

// --- baseline: raw pipes, no JSON --------------------------------------------------------------

pid_t spawn(const std::vector<std::string>& argv, int& to_child, int& from_child) {
  int in[2], out[2];
  if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0) std::exit(1);
  pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(in[0], 0);
    ::dup2(out[1], 1);
    std::vector<char*> args;
    for (auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execvp(args[0], args.data());
    _exit(127);
  }
  ::close(in[0]);
  ::close(out[1]);
  to_child = in[1];
  from_child = out[0];
  ::fcntl(to_child, F_SETFL, O_NONBLOCK);
  return pid;
}

figures baseline(const std::vector<std::string>& study, std::size_t n, std::size_t c) {
  int w = -1, r = -1;
  pid_t pid = spawn(study, w, r);
  std::string outbuf, inbuf;
  std::int64_t next_id = 1;
  auto request = [&](std::string_view method, std::string_view params) {
    outbuf += "{\"id\":" + std::to_string(next_id++) + ",\"method\":\"";
    outbuf += method;
    outbuf += "\"";
    if (!params.empty()) {
      outbuf += ",\"params\":";
      outbuf += params;
    }
    outbuf += "}\n";
  };
  const std::string_view run_params = R"({"eval":"bench","sample":"s0","target":"sim"})";
  request("initialize", R"({"protocol_version":"1.1","host":"baseline"})");
  request("list", "");
  // The first two answers are initialize's and list's; runs in flight are sent minus the rest.
  std::size_t expected = 2 + n, answered = 0, sent = 0;
  auto runs_in_flight = [&] { return sent - (answered > 2 ? answered - 2 : 0); };
  std::vector<double> latencies;  // at c = 1 only: one request at a time
  auto sent_at = std::chrono::steady_clock::now();
  auto t0 = std::chrono::steady_clock::now();
  double cpu0 = bench::cpu_seconds();
  char buf[1 << 16];
  while (answered < expected) {
    while (sent < n && runs_in_flight() < c) {
      request("run", run_params);
      ++sent;
      sent_at = std::chrono::steady_clock::now();
    }
    pollfd fds[2] = {{r, POLLIN, 0}, {w, static_cast<short>(outbuf.empty() ? 0 : POLLOUT), 0}};
    ::poll(fds, 2, -1);
    if (!outbuf.empty() && (fds[1].revents & POLLOUT)) {
      auto k = ::write(w, outbuf.data(), outbuf.size());
      if (k > 0) outbuf.erase(0, static_cast<std::size_t>(k));
    }
    if (fds[0].revents & (POLLIN | POLLHUP)) {
      auto k = ::read(r, buf, sizeof buf);
      if (k <= 0) break;
      inbuf.append(buf, static_cast<std::size_t>(k));
      std::size_t start = 0;
      for (;;) {
        auto nl = inbuf.find('\n', start);
        if (nl == std::string::npos) break;
        // Match the answer to its request the cheapest way: read the id.
        auto id_pos = inbuf.find("\"id\":", start);
        if (id_pos < nl) (void)std::strtoll(inbuf.c_str() + id_pos + 5, nullptr, 10);
        ++answered;
        if (c == 1 && answered > 2)
          latencies.push_back(
              std::chrono::duration<double>(std::chrono::steady_clock::now() - sent_at).count());
        start = nl + 1;
      }
      inbuf.erase(0, start);
    }
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  double cpu = bench::cpu_seconds() - cpu0;
  ::close(w);
  ::close(r);
  ::waitpid(pid, nullptr, 0);
  return {static_cast<double>(n) / secs, cpu / static_cast<double>(n) * 1e6,
          percentile_us(latencies, 50), percentile_us(latencies, 99)};
}

// --- the host ----------------------------------------------------------------------------------

figures through_host(const std::vector<std::string>& study, std::size_t n, std::size_t c,
                     bool two_threads) {
  asio::io_context ctx;
  // With two threads the callers (the C coroutines) run on their own io_context and thread;
  // the host's connection stays on `ctx`.
  asio::io_context callers_ctx;
  auto callers_work = asio::make_work_guard(callers_ctx);
  std::thread callers_thread;
  if (two_threads) callers_thread = std::thread([&] { callers_ctx.run(); });
  asio::io_context& worker_ctx = two_threads ? callers_ctx : ctx;
  figures f;
  asio::co_spawn(
      ctx,
      [&]() -> asio::awaitable<void> {
        auto host = co_await bench::start_study(ctx.get_executor(), study);
        auto list = co_await host.list_all();
        if (!list || list->evals.empty()) std::exit(1);
        mira::protocol::run_params p;
        p.eval = list->evals[0].name;
        p.sample = list->evals[0].samples.at(0).id;
        p.target = list->evals[0].targets.at(0).label;
        std::size_t next = 0, failures = 0, workers_left = c;
        auto t0 = std::chrono::steady_clock::now();
        double cpu0 = bench::cpu_seconds();
        asio::steady_timer done(ctx, std::chrono::steady_clock::time_point::max());
        std::vector<double> latencies;
        auto worker = [&]() -> asio::awaitable<void> {
          while (next < n) {
            ++next;
            auto sent_at = std::chrono::steady_clock::now();
            auto [ec, r] = co_await host.run(p, asio::as_tuple(asio::use_awaitable));
            if (c == 1)
              latencies.push_back(
                  std::chrono::duration<double>(std::chrono::steady_clock::now() - sent_at)
                      .count());
            if (ec || !r.passed) ++failures;
          }
          if (--workers_left == 0) asio::post(ctx, [&] { done.cancel(); });
        };
        for (std::size_t i = 0; i < c; ++i) asio::co_spawn(worker_ctx, worker(), asio::detached);
        co_await done.async_wait(asio::as_tuple(asio::use_awaitable));
        double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        double cpu = bench::cpu_seconds() - cpu0;
        if (failures) std::fprintf(stderr, "host_throughput: %zu failed runs\n", failures);
        f = {static_cast<double>(n) / secs, cpu / static_cast<double>(n) * 1e6,
             percentile_us(latencies, 50), percentile_us(latencies, 99)};
        co_await host.shutdown();
      },
      asio::detached);
  ctx.run();
  callers_work.reset();
  if (callers_thread.joinable()) callers_thread.join();
  return f;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  auto m = v.size() / 2;
  return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

// The middle half of v: its first and third quartiles, as "a-b".
std::string quartiles(std::vector<double> v, const char* format) {
  std::sort(v.begin(), v.end());
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v[v.size() / 4], v[(3 * v.size()) / 4]);
  return buf;
}

int versus(const std::vector<std::string>& study, const std::vector<std::string>& other,
           const std::string& label, std::size_t n, std::size_t c, std::size_t rounds,
           bool two_threads, bool pin) {
  std::vector<double> cps[2], cpu[2], by_cps, by_cpu;
  for (std::size_t round = 0; round < rounds; ++round) {
    figures f[2];
    for (std::size_t k = 0; k < 2; ++k) {
      std::size_t side = (round + k) % 2;  // who goes first alternates: drift hits both alike
      f[side] = through_host(side ? other : study, n, c, two_threads);
    }
    for (std::size_t side = 0; side < 2; ++side) {
      cps[side].push_back(f[side].cases_per_sec);
      cpu[side].push_back(f[side].cpu_us_per_case);
    }
    by_cps.push_back(f[1].cases_per_sec / f[0].cases_per_sec);
    by_cpu.push_back(f[0].cpu_us_per_case / f[1].cpu_us_per_case);
  }
  std::printf("host_throughput n=%zu c=%zu rounds=%zu%s%s versus '%s' (medians, quartiles)\n", n, c,
              rounds, pin ? " pinned" : "", two_threads ? " two-threads" : "", label.c_str());
  const char* names[2] = {"plain", label.c_str()};
  for (std::size_t side = 0; side < 2; ++side)
    std::printf("%-12s cases_per_sec %.0f (%s) host_cpu_us_per_case %.3f (%s)\n", names[side],
                median(cps[side]), quartiles(cps[side], "%.0f-%.0f").c_str(), median(cpu[side]),
                quartiles(cpu[side], "%.3f-%.3f").c_str());
  std::printf("ratio %s/plain by cases/s %.3f (%s), by host CPU %.3f (%s)\n", label.c_str(),
              median(by_cps), quartiles(by_cps, "%.3f-%.3f").c_str(), median(by_cpu),
              quartiles(by_cpu, "%.3f-%.3f").c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  auto args = bench::parse_args(argc, argv, {"--host-only", "--two-threads", "--pin"});
  std::size_t n = args.number("-n", 100000), c = args.number("-c", 64),
              rounds = args.number("-r", 3);
  bool host_only = args.has("--host-only");  // for profiling the host alone
  bool two_threads = args.has("--two-threads");
  auto study = args.study;
  auto other = study;
  std::string label;
  if (auto it = args.options.find("--versus"); it != args.options.end()) {
    other.push_back(it->second);
    label = it->second;
  } else if (auto a = args.options.find("--against"); a != args.options.end() && !other.empty()) {
    other[0] = a->second;
    label = a->second.substr(a->second.rfind('/') + 1);
  }
  if (study.empty() || n == 0 || c == 0 || rounds == 0) {
    std::fprintf(stderr,
                 "usage: host_throughput -n N -c C [-r ROUNDS] [--pin] [--two-threads] "
                 "[--host-only] [--versus ARG | --against STUDY2] -- STUDY_CMD [ARGS...]\n");
    return 2;
  }
  // --pin: this process (baseline client or host) on CPU 0, the study on CPU 1. Unpinned, the
  // scheduler sometimes puts client and study on one CPU, where they trade large batches
  // without cross-CPU wake-ups: the baseline then jumps from ~0.8 to 1.4-4.2 million cases/s
  // from one round to the next, and the ratio means little.
  bool pin = args.has("--pin") && std::thread::hardware_concurrency() >= 2;
  if (pin) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(0, &set);
    if (::sched_setaffinity(0, sizeof set, &set) != 0) pin = false;
  }
  if (pin) {
    study.insert(study.begin(), {"taskset", "-c", "1"});
    other.insert(other.begin(), {"taskset", "-c", "1"});
  }
  if (!label.empty()) return versus(study, other, label, n, c, rounds, two_threads, pin);
  figures best_base, best_host;
  std::vector<double> paired;
  for (std::size_t round = 0; round < rounds; ++round) {
    auto b = host_only ? figures{1, 0} : baseline(study, n, c);
    auto h = through_host(study, n, c, two_threads);
    if (b.cases_per_sec > best_base.cases_per_sec) best_base = b;
    if (h.cases_per_sec > best_host.cases_per_sec) best_host = h;
    paired.push_back(h.cases_per_sec / b.cases_per_sec);
  }
  std::sort(paired.begin(), paired.end());
  std::printf("host_throughput n=%zu c=%zu rounds=%zu%s%s (best round of each)\n", n, c, rounds,
              pin ? " pinned" : "", two_threads ? " two-threads" : "");
  std::printf("baseline cases_per_sec %.0f host_cpu_us_per_case %.2f\n", best_base.cases_per_sec,
              best_base.cpu_us_per_case);
  std::printf("host     cases_per_sec %.0f host_cpu_us_per_case %.2f\n", best_host.cases_per_sec,
              best_host.cpu_us_per_case);
  std::printf("ratio host/baseline %.2f (median of the rounds' paired ratios %.2f)\n",
              best_host.cases_per_sec / best_base.cases_per_sec, paired[paired.size() / 2]);
  if (c == 1 && !host_only)
    std::printf(
        "round trip us: baseline p50 %.1f p99 %.1f, host p50 %.1f p99 %.1f; "
        "overhead p50 %.1f p99 %.1f\n",
        best_base.p50_us, best_base.p99_us, best_host.p50_us, best_host.p99_us,
        best_host.p50_us - best_base.p50_us, best_host.p99_us - best_base.p99_us);
  return 0;
}
