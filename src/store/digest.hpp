// The store's fingerprints: SHA-256 and RFC 8785 canonical JSON, so a fingerprint does not change
// with key order or spacing. Private to the library (bodies in digest.cpp).
#pragma once

#include <boost/json/value.hpp>

#include <string>
#include <string_view>

namespace mira::store {

/// SHA-256 of `data`, as 64 lower-case hex digits.
std::string sha256_hex(std::string_view data);

/// RFC 8785 (JCS) canonical JSON: object members sorted by key, no whitespace, strings with
/// the minimal escapes, numbers in their shortest round-trip form (integral doubles below 1e21
/// written as integers).
std::string canonical_json(const boost::json::value& v);

}  // namespace mira::store
