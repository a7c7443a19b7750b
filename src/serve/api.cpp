// The sans-I/O part of the server: routes, targets, errors, request bodies, events; and the
// allow-list's NAME=COMMAND entries (server.hpp).
#include "serve/api.hpp"

#include <mira/command_line.hpp>
#include <mira/protocol/json_text.hpp>
#include <mira/serve/server.hpp>
#include <mira/store/files.hpp>
#include "protocol/json_scan.hpp"
#include "store/digest.hpp"

#include <boost/asio/ip/address.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>

namespace mira::serve {

namespace json = boost::json;

api_error make_error(unsigned status, std::string code, std::string message, json::value details) {
  api_error e;
  e.status = status;
  e.code = std::move(code);
  e.message = std::move(message);
  e.details = std::move(details);
  return e;
}

std::string error_body(const api_error& e) {
  return json::serialize(json::object{
             {"error",
              json::object{{"code", e.code}, {"message", e.message}, {"details", e.details}}}}) +
         "\n";
}

namespace {

constexpr route_spec route_table[] = {
    {route::healthz, "GET", "/healthz", false, "Liveness", "application/json", ""},
    {route::version, "GET", "/v1/version", true, "Host, protocol and API versions",
     "application/json", "401"},
    {route::openapi, "GET", "/v1/openapi.json", true, "This document", "application/json", "401"},
    {route::studies, "GET", "/v1/studies", true, "The studies on the allow-list",
     "application/json", "401"},
    {route::catalog, "GET", "/v1/studies/{name}/catalog", true,
     "The study's listing (evals, samples, targets)", "application/json", "401 404 429 503"},
    {route::runs_create, "POST", "/v1/runs", true,
     "Start a run: {study, selection, options}; Idempotency-Key makes a retry return the same run",
     "application/json", "400 401 404 409 413 415 422 429 503"},
    {route::runs_list, "GET", "/v1/runs", true,
     "Saved and live runs, newest first; ?limit=1..200&cursor=RUN_ID", "application/json",
     "400 401"},
    {route::run_get, "GET", "/v1/runs/{id}", true,
     "A run: state, counts, progress, timing, the summary when done", "application/json",
     "400 401 404"},
    {route::run_cases, "GET", "/v1/runs/{id}/cases", true,
     "A page of the run's cases: ?status=&eval=&target=&tag=&trial=&score_min=&score_max=&q=&sort="
     "&limit=1..500&cursor=; ?format=ndjson (or Accept: application/x-ndjson) dumps every record "
     "instead, ?state=passed,failed,... filtering",
     "application/json", "400 401 404"},
    {route::run_case, "GET", "/v1/runs/{id}/cases/{key}", true,
     "One case whole: its record (with its trajectory) and its events; the key URL-encoded",
     "application/json", "400 401 404"},
    {route::run_report, "GET", "/v1/runs/{id}/report", true,
     "The run's report; ?format=json|jsonl|csv|junit|md|html", "application/json", "400 401 404"},
    {route::run_cancel, "POST", "/v1/runs/{id}/cancel", true,
     "Cancel a run in flight (finished cases are kept; the run is resumable)", "application/json",
     "400 401 404 409"},
    {route::run_resume, "POST", "/v1/runs/{id}/resume", true,
     "Run what a saved run lacks: {retry_errors, retry_failed}", "application/json",
     "400 401 404 409 413 415 422 429 503"},
    {route::run_events, "GET", "/v1/runs/{id}/events", true,
     "Server-Sent Events: start, case, progress, end; each with an id; Last-Event-ID resumes",
     "text/event-stream", "400 401 404"},
    {route::compare, "GET", "/v1/compare", true,
     "Two saved runs compared: ?base=ID&candidate=ID&change=regressed,fixed,same,unpaired"
     "&limit=1..500&cursor=; flipped cases (regressed, then fixed) by default",
     "application/json", "400 401 404 409"},
    {route::dashboard, "GET", "/", false, "The dashboard: runs", "text/html", ""},
    {route::dashboard_run, "GET", "/runs/{id}", false, "The dashboard: one run, live", "text/html",
     "400"},
    {route::dashboard_case, "GET", "/runs/{id}/cases/{key}", false,
     "The viewer: one case, its trajectory step by step", "text/html", "400"},
    {route::dashboard_compare, "GET", "/compare", false,
     "The viewer: two runs compared, flipped cases first", "text/html", ""},
    {route::dashboard_compare_case, "GET", "/compare/cases/{key}", false,
     "The viewer: one case of two runs side by side", "text/html", ""},
    {route::dashboard_script, "GET", "/dashboard.js", false, "The dashboard's script",
     "text/javascript", ""},
    {route::viewer_script, "GET", "/viewer.js", false, "The viewer's script", "text/javascript",
     ""},
};

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Whether `s` is UTF-8 (as the JSON skim reads strings: Unicode's table 3-7).
bool valid_utf8(std::string_view s) {
  const char* p = s.data();
  const char* end = p + s.size();
  while ((p = mira::detail::json_plain_run(p, end)) != end) {
    if (static_cast<unsigned char>(*p) < 0x80) {
      ++p;  // a quote, a backslash or a control byte: ASCII, which a string would escape
      continue;
    }
    p = mira::detail::scan_json_string_special(p, end);
    if (!p) return false;
  }
  return true;
}

// Percent-decoding; '+' is a space in the query only. Nothing unless it decodes to UTF-8 without
// a NUL.
std::optional<std::string> percent_decode(std::string_view s, bool query) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c == '%') {
      if (i + 2 >= s.size()) return std::nullopt;
      int hi = hex_value(s[i + 1]), lo = hex_value(s[i + 2]);
      if (hi < 0 || lo < 0) return std::nullopt;
      c = static_cast<char>(hi * 16 + lo);
      i += 2;
    } else if (c == '+' && query) {
      c = ' ';
    }
    if (c == '\0') return std::nullopt;
    out += c;
  }
  if (!valid_utf8(out)) return std::nullopt;  // no key, id or value is anything else
  return out;
}

