// An LD_PRELOAD module that times a process's read and write system calls on descriptors
// above 2 (the study's pipes, for the host; a study's own stdin and stdout are not counted)
// and prints, at exit, their count and mean wall time. With B=build-release/benchmarks:
//   LD_PRELOAD=$PWD/$B/libtime_rw.so $B/host_throughput -n 100000 -c 64 -r 1 --pin
//       --host-only -- $B/echo_study
// What the kernel charges the host per request write (waking a study that went idle) and per
// read: `perf` cannot say in a VM without a PMU, where time spent with interrupts off is
// sampled at the instruction that turns them back on.
#include <dlfcn.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>

namespace {

using read_fn = ssize_t (*)(int, void*, size_t);
using write_fn = ssize_t (*)(int, const void*, size_t);

struct tally {
  std::atomic<long long> calls{0}, nanos{0};

  void add(long long ns) {
    calls.fetch_add(1, std::memory_order_relaxed);
    nanos.fetch_add(ns, std::memory_order_relaxed);
  }
  double mean_us() const {
    auto n = calls.load();
    return n ? static_cast<double>(nanos.load()) / static_cast<double>(n) / 1e3 : 0.0;
  }
};

tally reads, writes;

long long now_ns() {
  timespec t{};
  ::clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1'000'000'000LL + t.tv_nsec;
}

template <class Fn>
Fn next(const char* name) {
  return reinterpret_cast<Fn>(::dlsym(RTLD_NEXT, name));
}

// Runs as the module unloads, after main returned.
struct report {
  ~report() {
    char comm[32] = {};
    if (FILE* f = std::fopen("/proc/self/comm", "r")) {
      if (!std::fgets(comm, sizeof comm, f)) comm[0] = 0;
      std::fclose(f);
    }
    comm[std::strcspn(comm, "\n")] = 0;
    std::fprintf(stderr, "time_rw %s: %lld writes, mean %.2f us; %lld reads, mean %.2f us\n", comm,
                 writes.calls.load(), writes.mean_us(), reads.calls.load(), reads.mean_us());
  }
} at_exit;

}  // namespace

extern "C" ssize_t write(int fd, const void* buf, size_t n) {
  static auto real = next<write_fn>("write");
  if (fd <= 2) return real(fd, buf, n);
  auto t0 = now_ns();
  auto r = real(fd, buf, n);
  int saved = errno;
  if (r > 0) writes.add(now_ns() - t0);
  errno = saved;
  return r;
}

extern "C" ssize_t read(int fd, void* buf, size_t n) {
  static auto real = next<read_fn>("read");
  if (fd <= 2) return real(fd, buf, n);
  auto t0 = now_ns();
  auto r = real(fd, buf, n);
  int saved = errno;
  if (r > 0) reads.add(now_ns() - t0);  // a read that would block is not a read
  errno = saved;
  return r;
}
