// The text writer: a wire type's JSON text appended straight from its typed value, driven by the
// field tables of fields.hpp (the decoders walk the same ones), with no DOM in between. The host
// writes its `run` requests with it; a study writes every answer, a million a second on its hot
// path, so nothing here allocates beyond the growth of the caller's buffer.
#include <mira/protocol/codec.hpp>
#include <mira/protocol/json_text.hpp>

#include "protocol/fields.hpp"

#include <array>
#include <charconv>
#include <cstddef>
#include <optional>
#include <type_traits>

namespace mira::protocol {

namespace {

template <class T>
constexpr bool is_optional = false;
template <class T>
constexpr bool is_optional<std::optional<T>> = true;

// `,"name":` for each field of T, made at compile time: a member's key is one append.
struct member_key {
  std::array<char, 32> text{};
  std::size_t size = 0;
};

template <class T>
constexpr bool names_fit_member_key = [] {
  for (auto name : detail::field_names<T>)
    if (name.size() + 4 > member_key{}.text.size()) return false;
  return true;
}();

template <class T>
constexpr auto member_keys = [] {
  static_assert(names_fit_member_key<T>, "a field name too long for member_key");
  std::array<member_key, detail::field_count<T>> keys{};
  for (std::size_t i = 0; i < keys.size(); ++i) {
    auto name = detail::field_names<T>[i];
    auto& k = keys[i];
    k.text[k.size++] = ',';
    k.text[k.size++] = '"';
    for (char c : name) k.text[k.size++] = c;
    k.text[k.size++] = '"';
    k.text[k.size++] = ':';
  }
  return keys;
}();

void append_integer(std::string& out, std::int64_t v) {
  char buf[24];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, end);
}

template <detail::described T>
void write_object(std::string& out, const T& v);

void write_value(std::string& out, const std::string& s) {
  append_json_string(out, s);
}
void write_value(std::string& out, std::int64_t v) {
  append_integer(out, v);
}
void write_value(std::string& out, double d) {
  append_json_number(out, d);
}
void write_value(std::string& out, bool b) {
  out += b ? std::string_view("true") : std::string_view("false");
}
void write_value(std::string& out, error_kind k) {
  out += k == error_kind::infra ? std::string_view(R"("infra")") : std::string_view(R"("subject")");
}
void write_value(std::string& out, const json::value& v) {
  append_json_text(out, v);
}
void write_value(std::string& out, const json::object& o) {
  append_json_text(out, o);
}
void write_value(std::string& out, const json::array& a) {
  append_json_text(out, a);
}
template <class T>
void write_value(std::string& out, const lazy_json<T>& v) {
  v.append_text(out);
}
void write_value(std::string& out, const std::vector<std::string>& v) {
  out += '[';
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (i) out += ',';
    append_json_string(out, v[i]);
  }
  out += ']';
}
template <class Map>
void write_map(std::string& out, const Map& m) {
  out += '{';
  bool first = true;
  for (auto& [k, v] : m) {
    if (!first) out += ',';
    first = false;
    append_json_string(out, k);
    out += ':';
    write_value(out, v);
  }
  out += '}';
}
void write_value(std::string& out, const axis_params& m) {
  write_map(out, m);
}
void write_value(std::string& out, const std::map<std::string, double>& m) {
  write_map(out, m);
}
template <detail::described T>
void write_value(std::string& out, const T& v) {
  write_object(out, v);
}
template <detail::described T>
void write_value(std::string& out, const std::vector<T>& v) {
  out += '[';
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (i) out += ',';
    write_object(out, v[i]);
  }
  out += ']';
}
void write_value(std::string& out, const sample_list& v) {
  out += '[';
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (i) out += ',';
    write_object(out, v[i]);
  }
  out += ']';
}
template <class T>
void write_value(std::string& out, const std::optional<T>& v) {
  write_value(out, *v);  // the caller left out an unset one
}