std::vector<std::string_view> split_path(std::string_view path) {
  std::vector<std::string_view> out;
  std::size_t i = 1;  // after the leading '/'
  while (i <= path.size()) {
    auto j = path.find('/', i);
    if (j == std::string_view::npos) j = path.size();
    out.push_back(path.substr(i, j - i));
    i = j + 1;
  }
  return out;
}

}  // namespace

std::span<const route_spec> routes() {
  return route_table;
}

std::optional<std::string> request_target::param(std::string_view name) const {
  for (auto& [k, v] : query)
    if (k == name) return v;
  return std::nullopt;
}

tl::expected<request_target, api_error> parse_target(std::string_view target) {
  auto bad = [](std::string m) {
    return tl::unexpected(make_error(400, "bad_target", std::move(m)));
  };
  if (target.empty() || target[0] != '/') return bad("the request target must start with '/'");
  if (target.size() > 8192) return bad("the request target is longer than 8192 bytes");
  auto q = target.find('?');
  auto raw_path = target.substr(0, q);
  if (auto h = raw_path.find('#'); h != std::string_view::npos) raw_path = raw_path.substr(0, h);
  request_target t;
  auto path = percent_decode(raw_path, false);
  if (!path) return bad("the path has a bad percent escape, a NUL or bytes that are not UTF-8");
  t.path = std::move(*path);
  for (auto seg : split_path(t.path))
    if (seg == "." || seg == "..") return bad("the path has a '.' or '..' segment");
  if (q != std::string_view::npos) {
    auto query = target.substr(q + 1);
    if (auto h = query.find('#'); h != std::string_view::npos) query = query.substr(0, h);
    std::size_t i = 0;
    while (i <= query.size() && !query.empty()) {
      auto j = query.find('&', i);
      if (j == std::string_view::npos) j = query.size();
      auto pair = query.substr(i, j - i);
      if (!pair.empty()) {
        auto eq = pair.find('=');
        auto k = percent_decode(pair.substr(0, eq), true);
        auto v = percent_decode(eq == std::string_view::npos ? "" : pair.substr(eq + 1), true);
        if (!k || !v)
          return bad("the query has a bad percent escape, a NUL or bytes that are not UTF-8");
        t.query.emplace_back(std::move(*k), std::move(*v));
      }
      i = j + 1;
    }
  }
  return t;
}

