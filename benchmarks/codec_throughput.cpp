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
//   encode result   the typical RunResult written from its typed value by append_json, as a study
//                   answers (its input, expected and metadata held as values, as a study builds
//                   them); `result frame` adds the response line around it
//   record dom / record line    a finished case's saved record (its result the typical one, or
//                   the minimal one with `minimal`), as the host wrote it before
//                   (store::encode_case: the result parsed into a DOM, the host's members set,
//                   to_json_text; copied below as it was) and as store::case_line writes it
//                   straight from the record; the bytes are checked equal first
//   decode dom / decode record  the same record read back from its parsed object: the old
//                   decode_case (a copy of the object, the host's members erased, written out,
//                   decoded as a RunResult by the DOM decoder; copied below) and
//                   store::decode_case_record
//
//   codec_throughput [-n ITERATIONS] [--hot] [--only STEP]
//
// --hot: only `route` and `route+decode`, the host's path, and `minimal`: route+decode of the
// echo study's minimal answer (295-byte result) — what a typical answer costs beyond it is what
// host_throughput's typical/minimal ratio measures. --only STEP: that step alone (profiles).
#include "typical_result.hpp"

#include <mira/protocol/codec.hpp>
#include <mira/protocol/json_text.hpp>
#include <mira/store/records.hpp>
#include "connection/multiplexer.hpp"
#include "protocol/text_decoder.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <cmath>
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

// The saved record as the host built it before case_line: store::encode_case and decode_case as
// they were, the branches a passed case with a result takes (the reference for the figures).
json::object old_encode_case(const mira::plan::planned_case& c,
                             const mira::schedule::case_record& r) {
  boost::system::error_code ec;
  auto v = json::parse(r.result_json, ec);
  json::object o = !ec && v.is_object() ? std::move(v.as_object()) : json::object{};
  o["key"] = c.key;
  o["status"] = to_string(r.state);
  o["attempts"] = r.attempts;
  if (!r.retried.empty()) {
    json::array retried;
    for (auto& e : r.retried)
      retried.push_back(json::object{{"cause", e.cause}, {"message", e.message}});
    o["retried"] = std::move(retried);
  }
  if (!r.message.empty() && r.has_result()) o["host_message"] = r.message;
  if (r.attempts > 0) o["latency_ms"] = std::round(r.latency_seconds * 1e6) / 1e3;
  return o;
}

mira::schedule::case_record old_decode_case(const json::object& saved) {
  mira::schedule::case_record r;
  auto text = [&](std::string_view k) -> std::string {
    auto* v = saved.if_contains(k);
    return v && v->is_string() ? std::string(v->get_string()) : std::string();
  };
  if (auto st = mira::schedule::case_state_from_string(text("status"))) r.state = *st;
  if (auto* v = saved.if_contains("attempts"); v && v->is_int64())
    r.attempts = static_cast<int>(v->get_int64());
  if (auto* v = saved.if_contains("latency_ms"); v && v->is_number())
    r.latency_seconds = v->to_number<double>() / 1000;
  r.message = text("host_message");
  json::object study_part = saved;
  for (auto k : {"key", "status", "attempts", "retried", "latency_ms", "host_message"})
    study_part.erase(k);
  if (mira::protocol::decode_run_result(study_part))
    r.result_json = mira::protocol::to_json_text(study_part);
  return r;
}

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
  // The DOM decoder leaves the open members as values, as a study's own result holds them.
  auto typed = mira::protocol::decode_run_result(result);
  typed->raw_json.clear();
  std::string answer;
  measure("encode result", n, result_bytes, [&](std::size_t) {
    out.clear();
    mira::protocol::append_json(out, *typed);
    sink += out.size();
  });
  measure("result frame", n, result_bytes, [&](std::size_t i) {
    answer.clear();
    mira::protocol::append_json(answer, *typed);
    out.clear();
    mira::protocol::append_result_frame(out, static_cast<std::int64_t>(i), answer);
    sink += out.size();
  });

  // A finished case of the echo eval, as `mira run` saves it.
  mira::plan::planned_case c;
  c.params.eval = "bench";
  c.params.sample = "s";
  c.params.target = "sim";
  c.key = mira::plan::case_key(c.params);
  mira::schedule::case_record rec;
  rec.state = mira::schedule::case_state::passed;
  rec.attempts = 1;
  rec.latency_seconds = 0.0123;
  for (const char* payload : {"typical", "minimal"}) {
    rec.result_json = payload == std::string_view("typical")
                          ? std::string(bench::typical_run_result)
                          : minimal_line.substr(17, minimal_line.size() - 18);
    const auto saved = mira::store::case_line(c, rec);
    if (saved != mira::protocol::to_json_text(old_encode_case(c, rec))) {
      std::fprintf(stderr, "codec_throughput: case_line and the old encode_case differ\n");
      return 1;
    }
    std::printf("(%s result: %zu-byte record)\n", payload, saved.size());
    measure("record dom", n, saved.size(), [&](std::size_t) {
      out = mira::protocol::to_json_text(old_encode_case(c, rec));
      sink += out.size();
    });
    measure("record line", n, saved.size(), [&](std::size_t) {
      out = mira::store::case_line(c, rec);
      sink += out.size();
    });
    const auto object = json::parse(saved).as_object();
    if (old_decode_case(object).result_json !=
        mira::store::decode_case_record(object).result_json) {
      std::fprintf(stderr, "codec_throughput: decode_case_record and the old decode differ\n");
      return 1;
    }
    measure("decode dom", n, saved.size(),
            [&](std::size_t) { sink += old_decode_case(object).result_json.size(); });
    measure("decode record", n, saved.size(), [&](std::size_t) {
      sink += mira::store::decode_case_record(object).result_json.size();
    });
  }
  return sink == 0;  // keeps the work observable
}
