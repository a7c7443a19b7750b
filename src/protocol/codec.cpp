// Lenient decoding and default-omitting encoding of the wire types (see codec.hpp).
#include <mira/protocol/codec.hpp>
#include <mira/protocol/json_text.hpp>
#include <mira/protocol/trajectory.hpp>

#include "protocol/fields.hpp"
#include "protocol/json_scan.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/value_from.hpp>

#include <charconv>
#include <cmath>
#include <cstring>
#include <new>
#include <optional>
#include <stdexcept>
#include <utility>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace mira::protocol {

std::string decode_error::message() const {
  return path.empty() ? what : path + ": " + what;
}

namespace {

std::string_view kind_name(const json::value& v) {
  switch (v.kind()) {
    case json::kind::null:
      return "null";
    case json::kind::bool_:
      return "boolean";
    case json::kind::int64:
    case json::kind::uint64:
    case json::kind::double_:
      return "number";
    case json::kind::string:
      return "string";
    case json::kind::array:
      return "array";
    case json::kind::object:
      return "object";
  }
  return "value";
}

std::string child_path(std::string_view parent, std::string_view key) {
  std::string p(parent);
  if (!p.empty()) p += '.';
  p += key;
  return p;
}

std::string index_path(std::string_view parent, std::size_t i) {
  return std::string(parent) + '[' + std::to_string(i) + ']';
}

// A deep copy in the default memory resource. Copy *construction* would share the source's
// resource, and decoded input may live in a parser arena that is reused for the next line.
json::value owned(const json::value& v) {
  return json::value(v, json::storage_ptr());
}

decode_error wrong_type(std::string path, std::string_view expected, const json::value& got) {
  return {std::move(path),
          "expected " + std::string(expected) + ", got " + std::string(kind_name(got))};
}

// Reads fields of one JSON object, recording the first error with its path. A null field is
// treated as absent, so the default stays.
class reader {
 public:
  reader(const json::object& obj, std::string path) : obj_(obj), path_(std::move(path)) {}

  const json::value* find(std::string_view key, bool required = false) {
    if (err_) return nullptr;
    // Fields are looked up in the order studies write them, so the search resumes after the
    // last hit: usually the next member is the one wanted.
    const json::value* found = nullptr;
    auto n = obj_.size();
    auto* members = obj_.begin();
    for (std::size_t k = 0; k < n; ++k) {
      auto i = cursor_ + k < n ? cursor_ + k : cursor_ + k - n;
      if (members[i].key() == key) {
        found = &members[i].value();
        cursor_ = i + 1 < n ? i + 1 : 0;
        break;
      }
    }
    if (!found || found->is_null()) {
      if (required) err_ = decode_error{child_path(path_, key), "missing required field"};
      return nullptr;
    }
    return found;
  }

