// The cheapest possible study, for measuring the host: it answers every `run` at once, reading
// and writing in large chunks. It does not parse JSON; it finds "id", "method" and "params" by
// scanning, which is all a benchmark peer needs.
//   (default)   a minimal valid RunResult that echoes the case identity (~230 bytes)
//   --typical   a typical RunResult with scores, usage, timing and metadata (~680 bytes)
//   --samples N the eval lists N samples ("s0".."s<N-1>") in pages of 500 (list_samples)
//   --targets K the eval has K targets: sim, sim1, ... (default 1)
//   --trials T  the eval's listing says `trials: T` (default 1), so that the plan has
//               samples x targets x T cases: a 10 000 000-case run without a 10 000 000-sample
//               listing (which would cost the host its own memory and time, not the run's)
//   --hold N    keep every answer until N runs have arrived, then send them all (requests
//               held in flight, for measuring the host's memory per request)
//   --cpu-report PATH  at exit, write this process's CPU seconds to PATH
#include "typical_result.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

namespace {

std::string out;

void flush_out() {
  std::size_t done = 0;
  while (done < out.size()) {
    auto n = ::write(1, out.data() + done, out.size() - done);
    if (n <= 0) _exit(1);
    done += static_cast<std::size_t>(n);
  }
  out.clear();
}

std::string_view field(std::string_view line, std::string_view key) {
  auto pos = line.find(key);
  if (pos == std::string_view::npos) return {};
  pos += key.size();
  auto end = pos;
  while (end < line.size() && line[end] != ',' && line[end] != '}') ++end;
  return line.substr(pos, end - pos);
}

bool typical = false;
long samples = 1;
long hold = 0;
long runs_seen = 0;
long targets = 1;
long trials = 1;
constexpr long page_size = 500;

// Samples [from, min(from + page_size, samples)) and the cursor of the page after.
void page(long from) {
  out += "\"samples\":[";
  for (long i = from; i < from + page_size && i < samples; ++i) {
    if (i > from) out += ',';
    out += "{\"id\":\"s" + std::to_string(i) + "\"}";
  }
  out += "]";
  if (from + page_size < samples)
    out += ",\"next_cursor\":\"" + std::to_string(from + page_size) + "\"";
}

// The request's params object, e.g. {"eval":"e","sample":"s","target":"t"}.
std::string_view params_of(std::string_view line) {
  auto pos = line.find("\"params\":{");
  if (pos == std::string_view::npos) return {};
  auto start = pos + 9;
  auto end = line.find('}', start);  // run params hold no nested objects but `params`
  auto nested = line.find('{', start + 1);
  if (nested < end) end = line.find('}', line.find('}', start) + 1);
  return end == std::string_view::npos ? std::string_view{} : line.substr(start, end - start + 1);
}

void answer(std::string_view line) {
  auto id = field(line, "\"id\":");
  auto method = field(line, "\"method\":");
  if (method == "\"run\"") ++runs_seen;
  out += "{\"id\":";
  out += id;
  out += ",\"result\":";
  if (method == "\"run\"" && typical) {
    out += bench::typical_run_result;
  } else if (method == "\"run\"") {
    auto params = params_of(line);
    out += params.substr(0, params.size() - 1);  // the identity, echoed
    out += R"(,"passed":true,"aggregate":1.0,"scores":[{"scorer":"echo","value":1.0,)"
           R"("pass":true,"reason":"echo"}],"transcript":{"final_response":"","iterations":0,)"
           R"("tool_calls_count":0,"usage":{"input_tokens":0,"output_tokens":0,"cost_usd":0.0}},)"
           R"("skipped":false})";
  } else if (method == "\"initialize\"") {
    out += R"({"protocol_version":"1.1","study":"echo","evals":1,"capabilities":["cancel"]})";
  } else if (method == "\"list\"") {
    out += R"({"evals":[{"name":"bench",)";
    if (trials > 1) out += "\"trials\":" + std::to_string(trials) + ",";
    page(0);
    out += R"(,"scorers":["contains"],"targets":[)";
    for (long t = 0; t < targets; ++t) {
      out += t ? R"(,{"label":"sim)" + std::to_string(t) + "\"" : std::string(R"({"label":"sim")");
      out += R"(,"provider":"sim","available":true})";
    }
    out += "]}]}";
  } else if (method == "\"list_samples\"") {
    auto cursor = field(line, "\"cursor\":");
    out += "{";
    page(std::strtol(std::string(cursor.substr(1)).c_str(), nullptr, 10));
    out += "}";
  } else {
    out += R"({"cancelled":false})";
  }
  out += "}\n";
}

}  // namespace

void report_cpu(const char* path) {
  if (!path) return;
  rusage ru{};
  ::getrusage(RUSAGE_SELF, &ru);
  if (FILE* f = std::fopen(path, "w")) {
    std::fprintf(f, "%.3f\n",
                 static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
                     static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6);
    std::fclose(f);
  }
}

int main(int argc, char** argv) {
  const char* cpu_report = nullptr;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "--typical")
      typical = true;
    else if (arg == "--samples" && i + 1 < argc)
      samples = std::strtol(argv[++i], nullptr, 10);
    else if (arg == "--targets" && i + 1 < argc)
      targets = std::strtol(argv[++i], nullptr, 10);
    else if (arg == "--trials" && i + 1 < argc)
      trials = std::strtol(argv[++i], nullptr, 10);
    else if (arg == "--hold" && i + 1 < argc)
      hold = std::strtol(argv[++i], nullptr, 10);
    else if (arg == "--cpu-report" && i + 1 < argc)
      cpu_report = argv[++i];
  }
  std::string in;
  char buf[1 << 16];
  for (;;) {
    auto n = ::read(0, buf, sizeof buf);
    if (n <= 0) break;
    in.append(buf, static_cast<std::size_t>(n));
    std::size_t start = 0;
    for (;;) {
      auto nl = in.find('\n', start);
      if (nl == std::string::npos) break;
      if (nl > start) answer(std::string_view(in).substr(start, nl - start));
      start = nl + 1;
    }
    in.erase(0, start);
    if (runs_seen == 0 || runs_seen >= hold) flush_out();
  }
  flush_out();
  report_cpu(cpu_report);
  return 0;
}
