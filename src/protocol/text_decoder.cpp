// The text decoder: wire types read in one pass from their JSON text into the typed view,
// driven by the field tables of fields.hpp (the DOM decoder in codec.cpp walks the same ones).
//
// The DOM decoder parses every node into a tree, looks fields up, copies them out and destroys
// the tree: most of the host's time per case. Here the fields the typed view holds are read
// straight from the text; the open-ended members (input, expected, metadata, output) are kept
// as their checked text (protocol::lazy_json), a listing's metadata becomes a JSON value, and
// unknown members are skipped. Whatever this reader does not expect (a wrong type, a duplicate
// field, an integer written as 3.0, a negative trial, a missing required field, ...) sends the
// text to the DOM decoder, which either accepts it with the same result or names the offending
// field. The differential test and the fuzz target check that both agree.
#include <mira/protocol/codec.hpp>
#include "protocol/json_scan.hpp"

#include "protocol/fields.hpp"
#include "protocol/text_decoder.hpp"

#include <boost/json/parse.hpp>

#include <charconv>
#include <cmath>
#include <cstring>

namespace mira::protocol {

namespace {

void append_utf8(std::string& out, unsigned cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

unsigned hex4(const char* p) {
  unsigned v = 0;
  for (int i = 0; i < 4; ++i) {
    char c = p[i];
    v = v * 16 + static_cast<unsigned>(c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10);
  }
  return v;
}

std::uint64_t load8(const char* p) {
  std::uint64_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
std::uint32_t load4(const char* p) {
  std::uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// Short runs compared inline, eight bytes at a time: names are short, and a call to memcmp
// per key cost more than the compare itself.
bool same_bytes(const char* a, const char* b, std::size_t n) {
  if (n >= 8) {  // the last word overlapping the one before
    for (std::size_t i = 0; i + 8 < n; i += 8)
      if (load8(a + i) != load8(b + i)) return false;
    return load8(a + n - 8) == load8(b + n - 8);
  }
  if (n >= 4) return load4(a) == load4(b) && load4(a + n - 4) == load4(b + n - 4);
  // 0 to 3 bytes: the first, middle and last cover them all.
  return n == 0 || (a[0] == b[0] && a[n / 2] == b[n / 2] && a[n - 1] == b[n - 1]);
}

// Reads JSON text, checking it as it goes: a document it reads to the end is one that
// scan_json_value accepts too (the same strings, numbers, literals and nesting limit), so the
// text needs no skim before it. Every method returns false when the text is not what the typed
// view expects at that point, or not valid JSON; the caller then leaves the text to the DOM
// decoder, or to the multiplexer's checked path.
class text_reader {
 public:
  explicit text_reader(std::string_view s) : text_(s), p_(s.data()), end_(s.data() + s.size()) {}

  bool at_end() {
    ws();
    return p_ == end_;
  }

  // `{ "key": value, ... }`: on_member(key) reads (or skips) each value.
  template <class F>
  bool object(F&& on_member) {
    return object([] { return std::string_view(); }, on_member);
  }

  // The same, with expected() naming the key most likely next: when the text's key is that
  // name, it is matched in place (the name itself is handed on, not a view of the text)
  // without searching for the string's end.
  template <class E, class F>
  bool object(E&& expected, F&& on_member) {
    if (!eat('{') || !enter()) return false;
    if (eat('}')) return leave();
    do {
      ws();
      std::string_view k = expected();
      if (!(!k.empty() && key_is(k)) && !key(k)) return false;
      if (!eat(':')) return false;
      ws();
      if (!on_member(k)) return false;
    } while (eat(','));
    return eat('}') && leave();
  }

  // `[ value, ... ]`: on_element() reads each value.
  template <class F>
  bool array(F&& on_element) {
    if (!eat('[') || !enter()) return false;
    if (eat(']')) return leave();
    do {
      ws();
      if (!on_element()) return false;
    } while (eat(','));
    return eat(']') && leave();
  }

  bool null() {
    if (end_ - p_ >= 4 && std::memcmp(p_, "null", 4) == 0) {
      p_ += 4;
      return true;
    }
    return false;
  }
  bool is(char c) const { return p_ < end_ && *p_ == c; }

  // A string's content: a view into the text unless it has an escape, else decoded into
  // `scratch` (so a value copied into its destination is allocated once, there). Controls and
  // non-ASCII bytes are checked as the skim checks them; raw UTF-8 needs no decoding, so it
  // keeps the string a view.
  bool string_view(std::string_view& out, std::string& scratch) {
    if (!is('"')) return false;
    const char* start = p_ + 1;
    const char* q = mira::detail::json_plain_run(start, end_);
    while (q < end_ && *q != '"' && *q != '\\') {
      const char* next = mira::detail::scan_json_string_special(q, end_);
      if (!next) return false;
      q = mira::detail::json_plain_run(next, end_);
    }
    if (q >= end_) return false;
    if (*q == '"') {
      out = std::string_view(start, static_cast<std::size_t>(q - start));
      p_ = q + 1;
      return true;
    }
    // From the first escape on, each special checked as the skim checks it, then decoded.
    scratch.assign(start, static_cast<std::size_t>(q - start));
    for (;;) {
      if (q >= end_) return false;
      if (*q == '"') break;
      const char* next = mira::detail::scan_json_string_special(q, end_);
      if (!next) return false;
      if (*q == '\\') {
        p_ = q;
        unescape(scratch);  // to `next`
      } else {
        scratch.append(q, static_cast<std::size_t>(next - q));
      }
      q = mira::detail::json_plain_run(next, end_);
      scratch.append(next, static_cast<std::size_t>(q - next));
    }
    p_ = q + 1;
    out = scratch;
    return true;
  }

  bool string(std::string& out) {
    std::string_view v;
    if (!string_view(v, out)) return false;
    if (v.data() != out.data()) out.assign(v);
    return true;
  }

  // An integer. The common shape in one pass: up to 18 digits (exact in int64_t) and nothing
  // numeric after them; anything else by integer_slow.
  bool integer(std::int64_t& out) {
    const char* p = p_;
    bool negative = p < end_ && *p == '-';
    if (negative) ++p;
    const char* first = p;
    std::uint64_t m = 0;  // 19 digits fit; only 18 are taken here
    for (; p < end_ && static_cast<unsigned>(*p - '0') <= 9 && p - first < 19; ++p)
      m = m * 10 + static_cast<std::uint64_t>(*p - '0');
    auto len = p - first;
    if (len == 0 || len > 18 || (len > 1 && *first == '0') || (negative && m == 0) ||
        (p < end_ && (*p == '.' || *p == 'e' || *p == 'E' || static_cast<unsigned>(*p - '0') <= 9)))
      return integer_slow(out);
    p_ = p;
    auto v = static_cast<std::int64_t>(m);
    out = negative ? -v : v;
    return true;
  }

  bool integer_slow(std::int64_t& out) {
    const char* start = p_;
    const char* end = mira::detail::scan_json_number(start, end_);  // JSON's grammar: no "01"
    if (!end) return false;
    // A fraction or an exponent, or "-0" (a double to the DOM parser): the DOM's to read.
    for (const char* c = start; c < end; ++c)
      if (*c == '.' || *c == 'e' || *c == 'E') return false;
    if (end - start == 2 && start[0] == '-' && start[1] == '0') return false;
    auto [parsed, ec] = std::from_chars(start, end, out);
    if (ec != std::errc{} || parsed != end) return false;
    p_ = end;
    return true;
  }

  // A number as a double, correctly rounded. The common shapes in one pass: an integer of up
  // to 18 digits (exact in int64_t) and `-?int.frac` within exact_decimal's bounds; anything
  // else (an exponent, more digits, "-0") by the general reading below.
  bool number(double& out) {
    const char* p = p_;
    bool negative = p < end_ && *p == '-';
    if (negative) ++p;
    const char* first = p;
    std::uint64_t m = 0;
    int digits = 0;  // significant ones, as exact_decimal counts them
    for (; p < end_ && static_cast<unsigned>(*p - '0') <= 9; ++p) {
      if (m != 0 || *p != '0') ++digits;
      m = m * 10 + static_cast<std::uint64_t>(*p - '0');
    }
    auto int_len = p - first;
    // JSON's grammar holds for these shapes but for a leading zero, which number_slow refuses.
    if (int_len > 0 && int_len <= 18 && !(int_len > 1 && *first == '0') &&
        !(p < end_ && (*p == 'e' || *p == 'E'))) {
      if (!(p < end_ && *p == '.')) {
        if (negative && m == 0) return number_slow(out);  // "-0": the DOM's to read
        p_ = p;
        auto v = static_cast<double>(m);
        out = negative ? -v : v;
        return true;
      }
      const char* frac = ++p;
      for (; p < end_ && static_cast<unsigned>(*p - '0') <= 9; ++p) {
        if (m != 0 || *p != '0') ++digits;
        m = m * 10 + static_cast<std::uint64_t>(*p - '0');
        if (digits > 15) return number_slow(out);
      }
      auto decimals = p - frac;
      if (decimals > 0 && decimals <= 22 && !(p < end_ && (*p == 'e' || *p == 'E'))) {
        p_ = p;
        double v = static_cast<double>(m) / pow10[decimals];
        out = negative ? -v : v;
        return true;
      }
    }
    return number_slow(out);
  }

  // Any other number JSON's grammar allows (as the scanner reads it).
  bool number_slow(double& out) {
    const char* start = p_;
    const char* valid_end = mira::detail::scan_json_number(start, end_);
    if (!valid_end) return false;
    p_ = valid_end;
    std::string_view token(start, static_cast<std::size_t>(p_ - start));
    if (token == "-0") return false;
    if (token.find_first_of(".eE") == std::string_view::npos) {
      std::int64_t i;
      auto [end, ec] = std::from_chars(start, p_, i);
      if (ec != std::errc{} || end != p_) return false;  // beyond int64: the DOM decides
      out = static_cast<double>(i);
      return true;
    }
    if (exact_decimal(start, p_, out)) return true;
    auto [end, ec] = std::from_chars(start, p_, out);
    return ec == std::errc{} && end == p_ && std::isfinite(out);
  }

  // `-?digits.digits` with at most 15 significant digits and 22 decimals: the digits as an
  // integer and ten to the decimals are both exact doubles, so their quotient is the correctly
  // rounded value, as from_chars would give it (and several times cheaper: scores, costs).
  static constexpr double pow10[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                     1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                     1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
  static bool exact_decimal(const char* p, const char* end, double& out) {
    bool negative = *p == '-';
    if (negative) ++p;
    std::uint64_t m = 0;
    int digits = 0;
    int decimals = -1;  // digits after the point, once it is seen
    for (; p < end; ++p) {
      if (*p == '.') {
        if (decimals >= 0) return false;
        decimals = 0;
        continue;
      }
      if (*p < '0' || *p > '9') return false;  // an exponent: from_chars
      if (m != 0 || *p != '0') ++digits;
      if (digits > 15) return false;
      m = m * 10 + static_cast<std::uint64_t>(*p - '0');
      if (decimals >= 0) ++decimals;
    }
    if (decimals <= 0 || decimals > 22) return false;
    double v = static_cast<double>(m) / pow10[decimals];
    out = negative ? -v : v;
    return true;
  }

  bool boolean(bool& out) {
    if (end_ - p_ >= 4 && std::memcmp(p_, "true", 4) == 0) {
      p_ += 4;
      out = true;
      return true;
    }
    if (end_ - p_ >= 5 && std::memcmp(p_, "false", 5) == 0) {
      p_ += 5;
      out = false;
      return true;
    }
    return false;
  }

  // The next value's text, skipped (checked by the skim, nested within what encloses it).
  bool raw(std::string_view& out) {
    auto pos = static_cast<std::size_t>(p_ - text_.data());
    auto end = mira::detail::scan_json_value(text_, pos, depth_);
    if (end == mira::detail::json_scan_failed) return false;
    out = text_.substr(pos, end - pos);
    p_ = text_.data() + end;
    return true;
  }
  bool skip() {
    std::string_view ignored;
    return raw(ignored);
  }

  // Where the reader is, to come back to it when a value is better read another way.
  struct position {
    const char* p;
    int depth;
  };
  position mark() const { return {p_, depth_}; }
  void back_to(position m) {
    p_ = m.p;
    depth_ = m.depth;
  }

 private:
  // Compact JSON has none: one test, inline, for the usual case (whitespace bytes are <= ' ').
  void ws() {
    if (p_ < end_ && ' ' < static_cast<unsigned char>(*p_)) return;
    skip_ws();
  }
  // Out of line, so that ws() itself stays small enough to be inlined everywhere (GCC 12 kept
  // the two together as a call, which cost more than the loop saved).
  [[gnu::noinline]] void skip_ws() {
    const char* p = p_;  // a local: stepping the member would store it on every byte
    while (p < end_ && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) ++p;
    p_ = p;
  }
  // Arrays and objects open around the reader: the skim's nesting limit applies to them.
  bool enter() { return ++depth_ <= mira::detail::json_scan_max_depth; }
  bool leave() {
    --depth_;
    return true;
  }

  bool eat(char c) {
    if (!is(c)) {
      ws();
      if (!is(c)) return false;
    }
    ++p_;
    return true;
  }

  // Keys without escapes are views into the text; the rare escaped key is decoded.
  bool key(std::string_view& out) { return string_view(out, key_scratch_); }

  // At a key: is it `name` (plain ASCII: no quote, backslash or control)? Then past it. When
  // the key's first name.size() bytes are the name's and the next is a quote, the key is that
  // name, and a valid string: nothing in the name can have escaped that quote.
  bool key_is(std::string_view name) {
    std::size_t n = name.size();
    if (static_cast<std::size_t>(end_ - p_) < n + 2 || *p_ != '"' || p_[n + 1] != '"' ||
        !same_bytes(p_ + 1, name.data(), n))
      return false;
    p_ += n + 2;
    return true;
  }

  // At a backslash of a checked string: appends what it stands for.
  void unescape(std::string& out) {
    char c = p_[1];
    p_ += 2;
    switch (c) {
      case 'b':
        out += '\b';
        return;
      case 'f':
        out += '\f';
        return;
      case 'n':
        out += '\n';
        return;
      case 'r':
        out += '\r';
        return;
      case 't':
        out += '\t';
        return;
      case 'u':
        break;
      default:  // '"', '\\', '/'
        out += c;
        return;
    }
    unsigned cp = hex4(p_);
    p_ += 4;
    if (cp >= 0xD800 && cp <= 0xDBFF) {  // paired: checked by the scanner
      unsigned low = hex4(p_ + 2);
      p_ += 6;
      cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
    }
    append_utf8(out, cp);
  }

  std::string_view text_;
  const char* p_;
  const char* end_;
  int depth_ = 0;
  std::string key_scratch_;
};

// Each known field may appear once; a repeat goes to the DOM decoder, which keeps the last.
class seen_fields {
 public:
  bool first(std::size_t bit) {
    auto b = std::uint64_t{1} << bit;
    if (mask_ & b) return false;
    mask_ |= b;
    return true;
  }
  bool has(std::size_t bit) const { return mask_ & (std::uint64_t{1} << bit); }

 private:
  std::uint64_t mask_ = 0;
};

// A field name against a key, inline: names are short and the first one tried is nearly
// always the one, so a call to memcmp per key cost more than the compare itself.
bool same_name(std::string_view name, std::string_view k) {
  return name.size() == k.size() &&
         (name.data() == k.data() || same_bytes(name.data(), k.data(), name.size()));
}

// One member's value into `out`, by the member's type. Null is absent, as in the DOM decoder.
bool read_value(text_reader& r, std::string& out) {
  return r.null() || r.string(out);
}
bool read_value(text_reader& r, std::optional<std::string>& out) {
  if (r.null()) return true;
  out.emplace();
  return r.string(*out);
}
bool read_value(text_reader& r, std::int64_t& out) {
  return r.null() || r.integer(out);
}
bool read_value(text_reader& r, std::optional<std::int64_t>& out) {
  if (r.null()) return true;
  std::int64_t v;
  if (!r.integer(v)) return false;
  out = v;
  return true;
}
bool read_value(text_reader& r, double& out) {
  return r.null() || r.number(out);
}
bool read_value(text_reader& r, bool& out) {
  return r.null() || r.boolean(out);
}
bool read_value(text_reader& r, error_kind& out) {
  if (r.null()) return true;
  std::string kind;
  if (!r.string(kind)) return false;
  // An unknown future kind is not an infra signal; only "infra" changes the default.
  out = kind == "infra" ? error_kind::infra : error_kind::subject;
  return true;
}

// An open-ended member built straight from the text, without a parser: strings, integers
// that fit int64_t, booleans, null, and arrays and objects of them, which is what studies put
// in a listing's metadata. False for anything whose reading is Boost.JSON's own to decide (a
// number with a fraction or an exponent, whose rounding differs from std::from_chars in Boost
// 1.81; an integer beyond int64_t or "-0"; a repeated key): the member is then parsed, and so
// holds exactly what the DOM decoder holds.
bool build_value(text_reader& r, json::value& out, std::string& scratch);

bool build_array(text_reader& r, json::array& a, std::string& scratch) {
  return r.array([&] { return build_value(r, a.emplace_back(nullptr), scratch); });
}
bool build_object(text_reader& r, json::object& o, std::string& scratch) {
  return r.object([&](std::string_view k) {
    auto [it, fresh] = o.emplace(k, nullptr);
    return fresh && build_value(r, it->value(), scratch);
  });
}

bool build_value(text_reader& r, json::value& out, std::string& scratch) {
  if (r.is('"')) {
    std::string_view s;
    if (!r.string_view(s, scratch)) return false;
    out.emplace_string().assign(s);
    return true;
  }
  if (r.is('[')) return build_array(r, out.emplace_array(), scratch);
  if (r.is('{')) return build_object(r, out.emplace_object(), scratch);
  if (r.null()) {
    out = nullptr;
    return true;
  }
  bool b;
  if (r.boolean(b)) {
    out = b;
    return true;
  }
  std::int64_t i;
  if (!r.integer(i)) return false;
  out = i;
  return true;
}

// A listing's metadata object, built in place (no value to build and move from); what
// build_value does not take is parsed. Another type declines.
bool read_value(text_reader& r, json::object& out) {
  if (r.null()) return true;
  if (!r.is('{')) return false;
  auto start = r.mark();
  std::string scratch;
  if (build_object(r, out, scratch)) return true;
  out = json::object();
  r.back_to(start);
  std::string_view text;
  if (!r.raw(text)) return false;
  boost::system::error_code ec;
  auto v = json::parse(text, ec, json::storage_ptr(), mira::detail::host_parse_options());
  if (ec || !v.is_object()) return false;
  out = std::move(v.get_object());
  return true;
}

// An open-ended member kept as its text: checked as the skim checks it (a strict subset of
// what the parser behind get() accepts), of the member's kind, and copied.
template <class T>
bool read_value(text_reader& r, lazy_json<T>& out) {
  if (r.null()) return true;
  if constexpr (std::is_same_v<T, json::array>) {
    if (!r.is('[')) return false;
  } else if constexpr (std::is_same_v<T, json::object>) {
    if (!r.is('{')) return false;
  }
  std::string_view text;
  if (!r.raw(text)) return false;
  out = lazy_json<T>::from_checked_text(text);
  return true;
}
bool read_value(text_reader& r, std::optional<lazy_json<json::value>>& out) {
  if (r.null()) return true;
  return read_value(r, out.emplace());
}

bool read_value(text_reader& r, std::vector<std::string>& out) {
  if (r.null()) return true;
  return r.array([&] {
    out.emplace_back();
    return r.string(out.back());
  });
}
bool read_value(text_reader& r, axis_params& out) {
  if (r.null()) return true;
  std::string value;
  return r.object([&](std::string_view k) {
    return r.string(value) && out.emplace(std::string(k), std::move(value)).second;
  });
}
bool read_value(text_reader& r, std::map<std::string, double>& out) {
  if (r.null()) return true;
  return r.object([&](std::string_view k) {
    double v;
    return r.number(v) && out.emplace(std::string(k), v).second;
  });
}

template <detail::described T>
bool read_object(text_reader& r, T& out);

template <detail::described T>
bool read_value(text_reader& r, T& out) {
  return r.null() || read_object(r, out);
}
template <detail::described T>
bool read_value(text_reader& r, std::vector<T>& out) {
  if (r.null()) return true;
  // Results carry a few scores: room for them at once rather than a reallocation per score.
  return r.array([&] {
    if (out.empty()) out.reserve(4);
    return read_object(r, out.emplace_back());
  });
}
bool read_value(text_reader& r, sample_list& out) {
  if (r.null()) return true;
  return r.array([&] {
    sample_info s;
    if (!read_object(r, s)) return false;
    out.push_back(std::move(s));
    return true;
  });
}

// Field I of T read into its member: the entries of a table indexed by field, so that a member
// is dispatched with one indexed call instead of a test for every field before it.
template <detail::described T, std::size_t I>
bool read_field(text_reader& r, T& out) {
  const auto& fd = std::get<I>(detail::description<T>::fields);
  auto& m = out.*fd.member;
  if ((fd.rules & detail::required) && r.null()) return false;  // the DOM decoder names it
  bool good = read_value(r, m);
  if constexpr (std::is_same_v<std::remove_cvref_t<decltype(m)>, std::int64_t>)
    good = good && !((fd.rules & detail::non_negative) && m < 0);
  if constexpr (std::is_same_v<std::remove_cvref_t<decltype(m)>, std::optional<std::int64_t>>)
    good = good && !((fd.rules & detail::non_negative) && m && *m < 0);
  return good;
}
template <detail::described T, std::size_t... I>
constexpr auto field_readers(std::index_sequence<I...>) {
  return std::array<bool (*)(text_reader&, T&), sizeof...(I)>{&read_field<T, I>...};
}

// An object of a described type: each member is matched against the type's field table.
template <detail::described T>
bool read_object(text_reader& r, T& out) {
  static constexpr auto readers =
      field_readers<T>(std::make_index_sequence<detail::field_count<T>>{});
  static_assert(detail::field_count<T> <= 64, "seen_fields holds 64 bits");
  seen_fields seen;
  constexpr auto& names = detail::field_names<T>;
  std::size_t next = 0;  // studies write the fields in one order: the next one is tried first
  auto expected = [&] { return next < names.size() ? names[next] : names[0]; };
  bool ok = r.object(expected, [&](std::string_view k) {
    std::size_t found = names.size();
    for (std::size_t n = 0; n < names.size(); ++n) {
      std::size_t i = next + n < names.size() ? next + n : next + n - names.size();
      if (same_name(names[i], k)) {
        found = i;
        break;
      }
    }
    if (found == names.size()) return r.skip();
    next = found + 1;
    if (!seen.first(found)) return false;
    return readers[found](r, out);
  });
  if (!ok) return false;
  bool complete = true;
  detail::for_each_field<T>([&](const auto& fd, std::size_t i) {
    if ((fd.rules & detail::required) && !seen.has(i)) complete = false;
    if constexpr (std::is_same_v<std::remove_cvref_t<decltype(out.*fd.member)>, std::int64_t>)
      if ((fd.rules & detail::zero_means_one) && out.*fd.member == 0) out.*fd.member = 1;
  });
  return complete;
}

// A whole text of a described type, or nothing when the text reader leaves it to the DOM.
template <detail::described T>
bool read_document(std::string_view text, T& out) {
  text_reader r(text);
  return read_object(r, out) && r.at_end();
}

// Whatever the text reader does not take: the DOM decoder's answer or error.
template <class T, class Decode>
decoded<T> through_dom(std::string_view text, Decode&& decode) {
  boost::system::error_code ec;
  auto v = json::parse(text, ec, json::storage_ptr(), mira::detail::host_parse_options());
  if (ec) return tl::make_unexpected(decode_error{"", "not valid JSON (" + ec.message() + ")"});
  return decode(v);
}

decoded<run_result> run_result_through_dom(std::string_view text) {
  return through_dom<run_result>(
      text, [&](const json::value& v) { return decode_run_result(v, std::string(text)); });
}

template <class T, decoded<T> (*Decode)(const json::value&)>
decoded<T> decode_text(std::string_view text) {
  T out;
  if (read_document(text, out)) return out;
  return through_dom<T>(text, Decode);
}

}  // namespace

decoded<run_result> decode_run_result_text(std::string_view text) {
  run_result res;
  if (auto e = detail::decode_run_result_text_into(text, res)) return tl::make_unexpected(*e);
  return res;
}

decoded<list_result> decode_list_result_text(std::string_view text) {
  return decode_text<list_result, decode_list_result>(text);
}

decoded<list_samples_result> decode_list_samples_result_text(std::string_view text) {
  return decode_text<list_samples_result, decode_list_samples_result>(text);
}

decoded<run_params> decode_run_params_text(std::string_view text) {
  return decode_text<run_params, decode_run_params>(text);
}

bool detail::read_run_result_text(std::string_view text, run_result& out) {
  if (read_document(text, out)) {
    out.raw_json.assign(text.data(), text.size());
    return true;
  }
  out = run_result{};  // the text reader may have filled part of it
  return false;
}

std::optional<decode_error> detail::decode_run_result_text_into(std::string_view text,
                                                                run_result& out) {
  if (read_run_result_text(text, out)) return std::nullopt;
  auto res = run_result_through_dom(text);
  if (!res) return std::move(res.error());
  out = std::move(*res);
  return std::nullopt;
}

}  // namespace mira::protocol
