// Lenient decoding and default-omitting encoding of the wire types (see codec.hpp).
#include <mira/protocol/codec.hpp>
#include <mira/protocol/json_text.hpp>
#include <mira/protocol/trajectory.hpp>

#include <boost/json/parse.hpp>
#include <boost/json/value_from.hpp>

#include <charconv>
#include <cmath>
#include <cstring>
#include <utility>

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

decoded<sample_info> decode_sample(const json::value& v, const std::string& path) {
  decode_error err;
  auto* o = require_object(v, path, err);
  if (!o) return tl::make_unexpected(err);
  reader r(*o, path);
  sample_info s;
  r.str("id", s.id, true);
  r.strings("tags", s.tags);
  r.object("metadata", s.metadata);
  return finish(r, std::move(s));
}

decoded<target_info> decode_target(const json::value& v, const std::string& path) {
  decode_error err;
  auto* o = require_object(v, path, err);
  if (!o) return tl::make_unexpected(err);
  reader r(*o, path);
  target_info t;
  r.str("label", t.label, true);
  r.str("provider", t.provider);
  r.boolean("available", t.available);
  r.object("metadata", t.metadata);
  return finish(r, std::move(t));
}

decoded<axis_info> decode_axis(const json::value& v, const std::string& path) {
  decode_error err;
  auto* o = require_object(v, path, err);
  if (!o) return tl::make_unexpected(err);
  reader r(*o, path);
  axis_info a;
  r.str("name", a.name, true);
  r.strings("values", a.values);
  return finish(r, std::move(a));
}

void read_trials(reader& r, std::int64_t& trials) {
  r.integer("trials", trials);
  if (!r.error() && trials < 0)
    r.set_error({child_path(r.path(), "trials"), "must not be negative"});
  if (trials == 0) trials = 1;
}

decoded<eval_info> decode_eval(const json::value& v, const std::string& path) {
  decode_error err;
  auto* o = require_object(v, path, err);
  if (!o) return tl::make_unexpected(err);
  reader r(*o, path);
  eval_info e;
  r.str("name", e.name, true);
  r.str("description", e.description);
  r.each_decoded("samples", e.samples, decode_sample);
  r.opt_str("next_cursor", e.next_cursor);
  r.strings("scorers", e.scorers);
  r.each_decoded("targets", e.targets, decode_target);
  r.each_decoded("axes", e.axes, decode_axis);
  r.opt_integer("max_turns", e.max_turns);
  read_trials(r, e.trials);
  r.opt_integer("seed", e.seed);
  r.object("metadata", e.metadata);
  return finish(r, std::move(e));
}

void read_identity(reader& r, std::string& eval, std::string& sample, std::string& target,
                   axis_params& params, std::int64_t& trial, std::int64_t& trials,
                   std::optional<std::int64_t>& seed) {
  r.str("eval", eval);
  r.str("sample", sample);
  r.str("target", target);
  r.axis("params", params);
  r.integer("trial", trial);
  if (!r.error() && trial < 0) r.set_error({child_path(r.path(), "trial"), "must not be negative"});
  read_trials(r, trials);
  r.opt_integer("seed", seed);
}

std::optional<decode_error> decode_usage(const json::object& o, const std::string& path, usage& u) {
  reader r(o, path);
  r.integer("input_tokens", u.input_tokens);
  r.integer("output_tokens", u.output_tokens);
  r.integer("cache_read_tokens", u.cache_read_tokens);
  r.integer("reasoning_tokens", u.reasoning_tokens);
  r.number("cost_usd", u.cost_usd);
  return std::move(r.error());
}

