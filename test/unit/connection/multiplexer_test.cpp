// The sans-I/O connection core: classification, routing by id, the write queue and the
// cancellation rules, driven directly.
#include "connection/multiplexer.hpp"
#include "common/run_result_diff.hpp"

#include <mira/protocol/codec.hpp>

#include <boost/asio/buffer.hpp>
#include <boost/json/parse.hpp>
#include <boost/test/unit_test.hpp>

#include <random>

namespace asio = boost::asio;
namespace json = boost::json;
using namespace mira::detail;
using ct = asio::cancellation_type;

namespace {

struct test_op : pending_op {
  explicit test_op(int t) : tag(t) {}
  int tag;
};

std::unique_ptr<pending_op> op(int tag) {
  return std::make_unique<test_op>(tag);
}
int tag_of(const std::unique_ptr<pending_op>& p) {
  return static_cast<test_op*>(p.get())->tag;
}

// Takes the next batch as the writer would and returns it as one string.
std::string write_batch(multiplexer& m) {
  auto buf = m.prepare_write();
  return std::string(static_cast<const char*>(buf.data()), buf.size());
}

std::string flush(multiplexer& m) {
  auto s = write_batch(m);
  m.on_write_done();
  return s;
}

const std::string params = R"({"eval":"e"})";

// An op that decodes its result on the hot path, as the host's run requests do; `accept`
// false makes it decline, as every other request does.
struct decoding_op : pending_op {
  explicit decoding_op(bool a) : accept(a) {}
  bool decode_unchecked(std::string_view text) override {
    ++asked;
    decoded = accept && mira::protocol::detail::read_run_result_text(text, result);
    return decoded;
  }
  bool accept;
  int asked = 0;
  bool decoded = false;
  mira::protocol::run_result result;
};

// The DOM decoder's reading of a result text: what the hot path's result is compared with (the
// text decoder is the hot path's own reader).
mira::protocol::decoded<mira::protocol::run_result> through_dom(std::string_view text) {
  return mira::protocol::decode_run_result(json::parse(text, {}, host_parse_options()),
                                           std::string(text));
}

// What on_line made of a line, in comparable form.
struct routed {
  inbound_kind kind;
  std::int64_t id;
  std::string violation;
  std::string study_error;
  drop_reason reason;
  std::string detail;
  std::string result_text;
  bool operator==(const routed&) const = default;
};

std::ostream& operator<<(std::ostream& os, const routed& r) {
  return os << "kind " << static_cast<int>(r.kind) << ", id " << r.id << ", violation '"
            << r.violation << "', error '" << r.study_error << "', drop '" << to_string(r.reason)
            << "' " << r.detail << ", result " << r.result_text;
}

// A multiplexer with runs 1 and 2 written and run 3 abandoned, all with decoding ops: one
// line routed, and what the op of the line's request did with it.
struct hot_path {
  explicit hot_path(bool accept) {
    for (std::int64_t id = 1; id <= 3; ++id) {
      m.add_request(id, "run", params, std::make_unique<decoding_op>(accept));
    }
    flush(m);
    (void)m.cancel(3, ct::terminal, 100);
  }
  routed route(std::string_view line) {
    auto in = m.on_line(line);
    routed r{in.kind, in.id, in.violation, {}, in.reason, in.detail, std::string(in.result_text)};
    if (in.study_error) r.study_error = in.study_error->message;
    if (in.op) taken.reset(static_cast<decoding_op*>(in.op.release()));
    return r;
  }
  multiplexer m;
  std::unique_ptr<decoding_op> taken;  // the op of the line's request, once routed to it
};

const std::string typical_result =
    R"({"eval":"bench","sample":"s","target":"sim","input":["What is the answer?"],)"
    R"("expected":"42","passed":true,"aggregate":1.0,"scores":[{"scorer":"contains",)"
    R"("value":1.0,"pass":true,"reason":"found \"42\""}],"transcript":{"final_response":)"
    R"("Caf\u00e9, 42","iterations":2,"tool_calls":["calculator"],"usage":{"input_tokens":120,)"
    R"("cost_usd":0.00042},"metadata":{"trace":"https://example.invalid/t/1"}},"skipped":false})";

}  // namespace

BOOST_AUTO_TEST_SUITE(multiplexer_tests)

