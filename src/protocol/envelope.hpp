// The envelope classifier: one inbound line -> its id, its kind and the text spans of its
// result, error and params, read on top of json_scan without building a DOM. The multiplexer
// routes on what it returns; nothing else in the host scans a frame's JSON.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace mira::detail {

enum class envelope_kind : std::uint8_t {
  response,      // an id and no method
  notification,  // a method and no id
  request,       // a method and an id: a request from the study
  not_object,    // valid JSON, but not an object
  unclassifiable,
};

/// What the classifier read from one line. Spans point into the classified text; a member
/// that is absent or null has an empty span (JSON null counts as absent, as in the DOM codec).
struct envelope {
  envelope_kind kind = envelope_kind::unclassifiable;
  /// The id's value: set when the line has an id that is a non-negative integer (an id that
  /// is present but of another type or sign leaves it empty, with has_id set).
  bool has_id = false;
  std::optional<std::int64_t> id;
  /// The method's string content as written (escapes kept: see classify_envelope); empty
  /// when the method is not a string ("?" is what the multiplexer reports then).
  std::string_view method;
  bool method_is_string = false;
  std::string_view result;
  std::string_view error;
  std::string_view params;
  /// Set by classify_envelope_to_result only: `result` was not checked, and neither was
  /// anything after it.
  bool result_unchecked = false;
};

/// Classifies `line`. Nothing when the skim does not take the text (not JSON, or JSON this
/// reader leaves to Boost.JSON: an exponent beyond four digits, nesting deeper than 200, a
/// duplicate envelope member, an escaped member name or method, "-0" as an id). The caller
/// then parses the line and classifies its canonical text (protocol::to_json_text), passing
/// `canonical`: there an escape in a member name or method stands for a character no member
/// name or method the host knows contains, so the text is compared as written.
std::optional<envelope> classify_envelope(std::string_view line, bool canonical = false);

/// The hot path's reading: classify_envelope, except that a `result` whose value is an object
/// is taken unchecked, from its '{' to the last byte before the line's last '}' that is not
/// whitespace, and the walk ends there (result_unchecked). That span is the result when it is
/// one valid JSON value, which a decoder that checks as it reads tells; else the line must be
/// classified again, whole.
std::optional<envelope> classify_envelope_to_result(std::string_view line);

/// The id of a line that begins like a response, `{"id": N` (members before the id allowed
/// while each is a complete scalar or string): for a line too long to keep or not valid
/// JSON, which still fails the request it answers.
std::optional<std::int64_t> leading_response_id(std::string_view prefix);

}  // namespace mira::detail
