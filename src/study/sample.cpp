// A sample's input as text (see sample.hpp).
#include <mira/study/sample.hpp>

namespace mira::study {

std::string input_text(const json::array& input) {
  std::string out;
  bool first = true;
  for (const auto& v : input) {
    std::string_view text;
    if (const auto* s = v.if_string()) {
      text = *s;
    } else if (const auto* o = v.if_object()) {
      const auto* kind = o->if_contains("kind");
      const auto* t = o->if_contains("text");
      if (!kind || !kind->is_string() || kind->get_string() != "text" || !t || !t->is_string())
        continue;
      text = t->get_string();
    } else {
      continue;
    }
    if (!first) out += '\n';
    first = false;
    out += text;
  }
  return out;
}

}  // namespace mira::study
