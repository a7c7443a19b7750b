// The echo study written on the study SDK, for measuring the SDK against the hand-written
// echo_study (benchmarks/echo_study.cpp) through the same host: it parses every request,
// dispatches each case as its own coroutine, scores it and writes a whole RunResult, where
// echo_study only scans and pastes. Options as echo_study's:
//   --samples N  the eval lists N samples ("s0".."s<N-1>"), 500 to a page
//   --targets K  the eval has K targets: sim, sim1, ...
//   --trials T   the eval's listing says `trials: T`
//   --case-events  the SDK's started/finished events around each case (off by default here, as
//                  echo_study sends none; `host_throughput --versus --case-events --
//                  sdk_echo_study` measures what they cost)
#include <mira/study.hpp>

#include <cstdlib>
#include <cstring>
#include <string>

namespace asio = boost::asio;
namespace study = mira::study;
using mira::protocol::transcript;

int main(int argc, char** argv) {
  long samples = 1, targets = 1, trials = 1;
  study::serve_options o;
  o.case_events = false;
  for (int i = 1; i < argc; ++i) {
    bool has_value = i + 1 < argc;
    if (!std::strcmp(argv[i], "--case-events"))
      o.case_events = true;
    else if (has_value && !std::strcmp(argv[i], "--samples"))
      samples = std::strtol(argv[++i], nullptr, 10);
    else if (has_value && !std::strcmp(argv[i], "--targets"))
      targets = std::strtol(argv[++i], nullptr, 10);
    else if (has_value && !std::strcmp(argv[i], "--trials"))
      trials = std::strtol(argv[++i], nullptr, 10);
  }
  study::registry s("sdk-echo", "1");
  auto& e = s.add("bench");
  e.samples(study::sample_generator{
      static_cast<std::size_t>(samples),
      [](std::size_t i) { return study::sample{"s" + std::to_string(i)}; },
      [samples](std::string_view id) -> std::optional<std::size_t> {
        if (id.size() < 2 || id[0] != 's') return std::nullopt;
        auto i = std::strtoul(std::string(id.substr(1)).c_str(), nullptr, 10);
        return static_cast<long>(i) < samples ? std::optional<std::size_t>(i) : std::nullopt;
      }});
  for (long t = 0; t < targets; ++t) e.add_target(t ? "sim" + std::to_string(t) : "sim", "sim");
  e.trials(trials);
  e.score_with(study::make_scorer(
      "echo", [](const study::sample&, const transcript&) { return study::pass("echo", "echo"); }));
  e.subject([](study::run_context&) -> asio::awaitable<transcript> { co_return transcript(); });
  o.page_size = 500;
  o.max_in_flight = 1 << 16;
  return study::serve_stdio(s, o);
}