  void str(std::string_view key, std::string& out, bool required = false) {
    if (auto* v = find(key, required)) {
      if (auto* s = v->if_string())
        out.assign(s->data(), s->size());
      else
        fail(key, "a string", *v);
    }
  }
  void opt_str(std::string_view key, std::optional<std::string>& out) {
    std::string s;
    if (find(key)) {
      str(key, s);
      if (!err_) out = std::move(s);
    }
  }
  void integer(std::string_view key, std::int64_t& out, bool required = false) {
    if (auto* v = find(key, required)) {
      if (auto r = as_integer(*v))
        out = *r;
      else
        fail(key, "an integer", *v);
    }
  }
  void opt_integer(std::string_view key, std::optional<std::int64_t>& out) {
    if (auto* v = find(key)) {
      if (auto r = as_integer(*v))
        out = *r;
      else
        fail(key, "an integer", *v);
    }
  }
  void number(std::string_view key, double& out) {
    if (auto* v = find(key)) {
      if (v->is_number())
        out = v->to_number<double>();
      else
        fail(key, "a number", *v);
    }
  }
  void boolean(std::string_view key, bool& out) {
    if (auto* v = find(key)) {
      if (auto* b = v->if_bool())
        out = *b;
      else
        fail(key, "a boolean", *v);
    }
  }
  void object(std::string_view key, json::object& out) {
    if (auto* v = find(key)) {
      if (auto* o = v->if_object())
        out = *o;
      else
        fail(key, "an object", *v);
    }
  }
  void array(std::string_view key, json::array& out) {
    if (auto* v = find(key)) {
      if (auto* a = v->if_array())
        out = *a;
      else
        fail(key, "an array", *v);
    }
  }
  template <class T>
  void lazy(std::string_view key, lazy_json<T>& out) {
    auto* v = find(key);
    if (!v) return;
    if constexpr (std::is_same_v<T, json::array>) {
      if (auto* a = v->if_array())
        out = lazy_json<T>(*a);
      else
        fail(key, "an array", *v);
    } else if constexpr (std::is_same_v<T, json::object>) {
      if (auto* o = v->if_object())
        out = lazy_json<T>(*o);
      else
        fail(key, "an object", *v);
    } else {
      out = lazy_json<T>(*v);
    }
  }
  void strings(std::string_view key, std::vector<std::string>& out) {
    each(key, [&](const json::value& e, const std::string& p) {
      if (auto* s = e.if_string())
        out.emplace_back(s->data(), s->size());
      else
        err_ = wrong_type(p, "a string", e);
    });
  }
  void axis(std::string_view key, axis_params& out) {
    if (auto* v = find(key)) {
      auto* o = v->if_object();
      if (!o) return fail(key, "an object", *v);
      for (auto& kv : *o) {
        auto* s = kv.value().if_string();
        if (!s) {
          err_ = wrong_type(child_path(child_path(path_, key), kv.key()), "a string", kv.value());
          return;
        }
        out.emplace(std::string(kv.key()), std::string(*s));
      }
    }
  }
  // Calls f(element, element_path) for each element of an array field.
  template <class F>
  void each(std::string_view key, F&& f) {
    if (auto* v = find(key)) {
      auto* a = v->if_array();
      if (!a) return fail(key, "an array", *v);
      auto base = child_path(path_, key);
      for (std::size_t i = 0; i < a->size() && !err_; ++i) f((*a)[i], index_path(base, i));
    }
  }
  template <class T, class F>
  void each_decoded(std::string_view key, std::vector<T>& out, F&& decode) {
    each(key, [&](const json::value& e, const std::string& p) {
      auto r = decode(e, p);
      if (r)
        out.push_back(std::move(*r));
      else
        err_ = std::move(r.error());
    });
  }
  // Nested object decoded by `decode(obj, path)`.
  template <class F>
  void nested(std::string_view key, F&& decode) {
    if (auto* v = find(key)) {
      auto* o = v->if_object();
      if (!o) return fail(key, "an object", *v);
      if (auto e = decode(*o, child_path(path_, key))) err_ = std::move(*e);
    }
  }

  void set_error(decode_error e) {
    if (!err_) err_ = std::move(e);
  }
  const std::string& path() const { return path_; }
  std::optional<decode_error>& error() { return err_; }

  static std::optional<std::int64_t> as_integer(const json::value& v) {
    if (auto* i = v.if_int64()) return *i;
    if (auto* u = v.if_uint64()) {
      if (*u <= static_cast<std::uint64_t>(INT64_MAX)) return static_cast<std::int64_t>(*u);
      return std::nullopt;
    }
    if (auto* d = v.if_double()) {
      // 3.0 is an integer written by a loose encoder; 3.5 and out-of-range values are not.
      if (std::isfinite(*d) && std::trunc(*d) == *d && std::fabs(*d) < 9.0e15)
        return static_cast<std::int64_t>(*d);
    }
    return std::nullopt;
  }

 private:
  void fail(std::string_view key, std::string_view expected, const json::value& got) {
    err_ = wrong_type(child_path(path_, key), expected, got);
  }

