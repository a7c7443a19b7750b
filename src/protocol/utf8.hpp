// UTF-8 as Unicode table 3-7 defines it well-formed: one definition for every layer that shows
// or checks text a study sent (excerpts in logs, terminal and HTML escaping, agent files).
#pragma once

#include <cstddef>
#include <string_view>

namespace mira::detail {

/// The length of the well-formed UTF-8 sequence at s[i] (1 for ASCII), or 0 when the bytes there
/// are not one (overlong forms, surrogates, values above U+10FFFF, a sequence cut short).
constexpr std::size_t utf8_length(std::string_view s, std::size_t i) {
  const auto b = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const auto c = b(i);
  if (c < 0x80) return 1;
  std::size_t n = 0;
  unsigned char lo = 0x80, hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    if (c == 0xE0) lo = 0xA0;  // overlong
    if (c == 0xED) hi = 0x9F;  // UTF-16 surrogates
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    if (c == 0xF0) lo = 0x90;  // overlong
    if (c == 0xF4) hi = 0x8F;  // above U+10FFFF
  } else {
    return 0;
  }
  if (i + n > s.size() || b(i + 1) < lo || b(i + 1) > hi) return 0;
  for (std::size_t k = 2; k < n; ++k)
    if (b(i + k) < 0x80 || b(i + k) > 0xBF) return 0;
  return n;
}

}  // namespace mira::detail
