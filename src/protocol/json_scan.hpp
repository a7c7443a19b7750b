// A validating JSON skimmer: finds where one JSON value ends without building anything.
//
// It is the hot path's gatekeeper: a response line is routed by its id and its result handed on
// as text after this check, instead of being parsed into a DOM first. It accepts a strict subset
// of what Boost.JSON accepts (RFC 8259 with UTF-8 checked per Unicode table 3-7, surrogate
// escapes paired, nesting depth <= 200, exponents of at most 4 digits), so text it accepts is text
// the DOM parser accepts too; anything else is left to that parser, which decides and explains.
#pragma once

#include <boost/json/parse_options.hpp>

#include <cstddef>
#include <string_view>

namespace mira::detail {

/// The options of every parse of a study's output: trajectories nest deeper than Boost.JSON's
/// default of 32 (its parser is not recursive).
inline boost::json::parse_options host_parse_options() {
  boost::json::parse_options o;
  o.max_depth = 256;
  return o;
}

inline constexpr std::size_t json_scan_failed = static_cast<std::size_t>(-1);

/// End offset of the JSON value that starts at `pos` (no leading whitespace), or
/// json_scan_failed when the text there is not a value this scanner accepts. `depth`: how many
/// arrays and objects already enclose it (they count towards the nesting limit).
std::size_t scan_json_value(std::string_view text, std::size_t pos, int depth = 0);

/// The nesting limit of scan_json_value: arrays and objects enclosing a value, itself included.
inline constexpr int json_scan_max_depth = 200;  // below the host parser's 256, either way counted

/// Inside a string, where json_plain_run stopped short of the closing quote: past the escape or
/// UTF-8 sequence at `p`, or nullptr when it is not one scan_json_value accepts (a control byte,
/// a bad escape, a lone surrogate, invalid UTF-8, the string's end).
const char* scan_json_string_special(const char* p, const char* end);

/// Past the number that starts at `p`, or nullptr when there is none the scanner accepts.
const char* scan_json_number(const char* p, const char* end);

/// Past the bytes that need no attention inside a string: the first '"', '\\', control or
/// non-ASCII byte at or after `p`, or `end`.
const char* json_plain_run(const char* p, const char* end);

/// `pos` past any JSON whitespace.
inline std::size_t skip_json_ws(std::string_view text, std::size_t pos) {
  while (pos < text.size() &&
         (text[pos] == ' ' || text[pos] == '\t' || text[pos] == '\n' || text[pos] == '\r'))
    ++pos;
  return pos;
}

}  // namespace mira::detail
