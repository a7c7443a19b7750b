// One-pass rewrite of JSON text in the host's form (see json_rewrite.hpp). It checks what
// json_scan checks, with the same helpers, so it takes exactly the text the skim takes.
#include "protocol/json_rewrite.hpp"

#include <mira/protocol/json_text.hpp>
#include "protocol/json_scan.hpp"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <limits>

namespace mira::detail {

namespace {

constexpr char hex_digits[] = "0123456789abcdef";

unsigned hex4(const char* p) {
  unsigned u = 0;
  for (int i = 0; i < 4; ++i) {
    char c = p[i];
    u = u * 16 + static_cast<unsigned>(c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10);
  }
  return u;
}

// A code point from a \u escape, written as protocol::append_json_string writes that character.
void append_code_point(std::string& out, unsigned cp) {
  if (cp < 0x20) {
    switch (cp) {
      case '\b':
        out += "\\b";
        return;
      case '\f':
        out += "\\f";
        return;
      case '\n':
        out += "\\n";
        return;
      case '\r':
        out += "\\r";
        return;
      case '\t':
        out += "\\t";
        return;
      default:
        out += "\\u00";
        out += hex_digits[cp >> 4];
        out += hex_digits[cp & 15];
        return;
    }
  }
  if (cp == '"') {
    out += "\\\"";
  } else if (cp == '\\') {
    out += "\\\\";
  } else if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | cp >> 6);
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | cp >> 12);
    out += static_cast<char>(0x80 | (cp >> 6 & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | cp >> 18);
    out += static_cast<char>(0x80 | (cp >> 12 & 0x3F));
    out += static_cast<char>(0x80 | (cp >> 6 & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// Whether a number beyond a double (from_chars' result_out_of_range) is too large rather than
// too small: the decimal order of its first significant digit is positive.
bool overflows(const char* p, const char* end) {
  if (*p == '-') ++p;
  long order = 0;  // digits before the point raise it, zeros after the point lower it
  bool significant = false, fraction = false;
  for (; p < end && *p != 'e' && *p != 'E'; ++p) {
    if (*p == '.') {
      fraction = true;
      continue;
    }
    significant = significant || *p != '0';
    if (!fraction && significant)
      ++order;
    else if (fraction && !significant)
      --order;
  }
  long exponent = 0;
  if (p < end) {
    ++p;
    const bool negative = *p == '-';
    if (*p == '+' || *p == '-') ++p;
    std::from_chars(p, end, exponent);  // at most four digits (the skim's limit)
    if (negative) exponent = -exponent;
  }
  return order + exponent > 0;
}

// A member name as written to the output, for finding a repeated one.
struct written_name {
  std::size_t at, size;
};

class rewriter {
 public:
  rewriter(std::string& out, const char* end, std::vector<json_member_span>* members,
           std::vector<written_name>& names)
      : out_(out), end_(end), members_(members), names_(names) {}

  const char* value(const char* p, int depth) {
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

  const char* ws(const char* p) const {
    // Compact JSON has none: one test for the usual case (every whitespace byte is <= ' ').
    if (p < end_ && ' ' < static_cast<unsigned char>(*p)) return p;
    while (p < end_ && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) ++p;
    return p;
  }

 private:
  const char* literal(const char* p, std::string_view word) {
    if (static_cast<std::size_t>(end_ - p) < word.size() ||
        std::string_view(p, word.size()) != word)
      return nullptr;
    out_ += word;
    return p + word.size();
  }

  const char* string(const char* p) {
    const char* start = p++;
    const char* q = json_plain_run(p, end_);
    if (q < end_ && *q == '"') {  // no escape and nothing but ASCII: as written
      out_.append(start, static_cast<std::size_t>(q + 1 - start));
      return q + 1;
    }
    out_.append(start, static_cast<std::size_t>(q - start));
    p = q;
    for (;;) {
      if (p >= end_) return nullptr;
      if (*p == '"') {
        out_ += '"';
        return p + 1;
      }
      // An escape or a UTF-8 sequence, checked as the skim checks it; a raw control fails.
      const char* next = scan_json_string_special(p, end_);
      if (!next) return nullptr;
      if (*p == '\\')
        escape(p);
      else
        out_.append(p, static_cast<std::size_t>(next - p));
      p = next;
      q = json_plain_run(p, end_);
      out_.append(p, static_cast<std::size_t>(q - p));
      p = q;
    }
  }

  // A checked escape at `p` (its backslash), decoded and written again.
  void escape(const char* p) {
    switch (p[1]) {
      case 'u': {
        unsigned cp = hex4(p + 2);
        if (cp >= 0xD800 && cp <= 0xDBFF)  // the skim checked that a trailing surrogate follows
          cp = 0x10000 + ((cp - 0xD800) << 10) + (hex4(p + 8) - 0xDC00);
        append_code_point(out_, cp);
        return;
      }
      case 'b':
        return append_code_point(out_, '\b');
      case 'f':
        return append_code_point(out_, '\f');
      case 'n':
        return append_code_point(out_, '\n');
      case 'r':
        return append_code_point(out_, '\r');
      case 't':
        return append_code_point(out_, '\t');
      default:  // '"', '\\', '/'
        return append_code_point(out_, static_cast<unsigned char>(p[1]));
    }
  }

  const char* number(const char* p) {
    const char* end = scan_json_number(p, end_);
    if (!end) return nullptr;
    const auto text = std::string_view(p, static_cast<std::size_t>(end - p));
    if (text.find_first_of(".eE") == std::string_view::npos) {
      // An integer: Boost.JSON keeps it as int64 or uint64 when it fits, written back as is
      // ("-0" is the int64 0).
      if (text == "-0") {
        out_ += '0';
        return end;
      }
      std::int64_t i = 0;
      std::uint64_t u = 0;
      if (std::from_chars(p, end, i).ec == std::errc{} ||
          (*p != '-' && std::from_chars(p, end, u).ec == std::errc{})) {
        out_ += text;
        return end;
      }
    }
    double d = 0;
    auto [at, ec] = std::from_chars(p, end, d);
    if (ec == std::errc::result_out_of_range) {
      // Beyond a double: infinity (written as null) or a zero keeping its sign.
      const bool negative = *p == '-';
      d = overflows(p, end) ? std::numeric_limits<double>::infinity() : 0.0;
      if (negative) d = -d;
    } else if (ec != std::errc{} || at != end) {
      return nullptr;
    }
    protocol::append_json_number(out_, d);
    return end;
  }

  const char* array(const char* p, int depth) {
    if (depth > json_scan_max_depth) return nullptr;
    out_ += '[';
    p = ws(p + 1);
    if (p < end_ && *p == ']') {
      out_ += ']';
      return p + 1;
    }
    for (;;) {
      if (!(p = value(p, depth))) return nullptr;
      p = ws(p);
      if (p >= end_) return nullptr;
      if (*p == ']') {
        out_ += ']';
        return p + 1;
      }
      if (*p != ',') return nullptr;
      out_ += ',';
      p = ws(p + 1);
    }
  }

  const char* object(const char* p, int depth) {
    if (depth > json_scan_max_depth) return nullptr;
    const bool top = depth == 1 && members_;
    const auto names_at = names_.size();
    out_ += '{';
    p = ws(p + 1);
    if (p < end_ && *p == '}') {
      out_ += '}';
      return p + 1;
    }
    for (;;) {
      if (p >= end_ || *p != '"') return nullptr;
      json_member_span m;
      m.name = out_.size();
      if (!(p = string(p))) return nullptr;
      m.name_size = out_.size() - m.name;
      names_.push_back({m.name, m.name_size});
      p = ws(p);
      if (p >= end_ || *p != ':') return nullptr;
      out_ += ':';
      m.value = out_.size();
      if (!(p = value(ws(p + 1), depth))) return nullptr;
      m.value_size = out_.size() - m.value;
      if (top) members_->push_back(m);
      p = ws(p);
      if (p >= end_) return nullptr;
      if (*p == '}') break;
      if (*p != ',') return nullptr;
      out_ += ',';
      p = ws(p + 1);
    }
    const bool repeated = repeats_a_name(names_at);
    names_.resize(names_at);
    if (repeated) return nullptr;
    out_ += '}';
    return p + 1;
  }

  // Whether two of the names from `from` on are the same. Compared as rewritten, where a name
  // has one spelling ("\u0061" and "a" are both "a"), and by length first: the bytes of a name
  // just written are read back only when another has its length.
  bool repeats_a_name(std::size_t from) {
    auto text = [&](const written_name& n) { return std::string_view(out_).substr(n.at, n.size); };
    const auto first = names_.begin() + static_cast<std::ptrdiff_t>(from);
    if (names_.end() - first <= 16) {  // what results hold: a sort costs more
      for (auto i = first; i != names_.end(); ++i)
        for (auto j = first; j != i; ++j)
          if (i->size == j->size && text(*i) == text(*j)) return true;
      return false;
    }
    std::sort(first, names_.end(), [&](auto& a, auto& b) {
      return a.size != b.size ? a.size < b.size : text(a) < text(b);
    });
    return std::adjacent_find(first, names_.end(), [&](auto& a, auto& b) {
             return a.size == b.size && text(a) == text(b);
           }) != names_.end();
  }

  std::string& out_;
  const char* end_;
  std::vector<json_member_span>* members_;
  std::vector<written_name>& names_;  // of the objects being written
};

}  // namespace

bool rewrite_json(std::string& out, std::string_view text, std::vector<json_member_span>* members) {
  const auto at = out.size();
  const auto members_at = members ? members->size() : 0;
  // The names of the objects being written, kept per thread with their capacity: an allocation
  // per object was a tenth of the rewrite of a typical result.
  thread_local std::vector<written_name> names;
  names.clear();
  rewriter w(out, text.data() + text.size(), members, names);
  const char* p = w.ws(text.data());
  p = w.value(p, 0);
  if (p && w.ws(p) == text.data() + text.size()) return true;
  out.resize(at);
  if (members) members->resize(members_at);
  return false;
}

}  // namespace mira::detail
