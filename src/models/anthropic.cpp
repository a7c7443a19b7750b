// Anthropic Messages on the wire (POST {base}/v1/messages).
#include "models/wire.hpp"

namespace mira::models::detail {

namespace {

// Media as Anthropic's source object: base64 bytes, or a URL.
json::object source_of(const protocol::part& p) {
  if (auto data = base64_of(p))
    return {{"type", "base64"}, {"media_type", p.media_type}, {"data", *data}};
  return {{"type", "url"}, {"url", p.uri.value_or("")}};
}

tl::expected<json::value, error> anthropic_block(const protocol::part& p) {
  if (p.kind == "image") return json::object{{"type", "image"}, {"source", source_of(p)}};
  if (p.kind == "file") return json::object{{"type", "document"}, {"source", source_of(p)}};
  if (p.kind == "audio")
    return tl::make_unexpected(
        wire_error(errc::bad_request, "Anthropic Messages takes no audio parts"));
  return json::object{{"type", "text"}, {"text", part_text(p)}};
}

tl::expected<json::object, error> anthropic_message(const message& m) {
  if (m.role == "tool") {
    json::array result{json::object{
        {"type", "tool_result"}, {"tool_use_id", m.tool_call_id}, {"content", m.text()}}};
    return json::object{{"role", "user"}, {"content", std::move(result)}};
  }
  if (m.role == "assistant") {
    json::array blocks;
    if (!m.content.empty()) blocks.push_back(json::object{{"type", "text"}, {"text", m.text()}});
    for (const auto& c : m.tool_calls) {
      if (!c.arguments.is_object())
        return tl::make_unexpected(
            wire_error(errc::bad_request,
                       "Anthropic Messages takes a tool call's arguments as an object; "
                       "those of call " +
                           c.id + " are not one"));
      blocks.push_back(json::object{
          {"type", "tool_use"}, {"id", c.id}, {"name", c.name}, {"input", c.arguments}});
    }
    return json::object{{"role", "assistant"}, {"content", std::move(blocks)}};
  }
  if (m.content.size() == 1 && m.content[0].kind == "text")
    return json::object{{"role", m.role}, {"content", m.content[0].text}};
  json::array blocks;
  for (const auto& p : m.content) {
    auto block = anthropic_block(p);
    if (!block) return tl::make_unexpected(std::move(block.error()));
    blocks.push_back(std::move(*block));
  }
  return json::object{{"role", m.role}, {"content", std::move(blocks)}};
}

std::string finish_reason(std::string_view stop) {
  if (stop == "end_turn" || stop == "stop_sequence") return "stop";
  if (stop == "max_tokens") return "length";
  if (stop == "tool_use") return "tool_calls";
  if (stop == "refusal") return "content_filter";
  return std::string(stop);
}

}  // namespace

tl::expected<json::object, error> encode_anthropic(std::string_view model, const request& r) {
  json::array messages;
  for (const auto& m : r.messages) {
    auto one = anthropic_message(m);
    if (!one) return tl::make_unexpected(std::move(one.error()));
    messages.push_back(std::move(*one));
  }
  json::object body{{"model", model},
                    {"max_tokens", r.max_tokens.value_or(4096)},
                    {"messages", std::move(messages)}};
  if (!r.system.empty()) body["system"] = r.system;
  if (!r.tools.empty()) {
    json::array tools;
    for (const auto& t : r.tools) {
      json::object tool{{"name", t.name}, {"input_schema", t.parameters}};
      if (t.parameters.empty())
        tool["input_schema"] = json::object{{"type", "object"}, {"properties", json::object{}}};
      if (!t.description.empty()) tool["description"] = t.description;
      tools.push_back(std::move(tool));
    }
    body["tools"] = std::move(tools);
  }
  if (r.temperature) body["temperature"] = *r.temperature;
  merge_extra(body, r.extra);
  return body;
}

tl::expected<reply, error> decode_anthropic(const json::object& body) {
  auto* content = body.if_contains("content");
  if (!content || !content->is_array())
    return tl::make_unexpected(
        wire_error(errc::bad_provider_response, "the answer has no content"));
  reply r;
  for (const auto& block : content->get_array()) {
    auto type = string_at(&block, "type");
    if (type == "text") {
      r.text += string_at(&block, "text");
    } else if (type == "tool_use") {
      const auto* input = block.get_object().if_contains("input");
      r.tool_calls.push_back({std::string(string_at(&block, "id")),
                              std::string(string_at(&block, "name")),
                              input ? *input : json::value(json::object{})});
    } else if (type == "thinking") {
      r.reasoning += string_at(&block, "thinking");
    }
  }
  r.finish_reason = finish_reason(string_at(body, "stop_reason"));
  r.model = string_at(body, "model");
  // Anthropic counts the input read from or written to its cache apart: input_tokens here is
  // the whole input, as the other APIs count it.
  const auto* usage = body.if_contains("usage");
  r.usage.cache_read_tokens = int_at(usage, "cache_read_input_tokens");
  r.usage.input_tokens = int_at(usage, "input_tokens") + r.usage.cache_read_tokens +
                         int_at(usage, "cache_creation_input_tokens");
  r.usage.output_tokens = int_at(usage, "output_tokens");
  return r;
}

}  // namespace mira::models::detail