std::optional<decode_error> decode_summary(const json::object& o, const std::string& path,
                                           transcript_summary& t) {
  reader r(o, path);
  r.str("final_response", t.final_response);
  r.integer("iterations", t.iterations);
  r.integer("tool_calls_count", t.tool_calls_count);
  r.strings("tool_calls", t.tool_calls);
  r.nested("usage", [&](const json::object& u, const std::string& p) {
    return decode_usage(u, p, t.usage);
  });
  r.nested("timing", [&](const json::object& u, const std::string& p) {
    reader tr(u, p);
    tr.opt_integer("duration_ms", t.timing.duration_ms);
    tr.opt_integer("time_to_first_token_ms", t.timing.time_to_first_token_ms);
    return std::move(tr.error());
  });
  r.nested("metrics", [&](const json::object& m, const std::string& p) {
    std::optional<decode_error> e;
    for (auto& kv : m) {
      if (!kv.value().is_number()) {
        e = wrong_type(child_path(p, kv.key()), "a number", kv.value());
        break;
      }
      t.metrics.emplace(std::string(kv.key()), kv.value().to_number<double>());
    }
    return e;
  });
  r.object("metadata", t.metadata);
  r.opt_str("error", t.error);
  std::string kind;
  r.str("error_kind", kind);
  // An unknown future kind is not an infra signal; only "infra" changes the default.
  t.error_kind = kind == "infra" ? error_kind::infra : error_kind::subject;
  r.array("output", t.output);
  return std::move(r.error());
}

decoded<score> decode_score(const json::value& v, const std::string& path) {
  decode_error err;
  auto* o = require_object(v, path, err);
  if (!o) return tl::make_unexpected(err);
  reader r(*o, path);
  score s;
  r.str("scorer", s.scorer);
  r.number("value", s.value);
  r.boolean("pass", s.pass);
  r.boolean("na", s.na);
  r.str("reason", s.reason);
  return finish(r, std::move(s));
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
  decode_error err;
  auto* o = require_object(v, "error", err);
  if (!o) return tl::make_unexpected(err);
  reader r(*o, "error");
  rpc_error e;
  r.integer("code", e.code);
  r.str("message", e.message, true);
  r.boolean("retryable", e.retryable);
  if (auto* d = o->if_contains("data"); d && !d->is_null()) e.data = owned(*d);
  return finish(r, std::move(e));
}

decoded<initialize_result> decode_initialize_result(const json::value& v) {
  decode_error err;
  auto* o = require_object(v, "", err);
  if (!o) return tl::make_unexpected(err);
  reader r(*o, "");
  initialize_result res;
  r.str("protocol_version", res.protocol_version, true);
  r.str("study", res.study, true);
  r.integer("evals", res.evals);
  r.str("study_version", res.study_version);
  r.strings("capabilities", res.capabilities);
  r.object("capability_params", res.capability_params);
  res.raw = *o;
  return finish(r, std::move(res));
}

decoded<list_result> decode_list_result(const json::value& v) {
  decode_error err;
  auto* o = require_object(v, "", err);
  if (!o) return tl::make_unexpected(err);
  reader r(*o, "");
  list_result res;
  r.find("evals", true);
  r.each_decoded("evals", res.evals, decode_eval);
  return finish(r, std::move(res));
}

decoded<list_samples_result> decode_list_samples_result(const json::value& v) {
  decode_error err;
  auto* o = require_object(v, "", err);
  if (!o) return tl::make_unexpected(err);
  reader r(*o, "");
  list_samples_result res;
  r.each_decoded("samples", res.samples, decode_sample);
  r.opt_str("next_cursor", res.next_cursor);
  return finish(r, std::move(res));
}

decoded<run_params> decode_run_params(const json::value& v) {
  decode_error err;
  auto* o = require_object(v, "", err);
  if (!o) return tl::make_unexpected(err);
  reader r(*o, "");
  run_params p;
  read_identity(r, p.eval, p.sample, p.target, p.params, p.trial, p.trials, p.seed);
  return finish(r, std::move(p));
}

decoded<run_result> decode_run_result(const json::value& v, std::string raw_json) {
  auto* o = v.if_object();
  if (!o) return tl::make_unexpected(wrong_type("", "an object", v));
  reader r(*o, "");
  run_result res;
  read_identity(r, res.eval, res.sample, res.target, res.params, res.trial, res.trials, res.seed);
  r.array("input", res.input);
  if (auto* e = o->if_contains("expected"); e && !e->is_null()) res.expected = owned(*e);
  r.boolean("passed", res.passed);
  r.number("aggregate", res.aggregate);
  r.each_decoded("scores", res.scores, decode_score);
  r.nested("transcript", [&](const json::object& t, const std::string& p) {
    return decode_summary(t, p, res.transcript);
  });
  r.boolean("skipped", res.skipped);
  if (r.error()) return tl::make_unexpected(std::move(*r.error()));
  res.raw_json = raw_json.empty() ? to_json_text(v) : std::move(raw_json);
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
  const json::object& o = projected ? projected->get_object() : v.get_object();
  reader r(o, "");
  execute_result res;
  read_identity(r, res.eval, res.sample, res.target, res.params, res.trial, res.trials, res.seed);
  r.nested("transcript", [&](const json::object& t, const std::string& p) {
    if (auto e = decode_summary(t, p, res.transcript)) return e;
    reader tr(t, p);
    if (auto* traj = tr.find("trajectory")) res.transcript.trajectory = owned(*traj);
    tr.array("events", res.transcript.events);
    tr.object("files", res.transcript.files);
    return std::move(tr.error());
  });
  r.boolean("skipped", res.skipped);
  if (r.error()) return tl::make_unexpected(std::move(*r.error()));
  if (projected)
    res.raw_json = to_json_text(*projected);
  else
    res.raw_json = raw_json.empty() ? to_json_text(v) : std::move(raw_json);
  return res;
}

