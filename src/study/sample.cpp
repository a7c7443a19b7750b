// A sample's input as text (see sample.hpp).
#include <mira/study/sample.hpp>

#include <optional>
#include <string_view>

namespace mira::study {

namespace {

// A string, or the text of a text part.
std::optional<std::string_view> text_of(const json::value& v) {
  if (const auto* s = v.if_string()) return std::string_view(*s);
  const auto* o = v.if_object();
  if (!o) return std::nullopt;
  const auto* kind = o->if_contains("kind");
  const auto* text = o->if_contains("text");
  if (!kind || !kind->is_string() || kind->get_string() != "text" || !text || !text->is_string())
    return std::nullopt;
  return std::string_view(text->get_string());
}

}  // namespace

std::string input_text(const json::array& input) {
  std::string out;
  bool first = true;
  const auto add = [&](std::string_view text) {
    if (!first) out += '\n';
    first = false;
    out += text;
  };
  for (const auto& v : input) {
    if (auto t = text_of(v)) {
      add(*t);
      continue;
    }
    // A message {"role": ..., "content": a string or parts}.
    const auto* o = v.if_object();
    const auto* content = o ? o->if_contains("content") : nullptr;
    if (!content) continue;
    if (auto t = text_of(*content)) add(*t);
    if (const auto* parts = content->if_array())
      for (const auto& p : *parts)
        if (auto t = text_of(p)) add(*t);
  }
  return out;
}

}  // namespace mira::study