std::optional<std::string> check_run_id(std::string_view id) {
  if (id.empty()) return "a run id is empty";
  if (id.size() > 64) return "a run id is at most 64 characters";
  auto ok = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_' || c == '.';
  };
  if (!std::all_of(id.begin(), id.end(), ok))
    return "a run id has only the characters A-Z a-z 0-9 . _ -";
  if (!std::isalnum(static_cast<unsigned char>(id[0])))
    return "a run id starts with a letter or a digit";
  if (auto why = store::invalid_run_id(id)) return why;
  return std::nullopt;
}

tl::expected<route_match, api_error> match_route(std::string_view method, std::string_view path) {
  auto segs = split_path(path);
  bool path_matched = false;
  for (auto& spec : route_table) {
    auto pattern = split_path(spec.path);
    const bool rest = !pattern.empty() && pattern.back() == "{key}";
    if (rest ? segs.size() < pattern.size() : pattern.size() != segs.size()) continue;
    route_match m;
    bool ok = true;
    for (std::size_t i = 0; i < pattern.size() && ok; ++i) {
      if (pattern[i] == "{key}") {
        // Everything after the fixed segments: a case key holds slashes.
        auto at = static_cast<std::size_t>(segs[i].data() - path.data());
        m.key = path.substr(at);
        ok = !m.key.empty();
      } else if (pattern[i] == "{name}") {
        ok = !segs[i].empty();
        m.study = segs[i];
      } else if (pattern[i] == "{id}") {
        ok = !segs[i].empty();
        m.run_id = segs[i];
      } else {
        ok = pattern[i] == segs[i];
      }
    }
    if (!ok) continue;
    path_matched = true;
    if (spec.method != method) continue;
    if (!m.run_id.empty())
      if (auto why = check_run_id(m.run_id))
        return tl::unexpected(make_error(400, "invalid_run_id", *why));
    m.spec = &spec;
    return m;
  }
  if (path_matched)
    return tl::unexpected(
        make_error(405, "method_not_allowed", "this path does not take " + std::string(method)));
  return tl::unexpected(make_error(404, "not_found", "no route for this path"));
}

std::string percent_encode(std::string_view text, bool keep_slash) {
  static constexpr char hex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    auto u = static_cast<unsigned char>(c);
    if (std::isalnum(u) || c == '-' || c == '.' || c == '_' || c == '~' ||
        (keep_slash && c == '/')) {
      out += c;
    } else {
      out += '%';
      out += hex[u >> 4];
      out += hex[u & 15];
    }
  }
  return out;
}

bool bearer_matches(std::string_view authorization, std::string_view token) {
  constexpr std::string_view scheme = "Bearer ";
  if (token.empty() || authorization.size() < scheme.size()) return false;
  bool scheme_ok = true;
  for (std::size_t i = 0; i < scheme.size(); ++i)
    scheme_ok &= std::tolower(static_cast<unsigned char>(authorization[i])) ==
                 std::tolower(static_cast<unsigned char>(scheme[i]));
  auto given = authorization.substr(scheme.size());
  // Every byte of the token is compared whatever the given value holds, so the time taken does
  // not tell how much of it matched.
  unsigned char diff = given.size() == token.size() ? 0 : 1;
  for (std::size_t i = 0; i < token.size(); ++i) {
    unsigned char g = i < given.size() ? static_cast<unsigned char>(given[i]) : 0;
    diff |= static_cast<unsigned char>(g ^ static_cast<unsigned char>(token[i]));
  }
  return scheme_ok && diff == 0;
}

bool cookie_token_matches(std::string_view cookie, std::string_view token) {
  constexpr std::string_view name = "mira_token=";
  while (!cookie.empty()) {
    auto semi = cookie.find(';');
    auto pair = cookie.substr(0, semi);
    cookie = semi == std::string_view::npos ? std::string_view{} : cookie.substr(semi + 1);
    while (!pair.empty() && pair.front() == ' ') pair.remove_prefix(1);
    if (pair.substr(0, name.size()) != name) continue;
    auto value = percent_decode(pair.substr(name.size()), false);
    return value && bearer_matches("Bearer " + *value, token);
  }
  return false;
}