BOOST_AUTO_TEST_CASE(requests_are_framed_and_coalesced) {
  multiplexer m;
  m.add_request(1, "initialize", params, op(1));
  m.add_request(2, "list", {}, op(2));
  BOOST_TEST((m.state(1) == request_state::queued));
  BOOST_TEST(m.has_pending_writes());
  BOOST_TEST(flush(m) ==
             "{\"id\":1,\"method\":\"initialize\",\"params\":{\"eval\":\"e\"}}\n{\"id\":2,"
             "\"method\":\"list\"}\n");
  BOOST_TEST(!m.has_pending_writes());
  BOOST_TEST(m.outstanding() == 2u);
  BOOST_TEST((m.state(2) == request_state::written));
  BOOST_TEST(!m.state(3).has_value());
}

BOOST_AUTO_TEST_CASE(responses_route_by_id_in_any_order) {
  multiplexer m;
  for (int i = 1; i <= 3; ++i) m.add_request(i, "run", params, op(i * 10));
  flush(m);
  for (int id : {3, 1, 2}) {
    auto line = "{\"id\":" + std::to_string(id) + ",\"result\":{\"v\":" + std::to_string(id) + "}}";
    auto in = m.on_line(line);
    BOOST_REQUIRE((in.kind == inbound_kind::response));
    BOOST_TEST(in.id == id);
    BOOST_TEST(tag_of(in.op) == id * 10);
    BOOST_TEST(in.result_text == "{\"v\":" + std::to_string(id) + "}");
    BOOST_TEST(m.result_value(in).at("v").as_int64() == id);
  }
  BOOST_TEST(m.size() == 0u);
  BOOST_TEST(m.outstanding() == 0u);
}

BOOST_AUTO_TEST_CASE(error_responses_and_malformed_ones) {
  multiplexer m;
  for (int i = 1; i <= 4; ++i) m.add_request(i, "run", params, op(i));
  flush(m);
  auto err =
      m.on_line(R"({"id":1,"error":{"code":-32602,"message":"no such eval","retryable":true}})");
  BOOST_REQUIRE(err.study_error);
  BOOST_TEST(err.study_error->message == "no such eval");
  BOOST_TEST(err.study_error->retryable);
  auto both = m.on_line(R"({"id":2,"result":{},"error":{"message":"x"}})");
  BOOST_TEST(both.violation == "response has both result and error");
  auto neither = m.on_line(R"({"id":3,"result":null})");
  BOOST_TEST(neither.violation == "response has neither result nor error");
  auto bad_error = m.on_line(R"({"id":4,"error":"text"})");
  BOOST_TEST(bad_error.violation.find("malformed error object") == 0u);
  BOOST_TEST(m.size() == 0u);
}

BOOST_AUTO_TEST_CASE(lines_that_cannot_be_routed_are_dropped_with_a_reason) {
  multiplexer m;
  m.add_request(1, "run", params, op(1));
  flush(m);
  struct row {
    std::string line;
    drop_reason reason;
  };
  std::vector<row> rows{
      {"not json", drop_reason::invalid_json},
      {"{\"result\":\"\xff\xfe\"}", drop_reason::invalid_json},                // invalid UTF-8
      {R"({"id":77,"result":{"aggregate":NaN}})", drop_reason::invalid_json},  // no such request
      {"[1,2]", drop_reason::not_object},
      {R"({"id":"1","result":{}})", drop_reason::bad_id},
      {R"({"id":-1,"result":{}})", drop_reason::bad_id},
      {R"({"id":1.5,"result":{}})", drop_reason::bad_id},
      {R"({"id":99,"result":{}})", drop_reason::unknown_id},
      {R"({"id":1,"method":"sample","params":{}})", drop_reason::reverse_request},
      {R"({"method":"progress","params":{}})", drop_reason::unknown_notification},
      {R"({"result":{}})", drop_reason::unclassifiable},
  };
  for (auto& r : rows) {
    BOOST_TEST_CONTEXT(r.line) {
      auto in = m.on_line(r.line);
      BOOST_TEST((in.kind == inbound_kind::dropped));
      BOOST_TEST((in.reason == r.reason));
    }
  }
  // The reverse request with id 1 did not touch request 1, which still gets its answer.
  auto in = m.on_line(R"({"id":1,"result":{}})");
  BOOST_TEST((in.kind == inbound_kind::response));
  BOOST_TEST(tag_of(in.op) == 1);
}

