// OpenAI Chat Completions on the wire (POST {base}/chat/completions), which every
// OpenAI-compatible server (vLLM, Ollama, llama.cpp) speaks too.
#include "models/wire.hpp"

namespace mira::models::detail {

namespace {

tl::expected<json::value, error> chat_part(const protocol::part& p) {
  if (p.kind == "image")
    return json::object{{"type", "image_url"}, {"image_url", json::object{{"url", media_url(p)}}}};
  if (p.kind == "audio") {
    auto data = base64_of(p);
    if (!data)
      return tl::make_unexpected(wire_error(
          errc::bad_request, "OpenAI Chat Completions takes audio as data, not as a URL"));
    auto format = p.media_type.substr(p.media_type.find('/') + 1);
    if (format == "mpeg") format = "mp3";
    return json::object{{"type", "input_audio"},
                        {"input_audio", json::object{{"data", *data}, {"format", format}}}};
  }
  if (p.kind == "file") {
    if (!base64_of(p))
      return tl::make_unexpected(wire_error(
          errc::bad_request, "OpenAI Chat Completions takes a file as data, not as a URL"));
    json::object file{{"file_data", media_url(p)}};
    if (!p.name.empty()) file["filename"] = p.name;
    return json::object{{"type", "file"}, {"file", std::move(file)}};
  }
  return json::object{{"type", "text"}, {"text", part_text(p)}};
}

// One text part goes as a string, which every compatible server reads.
tl::expected<json::value, error> chat_content(const message& m) {
  if (m.content.size() == 1 && m.content[0].kind == "text") return json::value(m.content[0].text);
  json::array parts;
  for (const auto& p : m.content) {
    auto part = chat_part(p);
    if (!part) return tl::make_unexpected(std::move(part.error()));
    parts.push_back(std::move(*part));
  }
  return parts;
}

tl::expected<json::object, error> chat_message(const message& m) {
  if (m.role == "tool")
    return json::object{{"role", "tool"}, {"tool_call_id", m.tool_call_id}, {"content", m.text()}};
  json::object out{{"role", m.role}};
  if (m.role == "assistant") {
    out["content"] = m.content.empty() ? json::value(nullptr) : json::value(m.text());
    json::array calls;
    for (const auto& c : m.tool_calls)
      calls.push_back(json::object{
          {"id", c.id},
          {"type", "function"},
          {"function",
           json::object{{"name", c.name}, {"arguments", arguments_text(c.arguments)}}}});
    if (!calls.empty()) out["tool_calls"] = std::move(calls);
    return out;
  }
  auto content = chat_content(m);
  if (!content) return tl::make_unexpected(std::move(content.error()));
  out["content"] = std::move(*content);
  return out;
}

std::string content_text(const json::value* content) {
  if (!content) return {};
  if (auto* s = content->if_string()) return std::string(*s);
  std::string out;
  if (auto* parts = content->if_array())
    for (const auto& p : *parts)
      if (string_at(&p, "type") == "text") out += string_at(&p, "text");
  return out;
}

}  // namespace

tl::expected<json::object, error> encode_chat(std::string_view model, const request& r) {
  json::array messages;
  if (!r.system.empty())
    messages.push_back(json::object{{"role", "system"}, {"content", r.system}});
  for (const auto& m : r.messages) {
    auto one = chat_message(m);
    if (!one) return tl::make_unexpected(std::move(one.error()));
    messages.push_back(std::move(*one));
  }
  json::object body{{"model", model}, {"messages", std::move(messages)}};
  if (!r.tools.empty()) {
    json::array tools;
    for (const auto& t : r.tools) {
      json::object fn{{"name", t.name}, {"parameters", t.parameters}};
      if (t.parameters.empty())
        fn["parameters"] = json::object{{"type", "object"}, {"properties", json::object{}}};
      if (!t.description.empty()) fn["description"] = t.description;
      tools.push_back(json::object{{"type", "function"}, {"function", std::move(fn)}});
    }
    body["tools"] = std::move(tools);
  }
  if (r.temperature) body["temperature"] = *r.temperature;
  if (r.max_tokens) body["max_tokens"] = *r.max_tokens;
  merge_extra(body, r.extra);
  return body;
}

tl::expected<reply, error> decode_chat(const json::object& body) {
  auto* choices = body.if_contains("choices");
  if (!choices || !choices->is_array() || choices->get_array().empty())
    return tl::make_unexpected(
        wire_error(errc::bad_provider_response, "the answer has no choices"));
  const auto& choice = choices->get_array()[0];
  const auto* msg = choice.is_object() ? choice.get_object().if_contains("message") : nullptr;
  if (!msg || !msg->is_object())
    return tl::make_unexpected(
        wire_error(errc::bad_provider_response, "the answer's first choice has no message"));
  reply r;
  const auto& m = msg->get_object();
  r.text = content_text(m.if_contains("content"));
  r.reasoning = string_at(msg, "reasoning_content");
  if (r.reasoning.empty()) r.reasoning = string_at(msg, "reasoning");
  if (auto* calls = m.if_contains("tool_calls"); calls && calls->is_array()) {
    for (const auto& c : calls->get_array()) {
      const auto* fn = c.is_object() ? c.get_object().if_contains("function") : nullptr;
      r.tool_calls.push_back({std::string(string_at(&c, "id")), std::string(string_at(fn, "name")),
                              parse_arguments(string_at(fn, "arguments"))});
    }
  }
  r.finish_reason = string_at(&choice, "finish_reason");
  r.model = string_at(body, "model");
  const auto* usage = body.if_contains("usage");
  r.usage.input_tokens = int_at(usage, "prompt_tokens");
  r.usage.output_tokens = int_at(usage, "completion_tokens");
  if (usage && usage->is_object()) {
    auto& u = usage->get_object();
    r.usage.cache_read_tokens = int_at(u.if_contains("prompt_tokens_details"), "cached_tokens");
    r.usage.reasoning_tokens =
        int_at(u.if_contains("completion_tokens_details"), "reasoning_tokens");
  }
  return r;
}

}  // namespace mira::models::detail