namespace {

// NAME=COMMAND as a study_entry, or what is wrong with it.
tl::expected<study_entry, std::string> read_study_entry(std::string_view text) {
  auto eq = text.find('=');
  if (eq == std::string_view::npos || eq == 0)
    return tl::unexpected("expected NAME=COMMAND, got '" + std::string(text) + "'");
  study_entry e;
  e.name = text.substr(0, eq);
  for (char c : e.name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.')
      return tl::unexpected("the study name '" + e.name +
                            "' has a character outside A-Z a-z 0-9 . _ -");
  auto argv = split_command_line(text.substr(eq + 1));
  if (!argv)
    return tl::unexpected("the command of study '" + e.name + "' " + argv.error().message());
  e.argv = std::move(*argv);
  if (e.argv.empty()) return tl::unexpected("the study '" + e.name + "' has no command");
  return e;
}

}  // namespace

tl::expected<study_entry, error> parse_study_entry(std::string_view text) {
  auto e = read_study_entry(text);
  if (!e) return tl::unexpected(error{errc::invalid_study_entry, std::move(e.error())});
  return std::move(*e);
}

namespace {

std::string lowercase(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// The host of an authority ("name[:port]" or "[v6][:port]"), lowercase and without brackets,
// or nothing when it is not one.
std::optional<std::string> authority_host(std::string_view authority) {
  std::string_view name = authority, port;
  if (!authority.empty() && authority.front() == '[') {
    auto close = authority.find(']');
    if (close == std::string_view::npos) return std::nullopt;
    name = authority.substr(1, close - 1);
    auto rest = authority.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') return std::nullopt;
      port = rest.substr(1);
    }
  } else if (auto colon = authority.find(':'); colon != std::string_view::npos) {
    name = authority.substr(0, colon);
    port = authority.substr(colon + 1);
  }
  if (name.empty() || port.size() > 5 || !std::all_of(port.begin(), port.end(), [](char c) {
        return std::isdigit(static_cast<unsigned char>(c));
      }))
    return std::nullopt;
  return lowercase(name);
}

bool named_in(const std::string& host, std::span<const std::string> allowed) {
  return std::any_of(allowed.begin(), allowed.end(), [&](const std::string& a) {
    std::string_view name = a;
    if (name.size() > 2 && name.front() == '[' && name.back() == ']')
      name = name.substr(1, name.size() - 2);
    return lowercase(name) == host;
  });
}

}  // namespace

bool host_allowed(std::string_view host, std::string_view listen_address,
                  std::span<const std::string> allowed) {
  auto name = authority_host(host);
  if (!name) return false;
  if (*name == "localhost" || named_in(*name, allowed)) return true;
  boost::system::error_code ec;
  auto ip = boost::asio::ip::make_address(*name, ec);
  if (ec) return false;
  if (ip.is_loopback()) return true;
  auto listen = boost::asio::ip::make_address(listen_address, ec);
  return !ec && !listen.is_unspecified() && ip == listen;
}

bool origin_allowed(std::string_view origin, std::string_view host,
                    std::span<const std::string> allowed) {
  auto sep = origin.find("://");
  if (sep == std::string_view::npos) return false;
  auto scheme = lowercase(origin.substr(0, sep));
  if (scheme != "http" && scheme != "https") return false;
  auto authority = origin.substr(sep + 3);
  if (!host.empty() && lowercase(authority) == lowercase(host)) return true;
  auto name = authority_host(authority);
  return name && named_in(*name, allowed);
}

bool has_media_type(std::string_view content_type, std::string_view type) {
  auto semi = content_type.find(';');
  auto t = content_type.substr(0, semi);
  while (!t.empty() && t.back() == ' ') t.remove_suffix(1);
  return lowercase(t) == lowercase(type);
}

bool is_json_media_type(std::string_view content_type) {
  return has_media_type(content_type, "application/json");
}

api_error body_not_json(std::string_view content_type) {
  return make_error(415, "unsupported_media_type", "a request body must be application/json",
                    json::object{{"content_type", content_type}});
}

namespace {

tl::expected<json::object, api_error> json_body(std::string_view content_type,
                                                std::string_view body) {
  if (!is_json_media_type(content_type)) return tl::unexpected(body_not_json(content_type));
  boost::system::error_code ec;
  auto v = json::parse(body, ec);
  if (ec)
    return tl::unexpected(make_error(400, "invalid_json", "the body is not JSON: " + ec.message()));
  if (!v.is_object())
    return tl::unexpected(make_error(400, "invalid_json", "the body is not a JSON object"));
  return std::move(v.get_object());
}

api_error invalid(std::string member, std::string why) {
  return make_error(422, "invalid_request", member + ": " + why, json::object{{"member", member}});
}

// Members are checked one by one; the first wrong one is the error, named by its path.
struct reader {
  reader(const json::object& obj, std::string p) : o(obj), prefix(std::move(p)) {}
  const json::object& o;
  std::string prefix;
  std::optional<api_error> error;

