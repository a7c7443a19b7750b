// The two run layouts side by side: N saved echo-sized case records written through
// batch_writer into the per-case layout (a folder and a file per case) and through
// segment_writer into the compact one (NDJSON segments), then read back as a resume would.
//
//   store_layouts [-n N] [-r ROUNDS] [-d DIR] [--typical]
//
// Prints per layout and round: wall seconds from opening the writer to every record durable,
// cases/s, disk usage (st_blocks * 512 summed over the tree, folders included) and the
// read-back time (run_folder::load_cases / read_segments); then the compact layout's speed-up
// and disk saving. The records are built before the clock starts; both layouts get the same.
// DIR (default: a folder beside this binary, i.e. under the build directory) must be on the
// disk to measure; what is written is removed afterwards.
#include "typical_result.hpp"

#include "store/batch_writer.hpp"
#include "store/run_folder.hpp"
#include "store/segment_log.hpp"

#include <boost/json/parse.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using clock_type = std::chrono::steady_clock;

namespace {

struct record {
  std::string key;
  std::string json;  // one line, no '\n'
};

// What `mira run` saves for a case of the echo study: the study's result (the identity echoed,
// one score, an empty transcript; or the typical result with --typical) and the host's fields.
std::vector<record> make_records(std::size_t n, bool typical) {
  std::vector<record> out;
  out.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    std::string sample = "s";  // not "s" + to_string(i): a g++ 12 -Wrestrict false positive
    sample += std::to_string(i);
    record r;
    r.key = "bench/" + sample + "@sim";
    std::string result;
    if (typical) {
      result = bench::typical_run_result;
      result.pop_back();  // the closing brace
    } else {
      result =
          R"({"eval":"bench","sample":")" + sample +
          R"(","target":"sim","input":null,"expected":null,"metadata":{})"
          R"(,"passed":true,"aggregate":1.0,"scores":[{"scorer":"echo","value":1.0,)"
          R"("pass":true,"reason":"echo"}],"transcript":{"final_response":"","iterations":0,)"
          R"("tool_calls_count":0,"usage":{"input_tokens":0,"output_tokens":0,"cost_usd":0.0}},)"
          R"("skipped":false)";
    }
    r.json = result + R"(,"key":")" + r.key + R"(","status":"passed","attempts":1,"latency_ms":)" +
             std::to_string(0.2 + static_cast<double>(i % 1000) / 1000.0).substr(0, 5) + "}";
    out.push_back(std::move(r));
  }
  return out;
}

double disk_bytes(const fs::path& root) {
  auto blocks = [](const fs::path& p) {
    struct stat st {};
    return ::lstat(p.c_str(), &st) == 0 ? static_cast<double>(st.st_blocks) * 512.0 : 0.0;
  };
  double total = blocks(root);
  for (auto& e : fs::recursive_directory_iterator(root)) total += blocks(e.path());
  return total;
}

double since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

struct figures {
  double seconds = 0, disk = 0, read_seconds = 0;
  std::size_t failed = 0, read_back = 0;
};

figures per_case(const fs::path& root, const std::vector<record>& records) {
  figures f;
  auto t0 = clock_type::now();
  auto folder = mira::store::run_folder::create(root, "per-case");
  if (!folder) {
    std::fprintf(stderr, "%s\n", folder.error().message().c_str());
    std::exit(1);
  }
  std::atomic<std::size_t> failed{0};
  {
    mira::store::batch_writer writer(folder->path());
    for (auto& r : records)
      writer.submit(folder->case_file(r.key), r.json + "\n",
                    [&failed](boost::system::error_code ec) { failed += ec ? 1 : 0; });
    writer.drain();
    f.seconds = since(t0);
  }
  f.failed = failed;
  f.disk = disk_bytes(folder->path());
  auto t1 = clock_type::now();
  f.read_back = folder->load_cases().size();
  f.read_seconds = since(t1);
  return f;
}

figures compact(const fs::path& root, const std::vector<record>& records) {
  figures f;
  auto dir = root / "compact" / "segments";
  auto t0 = clock_type::now();
  auto writer = mira::store::segment_writer::open(dir);
  if (!writer) {
    std::fprintf(stderr, "%s\n", writer.error().message().c_str());
    std::exit(1);
  }
  std::atomic<std::size_t> failed{0};
  for (auto& r : records)
    (*writer)->submit(r.key, r.json,
                      [&failed](boost::system::error_code ec) { failed += ec ? 1 : 0; });
  (*writer)->drain();
  f.seconds = since(t0);
  writer->reset();
  f.failed = failed;
  f.disk = disk_bytes(root / "compact");
  auto t1 = clock_type::now();
  // Parsed into objects, as the per-case side's load_cases does and a resume needs.
  for (auto& r : mira::store::read_segments(dir).records)
    f.read_back += boost::json::parse(r.json).is_object();
  f.read_seconds = since(t1);
  return f;
}

void print(const char* name, const figures& f, std::size_t n) {
  std::printf("  %-9s %8.3f s %10.0f cases/s  disk %9.1f MB (%6.0f bytes/case)  read back %6.3f s",
              name, f.seconds, static_cast<double>(n) / f.seconds, f.disk / 1e6,
              f.disk / static_cast<double>(n), f.read_seconds);
  if (f.failed || f.read_back != n)
    std::printf("  [%zu failed, %zu read back]", f.failed, f.read_back);
  std::printf("\n");
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t n = 100000, rounds = 1;
  bool typical = false;
  fs::path base = fs::absolute(argv[0]).parent_path();
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--typical") {
      typical = true;
    } else if (i + 1 < argc && (a == "-n" || a == "-r" || a == "-d")) {
      std::string v = argv[++i];
      if (a == "-n") n = std::strtoull(v.c_str(), nullptr, 10);
      if (a == "-r") rounds = std::strtoull(v.c_str(), nullptr, 10);
      if (a == "-d") base = v;
    } else {
      std::fprintf(stderr, "usage: store_layouts [-n N] [-r ROUNDS] [-d DIR] [--typical]\n");
      return 2;
    }
  }
  auto records = make_records(n, typical);
  double bytes = 0;
  for (auto& r : records) bytes += static_cast<double>(r.json.size());
  auto root = base / ("store_layouts.tmp-" + std::to_string(::getpid()));
  std::printf("store_layouts: %zu records, %.0f bytes of JSON each on average (%s), in %s\n", n,
              bytes / static_cast<double>(n), typical ? "typical result" : "minimal echo result",
              root.c_str());
  for (std::size_t round = 1; round <= rounds; ++round) {
    fs::remove_all(root);
    fs::create_directories(root);
    ::sync();  // nothing left over from before is flushed on either layout's clock
    auto a = per_case(root, records);
    ::sync();
    auto b = compact(root, records);
    std::printf("round %zu\n", round);
    print("per-case", a, n);
    print("compact", b, n);
    std::printf("  compact vs per-case: %.1fx faster, %.1fx less disk, read back %.1fx faster\n",
                a.seconds / b.seconds, a.disk / b.disk, a.read_seconds / b.read_seconds);
    std::fflush(stdout);
    fs::remove_all(root);
  }
  return 0;
}