BOOST_AUTO_TEST_CASE(broken_json_addressed_to_a_written_request_fails_it) {
  multiplexer m;
  for (int i = 1; i <= 3; ++i) m.add_request(i, "run", params, op(i));
  flush(m);
  struct row {
    std::string line;
    int id;
  };
  std::vector<row> rows{
      {R"({"id":1,"result":{"aggregate":NaN}})", 1},              // a bare NaN
      {"{\"id\": 2, \"result\": {\"final\": \"\xff\xfe\"}}", 2},  // invalid UTF-8
      {R"({"id":3,"result":{"passed":tru)", 3},                   // cut short
  };
  for (auto& r : rows) {
    BOOST_TEST_CONTEXT(r.line) {
      auto in = m.on_line(r.line);
      BOOST_TEST((in.kind == inbound_kind::response));
      BOOST_TEST(tag_of(in.op) == r.id);
      BOOST_TEST(in.violation.find("the response is not valid JSON") == 0u);
    }
  }
  BOOST_TEST(m.size() == 0u);
}

BOOST_AUTO_TEST_CASE(many_large_lines_parse_without_growing_the_arena_forever) {
  // Each line needs more than the fixed parse buffer; 200 of them once made the arena ask for
  // 2^200 bytes.
  multiplexer m;
  for (int i = 1; i <= 200; ++i) {
    m.add_request(i, "run", params, op(i));
    flush(m);
    std::string line = R"({"id":)" + std::to_string(i) + R"(,"result":{"pad":[)";
    for (int k = 0; k < 2000; ++k) line += (k ? "," : "") + std::to_string(k);
    line += "]}}";
    auto in = m.on_line(line);
    BOOST_REQUIRE((in.kind == inbound_kind::response));
    BOOST_TEST(tag_of(in.op) == i);
    BOOST_TEST(m.result_value(in).at("pad").as_array().size() == 2000u);
  }
}

BOOST_AUTO_TEST_CASE(answers_are_routed_as_text_whatever_their_shape) {
  // Every valid answer is routed by the envelope classifier after a skim of the line, without
  // a DOM (not parsed), whatever the order and number of its members. The op gets the
  // result's exact text, and the same value when it asks for one.
  struct row {
    std::string line;
    std::string text;
  };
  std::vector<row> rows{
      {R"({"id":1,"result":{"a":[1,2.5,"x\"y"]}})", R"({"a":[1,2.5,"x\"y"]})"},
      {" { \"id\" : 2 ,\t\"result\" : \"s\" } \r", R"("s")"},
      {R"({"id":3,"result":7})", "7"},
      {"{\"id\":4,\"result\":{\"t\":\"caf\u00e9 \\ud83d\\ude00\"}}",
       "{\"t\":\"caf\u00e9 \\ud83d\\ude00\"}"},
      {R"({"result":{"b":1},"id":5})", R"({"b":1})"},     // members reordered
      {R"({"jsonrpc":"2.0","id":6,"result":[]})", "[]"},  // an extra member first
      {R"({"id":7,"result":{},"note":"x"})", "{}"},       // an extra member after
      {R"({"id":8,"result":{"deep":[[[[[[1]]]]]]}})", R"({"deep":[[[[[[1]]]]]]})"},
  };
  multiplexer m;
  for (int i = 1; i <= 8; ++i) m.add_request(i, "run", params, op(i));
  flush(m);
  for (auto& r : rows) {
    BOOST_TEST_CONTEXT(r.line) {
      auto in = m.on_line(r.line);
      BOOST_REQUIRE((in.kind == inbound_kind::response));
      BOOST_TEST(in.violation.empty());
      BOOST_TEST(!in.result_parsed);
      BOOST_TEST(in.result_text == r.text);
      BOOST_TEST(m.result_value(in) == json::parse(r.text));
    }
  }
  BOOST_TEST(m.size() == 0u);
}

