// JSON text rewritten in the host's form in one pass, without a DOM: what protocol::to_json_text
// writes for the value Boost.JSON parses from it. Whitespace goes, strings get the minimal escapes,
// integers stay as written, other numbers take their shortest round-trip form. The store splices
// a study's result into its saved record with it (store::append_case_line).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace mira::detail {

/// Where one member of the rewritten object sits in the output: its name (quotes included)
/// and its value, as offsets into `out`.
struct json_member_span {
  std::size_t name = 0, name_size = 0;
  std::size_t value = 0, value_size = 0;
};

/// Appends the JSON value `text` (whitespace around it allowed, nothing else) in the host's form.
/// For an object, `members` (when given) gets where each of its own members went, in order.
///
/// Numbers are read with std::from_chars, so a double comes out as the study wrote it; Boost.JSON
/// 1.81's parser is not correctly rounded (docs/reliability.md) and can change its last digit.
///
/// False, with `out` as it was, when the text is left to Boost.JSON: text the skim
/// (scan_json_value) does not accept, or an object that repeats a member name (Boost.JSON keeps
/// the last value in the first one's place, which a single pass cannot write).
bool rewrite_json(std::string& out, std::string_view text,
                  std::vector<json_member_span>* members = nullptr);

}  // namespace mira::detail
