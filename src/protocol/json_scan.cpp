// Validating skim of one JSON value (see json_scan.hpp for what it accepts and why).
#include <mira/detail/json_scan.hpp>

#include <array>
#include <cstdint>

namespace mira::detail {

namespace {

constexpr int max_depth = 200;  // below the host parser's 256, whichever way either counts
constexpr int max_exponent_digits = 4;

// Bytes that end a plain run inside a string: '"', '\\', controls and non-ASCII.
constexpr std::array<bool, 256> string_stop = [] {
  std::array<bool, 256> t{};
  for (int c = 0; c < 0x20; ++c) t[c] = true;
  for (int c = 0x80; c < 0x100; ++c) t[c] = true;
  t['"'] = t['\\'] = true;
  return t;
}();

class scanner {
 public:
  explicit scanner(std::string_view s)
      : p_(s.data()), begin_(s.data()), end_(s.data() + s.size()) {}

  std::size_t value_at(std::size_t pos) {
    p_ = begin_ + pos;
    if (!value(0)) return json_scan_failed;
    return static_cast<std::size_t>(p_ - begin_);
  }

 private:
  unsigned char peek() const { return static_cast<unsigned char>(*p_); }
  bool at_end() const { return p_ >= end_; }

  void ws() {
    while (p_ < end_ && (*p_ == ' ' || *p_ == '\t' || *p_ == '\n' || *p_ == '\r')) ++p_;
  }

  bool value(int depth) {
    if (at_end()) return false;
    switch (*p_) {
      case '"':
        return string();
      case '{':
        return object(depth + 1);
      case '[':
        return array(depth + 1);
      case 't':
        return literal("true");
      case 'f':
        return literal("false");
      case 'n':
        return literal("null");
      default:
        return number();
    }
  }

  bool literal(std::string_view word) {
    if (static_cast<std::size_t>(end_ - p_) < word.size() ||
        std::string_view(p_, word.size()) != word)
      return false;
    p_ += word.size();
    return true;
  }

  bool object(int depth) {
    if (depth > max_depth) return false;
    ++p_;
    ws();
    if (!at_end() && *p_ == '}') return ++p_, true;
    for (;;) {
      if (at_end() || *p_ != '"' || !string()) return false;
      ws();
      if (at_end() || *p_ != ':') return false;
      ++p_;
      ws();
      if (!value(depth)) return false;
      ws();
      if (at_end()) return false;
      if (*p_ == '}') return ++p_, true;
      if (*p_ != ',') return false;
      ++p_;
      ws();
    }
  }

  bool array(int depth) {
    if (depth > max_depth) return false;
    ++p_;
    ws();
    if (!at_end() && *p_ == ']') return ++p_, true;
    for (;;) {
      if (!value(depth)) return false;
      ws();
      if (at_end()) return false;
      if (*p_ == ']') return ++p_, true;
      if (*p_ != ',') return false;
      ++p_;
      ws();
    }
  }

  bool digits() {
    const char* start = p_;
    while (p_ < end_ && *p_ >= '0' && *p_ <= '9') ++p_;
    return p_ != start;
  }

  bool number() {
    if (*p_ == '-') ++p_;
    if (at_end()) return false;
    if (*p_ == '0') {
      ++p_;
    } else if (!digits()) {
      return false;
    }
    if (!at_end() && *p_ == '.') {
      ++p_;
      if (!digits()) return false;
    }
    if (!at_end() && (*p_ == 'e' || *p_ == 'E')) {
      ++p_;
      if (!at_end() && (*p_ == '+' || *p_ == '-')) ++p_;
      const char* start = p_;
      if (!digits() || p_ - start > max_exponent_digits) return false;
    }
    return true;
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

  bool escape() {
    ++p_;  // the backslash
    if (at_end()) return false;
    char c = *p_++;
    switch (c) {
      case '"':
      case '\\':
      case '/':
      case 'b':
      case 'f':
      case 'n':
      case 'r':
      case 't':
        return true;
      case 'u':
        break;
      default:
        return false;
    }
    unsigned u;
    if (end_ - p_ < 4 || !hex4(p_, u)) return false;
    p_ += 4;
    if (u >= 0xDC00 && u <= 0xDFFF) return false;  // a trailing surrogate alone
    if (u < 0xD800 || u > 0xDBFF) return true;
    // A leading surrogate must be followed by an escaped trailing one.
    unsigned low;
    if (end_ - p_ < 6 || p_[0] != '\\' || p_[1] != 'u' || !hex4(p_ + 2, low) || low < 0xDC00 ||
        low > 0xDFFF)
      return false;
    p_ += 6;
    return true;
  }

  // One UTF-8 sequence whose lead byte is >= 0x80 (Unicode table 3-7).
  bool utf8() {
    auto b0 = peek();
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
      return false;
    }
    if (end_ - p_ <= n) return false;
    auto b1 = static_cast<unsigned char>(p_[1]);
    if (b1 < lo || b1 > hi) return false;
    for (int i = 2; i <= n; ++i) {
      auto b = static_cast<unsigned char>(p_[i]);
      if (b < 0x80 || b > 0xBF) return false;
    }
    p_ += n + 1;
    return true;
  }

  bool string() {
    ++p_;  // the opening quote
    for (;;) {
      while (p_ < end_ && !string_stop[peek()]) ++p_;
      if (at_end()) return false;
      auto c = peek();
      if (c == '"') return ++p_, true;
      if (c == '\\') {
        if (!escape()) return false;
      } else if (c >= 0x80) {
        if (!utf8()) return false;
      } else {
        return false;  // a raw control character
      }
    }
  }

  const char* p_;
  const char* begin_;
  const char* end_;
};

}  // namespace

std::size_t scan_json_value(std::string_view text, std::size_t pos) {
  if (pos >= text.size()) return json_scan_failed;
  return scanner(text).value_at(pos);
}

}  // namespace mira::detail
