// Validating skim of one JSON value (see json_scan.hpp for what it accepts and why).
#include "protocol/json_scan.hpp"

#include <array>
#include <cstdint>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace mira::detail {

namespace {

constexpr int max_exponent_digits = 4;

// Bytes that end a plain run inside a string: '"', '\\', controls and non-ASCII.
constexpr std::array<bool, 256> string_stop = [] {
  std::array<bool, 256> t{};
  for (int c = 0; c < 0x20; ++c) t[c] = true;
  for (int c = 0x80; c < 0x100; ++c) t[c] = true;
  t['"'] = t['\\'] = true;
  return t;
}();

}  // namespace

// Sixteen bytes at a time where SSE2 is there (a signed compare below 0x20 catches controls
// and every byte >= 0x80 at once). A local pointer, not a member: stores through `this` in the
// loop cost a store per byte.
const char* json_plain_run(const char* p, const char* end) {
#if defined(__SSE2__)
  const __m128i quote = _mm_set1_epi8('"'), backslash = _mm_set1_epi8('\\'),
                space = _mm_set1_epi8(0x20);
  while (end - p >= 16) {
    __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    __m128i stop =
        _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, backslash)),
                     _mm_cmplt_epi8(v, space));
    if (int mask = _mm_movemask_epi8(stop)) return p + __builtin_ctz(static_cast<unsigned>(mask));
    p += 16;
  }
#endif
  while (p < end && !string_stop[static_cast<unsigned char>(*p)]) ++p;
  return p;
}

namespace {

// Each step takes the position and returns the one past what it accepted, or nullptr: the
// position stays in a register (a member would be stored on every byte, since a char read
// may alias it).
class scanner {
 public:
  explicit scanner(const char* end) : end_(end) {}

  const char* value(const char* p, int depth) const {
    if (p >= end_) return nullptr;
    switch (*p) {
      case '"':
        return string(p);
      case '{':
        return object(p, depth + 1);
      case '[':
        return array(p, depth + 1);
      case 't':
        return literal(p, "true");
      case 'f':
        return literal(p, "false");
      case 'n':
        return literal(p, "null");
      default:
        return number(p);
    }
  }

  // The steps below are used alone too (scan_json_string_special, scan_json_number).
  const char* ws(const char* p) const {
    // Compact JSON has none: one test for the usual case (every whitespace byte is <= ' ').
    if (p < end_ && ' ' < static_cast<unsigned char>(*p)) return p;
    while (p < end_ && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) ++p;
    return p;
  }

  const char* literal(const char* p, std::string_view word) const {
    if (static_cast<std::size_t>(end_ - p) < word.size() ||
        std::string_view(p, word.size()) != word)
      return nullptr;
    return p + word.size();
  }

  const char* object(const char* p, int depth) const {
    if (depth > json_scan_max_depth) return nullptr;
    p = ws(p + 1);
    if (p < end_ && *p == '}') return p + 1;
    // The colon, comma or brace is tested before any whitespace is looked for: compact
    // JSON has none, and each test saved is one per member.
    for (;;) {
      if (p >= end_ || *p != '"' || !(p = string(p))) return nullptr;
      if (p >= end_ || *p != ':') {
        p = ws(p);
        if (p >= end_ || *p != ':') return nullptr;
      }
      if (!(p = value(ws(p + 1), depth))) return nullptr;
      if (p >= end_ || (*p != ',' && *p != '}')) {
        p = ws(p);
        if (p >= end_ || (*p != ',' && *p != '}')) return nullptr;
      }
      if (*p == '}') return p + 1;
      p = ws(p + 1);
    }
  }

  const char* array(const char* p, int depth) const {
    if (depth > json_scan_max_depth) return nullptr;
    p = ws(p + 1);
    if (p < end_ && *p == ']') return p + 1;
    for (;;) {
      if (!(p = value(p, depth))) return nullptr;
      p = ws(p);
      if (p >= end_) return nullptr;
      if (*p == ']') return p + 1;
      if (*p != ',') return nullptr;
      p = ws(p + 1);
    }
  }

  const char* digits(const char* p) const {
    while (p < end_ && *p >= '0' && *p <= '9') ++p;
    return p;
  }

