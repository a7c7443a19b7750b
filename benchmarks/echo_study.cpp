// The cheapest possible study, for measuring the host: it answers every `run` at once, reading
// and writing in large chunks. It does not parse JSON; it finds "id", "method" and "params" by
// scanning, which is all a benchmark peer needs.
//   (default)   a minimal valid RunResult that echoes the case identity (~230 bytes)
//   --typical   a typical RunResult with scores, usage, timing and metadata (~680 bytes)
#include "typical_result.hpp"

#include <unistd.h>

#include <cstdint>
#include <cstdio>
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
    out += R"({"evals":[{"name":"bench","samples":[{"id":"s"}],"scorers":["contains"],)"
           R"("targets":[{"label":"sim","provider":"sim","available":true}]}]})";
  } else {
    out += R"({"cancelled":false})";
  }
  out += "}\n";
}

}  // namespace

int main(int argc, char** argv) {
  typical = argc > 1 && std::string_view(argv[1]) == "--typical";
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
    flush_out();
  }
  return 0;
}
