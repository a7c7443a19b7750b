// Sans-I/O connection core (see multiplexer.hpp for the cancellation table).
#include <mira/detail/json_scan.hpp>
#include <mira/detail/line_framer.hpp>
#include <mira/detail/multiplexer.hpp>
#include <mira/protocol/codec.hpp>

#include <boost/json/monotonic_resource.hpp>

#include <charconv>
#include <cstring>

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

// The text of a top-level member's value in an object already known to be valid JSON, so
// the result can be kept exactly as sent without serializing it again. Empty when the key is
// written with escapes (the caller then serializes the parsed value instead).
class member_scanner {
 public:
  explicit member_scanner(std::string_view s) : p_(s.data()), end_(s.data() + s.size()) {}

  std::string_view find(std::string_view key) {
    ws();
    if (!eat('{')) return {};
    for (;;) {
      ws();
      if (p_ >= end_ || *p_ != '"') return {};
      const char* key_start = p_ + 1;
      skip_string();
      std::string_view name(key_start, static_cast<std::size_t>(p_ - 1 - key_start));
      ws();
      if (!eat(':')) return {};
      ws();
      const char* value_start = p_;
      skip_value();
      if (name == key) return {value_start, static_cast<std::size_t>(p_ - value_start)};
      ws();
      if (!eat(',')) return {};
    }
  }

 private:
  bool eat(char c) {
    if (p_ < end_ && *p_ == c) {
      ++p_;
      return true;
    }
    return false;
  }
  void ws() {
    while (p_ < end_ && (*p_ == ' ' || *p_ == '\t' || *p_ == '\n' || *p_ == '\r')) ++p_;
  }
  // At an opening quote; leaves p_ past the closing one. memchr does the long runs.
  void skip_string() {
    ++p_;
    for (;;) {
      auto* q = static_cast<const char*>(std::memchr(p_, '"', static_cast<std::size_t>(end_ - p_)));
      if (!q) {
        p_ = end_;
        return;
      }
      std::size_t backslashes = 0;
      for (const char* b = q; b > p_ && b[-1] == '\\'; --b) ++backslashes;
      p_ = q + 1;
      if (backslashes % 2 == 0) return;
    }
  }
  void skip_value() {
    if (p_ >= end_) return;
    if (*p_ == '"') return skip_string();
    if (*p_ != '{' && *p_ != '[') {
      while (p_ < end_ && *p_ != ',' && *p_ != '}' && *p_ != ' ' && *p_ != '\t' && *p_ != '\r' &&
             *p_ != '\n')
        ++p_;
      return;
    }
    int depth = 0;
    while (p_ < end_) {
      char c = *p_;
      if (c == '"') {
        skip_string();
        continue;
      }
      ++p_;
      if (c == '{' || c == '[') {
        ++depth;
      } else if (c == '}' || c == ']') {
        if (--depth == 0) return;
      }
    }
  }

  const char* p_;
  const char* end_;
};