BOOST_AUTO_TEST_CASE(text_routing_leaves_every_odd_case_to_the_full_path) {
  // Lines that start like a routed answer but are not one keep their full-path outcome.
  multiplexer m;
  for (int i = 1; i <= 5; ++i) m.add_request(i, "run", params, op(i));
  flush(m);
  m.add_request(9, "run", params, op(9));  // stays queued
  auto unsent = m.on_line(R"({"id":9,"result":{}})");
  BOOST_TEST((unsent.reason == drop_reason::unknown_id));
  auto as_double = m.on_line(R"({"id":1.0,"result":{}})");
  BOOST_TEST((as_double.reason == drop_reason::bad_id));
  // Not JSON, but addressed to request 1 by its prefix: it fails (as before text routing).
  auto leading_zero = m.on_line(R"({"id":01,"result":{}})");
  BOOST_TEST(tag_of(leading_zero.op) == 1);
  BOOST_TEST(leading_zero.violation.find("the response is not valid JSON") == 0u);
  auto lone_surrogate = m.on_line(R"({"id":2,"result":"\udc00"})");
  BOOST_TEST(tag_of(lone_surrogate.op) == 2);
  BOOST_TEST(lone_surrogate.violation.find("the response is not valid JSON") == 0u);
  // A duplicate member is Boost.JSON's to resolve (the last one counts); the line is then
  // classified in its canonical form.
  auto dup = m.on_line(R"({"id":3,"result":{},"result":{"x":1}})");
  BOOST_TEST((dup.kind == inbound_kind::response));
  BOOST_TEST(dup.result_text == R"({"x":1})");
  auto cut = m.on_line(R"({"id":4,"result":{"x":1})");
  BOOST_TEST(cut.violation.find("the response is not valid JSON") == 0u);
  m.cancel(5, ct::terminal, 100);
  auto late = m.on_line(R"({"id":5,"result":{}})");
  BOOST_TEST((late.reason == drop_reason::late_response));
}

BOOST_AUTO_TEST_CASE(lines_the_skim_leaves_to_boost_json_are_classified_in_canonical_form) {
  multiplexer m;
  for (int i = 1; i <= 2; ++i) m.add_request(i, "run", params, op(i));
  flush(m);
  // An exponent of five digits, an escaped member name: JSON the skim does not take.
  auto big_exponent = m.on_line(R"({"id":1,"result":{"n":1e00002}})");
  BOOST_TEST(tag_of(big_exponent.op) == 1);
  BOOST_TEST(big_exponent.result_text == R"({"n":100})");
  auto escaped_key = m.on_line(R"({"\u0069d":2,"result":[]})");
  BOOST_TEST(tag_of(escaped_key.op) == 2);
  BOOST_TEST(escaped_key.result_text == "[]");
  auto escaped_method = m.on_line(R"({"method":"lo\u0067","params":{"message":"m"}})");
  BOOST_TEST((escaped_method.kind == inbound_kind::notification));
  BOOST_TEST(escaped_method.method == "log");
  auto deep =
      std::string(R"({"id":3,"result":)") + std::string(220, '[') + std::string(220, ']') + "}";
  auto too_deep = m.on_line(deep);
  BOOST_TEST((too_deep.kind == inbound_kind::dropped));
}

BOOST_AUTO_TEST_CASE(drops_are_flagged_once_per_reason_and_method) {
  multiplexer m;
  BOOST_TEST(m.on_line(R"({"id":1,"method":"sample"})").first_of_kind);
  BOOST_TEST(!m.on_line(R"({"id":2,"method":"sample"})").first_of_kind);
  BOOST_TEST(m.on_line(R"({"id":3,"method":"ask"})").first_of_kind);
  BOOST_TEST(m.on_line("garbage").first_of_kind);
  BOOST_TEST(!m.on_line("more garbage").first_of_kind);
}

BOOST_AUTO_TEST_CASE(duplicate_responses_only_complete_once) {
  multiplexer m;
  m.add_request(1, "run", params, op(1));
  flush(m);
  BOOST_TEST((m.on_line(R"({"id":1,"result":{}})").kind == inbound_kind::response));
  auto again = m.on_line(R"({"id":1,"result":{}})");
  BOOST_TEST((again.reason == drop_reason::unknown_id));
}

BOOST_AUTO_TEST_CASE(a_response_to_an_unsent_request_is_unknown) {
  multiplexer m;
  m.add_request(1, "run", params, op(1));
  auto in = m.on_line(R"({"id":1,"result":{}})");  // guessed the id before it was written
  BOOST_TEST((in.reason == drop_reason::unknown_id));
  BOOST_TEST(m.find(1) != nullptr);
}