decoded<cancel_result> decode_cancel_result(const json::value& v) {
  decode_error err;
  auto* o = require_object(v, "", err);
  if (!o) return tl::make_unexpected(err);
  reader r(*o, "");
  cancel_result res;
  r.boolean("cancelled", res.cancelled);
  return finish(r, std::move(res));
}

decoded<event_params> decode_event_params(const json::value& v) {
  decode_error err;
  auto* o = require_object(v, "params", err);
  if (!o) return tl::make_unexpected(err);
  reader r(*o, "params");
  event_params e;
  r.integer("request_id", e.request_id);
  r.str("eval", e.eval);
  r.str("sample", e.sample);
  r.str("target", e.target);
  r.axis("params", e.params);
  r.str("kind", e.kind);
  r.opt_integer("turn", e.turn);
  r.opt_str("tool", e.tool);
  r.opt_str("text", e.text);
  e.raw = *o;
  return finish(r, std::move(e));
}

decoded<log_params> decode_log_params(const json::value& v) {
  decode_error err;
  auto* o = require_object(v, "params", err);
  if (!o) return tl::make_unexpected(err);
  reader r(*o, "params");
  log_params l;
  r.integer("request_id", l.request_id);
  r.str("message", l.message);
  l.raw = *o;
  return finish(r, std::move(l));
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

json::object encode(const eval_info& e) {
  json::object o;
  o["name"] = e.name;
  if (!e.description.empty()) o["description"] = e.description;
  json::array samples;
  for (auto& s : e.samples) {
    json::object so{{"id", s.id}};
    if (!s.tags.empty()) so["tags"] = json::value_from(s.tags);
    if (!s.metadata.empty()) so["metadata"] = s.metadata;
    samples.push_back(std::move(so));
  }
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

void append_json_string(std::string& out, std::string_view s) {
  static constexpr char hex[] = "0123456789abcdef";
  // Most strings (keys, names, short texts) need no escape: one append of the quoted whole.
  std::size_t clean = 0;
  for (; clean < s.size(); ++clean) {
    auto c = static_cast<unsigned char>(s[clean]);
    if (c < 0x20 || c == '"' || c == '\\') break;
  }
  if (clean == s.size()) {
    const auto at = out.size();
    out.resize(at + s.size() + 2);
    char* d = out.data() + at;
    d[0] = '"';
    std::memcpy(d + 1, s.data(), s.size());
    d[s.size() + 1] = '"';
    return;
  }
  out += '"';
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

void append_json(std::string& out, const run_params& p) {
  char num[24];
  auto number = [&](std::int64_t v) {
    auto [end, ec] = std::to_chars(num, num + sizeof num, v);
    out.append(num, end);
  };
  out += "{\"eval\":";
  append_json_string(out, p.eval);
  out += ",\"sample\":";
  append_json_string(out, p.sample);
  out += ",\"target\":";
  append_json_string(out, p.target);
  if (!p.params.empty()) {
    out += ",\"params\":{";
    bool first = true;
    for (auto& [k, v] : p.params) {
      if (!first) out += ',';
      first = false;
      append_json_string(out, k);
      out += ':';
      append_json_string(out, v);
    }
    out += '}';
  }
  if (p.trial != 0) {
    out += ",\"trial\":";
    number(p.trial);
  }
  if (p.trials > 1) {
    out += ",\"trials\":";
    number(p.trials);
  }
  if (p.seed) {
    out += ",\"seed\":";
    number(*p.seed);
  }
  out += '}';
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