std::string_view member_text(std::string_view obj, std::string_view key) {
  return member_scanner(obj).find(key);
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

// `{"id":N,"result":VALUE}` (any JSON whitespace between the tokens) answering a request in
// flight: routed after a validating skim of VALUE, with no DOM. Every other shape, and every
// line the skim does not accept, takes the full path below, which classifies and explains.
std::optional<inbound> multiplexer::route_result_text(std::string_view line) {
  auto expect = [&](std::size_t& i, std::string_view token) {
    i = skip_json_ws(line, i);
    if (line.substr(i, token.size()) != token) return false;
    i += token.size();
    return true;
  };
  std::size_t i = 0;
  if (!expect(i, "{") || !expect(i, "\"id\"") || !expect(i, ":")) return std::nullopt;
  i = skip_json_ws(line, i);
  // JSON integers: no sign, no leading zero. 5.0 or 1e3 fail at the comma below.
  if (i >= line.size() || line[i] < '0' || line[i] > '9' ||
      (line[i] == '0' && i + 1 < line.size() && line[i + 1] >= '0' && line[i + 1] <= '9'))
    return std::nullopt;
  std::int64_t id = 0;
  auto [num_end, num_ec] = std::from_chars(line.data() + i, line.data() + line.size(), id);
  if (num_ec != std::errc{}) return std::nullopt;
  i = static_cast<std::size_t>(num_end - line.data());
  if (!expect(i, ",") || !expect(i, "\"result\"") || !expect(i, ":")) return std::nullopt;
  std::size_t start = skip_json_ws(line, i);
  std::size_t end = scan_json_value(line, start);
  if (end == json_scan_failed) return std::nullopt;
  auto text = line.substr(start, end - start);
  if (text == "null") return std::nullopt;  // "neither result nor error": the full path says so
  std::size_t j = end;
  if (!expect(j, "}") || skip_json_ws(line, j) != line.size()) return std::nullopt;
  auto it = entries_.find(id);
  if (it == entries_.end() || it->second.is_cancel || !it->second.op ||
      (it->second.state != request_state::writing && it->second.state != request_state::written))
    return std::nullopt;  // unknown, late or an ack: the full path logs it
  inbound in;
  in.kind = inbound_kind::response;
  in.id = id;
  in.op = std::move(it->second.op);
  erase(it);
  in.result_text = text;
  return in;
}

const json::value& multiplexer::result_value(inbound& in) {
  if (!in.result_parsed) {
    reset_arena();
    boost::system::error_code ec;
    parser_.write(in.result_text.data(), in.result_text.size(), ec);
    // The text passed the skim, which accepts less than the parser: this cannot fail.
    in.result = ec ? json::value() : parser_.release();
    in.result_parsed = true;
  }
  return in.result;
}

inbound multiplexer::on_line(std::string_view line) {
  if (auto in = route_result_text(line)) return std::move(*in);
  reset_arena();
  boost::system::error_code ec;
  parser_.write(line.data(), line.size(), ec);
  if (ec) {
    // Broken JSON that still starts like an answer to a written request ({"id":N,... with a
    // NaN, a truncated string, bad UTF-8): fail that request instead of leaving it waiting.
    std::int64_t id = 0;
    if (auto op = take_oversized(line, id)) {
      inbound in;
      in.kind = inbound_kind::response;
      in.id = id;
      in.op = std::move(op);
      in.violation = "the response is not valid JSON (" + ec.message() + ")";
      return in;
    }
    return drop(drop_reason::invalid_json, ec.message() + ": " + excerpt(line));
  }
  json::value v = parser_.release();
  auto* obj = v.if_object();
  if (!obj) return drop(drop_reason::not_object, excerpt(line));

  auto* method = obj->if_contains("method");
  auto* idv = obj->if_contains("id");
  if (method && !method->is_null()) {
    std::string m = method->is_string() ? std::string(method->get_string()) : "?";
    if (idv && !idv->is_null()) return drop(drop_reason::reverse_request, m, m);
    if (m != "event" && m != "log") return drop(drop_reason::unknown_notification, m, m);
    inbound in;
    in.kind = inbound_kind::notification;
    in.method = std::move(m);
    if (auto* p = obj->if_contains("params")) in.params = std::move(*p);
    if (auto* po = in.params.if_object()) {
      if (auto* rid = po->if_contains("request_id")) in.request_id = as_id(*rid).value_or(0);
    }
    if (in.request_id != 0) in.target = find(in.request_id);
    return in;
  }
  if (!idv) return drop(drop_reason::unclassifiable, excerpt(line));
  auto id = as_id(*idv);
  if (!id) return drop(drop_reason::bad_id, excerpt(line));
  auto it = entries_.find(*id);
  // A request still queued was never sent: an answer to it is as unknown as any other.
  if (it == entries_.end() || (it->second.state == request_state::queued && !it->second.is_cancel))
    return drop(drop_reason::unknown_id, "id " + std::to_string(*id) + ": " + excerpt(line));
  if (it->second.is_cancel || it->second.state == request_state::abandoned) {
    auto r = it->second.is_cancel ? drop_reason::cancel_ack : drop_reason::late_response;
    erase(it);
    return drop(r, "id " + std::to_string(*id));
  }

  inbound in;
  in.kind = inbound_kind::response;
  in.id = *id;
  in.op = std::move(it->second.op);
  erase(it);

  auto* result = obj->if_contains("result");
  auto* error = obj->if_contains("error");
  bool has_result = result && !result->is_null();
  bool has_error = error && !error->is_null();
  if (has_result && has_error) {
    in.violation = "response has both result and error";
  } else if (!has_result && !has_error) {
    in.violation = "response has neither result nor error";
  } else if (has_error) {
    auto e = protocol::decode_rpc_error(*error);
    if (e)
      in.study_error = std::move(*e);
    else
      in.violation = "malformed error object: " + e.error().message();
  } else {
    in.result = std::move(*result);
    in.result_parsed = true;
    in.result_text = member_text(line, "result");
  }
  return in;
}

std::unique_ptr<pending_op> multiplexer::take_oversized(std::string_view prefix, std::int64_t& id) {
  // Only the envelope's own "id", written before any nested value: `{"id":12,"result":...`.
  std::size_t i = prefix.find_first_not_of(" \t");
  if (i == std::string_view::npos || prefix[i] != '{') return nullptr;
  auto rest = prefix.substr(i + 1);
  auto key = rest.find("\"id\"");
  if (key == std::string_view::npos ||
      rest.substr(0, key).find_first_of("{[") != std::string_view::npos)
    return nullptr;
  auto colon = rest.find_first_not_of(" \t", key + 4);
  if (colon == std::string_view::npos || rest[colon] != ':') return nullptr;
  auto digits = rest.find_first_not_of(" \t", colon + 1);
  if (digits == std::string_view::npos) return nullptr;
  std::int64_t value = 0;
  auto [end, ec] = std::from_chars(rest.data() + digits, rest.data() + rest.size(), value);
  if (ec != std::errc{} || value < 0) return nullptr;
  auto it = entries_.find(value);
  if (it == entries_.end() || it->second.is_cancel || !it->second.op ||
      it->second.state == request_state::queued)
    return nullptr;
  id = value;
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
