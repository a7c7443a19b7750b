// libFuzzer target for everything a study's bytes reach before any handler: the line framer
// (chunked at fuzzer-chosen points, with a small line limit so overlong lines happen), the
// multiplexer's classification and routing against four written requests and two abandoned
// ones, and the typed decoding of each result by the method it answers, plus the ATIF
// projection; the text decoder of run results and listings against the DOM decoder on every result
// and on the whole input; and every line routed twice, by a multiplexer whose run and score ops
// decode on the hot path (pending_op::decode_unchecked) and by one whose ops decline, which must
// agree; and each line as a study reads a request, its run params by the text reader against the
// DOM decoder. Built and run by scripts/fuzz.sh.
#include "common/run_result_diff.hpp"

#include <mira/protocol/codec.hpp>
#include <mira/protocol/trajectory.hpp>
#include "connection/multiplexer.hpp"
#include "framing/line_framer.hpp"
#include "protocol/envelope.hpp"
#include "protocol/text_decoder.hpp"

#include <boost/asio/cancellation_type.hpp>
#include <boost/json/parse.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

using namespace mira;
using namespace mira::detail;

struct fuzz_op : pending_op {
  fuzz_op(std::string m, bool hot) : method(std::move(m)), hot_path(hot) {}
  bool decode_unchecked(std::string_view text) override {
    return hot_path && (method == "run" || method == "score") &&
           protocol::detail::read_run_result_text(text, result);
  }
  std::string method;
  bool hot_path;
  protocol::run_result result;
};

void decode_for(const std::string& method, const boost::json::value& v, std::string_view text) {
  if (method == "run" || method == "score") {
    (void)protocol::decode_run_result(v, std::string(text));
  } else if (method == "execute") {
    (void)protocol::decode_execute_result(v, std::string(text));
  } else if (method == "list") {
    (void)protocol::decode_list_result(v);
  } else if (method == "list_samples") {
    (void)protocol::decode_list_samples_result(v);
  } else if (method == "initialize") {
    (void)protocol::decode_initialize_result(v);
  }
}

void agree(const std::string& diff) {
  if (diff.empty()) return;
  std::fprintf(stderr, "text and DOM decoders disagree: %s\n", diff.c_str());
  std::abort();
}

// The text decoder must agree with the DOM decoder on everything (see run_result_diff.hpp).
void differential(std::string_view text) {
  auto diff = test::text_and_dom_disagree(text);
  if (diff.empty()) diff = test::listing_text_and_dom_disagree(text);
  if (diff.empty()) diff = test::run_params_text_and_dom_disagree(text);
  agree(diff);
}

[[noreturn]] void disagree(const char* what) {
  std::fprintf(stderr, "the hot path and the checked path disagree: %s\n", what);
  std::abort();
}

// The same line through the hot path's multiplexer: the same outcome. (A result decoded there is
// read_run_result_text of the same text, which route() compares with the DOM decoder.)
void route_hot(multiplexer& hot, std::string_view line, const inbound& checked) {
  auto in = hot.on_line(line);
  if (in.kind != checked.kind || in.id != checked.id || in.violation != checked.violation ||
      in.reason != checked.reason || in.detail != checked.detail ||
      in.result_text != checked.result_text ||
      in.study_error.has_value() != checked.study_error.has_value())
    disagree("outcome");
}

// What a study makes of the same line, read as the host's request: a run's params by the text
// reader of its hot path, which must agree with the DOM decoder.
void study_side(std::string_view line) {
  auto env = classify_envelope(line);
  if (!env || env->kind != envelope_kind::request || env->params.empty()) return;
  agree(test::run_params_text_and_dom_disagree(env->params));
}

void route(multiplexer& mux, multiplexer& hot, std::string_view line) {
  study_side(line);
  auto in = mux.on_line(line);
  route_hot(hot, line, in);
  if (in.kind == inbound_kind::response && in.op) {
    auto& op = static_cast<fuzz_op&>(*in.op);
    if (in.violation.empty() && !in.study_error) {
      if (!in.result_parsed) differential(in.result_text);
      decode_for(op.method, mux.result_value(in), in.result_text);
    }
  } else if (in.kind == inbound_kind::notification) {
    if (in.method == "event")
      (void)protocol::decode_event_params(in.params);
    else
      (void)protocol::decode_log_params(in.params);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  // The first byte picks the read size, so lines split across reads at many places.
  std::size_t chunk = 1 + data[0] % 64;
  ++data;
  --size;

  const char* methods[] = {"run", "execute", "list", "initialize", "list_samples", "score"};
  auto set_up = [&](multiplexer& mux, bool hot_path) {
    mux.set_supports_cancel(true);
    for (std::int64_t id = 1; id <= 6; ++id)
      mux.add_request(id, methods[id - 1], R"({"eval":"e"})",
                      std::make_unique<fuzz_op>(methods[id - 1], hot_path));
    (void)mux.prepare_write();
    mux.on_write_done();
    // Two of them abandoned: their answers are late responses, the acks cancel acks.
    (void)mux.cancel(5, boost::asio::cancellation_type::terminal, 100);
    (void)mux.cancel(6, boost::asio::cancellation_type::terminal, 101);
  };
  multiplexer mux, hot;
  set_up(mux, false);
  set_up(hot, true);

  line_framer framer(512, 64);
  std::size_t pos = 0;
  auto drain = [&](std::optional<line_framer::frame> f) {
    for (; f; f = framer.next()) {
      if (f->kind == line_framer::frame_kind::overlong) {
        std::int64_t id = 0, hot_id = 0;
        (void)mux.take_oversized(f->text, id);
        (void)hot.take_oversized(f->text, hot_id);
      } else {
        route(mux, hot, f->text);
      }
    }
  };
  while (pos < size) {
    auto space = framer.prepare();
    auto n = std::min({chunk, space.size(), size - pos});
    std::memcpy(space.data(), data + pos, n);
    framer.commit(n);
    pos += n;
    drain(framer.next());
  }
  if (auto f = framer.finish(); f && f->kind == line_framer::frame_kind::line)
    route(mux, hot, f->text);
  (void)mux.close();
  (void)hot.close();

  // The whole input as one JSON document, through every decoder and the ATIF projection.
  boost::system::error_code ec;
  auto v = boost::json::parse(std::string_view(reinterpret_cast<const char*>(data), size), ec);
  differential(std::string_view(reinterpret_cast<const char*>(data), size));
  if (!ec) {
    for (auto* m : methods) decode_for(m, v, {});
    (void)protocol::decode_run_params(v);
    (void)protocol::decode_part(v);
    (void)protocol::project(v);
    if (auto* o = v.if_object()) {
      auto copy = *o;
      (void)protocol::project_trajectory(copy);
    }
  }
  return 0;
}