BOOST_AUTO_TEST_CASE(notifications_correlate_by_request_id) {
  multiplexer m;
  m.add_request(7, "run", params, op(7));
  flush(m);
  auto ev = m.on_line(R"({"method":"event","params":{"request_id":7,"kind":"started"}})");
  BOOST_REQUIRE((ev.kind == inbound_kind::notification));
  BOOST_TEST(ev.request_id == 7);
  BOOST_REQUIRE(ev.target);
  BOOST_TEST(static_cast<test_op*>(ev.target)->tag == 7);
  auto log = m.on_line(R"({"method":"log","params":{"message":"hi"}})");
  BOOST_TEST(log.request_id == 0);
  BOOST_TEST(!log.target);
  auto stale = m.on_line(R"({"method":"log","params":{"request_id":3,"message":"hi"}})");
  BOOST_TEST(!stale.target);
}

// Every cancellation type against every request state: what completes, what reaches the wire.
BOOST_AUTO_TEST_CASE(cancellation_table) {
  enum class st { queued, writing, written };
  struct row {
    st state;
    ct type;
    bool supports_cancel;
    cancel_kind expect;
    bool cancel_frame;
  };
  const row rows[] = {
      {st::queued, ct::terminal, true, cancel_kind::removed_unsent, false},
      {st::queued, ct::partial, true, cancel_kind::removed_unsent, false},
      {st::queued, ct::total, true, cancel_kind::removed_unsent, false},
      {st::writing, ct::terminal, true, cancel_kind::abandoned, true},
      {st::writing, ct::partial, true, cancel_kind::abandoned, true},
      {st::writing, ct::total, true, cancel_kind::ignored, false},
      {st::written, ct::terminal, true, cancel_kind::abandoned, true},
      {st::written, ct::partial, true, cancel_kind::abandoned, true},
      {st::written, ct::total, true, cancel_kind::ignored, false},
      {st::written, ct::terminal, false, cancel_kind::abandoned, false},
      {st::written, ct::all, true, cancel_kind::abandoned, true},
  };
  int n = 0;
  for (auto& r : rows) {
    BOOST_TEST_CONTEXT("row " << n++) {
      multiplexer m;
      m.set_supports_cancel(r.supports_cancel);
      m.add_request(1, "run", params, op(1));
      m.add_request(2, "run", params, op(2));  // a neighbour that must be unaffected
      std::string in_flight;
      if (r.state != st::queued) in_flight = write_batch(m);
      if (r.state == st::written) m.on_write_done();

      auto out = m.cancel(1, r.type, 100);
      BOOST_TEST((out.kind == r.expect));
      bool completes =
          r.expect == cancel_kind::removed_unsent || r.expect == cancel_kind::abandoned;
      BOOST_TEST(static_cast<bool>(out.op) == completes);
      BOOST_TEST(out.cancel_frame_queued == r.cancel_frame);
      if (r.state == st::writing) m.on_write_done();

      std::string next = flush(m);
      if (r.state == st::queued) {
        // Nothing about request 1 ever reaches the study; request 2 is still sent.
        BOOST_TEST(next == "{\"id\":2,\"method\":\"run\",\"params\":{\"eval\":\"e\"}}\n");
      } else {
        BOOST_TEST(
            next ==
            (r.cancel_frame ? "{\"id\":100,\"method\":\"cancel\",\"params\":{\"id\":1}}\n" : ""));
      }
      // The late answer of an abandoned request is dropped, and only then stops counting.
      if (r.expect == cancel_kind::abandoned) {
        BOOST_TEST(m.outstanding() == 2u);
        auto late = m.on_line(R"({"id":1,"error":{"message":"cancelled"}})");
        BOOST_TEST((late.reason == drop_reason::late_response));
        BOOST_TEST(m.outstanding() == 1u);
      }
      if (r.cancel_frame) {
        auto ack = m.on_line(R"({"id":100,"result":{"cancelled":true}})");
        BOOST_TEST((ack.reason == drop_reason::cancel_ack));
      }
      if (r.expect == cancel_kind::ignored) BOOST_TEST(m.find(1) != nullptr);
      // Cancelling again does nothing.
      if (completes) BOOST_TEST((m.cancel(1, ct::terminal, 101).kind == cancel_kind::none));
    }
  }
}

