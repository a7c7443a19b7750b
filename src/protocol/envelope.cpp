// The envelope classifier (see envelope.hpp): the members of a frame's top-level object found
// with json_scan, each value skimmed once and kept as a span of the line.
#include "protocol/envelope.hpp"

#include "protocol/json_scan.hpp"

#include <charconv>

namespace mira::detail {

namespace {

// The members the protocol gives meaning to at the top level of a frame.
enum member : unsigned { m_id, m_method, m_result, m_error, m_params, m_other };

member member_of(std::string_view key) {
  if (key == "id") return m_id;
  if (key == "method") return m_method;
  if (key == "result") return m_result;
  if (key == "error") return m_error;
  if (key == "params") return m_params;
  return m_other;
}

// A string's content between its quotes (the text at `start` has been skimmed).
std::string_view string_content(std::string_view text, std::size_t start, std::size_t end) {
  return text.substr(start + 1, end - start - 2);
}

// A non-negative JSON integer that fits in int64_t: what the host accepts as an id.
std::optional<std::int64_t> as_id(std::string_view v) {
  if (v.empty() || v[0] < '0' || v[0] > '9' || v.find_first_of(".eE") != std::string_view::npos)
    return std::nullopt;
  std::int64_t id = 0;
  auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), id);
  if (ec != std::errc{} || end != v.data() + v.size()) return std::nullopt;
  return id;
}

// The envelope's fields from the member values found, once the walk is over.
std::optional<envelope> finish(envelope& env, const std::string_view (&values)[m_other],
                               std::string_view id_text) {
  // "-0" is an integer or a double depending on the parser: its canonical text says which.
  if (id_text == "-0") return std::nullopt;
  env.has_id = !id_text.empty();
  if (env.has_id) env.id = as_id(id_text);
  env.result = values[m_result];
  env.error = values[m_error];
  env.params = values[m_params];
  if (!values[m_method].empty())
    env.kind = values[m_id].empty() ? envelope_kind::notification : envelope_kind::request;
  else if (env.has_id)
    env.kind = envelope_kind::response;
  else
    env.kind = envelope_kind::unclassifiable;
  return env;
}

// The line's last byte that is not whitespace, or npos.
std::size_t last_non_ws(std::string_view line) {
  auto n = line.size();
  while (n > 0 &&
         (line[n - 1] == ' ' || line[n - 1] == '\t' || line[n - 1] == '\n' || line[n - 1] == '\r'))
    --n;
  return n == 0 ? std::string_view::npos : n - 1;
}

std::optional<envelope> classify(std::string_view line, bool canonical, bool result_unchecked) {
  envelope env;
  std::size_t i = skip_json_ws(line, 0);
  if (i >= line.size()) return std::nullopt;
  if (line[i] != '{') {
    std::size_t end = scan_json_value(line, i);
    if (end == json_scan_failed || skip_json_ws(line, end) != line.size()) return std::nullopt;
    env.kind = envelope_kind::not_object;
    return env;
  }
  // The top-level object walked member by member, each key and value skimmed once: together
  // the same check as one skim of the line.
  std::string_view values[m_other];
  std::string_view id_text;
  unsigned seen = 0;
  i = skip_json_ws(line, i + 1);
  if (i < line.size() && line[i] == '}') {
    i = skip_json_ws(line, i + 1);
  } else {
    for (;;) {
      if (i >= line.size() || line[i] != '"') return std::nullopt;
      std::size_t key_end = scan_json_value(line, i);
      if (key_end == json_scan_failed) return std::nullopt;
      auto key = string_content(line, i, key_end);
      if (!canonical && key.find('\\') != std::string_view::npos) return std::nullopt;
      i = skip_json_ws(line, key_end);
      if (i >= line.size() || line[i] != ':') return std::nullopt;
      std::size_t value_start = skip_json_ws(line, i + 1);
      auto m = member_of(key);
      if (result_unchecked && m == m_result && !(seen & (1u << m_result)) &&
          value_start < line.size() && line[value_start] == '{') {
        auto close = last_non_ws(line);  // the envelope's '}', if the result is its last member
        if (close != std::string_view::npos && close > value_start && line[close] == '}') {
          auto last = last_non_ws(line.substr(0, close));  // the result's '}', then
          values[m_result] = line.substr(value_start, last + 1 - value_start);
          env.result_unchecked = true;
          return finish(env, values, id_text);
        }
      }
      std::size_t value_end = scan_json_value(line, value_start);
      if (value_end == json_scan_failed) return std::nullopt;
      if (m != m_other) {
        if (seen & (1u << m)) return std::nullopt;  // which one counts is Boost.JSON's to say
        seen |= 1u << m;
        auto value = line.substr(value_start, value_end - value_start);
        if (m == m_id) id_text = value;
        if (value != "null") values[m] = value;
        if (m == m_method && line[value_start] == '"') {
          env.method_is_string = true;
          env.method = string_content(line, value_start, value_end);
          if (!canonical && env.method.find('\\') != std::string_view::npos) return std::nullopt;
        }
      }
      i = skip_json_ws(line, value_end);
      if (i >= line.size()) return std::nullopt;
      if (line[i] == '}') {
        i = skip_json_ws(line, i + 1);
        break;
      }
      if (line[i] != ',') return std::nullopt;
      i = skip_json_ws(line, i + 1);
    }
  }
  if (i != line.size()) return std::nullopt;
  return finish(env, values, id_text);
}

}  // namespace

std::optional<envelope> classify_envelope(std::string_view line, bool canonical) {
  return classify(line, canonical, false);
}

std::optional<envelope> classify_envelope_to_result(std::string_view line) {
  return classify(line, false, true);
}

std::optional<std::int64_t> leading_response_id(std::string_view prefix) {
  std::size_t i = skip_json_ws(prefix, 0);
  if (i >= prefix.size() || prefix[i] != '{') return std::nullopt;
  i = skip_json_ws(prefix, i + 1);
  for (;;) {
    if (i >= prefix.size() || prefix[i] != '"') return std::nullopt;
    std::size_t key_end = scan_json_value(prefix, i);
    if (key_end == json_scan_failed) return std::nullopt;
    auto key = string_content(prefix, i, key_end);
    i = skip_json_ws(prefix, key_end);
    if (i >= prefix.size() || prefix[i] != ':') return std::nullopt;
    i = skip_json_ws(prefix, i + 1);
    if (key == "id") {
      // The digits only: what follows them may be where the line broke.
      std::size_t end = i;
      while (end < prefix.size() && prefix[end] >= '0' && prefix[end] <= '9') ++end;
      return as_id(prefix.substr(i, end - i));
    }
    // Only complete scalars and strings are stepped over: the id of a nested object is not
    // the envelope's.
    if (i >= prefix.size() || prefix[i] == '{' || prefix[i] == '[') return std::nullopt;
    std::size_t value_end = scan_json_value(prefix, i);
    if (value_end == json_scan_failed) return std::nullopt;
    i = skip_json_ws(prefix, value_end);
    if (i >= prefix.size() || prefix[i] != ',') return std::nullopt;
    i = skip_json_ws(prefix, i + 1);
  }
}

}  // namespace mira::detail