  const json::object& obj_;
  std::string path_;
  std::optional<decode_error> err_;
  std::size_t cursor_ = 0;
};

// One member of an object into `out`, by the member's type (the field tables of fields.hpp
// say which members a type has; the text decoder reads the same types the same way).
void read_member(reader& r, std::string_view key, std::string& out) {
  r.str(key, out);
}
void read_member(reader& r, std::string_view key, std::optional<std::string>& out) {
  r.opt_str(key, out);
}
void read_member(reader& r, std::string_view key, std::int64_t& out) {
  r.integer(key, out);
}
void read_member(reader& r, std::string_view key, std::optional<std::int64_t>& out) {
  r.opt_integer(key, out);
}
void read_member(reader& r, std::string_view key, double& out) {
  r.number(key, out);
}
void read_member(reader& r, std::string_view key, bool& out) {
  r.boolean(key, out);
}
void read_member(reader& r, std::string_view key, error_kind& out) {
  std::string kind;
  r.str(key, kind);
  // An unknown future kind is not an infra signal; only "infra" changes the default.
  if (kind == "infra") out = error_kind::infra;
}
void read_member(reader& r, std::string_view key, json::object& out) {
  r.object(key, out);
}
void read_member(reader& r, std::string_view key, json::array& out) {
  r.array(key, out);
}
void read_member(reader& r, std::string_view key, std::optional<json::value>& out) {
  if (auto* v = r.find(key)) out = owned(*v);
}
template <class T>
void read_member(reader& r, std::string_view key, lazy_json<T>& out) {
  r.lazy(key, out);
}
void read_member(reader& r, std::string_view key, std::optional<lazy_json<json::value>>& out) {
  if (auto* v = r.find(key)) out.emplace(*v);
}
void read_member(reader& r, std::string_view key, std::vector<std::string>& out) {
  r.strings(key, out);
}
void read_member(reader& r, std::string_view key, axis_params& out) {
  r.axis(key, out);
}
void read_member(reader& r, std::string_view key, std::map<std::string, double>& out) {
  r.nested(key, [&](const json::object& m, const std::string& p) {
    std::optional<decode_error> e;
    for (auto& kv : m) {
      if (!kv.value().is_number()) {
        e = wrong_type(child_path(p, kv.key()), "a number", kv.value());
        break;
      }
      out.emplace(std::string(kv.key()), kv.value().to_number<double>());
    }
    return e;
  });
}

template <detail::described T>
std::optional<decode_error> read_fields(const json::object& o, const std::string& path, T& out);

template <detail::described T>
decoded<T> decode_object(const json::value& v, const std::string& path) {
  auto* o = v.if_object();
  if (!o) return tl::make_unexpected(wrong_type(path, "an object", v));
  T out;
  if (auto e = read_fields(*o, path, out)) return tl::make_unexpected(std::move(*e));
  return out;
}

template <detail::described T>
void read_member(reader& r, std::string_view key, T& out) {
  r.nested(key,
           [&](const json::object& o, const std::string& p) { return read_fields(o, p, out); });
}
template <detail::described T>
void read_member(reader& r, std::string_view key, std::vector<T>& out) {
  r.each_decoded(key, out, decode_object<T>);
}
void read_member(reader& r, std::string_view key, sample_list& out) {
  r.each(key, [&](const json::value& e, const std::string& p) {
    auto sample = decode_object<sample_info>(e, p);
    if (sample)
      out.push_back(std::move(*sample));
    else
      r.set_error(std::move(sample.error()));
  });
}

// The fields of T from `o`, in the table's order: the first error is the one reported.
template <detail::described T>
std::optional<decode_error> read_fields(const json::object& o, const std::string& path, T& out) {
  reader r(o, path);
  detail::for_each_field<T>([&](const auto& fd, std::size_t) {
    auto& m = out.*fd.member;
    if (fd.rules & detail::required) r.find(fd.name, true);
    read_member(r, fd.name, m);
    if constexpr (std::is_same_v<std::remove_cvref_t<decltype(m)>, std::int64_t>) {
      if ((fd.rules & detail::non_negative) && !r.error() && m < 0)
        r.set_error({child_path(path, fd.name), "must not be negative"});
      if ((fd.rules & detail::zero_means_one) && m == 0) m = 1;
    }
    if constexpr (std::is_same_v<std::remove_cvref_t<decltype(m)>, std::optional<std::int64_t>>) {
      if ((fd.rules & detail::non_negative) && !r.error() && m && *m < 0)
        r.set_error({child_path(path, fd.name), "must not be negative"});
    }
  });
  return std::move(r.error());
}

template <class T>
decoded<T> finish(reader& r, T&& value) {
  if (r.error()) return tl::make_unexpected(std::move(*r.error()));
  return std::forward<T>(value);
}

const json::object* require_object(const json::value& v, const std::string& path,
                                   decode_error& err) {
  auto* o = v.if_object();
  if (!o) err = wrong_type(path, "an object", v);
  return o;
}

}  // namespace

bool initialize_result::has_capability(std::string_view token) const {
  for (auto& c : capabilities)
    if (c == token) return true;
  return false;
}

namespace {

json::object parse_object(const std::string& text) {
  if (text.empty()) return {};  // built by hand, never received
  auto v = json::parse(text);
  return v.is_object() ? std::move(v.as_object()) : json::object{};
}

}  // namespace

// A value, or `size` bytes of text right after the struct, in the same allocation.
template <class T>
struct lazy_json<T>::held {
  std::optional<T> value;
  std::size_t size = 0;

  std::string_view text() const {
    return {reinterpret_cast<const char*>(this) + sizeof(held), size};
  }