BOOST_AUTO_TEST_CASE(cancel_frames_go_ahead_of_queued_requests) {
  multiplexer m;
  m.set_supports_cancel(true);
  m.add_request(1, "run", params, op(1));
  flush(m);
  m.add_request(2, "run", params, op(2));
  m.cancel(1, ct::terminal, 3);
  BOOST_TEST(flush(m) ==
             "{\"id\":3,\"method\":\"cancel\",\"params\":{\"id\":1}}\n{\"id\":2,\"method\":\"run\","
             "\"params\":{\"eval\":\"e\"}}\n");
}

BOOST_AUTO_TEST_CASE(frames_in_a_write_are_never_torn) {
  multiplexer m(64);  // small batches: one frame per write
  m.set_supports_cancel(true);
  m.add_request(1, "run", params, op(1));
  m.add_request(2, "run", params, op(2));
  auto buf = m.prepare_write();
  std::string before(static_cast<const char*>(buf.data()), buf.size());
  BOOST_TEST(before == "{\"id\":1,\"method\":\"run\",\"params\":{\"eval\":\"e\"}}\n");
  // Cancelling the request whose frame is being written, and closing, leave its bytes intact.
  m.cancel(1, ct::terminal, 10);
  m.cancel(2, ct::terminal, 11);
  auto ops = m.close();
  BOOST_TEST(ops.empty());  // both already handed back by cancel
  BOOST_TEST(std::string(static_cast<const char*>(buf.data()), buf.size()) == before);
  m.on_write_done();
  BOOST_TEST(!m.has_pending_writes());
}

