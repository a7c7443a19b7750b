// The cheapest possible study, for measuring the host: it answers every `run` at once with a
// canned RunResult (about 560 bytes), reading and writing in large chunks. It does not parse
// JSON; it finds "id" and "method" by scanning, which is all a benchmark peer needs.
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

constexpr std::string_view run_result =
    R"({"eval":"bench","sample":"s","target":"sim","input":["What is the answer?"],)"
    R"("expected":"42","passed":true,"aggregate":1.0,"scores":[{"scorer":"contains",)"
    R"("value":1.0,"pass":true,"reason":"found \"42\""},{"scorer":"length","value":1.0,)"
    R"("pass":true,"reason":"short enough"}],"transcript":{"final_response":)"
    R"("Hi! The answer is 42. I looked it up and double-checked the arithmetic.",)"
    R"("iterations":2,"tool_calls_count":1,"tool_calls":["calculator"],"usage":)"
    R"({"input_tokens":120,"output_tokens":48,"cache_read_tokens":64,"reasoning_tokens":12,)"
    R"("cost_usd":0.00042},"timing":{"duration_ms":420,"time_to_first_token_ms":180},)"
    R"("metadata":{"trace":"https://example.invalid/t/1"}},"skipped":false})";

void answer(std::string_view line) {
  auto id = field(line, "\"id\":");
  auto method = field(line, "\"method\":");
  out += "{\"id\":";
  out += id;
  out += ",\"result\":";
  if (method == "\"run\"") {
    out += run_result;
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

int main() {
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
