// OpenAI Responses on the wire (POST {base}/responses).
#include "models/wire.hpp"

namespace mira::models::detail {

namespace {

tl::expected<json::value, error> responses_part(const protocol::part& p) {
  if (p.kind == "image") return json::object{{"type", "input_image"}, {"image_url", media_url(p)}};
  if (p.kind == "file") {
    json::object file{{"type", "input_file"}};
    if (p.uri && !p.uri->starts_with("data:"))
      file["file_url"] = *p.uri;
    else
      file["file_data"] = media_url(p);
    if (!p.name.empty()) file["filename"] = p.name;
    return file;
  }
  if (p.kind == "audio")
    return tl::make_unexpected(
        wire_error(errc::bad_request, "OpenAI Responses takes no audio parts"));
  return json::object{{"type", "input_text"}, {"text", part_text(p)}};
}

// The items one message is: a message item, and an assistant's calls or a tool's output as
// items of their own.
tl::expected<std::vector<json::object>, error> responses_items(const message& m) {
  std::vector<json::object> items;
  if (m.role == "tool") {
    items.push_back(
        {{"type", "function_call_output"}, {"call_id", m.tool_call_id}, {"output", m.text()}});
    return items;
  }
  if (m.role == "assistant") {
    if (!m.content.empty()) items.push_back({{"role", "assistant"}, {"content", m.text()}});
    for (const auto& c : m.tool_calls)
      items.push_back({{"type", "function_call"},
                       {"call_id", c.id},
                       {"name", c.name},
                       {"arguments", arguments_text(c.arguments)}});
    return items;
  }
  if (m.content.size() == 1 && m.content[0].kind == "text") {
    items.push_back({{"role", m.role}, {"content", m.content[0].text}});
    return items;
  }
  json::array parts;
  for (const auto& p : m.content) {
    auto part = responses_part(p);
    if (!part) return tl::make_unexpected(std::move(part.error()));
    parts.push_back(std::move(*part));
  }
  items.push_back({{"role", m.role}, {"content", std::move(parts)}});
  return items;
}

// Responses says how it ended by a status (and the reason of an incomplete one): in Chat
// Completions' words.
std::string finish_reason(const json::object& body, bool called) {
  auto status = string_at(body, "status");
  if (status == "completed") return called ? "tool_calls" : "stop";
  if (status == "incomplete") {
    auto why = string_at(body.if_contains("incomplete_details"), "reason");
    if (why == "max_output_tokens") return "length";
    return std::string(why.empty() ? status : why);
  }
  return std::string(status);
}

}  // namespace

tl::expected<json::object, error> encode_responses(std::string_view model, const request& r) {
  json::array input;
  // The system prompt as an input message (not `instructions`): the json_object text format
  // asks for the word JSON in the input, and a judge's system prompt is where it is.
  if (!r.system.empty()) input.push_back(json::object{{"role", "system"}, {"content", r.system}});
  for (const auto& m : r.messages) {
    auto items = responses_items(m);
    if (!items) return tl::make_unexpected(std::move(items.error()));
    for (auto& i : *items) input.push_back(std::move(i));
  }
  json::object body{{"model", model}, {"input", std::move(input)}};
  if (!r.tools.empty()) {
    json::array tools;
    for (const auto& t : r.tools) {
      json::object fn{{"type", "function"}, {"name", t.name}, {"parameters", t.parameters}};
      if (t.parameters.empty())
        fn["parameters"] = json::object{{"type", "object"}, {"properties", json::object{}}};
      if (!t.description.empty()) fn["description"] = t.description;
      fn["strict"] = false;  // the schema as given, not the strict subset Responses defaults to
      tools.push_back(std::move(fn));
    }
    body["tools"] = std::move(tools);
  }
  if (r.temperature) body["temperature"] = *r.temperature;
  if (r.max_tokens) body["max_output_tokens"] = *r.max_tokens;
  merge_extra(body, r.extra);
  return body;
}

tl::expected<reply, error> decode_responses(const json::object& body) {
  auto* output = body.if_contains("output");
  if (!output || !output->is_array())
    return tl::make_unexpected(wire_error(errc::bad_provider_response, "the answer has no output"));
  reply r;
  for (const auto& item : output->get_array()) {
    auto type = string_at(&item, "type");
    const auto* o = item.if_object();
    if (!o) continue;
    if (type == "message") {
      if (auto* content = o->if_contains("content"); content && content->is_array())
        for (const auto& c : content->get_array())
          if (string_at(&c, "type") == "output_text") r.text += string_at(&c, "text");
    } else if (type == "function_call") {
      r.tool_calls.push_back({std::string(string_at(&item, "call_id")),
                              std::string(string_at(&item, "name")),
                              parse_arguments(string_at(&item, "arguments"))});
    } else if (type == "reasoning") {
      for (std::string_view list : {"summary", "content"})
        if (auto* parts = o->if_contains(list); parts && parts->is_array())
          for (const auto& p : parts->get_array())
            if (auto text = string_at(&p, "text"); !text.empty())
              r.reasoning += (r.reasoning.empty() ? "" : "\n") + std::string(text);
    }
  }
  r.finish_reason = finish_reason(body, !r.tool_calls.empty());
  r.model = string_at(body, "model");
  const auto* usage = body.if_contains("usage");
  r.usage.input_tokens = int_at(usage, "input_tokens");
  r.usage.output_tokens = int_at(usage, "output_tokens");
  if (usage && usage->is_object()) {
    auto& u = usage->get_object();
    r.usage.cache_read_tokens = int_at(u.if_contains("input_tokens_details"), "cached_tokens");
    r.usage.reasoning_tokens = int_at(u.if_contains("output_tokens_details"), "reasoning_tokens");
  }
  return r;
}

}  // namespace mira::models::detail