BOOST_AUTO_TEST_CASE(an_oversized_response_is_matched_by_its_prefix) {
  multiplexer m;
  m.add_request(1, "run", params, op(1));
  m.add_request(2, "run", params, op(2));
  flush(m);
  std::int64_t id = -1;
  BOOST_TEST(!m.take_oversized(R"({"result":{"id":1,"x":"aaaa)", id));  // not the envelope's
  BOOST_TEST(!m.take_oversized(R"({"id":7,"result":{"x":"aaaa)", id));  // unknown
  BOOST_TEST(!m.take_oversized("xxxxxxxx", id));
  auto taken = m.take_oversized(R"( {"id" : 2,"result":{"x":"aaaa)", id);
  BOOST_REQUIRE(taken);
  BOOST_TEST(tag_of(taken) == 2);
  BOOST_TEST(id == 2);
  BOOST_TEST(m.find(2) == nullptr);
  BOOST_TEST(m.find(1) != nullptr);
}

BOOST_AUTO_TEST_CASE(close_hands_back_every_waiting_request) {
  multiplexer m;
  for (int i = 1; i <= 1000; ++i) m.add_request(i, "run", params, op(i));
  write_batch(m);  // some writing
  m.on_write_done();
  for (int i = 1001; i <= 1500; ++i) m.add_request(i, "run", params, op(i));  // some queued
  auto ops = m.close();
  BOOST_TEST(ops.size() == 1500u);
  BOOST_TEST(m.closed());
  BOOST_TEST(m.outstanding() == 0u);
  auto bounced = m.add_request(2000, "run", params, op(2000));
  BOOST_REQUIRE(bounced);
  BOOST_TEST(tag_of(bounced) == 2000);
}

BOOST_AUTO_TEST_CASE(a_last_result_object_is_decoded_by_its_op_without_a_skim) {
  hot_path h(true);
  auto r = h.route(R"({"id":1,"result":)" + typical_result + " } ");
  BOOST_TEST((r.kind == inbound_kind::response));
  BOOST_TEST(r.result_text == typical_result);  // without the whitespace before the '}'
  BOOST_REQUIRE(h.taken);
  BOOST_TEST(h.taken->decoded);
  BOOST_TEST(h.taken->result.transcript.final_response == "Caf\xC3\xA9, 42");
  BOOST_TEST(h.taken->result.raw_json == typical_result);
}

// Lines the hot path must give way on: each is routed as a multiplexer whose ops decline routes
// it, and a result the op took is the one the DOM decoder reads from the checked text.
BOOST_AUTO_TEST_CASE(the_hot_path_gives_each_line_the_checked_paths_outcome) {
  const std::string r = typical_result;
  const std::string lines[] = {
      R"({"id":1,"result":)" + r + "}",
      R"({"id":1,"result":)" + r + R"(,"error":{"code":1,"message":"both"}})",
      R"({"id":1,"result":)" + r + R"(,"id":2})",
      R"({"id":1,"result":)" + r + R"(,"result":{}})",
      R"({"id":1,"result":)" + r + R"(,"method":"log"})",
      R"({"id":1,"result":)" + r + R"(}})",
      R"({"id":1,"error":{"code":1,"message":"x"},"result":)" + r + "}",
      R"({"method":"log","id":1,"result":)" + r + "}",
      R"({"result":)" + r + R"(,"id":1})",
      R"({"id":3,"result":)" + r + "}",  // abandoned: a late response
      R"({"id":9,"result":)" + r + "}",  // never sent
      R"({"id":1,"result":{"eval":"e","n":01}})",
      R"({"id":1,"result":{"eval":"e","n":1e00001}})",  // the skim's exponent limit
      R"({"id":1,"result":{"eval":"e","s":"\x"}})",
      "{\"id\":1,\"result\":{\"eval\":\"e\",\"s\":\"\x01\"}}",
      "{\"id\":1,\"result\":{\"eval\":\"e\",\"s\":\"\xC3\"}}",
      "{\"id\":1,\"result\":{\"eval\":\"e\",\"s\":\"\xED\xA0\x80\"}}",
      R"({"id":1,"result":{"eval":"e","s":"\ud800"}})",
      R"({"id":1,"result":{"eval":"e","x":)" + std::string(200, '[') + std::string(200, ']') + "}}",
      R"({"id":1,"result":{"eval":"e","x":)" + std::string(198, '[') + std::string(198, ']') + "}}",
      R"({"id":1,"result":{"eval":"e","input":)" + std::string(200, '[') + std::string(200, ']') +
          "}}",
      R"({"id":1,"result":{"eval":"e","trial":3.0}})",  // taken by the DOM decoder only
      R"({"id":1,"result":{"eval":"e","passed":tru}})",
      R"({"id":1,"result":{"eval":"e",}})",
      R"({"id":1,"result":{"eval":"e"})",
      R"({"id":1,"result":{})",
      R"({"id":1,"result":{ }})",
  };
  for (const auto& line : lines) {
    BOOST_TEST_CONTEXT(line) {
      hot_path hot(true), checked(false);
      auto a = hot.route(line);
      auto b = checked.route(line);
      BOOST_TEST(a == b);
      if (hot.taken && hot.taken->decoded) {
        auto decoded = through_dom(b.result_text);
        BOOST_REQUIRE(decoded);
        BOOST_TEST(mira::test::run_result_diff(hot.taken->result, *decoded) == "");
      }
    }
  }
}

// The same on seeded byte edits of a typical response: the edits reach strings, numbers,
// literals, the nesting and the envelope after the result.
BOOST_AUTO_TEST_CASE(seeded_edits_route_alike_on_both_paths) {
  const std::string base = R"({"id":1,"result":)" + typical_result + "}";
  const char bytes[] = {'"', '\\', '}', ']', '{',    '[',    ',',   ':',
                        '0', 'e',  '-', ' ', '\x01', '\xC3', '\x80'};
  std::mt19937 rng(20261201);
  int decoded = 0, declined = 0;
  for (int i = 0; i < 5000; ++i) {
    std::string line = base;
    for (int e = 1 + static_cast<int>(rng() % 2); e > 0; --e) {
      auto pos = 17 + rng() % (line.size() - 17);  // within the result
      switch (rng() % 3) {
        case 0:
          line.erase(pos, 1);
          break;
        case 1:
          line.insert(pos, 1, bytes[rng() % sizeof bytes]);
          break;
        default:
          line[pos] = bytes[rng() % sizeof bytes];
      }
    }
    hot_path hot(true), checked(false);
    auto a = hot.route(line);
    auto b = checked.route(line);
    if (!(a == b)) BOOST_FAIL(a << " / " << b << " for " << line);
    if (hot.taken && hot.taken->decoded) {
      ++decoded;
      auto by_dom = through_dom(b.result_text);
      if (!by_dom || !mira::test::run_result_diff(hot.taken->result, *by_dom).empty())
        BOOST_FAIL("the hot path decoded another result for " << line);
    } else if (hot.taken && hot.taken->asked) {
      ++declined;
    }
  }
  // Both ways must be reached, or the comparison proves little.
  BOOST_TEST(decoded > 250);
  BOOST_TEST(declined > 250);
}

BOOST_AUTO_TEST_SUITE_END()