  static held* with_text(std::string_view text) {
    auto* p = static_cast<char*>(::operator new(sizeof(held) + text.size()));
    auto* h = new (p) held();
    h->size = text.size();
    std::memcpy(p + sizeof(held), text.data(), text.size());
    return h;
  }
  static held* with_value(const T& v) {
    void* p = ::operator new(sizeof(held));
    try {
      return new (p) held{std::optional<T>(std::in_place, v, json::storage_ptr())};
    } catch (...) {
      ::operator delete(p);  // the copy of `v` threw
      throw;
    }
  }
};

template <class T>
void lazy_json<T>::destroy(held* h) noexcept {
  h->~held();
  ::operator delete(h);
}

template <class T>
lazy_json<T>::lazy_json(const T& v) : held_(held::with_value(v)) {}

template <class T>
lazy_json<T>::lazy_json(const lazy_json& other) {
  if (!other.held_) return;
  held_ = other.held_->value ? held::with_value(*other.held_->value)
                             : held::with_text(other.held_->text());
}

template <class T>
lazy_json<T>& lazy_json<T>::operator=(const lazy_json& other) {
  if (this != &other) *this = lazy_json(other);
  return *this;
}

template <class T>
lazy_json<T> lazy_json<T>::from_checked_text(std::string_view text) {
  lazy_json out;
  if (!text.empty()) out.held_ = held::with_text(text);
  return out;
}

template <class T>
std::string lazy_json<T>::text() const {
  std::string out;
  append_text(out);
  return out;
}

namespace {
// The text of an empty lazy_json<T>: the empty T.
template <class T>
constexpr std::string_view empty_json_text = std::is_same_v<T, json::array>    ? "[]"
                                             : std::is_same_v<T, json::object> ? "{}"
                                                                               : "null";
}  // namespace

template <class T>
void lazy_json<T>::append_text(std::string& out) const {
  if (held_ && held_->value)
    append_json_text(out, *held_->value);
  else if (held_)
    out += held_->text();
  else
    out += empty_json_text<T>;
}

template <class T>
T lazy_json<T>::get() const {
  if (!held_) return T();
  if (held_->value) return T(*held_->value, json::storage_ptr());
  auto v = json::parse(held_->text(), json::storage_ptr(), mira::detail::host_parse_options());
  if constexpr (std::is_same_v<T, json::array>) {
    if (!v.is_array()) throw std::invalid_argument("lazy_json: the text is not an array");
    return std::move(v.get_array());
  } else if constexpr (std::is_same_v<T, json::object>) {
    if (!v.is_object()) throw std::invalid_argument("lazy_json: the text is not an object");
    return std::move(v.get_object());
  } else {
    return v;
  }
}

template <class T>
bool lazy_json<T>::equals(const lazy_json& other) const {
  bool both_text = held_ && other.held_ && !held_->value && !other.held_->value;
  return (both_text && held_->text() == other.held_->text()) || get() == other.get();
}

template class lazy_json<json::array>;
template class lazy_json<json::object>;
template class lazy_json<json::value>;

json::object run_result::raw() const {
  return parse_object(raw_json);
}
json::object execute_result::raw() const {
  return parse_object(raw_json);
}

bool run_result::is_na() const {
  if (scores.empty()) return false;
  for (auto& s : scores)
    if (!s.na) return false;
  return true;
}

decoded<rpc_error> decode_rpc_error(const json::value& v) {
  return decode_object<rpc_error>(v, "error");
}

decoded<initialize_result> decode_initialize_result(const json::value& v) {
  auto res = decode_object<initialize_result>(v, "");
  if (res) res->raw = v.get_object();
  return res;
}

decoded<list_result> decode_list_result(const json::value& v) {
  return decode_object<list_result>(v, "");
}

decoded<list_samples_result> decode_list_samples_result(const json::value& v) {
  return decode_object<list_samples_result>(v, "");
}

decoded<run_params> decode_run_params(const json::value& v) {
  return decode_object<run_params>(v, "");
}

decoded<initialize_params> decode_initialize_params(const json::value& v) {
  auto* o = v.if_object();
  if (!o) return tl::make_unexpected(wrong_type("", "an object", v));
  initialize_params p{.protocol_version = {}, .host = {}};
  if (auto e = read_fields(*o, "", p)) return tl::make_unexpected(std::move(*e));
  return p;
}

decoded<list_samples_params> decode_list_samples_params(const json::value& v) {
  return decode_object<list_samples_params>(v, "");
}

