// The host's JSON writer (see json_text.hpp).
#include <mira/protocol/codec.hpp>
#include <mira/protocol/json_text.hpp>

#include <charconv>
#include <cmath>
#include <cstdlib>

namespace mira::protocol {

namespace json = boost::json;

void append_json_number(std::string& out, double d) {
  if (!std::isfinite(d)) {
    out += "null";
    return;
  }
  if (d == 0) {
    // "-0" would read back as the integer 0 (Boost.JSON, most readers): the sign is kept by
    // the one spelling every reader takes as a double.
    out += std::signbit(d) ? "-0.0" : "0";
    return;
  }
  // Integral and exactly an int64: the common case (counts, token totals), without the
  // digit layout below.
  if (std::fabs(d) < 9.2e18 && std::trunc(d) == d) {
    char buf[24];
    auto [end, ec] = std::to_chars(buf, buf + sizeof buf, static_cast<std::int64_t>(d));
    out.append(buf, end);
    return;
  }
  // The shortest round-trip digits, then ECMAScript's Number::toString layout (RFC 8785 3.2.2.3)
  // of s x 10^(n-k): s the k digits, n the decimal exponent of the first digit plus one.
  char sci[32];
  auto [end, ec] = std::to_chars(sci, sci + sizeof sci, d, std::chars_format::scientific);
  const char* p = sci;
  if (*p == '-') {
    out += '-';
    ++p;
  }
  char digits[20];
  int k = 0;
  for (; p < end && *p != 'e'; ++p)
    if (*p != '.') digits[k++] = *p;
  // p is at the 'e' of "e+DD" / "e-DDD" (not NUL-terminated).
  const bool negative_exponent = p + 1 < end && p[1] == '-';
  int exponent = 0;
  std::from_chars(p + 2, end, exponent);
  int n = (negative_exponent ? -exponent : exponent) + 1;
  if (k <= n && n <= 21) {
    out.append(digits, static_cast<std::size_t>(k));
    out.append(static_cast<std::size_t>(n - k), '0');
  } else if (0 < n && n <= 21) {
    out.append(digits, static_cast<std::size_t>(n));
    out += '.';
    out.append(digits + n, static_cast<std::size_t>(k - n));
  } else if (-6 < n && n <= 0) {
    out += "0.";
    out.append(static_cast<std::size_t>(-n), '0');
    out.append(digits, static_cast<std::size_t>(k));
  } else {
    out += digits[0];
    if (k > 1) {
      out += '.';
      out.append(digits + 1, static_cast<std::size_t>(k - 1));
    }
    out += n - 1 < 0 ? "e-" : "e+";
    char exp[8];
    auto [e_end, e_ec] = std::to_chars(exp, exp + sizeof exp, std::abs(n - 1));
    out.append(exp, e_end);
  }
}

void append_json_text(std::string& out, const json::array& a) {
  out += '[';
  bool first = true;
  for (auto& e : a) {
    if (!first) out += ',';
    first = false;
    append_json_text(out, e);
  }
  out += ']';
}

void append_json_text(std::string& out, const json::object& o) {
  out += '{';
  bool first = true;
  for (auto& kv : o) {
    if (!first) out += ',';
    first = false;
    append_json_string(out, kv.key());
    out += ':';
    append_json_text(out, kv.value());
  }
  out += '}';
}

void append_json_text(std::string& out, const json::value& v) {
  char buf[24];
  switch (v.kind()) {
    case json::kind::null:
      out += "null";
      return;
    case json::kind::bool_:
      out += v.get_bool() ? "true" : "false";
      return;
    case json::kind::int64: {
      auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v.get_int64());
      out.append(buf, end);
      return;
    }
    case json::kind::uint64: {
      auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v.get_uint64());
      out.append(buf, end);
      return;
    }
    case json::kind::double_:
      append_json_number(out, v.get_double());
      return;
    case json::kind::string:
      append_json_string(out, v.get_string());
      return;
    case json::kind::array:
      append_json_text(out, v.get_array());
      return;
    case json::kind::object:
      append_json_text(out, v.get_object());
      return;
  }
}

// Most texts (frames' params, records) fit: one allocation instead of a doubling series.
constexpr std::size_t initial_capacity = 1024;

std::string to_json_text(const json::value& v) {
  std::string out;
  out.reserve(initial_capacity);
  append_json_text(out, v);
  return out;
}

std::string to_json_text(const json::object& o) {
  std::string out;
  out.reserve(initial_capacity);
  append_json_text(out, o);
  return out;
}

std::string to_json_text(const json::array& a) {
  std::string out;
  out.reserve(initial_capacity);
  append_json_text(out, a);
  return out;
}

}  // namespace mira::protocol
