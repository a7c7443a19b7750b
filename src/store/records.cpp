// The case record's JSON codec (see records.hpp).
#include <mira/store/records.hpp>
#include "store/case_batch.hpp"

#include <mira/protocol/codec.hpp>
#include <mira/protocol/json_text.hpp>
#include "protocol/json_rewrite.hpp"
#include "protocol/json_scan.hpp"

#include <boost/json/parse.hpp>

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <vector>

namespace mira::store {

namespace json = boost::json;
using schedule::case_state;

json::object result_object(const schedule::case_record& r) {
  boost::system::error_code ec;
  auto v = json::parse(r.result_json, ec);
  return !ec && v.is_object() ? std::move(v.as_object()) : json::object{};
}

namespace {

// The host's members of a saved record, in the order they follow the result's own.
enum host_field : unsigned {
  f_key,
  f_status,
  f_attempts,
  f_retried,
  f_host_message,
  f_latency_ms,
  f_tags
};
constexpr std::string_view host_field_names[] = {
    "\"key\"",          "\"status\"",     "\"attempts\"", "\"retried\"",
    "\"host_message\"", "\"latency_ms\"", "\"tags\""};

// What the host adds to a case's result besides the case record: its key, and its sample's tags
// (from the study's listing, which a record would otherwise not say).
struct saved_as {
  std::string_view key;
  const std::vector<std::string>& tags;
};
constexpr unsigned host_field_count = std::size(host_field_names);

// The host's members this record has: key, status and attempts always; the others when they
// say something.
unsigned host_fields_of(const schedule::case_record& r, const saved_as& as) {
  unsigned fields = 1u << f_key | 1u << f_status | 1u << f_attempts;
  if (!as.tags.empty()) fields |= 1u << f_tags;
  if (!r.retried.empty()) fields |= 1u << f_retried;
  if (!r.message.empty() && r.has_result()) fields |= 1u << f_host_message;
  if (r.attempts > 0) fields |= 1u << f_latency_ms;
  return fields;
}

void append_host_value(std::string& out, host_field f, const saved_as& as,
                       const schedule::case_record& r) {
  switch (f) {
    case f_key:
      return protocol::append_json_string(out, as.key);
    case f_status:
      out += '"';
      out += to_string(r.state);  // a name without anything to escape
      out += '"';
      return;
    case f_attempts: {
      char buf[16];
      auto [end, ec] = std::to_chars(buf, buf + sizeof buf, r.attempts);
      out.append(buf, end);
      return;
    }
    case f_retried: {
      out += '[';
      for (std::size_t i = 0; i < r.retried.size(); ++i) {
        out += i ? ",{\"cause\":" : "{\"cause\":";
        protocol::append_json_string(out, r.retried[i].cause);
        out += ",\"message\":";
        protocol::append_json_string(out, r.retried[i].message);
        out += '}';
      }
      out += ']';
      return;
    }
    case f_host_message:
      return protocol::append_json_string(out, r.message);
    case f_latency_ms:
      return protocol::append_json_number(out, std::round(r.latency_seconds * 1e6) / 1e3);
    case f_tags:
      out += '[';
      for (std::size_t i = 0; i < as.tags.size(); ++i) {
        if (i) out += ',';
        protocol::append_json_string(out, as.tags[i]);
      }
      out += ']';
      return;
  }
}

// Each of `fields` as a member, after the members already written (`first`: there are none).
void append_host_fields(std::string& out, unsigned fields, bool first, const saved_as& as,
                        const schedule::case_record& r) {
  for (unsigned f = 0; f < host_field_count; ++f) {
    if (!(fields & (1u << f))) continue;
    if (!first) out += ',';
    first = false;
    out += host_field_names[f];
    out += ':';
    append_host_value(out, static_cast<host_field>(f), as, r);
  }
}

// The host field of each name length (quotes included), -1 for none: each host name has a
// length of its own, so one comparison tells whether a member is named like one.
constexpr auto host_field_of_length = [] {
  std::array<int, 16> t{};
  t.fill(-1);
  for (unsigned f = 0; f < host_field_count; ++f) t[host_field_names[f].size()] = int(f);
  return t;
}();
static_assert(
    [] {
      for (unsigned f = 0; f < host_field_count; ++f)
        if (host_field_of_length[host_field_names[f].size()] != int(f)) return false;
      return true;
    }(),
    "two host field names of one length");

// The host field a member's name (as written, quotes included) is, among `fields`.
std::optional<host_field> host_field_named(std::string_view name, unsigned fields) {
  if (name.size() >= host_field_of_length.size() || host_field_of_length[name.size()] < 0)
    return std::nullopt;
  const auto f = static_cast<unsigned>(host_field_of_length[name.size()]);
  if (!(fields & (1u << f)) || name != host_field_names[f]) return std::nullopt;
  return static_cast<host_field>(f);
}

// out[at..] is the result's object in the host's form, its members where `members` says: the
// host's fields are added, each in the place of the result's member of that name if it has one.
void add_host_fields(std::string& out, std::size_t at,
                     const std::vector<mira::detail::json_member_span>& members, const saved_as& as,
                     const schedule::case_record& r) {
  unsigned fields = host_fields_of(r, as);
  bool shared = false;
  for (auto& m : members)
    shared = shared || host_field_named(std::string_view(out).substr(m.name, m.name_size), fields);
  if (!shared) {  // what studies send: the host's fields go at the end
    out.pop_back();
    append_host_fields(out, fields, members.empty(), as, r);
    out += '}';
    return;
  }
  const std::string result = out.substr(at);
  out.resize(at);
  out += '{';
  for (std::size_t i = 0; i < members.size(); ++i) {
    auto& m = members[i];
    if (i) out += ',';
    out.append(result, m.name - at, m.name_size);
    out += ':';
    if (auto f =
            host_field_named(std::string_view(result).substr(m.name - at, m.name_size), fields)) {
      append_host_value(out, *f, as, r);
      fields &= ~(1u << *f);
    } else {
      out.append(result, m.value - at, m.value_size);
    }
  }
  append_host_fields(out, fields, members.empty(), as, r);
  out += '}';
}

// A case without a result: its identity, a failed verdict with the error in its transcript.
void append_synthesised_result(std::string& out, const plan::case_params& params,
                               const saved_as& as, const schedule::case_record& r) {
  protocol::append_json(out, params);
  out.pop_back();  // the identity's closing brace
  out += R"(,"passed":false,"aggregate":0,"scores":[],"transcript":{"final_response":"",)"
         R"("iterations":0,"tool_calls_count":0,"usage":{"input_tokens":0,"output_tokens":0,)"
         R"("cost_usd":0})";
  if (!r.message.empty()) {
    out += ",\"error\":";
    protocol::append_json_string(out, r.message);
  }
  if (r.state == case_state::na) out += R"(,"error_kind":"infra")";
  out += r.state == case_state::skipped ? R"(},"skipped":true)" : R"(},"skipped":false)";
  append_host_fields(out, host_fields_of(r, as), false, as, r);
  out += '}';
}

// The line of a case that produced a result.
void append_result_line(std::string& out, const saved_as& as, const schedule::case_record& r) {
  const auto at = out.size();
  thread_local std::vector<mira::detail::json_member_span> members;  // its capacity kept
  members.clear();
  if (mira::detail::rewrite_json(out, r.result_json, &members) && out[at] == '{')
    return add_host_fields(out, at, members, as, r);
  // What the rewrite leaves to Boost.JSON (a repeated member name, an exponent of five digits,
  // nesting deeper than the skim's limit), or a result that is not an object, which counts as
  // an empty one.
  out.resize(at);
  members.clear();
  out += '{';
  boost::system::error_code ec;
  auto v = json::parse(r.result_json, ec, {}, mira::detail::host_parse_options());
  if (!ec && v.is_object()) {
    for (auto& [name, value] : v.get_object()) {
      if (!members.empty()) out += ',';
      mira::detail::json_member_span m;
      m.name = out.size();
      protocol::append_json_string(out, name);
      m.name_size = out.size() - m.name;
      out += ':';
      m.value = out.size();
      protocol::append_json_text(out, value);
      m.value_size = out.size() - m.value;
      members.push_back(m);
    }
  }
  out += '}';
  add_host_fields(out, at, members, as, r);
}

}  // namespace

void append_case_line(std::string& out, const plan::planned_case& c,
                      const schedule::case_record& r) {
  const saved_as as{c.key, c.tags};
  if (!r.has_result()) return append_synthesised_result(out, c.params, as, r);
  append_result_line(out, as, r);
}

void append_case_line(std::string& out, const plan::case_list& cases, std::size_t i,
                      std::string_view key, const schedule::case_record& r) {
  const saved_as as{key, cases.tags(i)};
  if (!r.has_result()) return append_synthesised_result(out, cases.params(i), as, r);
  append_result_line(out, as, r);
}

// Here, beside the one function that writes a record.
void case_batch::add_case(const plan::case_list& cases, std::size_t i,
                          const schedule::case_record& r) {
  const auto key_at = keys_.size();
  keys_ += cases.key(i);
  append_case_line(records_, cases, i, std::string_view(keys_).substr(key_at), r);
  ends_.push_back({keys_.size(), records_.size(), i, static_cast<std::uint8_t>(1 + int(r.state))});
}

std::string case_line(const plan::planned_case& c, const schedule::case_record& r) {
  std::string out;
  out.reserve(r.result_json.size() + 256);
  append_case_line(out, c, r);
  return out;
}

std::optional<std::string> key_of(const json::object& record) {
  if (auto* k = record.if_contains("key"); k && k->is_string()) return std::string(k->get_string());
  auto params = protocol::decode_run_params(record);
  if (!params) return std::nullopt;
  return plan::case_key(*params);
}

namespace {

// The members of `saved` but the ones named in `skip`, as the text of one object in the host's
// form: the study's own result, written from the saved record in one pass.
template <std::size_t N>
std::string members_but(const json::object& saved, const std::string_view (&skip)[N]) {
  std::string out;
  out.reserve(1024);
  out += '{';
  for (auto& [name, value] : saved) {
    if (std::find(std::begin(skip), std::end(skip), name) != std::end(skip)) continue;
    if (out.size() > 1) out += ',';
    protocol::append_json_string(out, name);
    out += ':';
    protocol::append_json_text(out, value);
  }
  out += '}';
  return out;
}

constexpr std::string_view only_the_key[] = {"key"};
// "tags" too: they are read back with the case's identity (planned_case_of), and written again
// from there, in the host's place for them.
constexpr std::string_view the_host_fields[] = {"key",        "status",       "attempts", "retried",
                                                "latency_ms", "host_message", "tags"};

}  // namespace

schedule::case_record decode_case_record(const json::object& saved) {
  schedule::case_record r;
  auto text = [&](std::string_view k) -> std::string_view {
    auto* v = saved.if_contains(k);
    return v && v->is_string() ? std::string_view(v->get_string()) : std::string_view();
  };
  const auto status = text("status");
  if (status.empty()) {
    // A record the Rust mira CLI saved: a bare RunResult, its state read from the verdict.
    auto study = members_but(saved, only_the_key);
    if (auto result = protocol::decode_run_result_text(study)) {
      bool all_na = !result->scores.empty();
      for (auto& sc : result->scores) all_na = all_na && sc.na;
      r.state = result->skipped  ? case_state::skipped
                : all_na         ? case_state::na
                : result->passed ? case_state::passed
                                 : case_state::failed;
      r.attempts = 1;
      r.result_json = std::move(study);
      return r;
    }
  }
  if (auto st = schedule::case_state_from_string(status)) r.state = *st;
  if (auto* v = saved.if_contains("attempts"); v && v->is_int64())
    r.attempts = static_cast<int>(v->get_int64());
  if (auto* v = saved.if_contains("latency_ms"); v && v->is_number())
    r.latency_seconds = v->to_number<double>() / 1000;
  if (auto* v = saved.if_contains("retried"); v && v->is_array())
    for (auto& e : v->get_array())
      if (auto* o = e.if_object()) {
        auto member = [&](std::string_view k) {
          auto* m = o->if_contains(k);
          return m && m->is_string() ? std::string(m->get_string()) : std::string();
        };
        r.retried.push_back({member("cause"), member("message")});
      }
  r.message = text("host_message");
  // The study's own result, without the host's fields; cases that never produced one (errors,
  // unavailable targets) were saved with a synthesised result that is not put back.
  if (r.state == case_state::passed || r.state == case_state::failed || r.state == case_state::na ||
      (r.state == case_state::skipped && r.attempts > 0)) {
    auto study = members_but(saved, the_host_fields);
    if (protocol::decode_run_result_text(study)) r.result_json = std::move(study);
  }
  if (r.message.empty() && !r.has_result()) {
    if (auto* t = saved.if_contains("transcript"); t && t->is_object())
      if (auto* e = t->get_object().if_contains("error"); e && e->is_string())
        r.message = std::string(e->get_string());
  }
  return r;
}

}  // namespace mira::store
