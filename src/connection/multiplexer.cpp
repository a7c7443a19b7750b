// Sans-I/O connection core (see multiplexer.hpp for the cancellation table).
#include "connection/multiplexer.hpp"
#include <mira/protocol/codec.hpp>
#include <mira/protocol/json_text.hpp>
#include "framing/line_framer.hpp"
#include "protocol/json_scan.hpp"

#include "protocol/envelope.hpp"

#include <boost/json/monotonic_resource.hpp>

#include <charconv>

namespace mira::detail {

namespace json = boost::json;
namespace asio = boost::asio;

std::string_view to_string(drop_reason r) {
  switch (r) {
    case drop_reason::invalid_json:
      return "invalid JSON";
    case drop_reason::not_object:
      return "not a JSON object";
    case drop_reason::bad_id:
      return "response id is not a non-negative integer";
    case drop_reason::unknown_id:
      return "response for an unknown request id";
    case drop_reason::late_response:
      return "late response to a cancelled request";
    case drop_reason::cancel_ack:
      return "cancel acknowledgement";
    case drop_reason::reverse_request:
      return "request from the study (not supported)";
    case drop_reason::unknown_notification:
      return "unknown notification";
    case drop_reason::unclassifiable:
      return "line has neither method nor id";
  }
  return "dropped";
}

namespace {

void append_frame(std::string& out, std::int64_t id, std::string_view method,
                  std::string_view params_json) {
  char num[24];
  auto [end, ec] = std::to_chars(num, num + sizeof num, id);
  out.reserve(out.size() + params_json.size() + method.size() + 48);
  out += "{\"id\":";
  out.append(num, end);
  out += ",\"method\":\"";
  out += method;  // method names are fixed ASCII tokens chosen by the host
  out += '"';
  if (!params_json.empty()) {
    out += ",\"params\":";
    out += params_json;
  }
  out += "}\n";
}

std::optional<std::int64_t> as_id(const json::value& v) {
  if (auto* i = v.if_int64()) return *i >= 0 ? std::optional(*i) : std::nullopt;
  if (auto* u = v.if_uint64()) {
    if (*u <= static_cast<std::uint64_t>(INT64_MAX)) return static_cast<std::int64_t>(*u);
  }
  return std::nullopt;
}

}  // namespace

multiplexer::multiplexer(std::size_t max_batch_bytes)
    : max_batch_(max_batch_bytes), parser_({}, host_parse_options()) {}

void multiplexer::set_state(entry& e, request_state s) {
  auto counts = [](request_state st) {
    return st == request_state::writing || st == request_state::written ||
           st == request_state::abandoned;
  };
  if (!e.is_cancel) {
    if (counts(e.state) && !counts(s)) --outstanding_;
    if (!counts(e.state) && counts(s)) ++outstanding_;
    if (e.state == request_state::abandoned && s != request_state::abandoned) --abandoned_;
    if (e.state != request_state::abandoned && s == request_state::abandoned) ++abandoned_;
  }
  e.state = s;
}

std::unique_ptr<pending_op> multiplexer::add_request(std::int64_t id, std::string_view method,
                                                     std::string_view params_json,
                                                     std::unique_ptr<pending_op> op) {
  if (closed_) return op;
  queue_.push(id, method, params_json);
  entries_.emplace(id, entry{request_state::queued, false, std::move(op)});
  ++live_queued_;
  return nullptr;
}

bool multiplexer::has_pending_writes() const {
  return !urgent_.empty() || live_queued_ > 0;
}

void multiplexer::erase(std::unordered_map<std::int64_t, entry>::iterator it) {
  if (it->second.state == request_state::queued && !it->second.is_cancel) --live_queued_;
  set_state(it->second, request_state::queued);  // leaves the outstanding count
  entries_.erase(it);
}

void multiplexer::frame_queue::push(std::int64_t id, std::string_view method,
                                    std::string_view params_json) {
  auto offset = base_ + bytes_.size();
  append_frame(bytes_, id, method, params_json);
  refs_.push_back({id, offset, base_ + bytes_.size() - offset});
}

void multiplexer::frame_queue::pop_front() {
  refs_.pop_front();
  if (refs_.empty()) {
    base_ += bytes_.size();
    // Kept for the next requests, unless a burst made it large: then it goes back.
    if (bytes_.capacity() > (std::size_t{1} << 20))
      std::string().swap(bytes_);
    else
      bytes_.clear();
    return;
  }
  // Drop the written prefix once it is most of the buffer: amortised O(1) per frame.
  auto dead = refs_.front().offset - base_;
  if (dead > (std::size_t{64} << 10) && dead > bytes_.size() / 2) {
    bytes_.erase(0, dead);
    base_ += dead;
  }
}

void multiplexer::frame_queue::clear() {
  base_ += bytes_.size();
  bytes_.clear();
  refs_.clear();
}

asio::const_buffer multiplexer::prepare_write() {
  wire_.clear();
  auto take = [&](frame_queue& q) {
    while (!q.empty() && (wire_.empty() || wire_.size() + q.front().size <= max_batch_)) {
      auto f = q.front();
      auto it = entries_.find(f.id);
      // A request cancelled while queued left its frame behind: skip it.
      if (it != entries_.end() && it->second.state == request_state::queued) {
        if (!it->second.is_cancel) --live_queued_;
        set_state(it->second, request_state::writing);
        wire_ += q.text(f);
        writing_ids_.push_back(f.id);
      }
      q.pop_front();
    }
  };
  take(urgent_);
  take(queue_);
  return asio::buffer(wire_);
}

void multiplexer::on_write_done() {
  for (auto id : writing_ids_) {
    auto it = entries_.find(id);
    if (it != entries_.end() && it->second.state == request_state::writing)
      set_state(it->second, request_state::written);
  }
  writing_ids_.clear();
}

inbound multiplexer::drop(drop_reason r, std::string detail, std::string_view method) {
  inbound in;
  in.kind = inbound_kind::dropped;
  in.reason = r;
  in.detail = std::move(detail);
  std::string key(to_string(r));
  key += '\0';
  key += method;
  in.first_of_kind = logged_.insert(std::move(key)).second;
  return in;
}

void multiplexer::reset_arena() {
  // Typical lines parse inside the fixed buffer, without a single allocation. The arena is made
  // anew per line rather than release()d: release() keeps doubling the size of the next block
  // it asks for (Boost 1.81), so a long run of large lines ended in bad_alloc.
  parser_.reset();  // drops the previous document before its memory is reused
  arena_.emplace(arena_buffer_, sizeof arena_buffer_);
  parser_.reset(json::storage_ptr(&*arena_));
}

const json::value& multiplexer::result_value(inbound& in) {
  if (!in.result_parsed) {
    in.result = parse_span(in.result_text);
    in.result_parsed = true;
  }
  return in.result;
}

json::value multiplexer::parse_span(std::string_view text) {
  reset_arena();
  boost::system::error_code ec;
  parser_.write(text.data(), text.size(), ec);
  // Spans come from the classifier, whose skim accepts less than the parser: this cannot fail.
  return ec ? json::value() : parser_.release();
}

// A response whose result object is its last member, decoded by its op straight from the text:
// the result is checked once, by the decoder, instead of skimmed and then read. Only a response
// that would be routed to its op is taken here; anything else, and a result the op's decoder
// does not take, goes through the checked path, with the outcome it always had.
std::optional<inbound> multiplexer::route_unchecked(const envelope& env) {
  if (env.kind != envelope_kind::response || !env.id || !env.error.empty()) return std::nullopt;
  auto it = entries_.find(*env.id);
  if (it == entries_.end() || it->second.is_cancel ||
      (it->second.state != request_state::writing && it->second.state != request_state::written))
    return std::nullopt;
  if (!it->second.op->decode_unchecked(env.result)) return std::nullopt;
  inbound in;
  in.kind = inbound_kind::response;
  in.id = *env.id;
  in.op = std::move(it->second.op);
  in.result_text = env.result;
  erase(it);
  return in;
}

inbound multiplexer::on_line(std::string_view line) {
  auto env = classify_envelope_to_result(line);
  if (env && env->result_unchecked) {
    if (auto in = route_unchecked(*env)) return std::move(*in);
    env = classify_envelope(line);  // the whole line checked, as any other
  }
  if (!env) {
    // Left to Boost.JSON: it says whether this is JSON, and its canonical text is classified.
    reset_arena();
    boost::system::error_code ec;
    parser_.write(line.data(), line.size(), ec);
    if (!ec) {
      canonical_ = protocol::to_json_text(parser_.release());
      env = classify_envelope(canonical_, true);
      if (env) line = canonical_;
    }
    if (!env) {
      // Broken JSON that still starts like an answer to a written request ({"id":N,... with a
      // NaN, a truncated string, bad UTF-8): fail that request instead of leaving it waiting.
      auto why = ec ? ec.message() : std::string("nested deeper than the host reads");
      std::int64_t id = 0;
      if (auto op = take_oversized(line, id)) {
        inbound in;
        in.kind = inbound_kind::response;
        in.id = id;
        in.op = std::move(op);
        in.violation = "the response is not valid JSON (" + why + ")";
        return in;
      }
      return drop(drop_reason::invalid_json, why + ": " + excerpt(line));
    }
  }
  switch (env->kind) {
    case envelope_kind::not_object:
      return drop(drop_reason::not_object, excerpt(line));
    case envelope_kind::unclassifiable:
      return drop(drop_reason::unclassifiable, excerpt(line));
    case envelope_kind::request:
    case envelope_kind::notification:
      return on_notification(*env);
    case envelope_kind::response:
      break;
  }
  if (!env->id) return drop(drop_reason::bad_id, excerpt(line));
  auto id = *env->id;
  auto it = entries_.find(id);
  // A request still queued was never sent: an answer to it is as unknown as any other.
  if (it == entries_.end() || (it->second.state == request_state::queued && !it->second.is_cancel))
    return drop(drop_reason::unknown_id, "id " + std::to_string(id) + ": " + excerpt(line));
  if (it->second.is_cancel || it->second.state == request_state::abandoned) {
    auto r = it->second.is_cancel ? drop_reason::cancel_ack : drop_reason::late_response;
    erase(it);
    return drop(r, "id " + std::to_string(id));
  }

  inbound in;
  in.kind = inbound_kind::response;
  in.id = id;
  in.op = std::move(it->second.op);
  erase(it);
  bool has_result = !env->result.empty();
  bool has_error = !env->error.empty();
  if (has_result && has_error) {
    in.violation = "response has both result and error";
  } else if (!has_result && !has_error) {
    in.violation = "response has neither result nor error";
  } else if (has_error) {
    auto e = protocol::decode_rpc_error(parse_span(env->error));
    if (e)
      in.study_error = std::move(*e);
    else
      in.violation = "malformed error object: " + e.error().message();
  } else {
    in.result_text = env->result;
  }
  return in;
}

inbound multiplexer::on_notification(const envelope& env) {
  std::string m = env.method_is_string ? std::string(env.method) : "?";
  if (env.kind == envelope_kind::request) return drop(drop_reason::reverse_request, m, m);
  if (m != "event" && m != "log") return drop(drop_reason::unknown_notification, m, m);
  inbound in;
  in.kind = inbound_kind::notification;
  in.method = std::move(m);
  if (!env.params.empty()) in.params = parse_span(env.params);
  if (auto* po = in.params.if_object()) {
    if (auto* rid = po->if_contains("request_id")) in.request_id = as_id(*rid).value_or(0);
  }
  if (in.request_id != 0) in.target = find(in.request_id);
  return in;
}

std::unique_ptr<pending_op> multiplexer::take_oversized(std::string_view prefix, std::int64_t& id) {
  auto value = leading_response_id(prefix);
  if (!value) return nullptr;
  auto it = entries_.find(*value);
  if (it == entries_.end() || it->second.is_cancel || !it->second.op ||
      it->second.state == request_state::queued)
    return nullptr;
  id = *value;
  auto op = std::move(it->second.op);
  erase(it);
  return op;
}

cancel_outcome multiplexer::cancel(std::int64_t id, asio::cancellation_type_t type,
                                   std::int64_t cancel_frame_id) {
  cancel_outcome out;
  auto it = entries_.find(id);
  if (it == entries_.end() || it->second.is_cancel || !it->second.op) return out;
  auto& e = it->second;
  if (e.state == request_state::queued) {
    out.kind = cancel_kind::removed_unsent;
    out.op = std::move(e.op);
    erase(it);  // its frame is skipped by prepare_write
    return out;
  }
  constexpr auto abandon_mask =
      asio::cancellation_type::terminal | asio::cancellation_type::partial;
  if ((type & abandon_mask) == asio::cancellation_type::none) {
    out.kind = cancel_kind::ignored;  // total: the request already had its effect
    return out;
  }
  out.kind = cancel_kind::abandoned;
  out.op = std::move(e.op);
  set_state(e, request_state::abandoned);
  if (supports_cancel_ && !closed_ && cancel_frame_id != 0) {
    urgent_.push(cancel_frame_id, "cancel", "{\"id\":" + std::to_string(id) + "}");
    entries_.emplace(cancel_frame_id, entry{request_state::queued, true, nullptr});
    out.cancel_frame_queued = true;
  }
  return out;
}

std::vector<std::unique_ptr<pending_op>> multiplexer::close() {
  std::vector<std::unique_ptr<pending_op>> ops;
  closed_ = true;
  for (auto& [id, e] : entries_)
    if (e.op) ops.push_back(std::move(e.op));
  entries_.clear();
  urgent_.clear();
  queue_.clear();
  outstanding_ = 0;
  abandoned_ = 0;
  live_queued_ = 0;
  // wire_ stays: a write in progress may still be reading it.
  return ops;
}

pending_op* multiplexer::find(std::int64_t id) {
  auto it = entries_.find(id);
  return it == entries_.end() ? nullptr : it->second.op.get();
}

std::optional<request_state> multiplexer::state(std::int64_t id) const {
  auto it = entries_.find(id);
  if (it == entries_.end()) return std::nullopt;
  return it->second.state;
}

}  // namespace mira::detail