  std::string name(std::string_view k) const { return prefix + std::string(k); }
  void only(std::initializer_list<std::string_view> known) {
    for (auto& [k, v] : o)
      if (std::find(known.begin(), known.end(), std::string_view(k)) == known.end() && !error)
        error = invalid(name(k), "unknown member");
  }
  const json::value* get(std::string_view k) {
    auto* v = o.if_contains(k);
    return v && !v->is_null() ? v : nullptr;
  }
  void string(std::string_view k, std::string& out) {
    if (auto* v = get(k)) {
      if (!v->is_string()) return fail(k, "must be a string");
      out = v->get_string();
    }
  }
  void strings(std::string_view k, std::vector<std::string>& out) {
    auto* v = get(k);
    if (!v) return;
    if (v->is_string()) {
      out.emplace_back(v->get_string());
      return;
    }
    if (!v->is_array()) return fail(k, "must be a string or an array of strings");
    for (auto& e : v->get_array()) {
      if (!e.is_string()) return fail(k, "must be a string or an array of strings");
      out.emplace_back(e.get_string());
    }
  }
  void boolean(std::string_view k, bool& out) {
    if (auto* v = get(k)) {
      if (!v->is_bool()) return fail(k, "must be true or false");
      out = v->get_bool();
    }
  }
  template <class T>
  void integer(std::string_view k, std::optional<T>& out, std::int64_t lo, std::int64_t hi) {
    auto* v = get(k);
    if (!v) return;
    std::int64_t n = 0;
    if (v->is_int64()) {
      n = v->get_int64();
    } else if (v->is_uint64() && v->get_uint64() <= static_cast<std::uint64_t>(hi)) {
      n = static_cast<std::int64_t>(v->get_uint64());
    } else {
      return fail(k, "must be an integer");
    }
    if (n < lo || n > hi)
      return fail(k, "must be from " + std::to_string(lo) + " to " + std::to_string(hi));
    out = static_cast<T>(n);
  }
  void number(std::string_view k, std::optional<double>& out, double lo, double hi) {
    auto* v = get(k);
    if (!v) return;
    if (!v->is_number()) return fail(k, "must be a number");
    double d = v->to_number<double>();
    if (!std::isfinite(d) || d < lo || d > hi) return fail(k, "is out of range");
    out = d;
  }
  void fail(std::string_view k, std::string why) {
    if (!error) error = invalid(name(k), std::move(why));
  }
};

}  // namespace

tl::expected<run_request, api_error> decode_run_request(std::string_view content_type,
                                                        std::string_view body) {
  auto o = json_body(content_type, body);
  if (!o) return tl::unexpected(o.error());
  run_request r;
  reader top{*o, ""};
  top.only({"study", "selection", "options"});
  top.string("study", r.study);
  if (!top.error && r.study.empty()) top.fail("study", "is required (a name from GET /v1/studies)");
  if (top.error) return tl::unexpected(*top.error);
  if (auto* sel = top.get("selection")) {
    if (!sel->is_object()) return tl::unexpected(invalid("selection", "must be an object"));
    reader s{sel->get_object(), "selection."};
    s.only({"filter", "evals", "samples", "targets", "tags", "axes", "trials", "seed"});
    auto& out = r.selection;
    s.string("filter", out.filter);
    s.strings("evals", out.evals);
    s.strings("samples", out.samples);
    s.strings("targets", out.targets);
    s.strings("tags", out.tags);
    s.integer("trials", out.trials, 0, 100000);
    s.integer("seed", out.seed, INT64_MIN, INT64_MAX);
    if (auto* axes = s.get("axes")) {
      if (!axes->is_object()) {
        s.fail("axes", "must be an object of NAME: [globs]");
      } else {
        for (auto& [k, v] : axes->get_object()) {
          std::vector<std::string> globs;
          reader a{axes->get_object(), "selection.axes."};
          a.strings(k, globs);
          if (a.error) {
            s.error = a.error;
            break;
          }
          (void)v;
          out.axes.emplace_back(std::string(k), std::move(globs));
        }
      }
    }
    if (s.error) return tl::unexpected(*s.error);
  }
  if (auto* opt = top.get("options")) {
    if (!opt->is_object()) return tl::unexpected(invalid("options", "must be an object"));
    reader s{opt->get_object(), "options."};
    s.only({"concurrency", "retries", "case_timeout_s", "deadline_s", "fail_fast",
            "timeout_is_infra", "max_cost_usd", "max_tokens", "procs"});
    auto& out = r.options;
    s.integer("concurrency", out.concurrency, 1, 10000);
    s.integer("retries", out.retries, 0, 100);
    s.number("case_timeout_s", out.case_timeout_s, 0.001, 7 * 86400.0);
    s.number("deadline_s", out.deadline_s, 0.001, 30 * 86400.0);
    s.boolean("fail_fast", out.fail_fast);
    s.boolean("timeout_is_infra", out.timeout_is_infra);
    s.number("max_cost_usd", out.max_cost_usd, 0, 1e12);
    s.integer("max_tokens", out.max_tokens, 0, INT64_MAX);
    s.integer("procs", out.procs, 1, 256);
    if (s.error) return tl::unexpected(*s.error);
  }
  r.body = std::move(*o);
  return r;
}

schedule::run_policy to_policy(const run_options& o) {
  schedule::run_policy p;
  auto secs = [](double s) {
    return std::chrono::duration_cast<schedule::duration>(std::chrono::duration<double>(s));
  };
  if (o.concurrency) p.concurrency.max_concurrent = *o.concurrency;
  if (o.retries) p.retry.max_retries = *o.retries;
  if (o.case_timeout_s) p.case_timeout = secs(*o.case_timeout_s);
  if (o.deadline_s) p.deadline = secs(*o.deadline_s);
  p.fail_fast = o.fail_fast;
  p.timeout_is_infra = o.timeout_is_infra;
  p.max_cost_usd = o.max_cost_usd;
  p.max_tokens = o.max_tokens;
  return p;
}

tl::expected<resume_request, api_error> decode_resume_request(std::string_view content_type,
                                                              std::string_view body) {
  resume_request r;
  if (body.empty()) return r;
  auto o = json_body(content_type, body);
  if (!o) return tl::unexpected(o.error());
  reader s{*o, ""};
  s.only({"retry_errors", "retry_failed"});
  s.boolean("retry_errors", r.retry_errors);
  s.boolean("retry_failed", r.retry_failed);
  if (s.error) return tl::unexpected(*s.error);
  return r;
}

bool idempotency_keys::valid_key(std::string_view key) {
  if (key.empty() || key.size() > 256) return false;
  return std::all_of(key.begin(), key.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.' ||
           c == ':' || c == '/';
  });
}

