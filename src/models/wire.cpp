// What the three provider APIs share on the wire (see wire.hpp), and the request and reply
// types' helpers (chat.hpp).
#include "models/wire.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <charconv>

namespace mira::models {

std::string_view name_of(api a) noexcept {
  switch (a) {
    case api::openai_chat:
      return "openai-chat";
    case api::openai_responses:
      return "openai-responses";
    case api::anthropic_messages:
      return "anthropic";
  }
  return "openai-chat";
}

std::optional<api> api_named(std::string_view name) noexcept {
  for (auto a : {api::openai_chat, api::openai_responses, api::anthropic_messages})
    if (name_of(a) == name) return a;
  return std::nullopt;
}

message message::user(std::string text) {
  protocol::part p;
  p.kind = "text";
  p.text = std::move(text);
  return user(std::vector<protocol::part>{std::move(p)});
}

message message::user(std::vector<protocol::part> parts) {
  message m;
  m.content = std::move(parts);
  return m;
}

message message::assistant(const reply& r) {
  message m;
  m.role = "assistant";
  if (!r.text.empty()) {
    protocol::part p;
    p.kind = "text";
    p.text = r.text;
    m.content.push_back(std::move(p));
  }
  m.tool_calls = r.tool_calls;
  return m;
}

message message::tool_result(std::string call_id, std::string output) {
  message m = user(std::move(output));
  m.role = "tool";
  m.tool_call_id = std::move(call_id);
  return m;
}

std::string message::text() const {
  std::string out;
  for (const auto& p : content) {
    if (p.kind != "text") continue;
    if (!out.empty()) out += '\n';
    out += p.text;
  }
  return out;
}

request request::of(std::string prompt) {
  request r;
  r.messages.push_back(message::user(std::move(prompt)));
  return r;
}

namespace detail {

namespace {

std::string_view label_of(api a) {
  switch (a) {
    case api::openai_chat:
      return "OpenAI Chat Completions";
    case api::openai_responses:
      return "OpenAI Responses";
    case api::anthropic_messages:
      return "Anthropic Messages";
  }
  return "the provider";
}

// The provider's own words for a failure: error.message (OpenAI, Anthropic), or the error,
// message or detail string other compatible servers send; else the start of the body.
std::string provider_message(std::string_view body) {
  boost::system::error_code ec;
  auto v = json::parse(body, ec);
  if (!ec && v.is_object()) {
    auto& o = v.get_object();
    if (auto* e = o.if_contains("error")) {
      if (auto m = string_at(e, "message"); !m.empty()) return std::string(m);
      if (e->is_string()) return std::string(e->get_string());
    }
    for (std::string_view k : {"message", "detail"})
      if (auto* m = o.if_contains(k); m && m->is_string()) return std::string(m->get_string());
  }
  std::string excerpt;
  for (char c : body.substr(0, 200)) excerpt += (c >= 0x20 && c < 0x7f) ? c : ' ';
  return excerpt;
}

void mask(std::string& text, std::string_view key) {
  if (key.size() < 4) return;  // too short to mask without garbling the message
  for (auto at = text.find(key); at != std::string::npos; at = text.find(key, at + 3))
    text.replace(at, key.size(), "***");
}

std::optional<std::chrono::milliseconds> retry_after_of(const http_response& r,
                                                        std::chrono::system_clock::time_point now) {
  if (auto ms = r.header("retry-after-ms")) {
    double v = 0;
    auto [end, ec] = std::from_chars(ms->data(), ms->data() + ms->size(), v);
    if (ec == std::errc() && end == ms->data() + ms->size() && v >= 0)
      return std::chrono::milliseconds(static_cast<std::int64_t>(v));
  }
  if (auto v = r.header("retry-after")) return parse_retry_after(*v, now);
  return std::nullopt;
}

}  // namespace

tl::expected<json::object, error> encode_request(api a, std::string_view model, const request& r) {
  switch (a) {
    case api::openai_chat:
      return encode_chat(model, r);
    case api::openai_responses:
      return encode_responses(model, r);
    case api::anthropic_messages:
      return encode_anthropic(model, r);
  }
  return tl::make_unexpected(wire_error(errc::bad_request, "unknown provider API"));
}

tl::expected<reply, error> decode_reply(api a, std::string_view body) {
  boost::system::error_code ec;
  auto v = json::parse(body, ec);
  if (ec || !v.is_object())
    return tl::make_unexpected(wire_error(errc::bad_provider_response,
                                          std::string(label_of(a)) +
                                              ": the answer is not a JSON object" +
                                              (ec ? " (" + ec.message() + ")" : std::string())));
  tl::expected<reply, error> r;
  switch (a) {
    case api::openai_chat:
      r = decode_chat(v.get_object());
      break;
    case api::openai_responses:
      r = decode_responses(v.get_object());
      break;
    case api::anthropic_messages:
      r = decode_anthropic(v.get_object());
      break;
  }
  if (!r) {
    r.error().message = std::string(label_of(a)) + ": " + r.error().message;
    return r;
  }
  r->raw = std::move(v);
  return r;
}

error failure_of(api a, const http_response& r, std::string_view key,
                 std::chrono::system_clock::time_point now) {
  error e;
  e.http_status = r.status;
  std::string status = "HTTP " + std::to_string(r.status);
  if (r.status == 429) {
    e.code = errc::rate_limited;
    status = "rate limited (" + status + ")";
  } else if (r.status >= 500) {
    e.code = errc::server_error;
    status = "server error (" + status + ")";
  } else if (r.status == 408) {
    e.code = errc::timed_out;
    status = "request timeout (" + status + ")";
  } else if (r.status >= 400) {
    e.code = errc::client_error;
  } else {
    e.code = errc::bad_provider_response;
    status = "unexpected " + status;
  }
  if (e.code == errc::rate_limited || e.code == errc::server_error)
    e.retry_after = retry_after_of(r, now);
  e.message = std::string(label_of(a)) + ": " + status;
  if (auto said = provider_message(r.body); !said.empty()) e.message += ": " + said;
  mask(e.message, key);
  return e;
}

std::string endpoint(api a, std::string_view base_url) {
  while (!base_url.empty() && base_url.back() == '/') base_url.remove_suffix(1);
  switch (a) {
    case api::openai_chat:
      return std::string(base_url) + "/chat/completions";
    case api::openai_responses:
      return std::string(base_url) + "/responses";
    case api::anthropic_messages:
      return std::string(base_url) + "/v1/messages";
  }
  return std::string(base_url);
}

std::vector<http_header> headers_for(api a, std::string_view key,
                                     std::string_view anthropic_version) {
  std::vector<http_header> h{{"Content-Type", "application/json", false}};
  if (a == api::anthropic_messages) {
    h.push_back({"x-api-key", std::string(key), true});
    h.push_back({"anthropic-version", std::string(anthropic_version), false});
  } else {
    h.push_back({"Authorization", "Bearer " + std::string(key), true});
  }
  return h;
}

void price_reply(reply& r, const price_table& prices, std::string_view requested_model) {
  auto it = prices.find(requested_model);
  if (it == prices.end()) it = prices.find(r.model);
  if (it == prices.end()) return;
  r.usage.cost_usd = (static_cast<double>(r.usage.input_tokens) * it->second.input_per_million +
                      static_cast<double>(r.usage.output_tokens) * it->second.output_per_million) /
                     1e6;
}

std::string media_url(const protocol::part& p) {
  if (p.uri) return *p.uri;
  return "data:" + p.media_type + ";base64," + p.data.value_or("");
}

std::optional<std::string> base64_of(const protocol::part& p) {
  if (p.data) return *p.data;
  constexpr std::string_view marker = ";base64,";
  if (p.uri && p.uri->starts_with("data:"))
    if (auto at = p.uri->find(marker); at != std::string::npos)
      return p.uri->substr(at + marker.size());
  return std::nullopt;
}

std::string part_text(const protocol::part& p) {
  if (p.json) return json::serialize(*p.json);
  return p.text;
}

void merge_extra(json::object& body, const json::object& extra) {
  for (const auto& kv : extra) body[kv.key()] = kv.value();
}

json::value parse_arguments(std::string_view text) {
  boost::system::error_code ec;
  auto v = json::parse(text, ec);
  if (ec) return json::string(text);
  return v;
}

std::string arguments_text(const json::value& arguments) {
  if (auto* s = arguments.if_string()) return std::string(*s);
  if (arguments.is_null()) return "{}";
  return json::serialize(arguments);
}

error wire_error(errc e, std::string message) {
  error out;
  out.code = e;
  out.message = std::move(message);
  return out;
}

std::string_view string_at(const json::value* v, std::string_view key) {
  auto* o = v ? v->if_object() : nullptr;
  return o ? string_at(*o, key) : std::string_view();
}

std::string_view string_at(const json::object& o, std::string_view key) {
  auto* m = o.if_contains(key);
  return m && m->is_string() ? std::string_view(m->get_string()) : std::string_view();
}

std::int64_t int_at(const json::value* v, std::string_view key) {
  auto* o = v ? v->if_object() : nullptr;
  auto* m = o ? o->if_contains(key) : nullptr;
  if (!m) return 0;
  if (auto* i = m->if_int64()) return *i;
  if (auto* u = m->if_uint64()) return static_cast<std::int64_t>(*u);
  if (auto* d = m->if_double()) return static_cast<std::int64_t>(*d);
  return 0;
}

}  // namespace detail

}  // namespace mira::models
