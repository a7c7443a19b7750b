// The store's fingerprints: SHA-256 and RFC 8785 canonical JSON, so a fingerprint does not change
// with key order or spacing. Private to the library (bodies in digest.cpp).
#pragma once

#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

#include <functional>
#include <memory>
#include <string>
#include <string_view>

namespace mira::store {

/// SHA-256 of `data`, as 64 lower-case hex digits.
std::string sha256_hex(std::string_view data);

/// SHA-256 of data given piece by piece (a listing's canonical JSON without the whole text).
class sha256_stream {
 public:
  sha256_stream();
  ~sha256_stream();
  void update(std::string_view data);
  /// The digest of everything given, as 64 lower-case hex digits. Once.
  std::string hex_digest();

 private:
  struct state;
  std::unique_ptr<state> s_;
};

using text_sink = std::function<void(std::string_view)>;

/// canonical_json(o) into `sink` in pieces, the value of member `key` written by `write_value`
/// in place of o's own (a member too large to hold as JSON: an eval's samples).
void canonical_json_to(const boost::json::object& o, std::string_view key,
                       const std::function<void(const text_sink&)>& write_value,
                       const text_sink& sink);

/// RFC 8785 (JCS) canonical JSON: object members sorted by key, no whitespace, strings with
/// the minimal escapes, numbers in their shortest round-trip form (integral doubles below 1e21
/// written as integers).
std::string canonical_json(const boost::json::value& v);

}  // namespace mira::store