idempotency_keys::lookup_result idempotency_keys::begin(const std::string& key,
                                                        std::string_view body) {
  auto digest = store::sha256_hex(body);
  auto it = keys_.find(key);
  if (it == keys_.end()) {
    keys_.emplace(key, entry{std::move(digest), {}});
    return {outcome::fresh, {}};
  }
  if (it->second.digest != digest) return {outcome::conflict, {}};
  if (it->second.run_id.empty()) return {outcome::in_progress, {}};
  return {outcome::replay, it->second.run_id};
}

void idempotency_keys::complete(const std::string& key, std::string run_id) {
  if (auto it = keys_.find(key); it != keys_.end()) it->second.run_id = std::move(run_id);
}

void idempotency_keys::release(const std::string& key) {
  keys_.erase(key);
}

std::string sse_frame(const run_event& e) {
  std::string out = "id: " + std::to_string(e.id) + "\nevent: " + e.type + "\ndata: ";
  // One data line: the JSON text has no line break (serialize never writes one).
  out += e.data;
  out += "\n\n";
  return out;
}

std::optional<std::uint64_t> parse_last_event_id(std::string_view v) {
  while (!v.empty() && v.front() == ' ') v.remove_prefix(1);
  while (!v.empty() && v.back() == ' ') v.remove_suffix(1);
  if (v.empty() || v.size() > 20) return std::nullopt;
  std::uint64_t n = 0;
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  if (ec != std::errc() || p != v.data() + v.size()) return std::nullopt;
  return n;
}

