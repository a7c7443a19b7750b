// Codec cost per line, side by side with plain Boost.JSON on the same bytes:
//   parse           boost::json::parse of a typical RunResult response line (the floor)
//   route           multiplexer::on_line for a request whose op does not decode on the hot path:
//                   classify the line with the result skimmed, route by id (no DOM)
//   route+decode    on_line for a `run`, as the host makes it: the op decodes the unskimmed
//                   result into run_result with the text decoder (the host's hot path)
//   dom decode      the same line through the DOM: parse into the arena, decode_run_result
//   encode run      the `run` request frame text, vs json::serialize of the same params and
//                   protocol::to_json_text of them (the writer of every other frame)
//   serialize/text result  a parsed RunResult (scores and costs are doubles) written back by
//                   json::serialize and by protocol::to_json_text (saved records, reports)
//
//   codec_throughput [-n ITERATIONS] [--hot] [--only STEP]
//
// --hot: only `route` and `route+decode`, the host's path, and `minimal`: route+decode of the
// echo study's minimal answer (295-byte result) — what a typical answer costs beyond it is what
// host_throughput's typical/minimal ratio measures. --only STEP: that step alone (profiles).
#include "typical_result.hpp"

#include <mira/protocol/codec.hpp>
#include <mira/protocol/json_text.hpp>
#include "connection/multiplexer.hpp"
#include "protocol/text_decoder.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string>

namespace json = boost::json;

namespace {

const std::string line = "{\"id\":7,\"result\":" + std::string(bench::typical_run_result) + "}";
// What `echo_study` answers a run without --typical.
const std::string minimal_line =
    R"({"id":7,"result":{"eval":"bench","sample":"s-000001","target":"sim","trial":0,)"
    R"("passed":true,"aggregate":1.0,"scores":[{"scorer":"echo","value":1.0,"pass":true,)"
    R"("reason":"echo"}],"transcript":{"final_response":"","iterations":0,"tool_calls_count":0,)"
    R"("usage":{"input_tokens":0,"output_tokens":0,"cost_usd":0.0}},"skipped":false}})";

struct pending : mira::detail::pending_op {};

// As the host's run requests: the result decoded on the multiplexer's hot path.
struct decoding : mira::detail::pending_op {
  bool decode_unchecked(std::string_view text) override {
    decoded = mira::protocol::detail::read_run_result_text(text, result);
    return decoded;
  }
  mira::protocol::run_result result;
  bool decoded = false;
};

// The thread's CPU time, not the wall clock: on a shared machine the wall clock counts the time
// other processes held the core, and the figures moved by a factor of two between runs.
double cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

std::string only;  // --only: the one step to run

template <class F>
void measure(const char* name, std::size_t n, std::size_t bytes, F&& f) {
  if (!only.empty() && only != name) return;
  for (std::size_t i = 0; i < n / 10; ++i) f(i);  // warm up
  double t0 = cpu_seconds();
  for (std::size_t i = 0; i < n; ++i) f(i);
  double s = cpu_seconds() - t0;
  std::printf("%-16s lines_per_sec %10.0f  MB_per_sec %7.1f  ns_per_line %6.0f\n", name,
              static_cast<double>(n) / s, static_cast<double>(n * bytes) / s / 1e6,
              s / static_cast<double>(n) * 1e9);
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t n = 300000;
  bool hot_only = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-n" && i + 1 < argc) {
      n = std::strtoull(argv[++i], nullptr, 10);
    } else if (a == "--hot") {
      hot_only = true;
    } else if (a == "--only" && i + 1 < argc) {
      only = argv[++i];
    } else {
      std::fprintf(stderr, "usage: codec_throughput [-n ITERATIONS] [--hot] [--only STEP]\n");
      return 2;
    }
  }
  std::size_t sink = 0;
  std::printf("codec_throughput: %zu-byte RunResult line, %zu iterations\n", line.size(), n);

  if (!hot_only) {
    measure("parse", n, line.size(), [&](std::size_t) {
      auto v = json::parse(line);
      sink += v.as_object().size();
    });
  }

  mira::detail::multiplexer mux;
  std::int64_t id = 7;
  auto route = [&](int decode, const std::string& text = line) {
    if (decode == 1)
      mux.add_request(id, "run", "{}", std::make_unique<decoding>());
    else
      mux.add_request(id, "run", "{}", std::make_unique<pending>());
    (void)mux.prepare_write();
    mux.on_write_done();
    auto in = mux.on_line(text);
    if (decode == 1) {
      auto& op = static_cast<decoding&>(*in.op);
      if (!op.decoded)
        (void)mira::protocol::detail::decode_run_result_text_into(in.result_text, op.result);
      sink += op.result.scores.size();
    } else if (decode == 2) {
      auto& v = mux.result_value(in);
      auto r = mira::protocol::decode_run_result(v, std::string(in.result_text));
      sink += r->scores.size();
    }
    sink += in.id != 0;
  };
  measure("route", n, line.size(), [&](std::size_t) { route(0); });
  measure("route+decode", n, line.size(), [&](std::size_t) { route(1); });
  if (hot_only) {
    measure("minimal", n, minimal_line.size(), [&](std::size_t) { route(1, minimal_line); });
    return sink == 0;
  }
  measure("dom decode", n, line.size(), [&](std::size_t) { route(2); });

  mira::protocol::run_params p;
  p.eval = "bench";
  p.sample = "sample-000123";
  p.target = "anthropic/claude-opus";
  p.params = {{"effort", "high"}};
  p.trial = 2;
  p.trials = 8;
  p.seed = 44;
  std::string out;
  out.reserve(256);
  measure("encode run", n, 120, [&](std::size_t) {
    out.clear();
    mira::protocol::append_json(out, p);
    sink += out.size();
  });
  measure("serialize run", n, 120, [&](std::size_t) {
    out = json::serialize(mira::protocol::encode(p));
    sink += out.size();
  });
  measure("to_json_text run", n, 120, [&](std::size_t) {
    out = mira::protocol::to_json_text(mira::protocol::encode(p));
    sink += out.size();
  });
  const auto result = json::parse(bench::typical_run_result);
  const auto result_bytes = std::string(bench::typical_run_result).size();
  measure("serialize result", n, result_bytes, [&](std::size_t) {
    out = json::serialize(result);
    sink += out.size();
  });
  measure("text result", n, result_bytes, [&](std::size_t) {
    out = mira::protocol::to_json_text(result);
    sink += out.size();
  });
  return sink == 0;  // keeps the work observable
}