// Whether an `omitted` member is at its default, for the types that can tell without writing
// it; the rest (a lazy_json array or object, a nested object) are written and taken back when
// they come out as "[]" or "{}".
template <class M>
bool at_default(const M& m, unsigned rules) {
  if constexpr (std::is_same_v<M, std::int64_t>)
    return (rules & detail::zero_means_one) ? m <= 1 : m == 0;
  else if constexpr (std::is_same_v<M, bool>)
    return !m;
  else if constexpr (std::is_same_v<M, error_kind>)
    return m == error_kind::subject;
  else if constexpr (requires { m.empty(); })
    return m.empty();
  else
    return false;  // a double: no field of one is `omitted` (a score of 0 is written)
}
template <class M>
constexpr bool taken_back_when_empty =
    std::is_same_v<M, lazy_json<json::array>> || std::is_same_v<M, lazy_json<json::object>> ||
    detail::described<M>;

// The fields of T in the table's order, each after its key and a comma (none before the first
// written).
template <detail::described T>
void write_object(std::string& out, const T& v) {
  out += '{';
  bool first = true;
  detail::for_each_field<T>([&](const auto& fd, std::size_t i) {
    const auto& m = v.*fd.member;
    using M = std::remove_cvref_t<decltype(m)>;
    if constexpr (is_optional<M>) {
      if (!m) return;
    } else if constexpr (!taken_back_when_empty<M>) {
      if ((fd.rules & detail::omitted) && at_default(m, fd.rules)) return;
    }
    const auto key_at = out.size();
    const auto& key = member_keys<T>[i];
    out.append(key.text.data() + (first ? 1 : 0), key.size - (first ? 1 : 0));
    const auto value_at = out.size();
    write_value(out, m);
    if constexpr (taken_back_when_empty<M>) {
      if ((fd.rules & detail::omitted) && out.size() - value_at == 2) {  // "[]" or "{}"
        out.resize(key_at);
        return;
      }
    }
    first = false;
  });
  out += '}';
}

void append_frame_head(std::string& out, std::int64_t id, std::string_view member) {
  out += R"({"id":)";
  append_integer(out, id);
  out += member;
}

}  // namespace

void append_json(std::string& out, const run_params& p) {
  write_object(out, p);
}
void append_json(std::string& out, const run_result& r) {
  write_object(out, r);
}
void append_json(std::string& out, const execute_result& r) {
  write_object(out, r);
}
void append_json(std::string& out, const transcript_summary& t) {
  write_object(out, t);
}
void append_json(std::string& out, const transcript& t) {
  write_object(out, t);
}
void append_json(std::string& out, const initialize_result& r) {
  write_object(out, r);
}
void append_json(std::string& out, const list_samples_result& r) {
  write_object(out, r);
}
void append_json(std::string& out, const eval_info& e) {
  write_object(out, e);
}
void append_json(std::string& out, const list_result& l) {
  write_object(out, l);
}
void append_json(std::string& out, const event_params& e) {
  write_object(out, e);
}
void append_json(std::string& out, const log_params& l) {
  write_object(out, l);
}
void append_json(std::string& out, const rpc_error& e) {
  write_object(out, e);
}
void append_json(std::string& out, const cancel_result& r) {
  write_object(out, r);
}

void append_result_frame(std::string& out, std::int64_t id, std::string_view result_json) {
  append_frame_head(out, id, R"(,"result":)");
  out += result_json;
  out += "}\n";
}

void append_error_frame(std::string& out, std::int64_t id, const rpc_error& e) {
  append_frame_head(out, id, R"(,"error":)");
  write_object(out, e);
  out += "}\n";
}

void append_notification_frame(std::string& out, std::string_view method,
                               std::string_view params_json) {
  out += R"({"method":)";
  append_json_string(out, method);
  out += R"(,"params":)";
  out += params_json;
  out += "}\n";
}

}  // namespace mira::protocol
