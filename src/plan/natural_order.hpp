// Natural order of case keys and other names: "case-2" before "case-10", as a reader expects
// in a report, where byte order would put case-10 first. Private to the library: the summary,
// the store and compare sort with it.
#pragma once

#include <string_view>

namespace mira::plan {

/// Strict weak (in fact total) order: runs of ASCII digits compare by their numeric value
/// (any length, leading zeros ignored), everything else byte by byte. Strings equal by value
/// ("a01" and "a1") are ordered by their bytes, so the order is deterministic and only equal
/// strings are equivalent.
bool natural_less(std::string_view a, std::string_view b);

}  // namespace mira::plan