const run_event& event_log::append(std::string type, std::string data) {
  events_.push_back(run_event{last_id() + 1, std::move(type), std::move(data)});
  return events_.back();
}

std::span<const run_event> event_log::after(std::uint64_t id) const {
  // Ids rise in order (with a gap where trim() forgot some).
  auto it = std::upper_bound(events_.begin(), events_.end(), id,
                             [](std::uint64_t i, const run_event& e) { return i < e.id; });
  return std::span<const run_event>(it, events_.end());
}

void event_log::trim(std::size_t keep) {
  if (keep < 2 || events_.size() <= keep) return;
  events_.erase(events_.begin() + 1, events_.end() - static_cast<std::ptrdiff_t>(keep - 1));
  events_.shrink_to_fit();
}

std::string openapi_document() {
  json::object paths;
  auto error_ref = json::object{{"$ref", "#/components/schemas/Error"}};
  for (auto& r : route_table) {
    json::object responses;
    auto ok = r.r == route::runs_create                              ? "201"
              : r.r == route::run_cancel || r.r == route::run_resume ? "202"
                                                                     : "200";
    responses[ok] = json::object{
        {"description", "success"},
        {"content", json::object{{r.produces, json::object{{"schema", json::object{}}}}}}};
    std::string_view codes = r.statuses;
    while (!codes.empty()) {
      auto sp = codes.find(' ');
      auto code = codes.substr(0, sp);
      responses[code] = json::object{
          {"description", "error"},
          {"content", json::object{{"application/json", json::object{{"schema", error_ref}}}}}};
      codes = sp == std::string_view::npos ? std::string_view{} : codes.substr(sp + 1);
    }
    json::array params;
    auto path = std::string(r.path);
    if (path.find("{id}") != std::string::npos)
      params.push_back(json::object{
          {"name", "id"},
          {"in", "path"},
          {"required", true},
          {"schema",
           json::object{{"type", "string"}, {"pattern", "^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"}}}});
    if (path.find("{key}") != std::string::npos)
      params.push_back(json::object{{"name", "key"},
                                    {"in", "path"},
                                    {"required", true},
                                    {"description", "a case key, URL-encoded"},
                                    {"schema", json::object{{"type", "string"}}}});
    if (path.find("{name}") != std::string::npos)
      params.push_back(json::object{{"name", "name"},
                                    {"in", "path"},
                                    {"required", true},
                                    {"schema", json::object{{"type", "string"}}}});
    json::object op{{"summary", r.summary},
                    {"operationId", std::string(r.method == "GET" ? "get" : "post") + path},
                    {"responses", std::move(responses)}};
    if (!params.empty()) op["parameters"] = std::move(params);
    if (!r.authenticated) op["security"] = json::array{};
    std::string method(r.method);
    for (auto& c : method) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    auto& entry = paths[path];
    if (!entry.is_object()) entry = json::object{};
    entry.get_object()[method] = std::move(op);
  }
  json::object doc{
      {"openapi", "3.0.3"},
      {"info", json::object{{"title", "mira serve"}, {"version", api_version}}},
      {"paths", std::move(paths)},
      {"security", json::array{json::object{{"bearer", json::array{}}}}},
      {"components",
       json::object{
           {"securitySchemes",
            json::object{{"bearer", json::object{{"type", "http"}, {"scheme", "bearer"}}}}},
           {"schemas",
            json::object{
                {"Error",
                 json::object{
                     {"type", "object"},
                     {"required", json::array{"error"}},
                     {"properties",
                      json::object{
                          {"error", json::object{{"type", "object"},
                                                 {"required", json::array{"code", "message",
                                                                          "details"}}}}}}}}}}}}};
  return json::serialize(doc) + "\n";
}

}  // namespace mira::serve