decoded<cancel_params> decode_cancel_params(const json::value& v) {
  return decode_object<cancel_params>(v, "");
}

decoded<score_params> decode_score_params(const json::value& v) {
  auto identity = decode_run_params(v);
  if (!identity) return tl::make_unexpected(std::move(identity.error()));
  score_params p;
  p.identity = std::move(*identity);
  reader r(v.get_object(), "");
  r.find("transcript", true);
  r.object("transcript", p.transcript);  // copied into p's (default) memory resource
  return finish(r, std::move(p));
}

decoded<transcript> decode_transcript(const json::value& v) {
  auto t = decode_object<transcript>(v, "");
  if (!t) return t;
  if (auto e = project_trajectory(*t))
    return tl::make_unexpected(decode_error{child_path("trajectory", e->path), std::move(e->what)});
  return t;
}

decoded<run_result> decode_run_result(const json::value& v, std::string raw_json) {
  auto res = decode_object<run_result>(v, "");
  if (res) res->raw_json = raw_json.empty() ? to_json_text(v) : std::move(raw_json);
  return res;
}

decoded<execute_result> decode_execute_result(const json::value& v, std::string raw_json) {
  if (!v.is_object()) return tl::make_unexpected(wrong_type("", "an object", v));
  // Fill the flat transcript fields from the trajectory before the typed view is read, so the
  // JSON we persist and the typed view agree.
  std::optional<json::value> projected;
  if (auto* t = v.get_object().if_contains("transcript");
      t && t->is_object() && t->get_object().contains("trajectory")) {
    projected = owned(v);
    if (auto e = project_trajectory(projected->get_object()["transcript"].get_object()))
      return tl::make_unexpected(decode_error{"transcript.trajectory", e->message()});
  }
  auto res = decode_object<execute_result>(projected ? *projected : v, "");
  if (!res) return res;
  if (projected)
    res->raw_json = to_json_text(*projected);
  else
    res->raw_json = raw_json.empty() ? to_json_text(v) : std::move(raw_json);
  return res;
}

decoded<cancel_result> decode_cancel_result(const json::value& v) {
  return decode_object<cancel_result>(v, "");
}

decoded<event_params> decode_event_params(const json::value& v) {
  auto e = decode_object<event_params>(v, "params");
  if (e) e->raw = v.get_object();
  return e;
}

decoded<log_params> decode_log_params(const json::value& v) {
  auto l = decode_object<log_params>(v, "params");
  if (l) l->raw = v.get_object();
  return l;
}

decoded<part> decode_part(const json::value& v) {
  decode_error err;
  auto* o = require_object(v, "", err);
  if (!o) return tl::make_unexpected(err);
  reader r(*o, "");
  part p;
  r.str("kind", p.kind, true);
  r.str("text", p.text);
  r.str("media_type", p.media_type);
  r.str("name", p.name);
  r.nested("source", [&](const json::object& s, const std::string& path) {
    reader sr(s, path);
    sr.opt_str("uri", p.uri);
    sr.opt_str("data", p.data);
    if (!sr.error() && p.uri.has_value() == p.data.has_value())
      sr.set_error({path, "must have exactly one of uri or data"});
    return std::move(sr.error());
  });
  if (auto* j = o->if_contains("json")) p.json = owned(*j);
  if (!r.error() && (p.kind == "image" || p.kind == "audio" || p.kind == "file") && !p.uri &&
      !p.data)
    r.set_error({"source", "a " + p.kind + " part needs a source"});
  return finish(r, std::move(p));
}

namespace {

void put_identity(json::object& o, const run_params& p) {
  o["eval"] = p.eval;
  o["sample"] = p.sample;
  o["target"] = p.target;
  if (!p.params.empty()) {
    json::object params;
    for (auto& [k, v] : p.params) params[k] = v;
    o["params"] = std::move(params);
  }
  if (p.trial != 0) o["trial"] = p.trial;
  if (p.trials > 1) o["trials"] = p.trials;
  if (p.seed) o["seed"] = *p.seed;
}

}  // namespace

json::object encode(const initialize_params& p) {
  return {{"protocol_version", p.protocol_version}, {"host", p.host}};
}

json::object encode(const list_samples_params& p) {
  return {{"eval", p.eval}, {"cursor", p.cursor}};
}

json::object encode(const run_params& p) {
  json::object o;
  put_identity(o, p);
  return o;
}

json::object encode(const score_params& p) {
  json::object o;
  put_identity(o, p.identity);
  o["transcript"] = p.transcript;
  return o;
}