  const char* number(const char* p) const {
    if (*p == '-') ++p;
    if (p >= end_) return nullptr;
    if (*p == '0') {
      ++p;
    } else {
      auto q = digits(p);
      if (q == p) return nullptr;
      p = q;
    }
    if (p < end_ && *p == '.') {
      auto q = digits(p + 1);
      if (q == p + 1) return nullptr;
      p = q;
    }
    if (p < end_ && (*p == 'e' || *p == 'E')) {
      ++p;
      if (p < end_ && (*p == '+' || *p == '-')) ++p;
      auto q = digits(p);
      if (q == p || q - p > max_exponent_digits) return nullptr;
      p = q;
    }
    return p;
  }

  static bool hex4(const char* p, unsigned& out) {
    out = 0;
    for (int i = 0; i < 4; ++i) {
      char c = p[i];
      unsigned d;
      if (c >= '0' && c <= '9')
        d = static_cast<unsigned>(c - '0');
      else if (c >= 'a' && c <= 'f')
        d = static_cast<unsigned>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F')
        d = static_cast<unsigned>(c - 'A' + 10);
      else
        return false;
      out = out * 16 + d;
    }
    return true;
  }

  // At a backslash: past the escape, or nullptr.
  const char* escape(const char* p) const {
    ++p;
    if (p >= end_) return nullptr;
    switch (*p++) {
      case '"':
      case '\\':
      case '/':
      case 'b':
      case 'f':
      case 'n':
      case 'r':
      case 't':
        return p;
      case 'u':
        break;
      default:
        return nullptr;
    }
    unsigned u;
    if (end_ - p < 4 || !hex4(p, u)) return nullptr;
    p += 4;
    if (u >= 0xDC00 && u <= 0xDFFF) return nullptr;  // a trailing surrogate alone
    if (u < 0xD800 || u > 0xDBFF) return p;
    // A leading surrogate must be followed by an escaped trailing one.
    unsigned low;
    if (end_ - p < 6 || p[0] != '\\' || p[1] != 'u' || !hex4(p + 2, low) || low < 0xDC00 ||
        low > 0xDFFF)
      return nullptr;
    return p + 6;
  }

  // One UTF-8 sequence whose lead byte is >= 0x80 (Unicode table 3-7).
  const char* utf8(const char* p) const {
    auto b0 = static_cast<unsigned char>(*p);
    int n;
    unsigned char lo = 0x80, hi = 0xBF;
    if (b0 >= 0xC2 && b0 <= 0xDF) {
      n = 1;
    } else if (b0 >= 0xE0 && b0 <= 0xEF) {
      n = 2;
      if (b0 == 0xE0) lo = 0xA0;
      if (b0 == 0xED) hi = 0x9F;
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
      n = 3;
      if (b0 == 0xF0) lo = 0x90;
      if (b0 == 0xF4) hi = 0x8F;
    } else {
      return nullptr;
    }
    if (end_ - p <= n) return nullptr;
    auto b1 = static_cast<unsigned char>(p[1]);
    if (b1 < lo || b1 > hi) return nullptr;
    for (int i = 2; i <= n; ++i) {
      auto b = static_cast<unsigned char>(p[i]);
      if (b < 0x80 || b > 0xBF) return nullptr;
    }
    return p + n + 1;
  }

  const char* string(const char* p) const {
    ++p;  // the opening quote
    for (;;) {
      p = json_plain_run(p, end_);
      if (p >= end_) return nullptr;
      if (*p == '"') return p + 1;
      if (!(p = special(p))) return nullptr;
    }
  }

  // Where a plain run stopped, other than at the closing quote.
  const char* special(const char* p) const {
    auto c = static_cast<unsigned char>(*p);
    if (c == '\\') return escape(p);
    if (c >= 0x80) return utf8(p);
    return nullptr;  // a raw control character
  }

  const char* end_;
};

}  // namespace

std::size_t scan_json_value(std::string_view text, std::size_t pos, int depth) {
  if (pos >= text.size()) return json_scan_failed;
  const char* end = scanner(text.data() + text.size()).value(text.data() + pos, depth);
  return end ? static_cast<std::size_t>(end - text.data()) : json_scan_failed;
}

const char* scan_json_string_special(const char* p, const char* end) {
  return p < end && *p != '"' ? scanner(end).special(p) : nullptr;
}

const char* scan_json_number(const char* p, const char* end) {
  return p < end ? scanner(end).number(p) : nullptr;
}

}  // namespace mira::detail