json::object encode(const cancel_params& p) {
  return {{"id", p.id}};
}

json::object encode(const rpc_error& e) {
  json::object o;
  if (e.code != 0) o["code"] = e.code;
  o["message"] = e.message;
  if (e.retryable) o["retryable"] = true;
  if (e.data) o["data"] = *e.data;
  return o;
}

json::object encode(const sample_info& s) {
  json::object o{{"id", s.id}};
  if (!s.tags.empty()) o["tags"] = json::value_from(s.tags);
  if (!s.metadata.empty()) o["metadata"] = s.metadata;
  return o;
}

json::object encode(const eval_info& e) {
  json::object o;
  o["name"] = e.name;
  if (!e.description.empty()) o["description"] = e.description;
  json::array samples;
  samples.reserve(e.samples.size());
  for (std::size_t i = 0; i < e.samples.size(); ++i) samples.push_back(encode(e.samples[i]));
  o["samples"] = std::move(samples);
  if (e.next_cursor) o["next_cursor"] = *e.next_cursor;
  o["scorers"] = json::value_from(e.scorers);
  json::array targets;
  for (auto& t : e.targets) {
    json::object to{{"label", t.label}, {"available", t.available}};
    if (!t.provider.empty()) to["provider"] = t.provider;
    if (!t.metadata.empty()) to["metadata"] = t.metadata;
    targets.push_back(std::move(to));
  }
  o["targets"] = std::move(targets);
  if (!e.axes.empty()) {
    json::array axes;
    for (auto& a : e.axes)
      axes.push_back(json::object{{"name", a.name}, {"values", json::value_from(a.values)}});
    o["axes"] = std::move(axes);
  }
  if (e.max_turns) o["max_turns"] = *e.max_turns;
  if (e.trials > 1) o["trials"] = e.trials;
  if (e.seed) o["seed"] = *e.seed;
  if (!e.metadata.empty()) o["metadata"] = e.metadata;
  return o;
}

json::object encode(const list_result& l) {
  json::array evals;
  for (auto& e : l.evals) evals.push_back(encode(e));
  return {{"evals", std::move(evals)}};
}

namespace {

// Where the first byte at or after `i` that a JSON string escapes ('"', '\\', a control) is, or
// s.size(). Sixteen bytes at a time where SSE2 is there: a study's responses and reasons are
// long enough for the scan to be most of what writing them costs.
std::size_t first_to_escape(std::string_view s, std::size_t i) {
#if defined(__SSE2__)
  const __m128i quote = _mm_set1_epi8('"'), backslash = _mm_set1_epi8('\\'),
                last_control = _mm_set1_epi8(0x1F);
  for (; i + 16 <= s.size(); i += 16) {
    __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s.data() + i));
    // Unsigned v <= 0x1F: min(v, 0x1F) == v. Bytes >= 0x80 (UTF-8) are written as they are.
    __m128i stop =
        _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, backslash)),
                     _mm_cmpeq_epi8(_mm_min_epu8(v, last_control), v));
    if (int mask = _mm_movemask_epi8(stop)) return i + __builtin_ctz(static_cast<unsigned>(mask));
  }
#endif
  for (; i < s.size(); ++i) {
    auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == '"' || c == '\\') break;
  }
  return i;
}

}  // namespace

void append_json_string(std::string& out, std::string_view s) {
  static constexpr char hex[] = "0123456789abcdef";
  // Most strings (keys, names, short texts) need no escape: appended whole between the quotes.
  std::size_t clean = first_to_escape(s, 0);
  out += '"';
  if (clean == s.size()) {
    out += s;
    out += '"';
    return;
  }
  std::size_t run = 0;  // start of the pending run of bytes that need no escaping
  for (std::size_t i = clean; i < s.size(); ++i) {
    auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c != '"' && c != '\\') continue;
    out.append(s.data() + run, i - run);
    run = i + 1;
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        out += "\\u00";
        out += hex[c >> 4];
        out += hex[c & 15];
    }
  }
  out.append(s.data() + run, s.size() - run);
  out += '"';
}

std::optional<unsigned> version_major(std::string_view version) {
  auto dot = version.find('.');
  auto head = version.substr(0, dot);
  unsigned major = 0;
  auto [ptr, ec] = std::from_chars(head.data(), head.data() + head.size(), major);
  if (ec != std::errc{} || ptr != head.data() + head.size() || head.empty()) return std::nullopt;
  return major;
}

}  // namespace mira::protocol
