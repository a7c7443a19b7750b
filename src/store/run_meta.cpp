// meta.json, typed (see run_meta.hpp).
#include <mira/store/run_meta.hpp>

#include <ctime>

namespace mira::store {

namespace json = boost::json;

std::string_view to_string(layout l) {
  return l == layout::compact ? "compact" : "per-case";
}

std::optional<layout> layout_from_string(std::string_view s) {
  if (s == "per-case") return layout::per_case;
  if (s == "compact") return layout::compact;
  return std::nullopt;
}

namespace {

std::string text(const json::object& o, std::string_view k) {
  auto* v = o.if_contains(k);
  return v && v->is_string() ? std::string(v->get_string()) : std::string();
}

json::object object(const json::object& o, std::string_view k) {
  auto* v = o.if_contains(k);
  return v && v->is_object() ? v->get_object() : json::object{};
}

std::int64_t integer(const json::object& o, std::string_view k) {
  auto* v = o.if_contains(k);
  if (v && v->is_int64()) return v->get_int64();
  if (v && v->is_uint64()) return static_cast<std::int64_t>(v->get_uint64());
  if (v && v->is_double()) return static_cast<std::int64_t>(v->get_double());
  return 0;
}

std::vector<std::string> strings(const json::object& o, std::string_view k) {
  std::vector<std::string> out;
  if (auto* v = o.if_contains(k); v && v->is_array())
    for (auto& e : v->get_array())
      if (e.is_string()) out.emplace_back(e.get_string());
  return out;
}

json::array strings_json(const std::vector<std::string>& v) {
  json::array out;
  for (auto& s : v) out.emplace_back(s);
  return out;
}

std::int64_t unix_from_iso(const std::string& iso) {
  std::tm utc{};
  if (iso.empty() || !::strptime(iso.c_str(), "%Y-%m-%dT%H:%M:%SZ", &utc)) return 0;
  return static_cast<std::int64_t>(::timegm(&utc));
}

// Members meta.json may have that from_json reads into typed fields.
constexpr std::string_view known[] = {
    "format", "run_id",      "layout",       "started",       "finished",     "study",
    "host",   "environment", "fingerprints", "sessions",      "summary",      "study_command",
    "config", "study_env",   "started_unix", "finished_unix", "study_version"};

bool is_known(std::string_view k) {
  for (auto n : known)
    if (n == k) return true;
  return false;
}

}  // namespace

std::string iso_utc(std::int64_t t) {
  if (t <= 0) return {};
  auto tt = static_cast<std::time_t>(t);
  std::tm utc{};
  ::gmtime_r(&tt, &utc);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return buf;
}

namespace {

std::vector<session_entry> sessions_of(const json::object& o) {
  std::vector<session_entry> out;
  if (auto* sessions = o.if_contains("sessions"); sessions && sessions->is_array())
    for (auto& s : sessions->get_array())
      if (s.is_object()) out.push_back(session_entry::from_json(s.get_object()));
  return out;
}

}  // namespace

json::object session_entry::to_json() const {
  json::object o{{"started", started}, {"finished", finished},       {"hostname", hostname},
                 {"pid", pid},         {"argv", strings_json(argv)}, {"config", config},
                 {"planned", planned}, {"reused", reused},           {"ran", ran},
                 {"seconds", seconds}};
  if (!stopped.empty()) o["stopped"] = stopped;
  if (!stop_message.empty()) o["stop_message"] = stop_message;
  return o;
}

session_entry session_entry::from_json(const json::object& o) {
  session_entry s;
  s.started = text(o, "started");
  s.finished = text(o, "finished");
  s.hostname = text(o, "hostname");
  s.pid = integer(o, "pid");
  s.argv = strings(o, "argv");
  s.config = object(o, "config");
  s.planned = static_cast<std::size_t>(integer(o, "planned"));
  s.reused = static_cast<std::size_t>(integer(o, "reused"));
  s.ran = static_cast<std::size_t>(integer(o, "ran"));
  if (auto* v = o.if_contains("seconds"); v && v->is_number()) s.seconds = v->to_number<double>();
  s.stopped = text(o, "stopped");
  s.stop_message = text(o, "stop_message");
  return s;
}

double run_meta::seconds() const {
  double total = 0;
  for (auto& s : sessions) total += s.seconds;
  return total;
}

json::object run_meta::to_json() const {
  json::object o = extra;
  o["format"] = format;
  o["run_id"] = run_id;
  o["layout"] = to_string(layout);
  o["started"] = started;
  o["finished"] = finished;
  // A Rust-made run keeps the members the Rust CLI reads, so it can still open the folder.
  if (made_by_rust_host) {
    o["study"] = study;
    if (!study_version.empty()) o["study_version"] = study_version;
    o["started_unix"] = unix_from_iso(started);
    o["finished_unix"] = unix_from_iso(finished);
  } else {
    o["study"] = initialize.empty()
                     ? json::object{{"study", study}, {"study_version", study_version}}
                     : initialize;
  }
  o["study_command"] = strings_json(study_command);
  o["study_env"] = study_env;
  o["host"] = host;
  o["environment"] = environment;
  o["fingerprints"] = fingerprints;
  json::array ss;
  for (auto& s : sessions) ss.push_back(s.to_json());
  o["sessions"] = std::move(ss);
  // The first session's configuration, where format 1 readers look for it.
  if (!sessions.empty()) o["config"] = sessions.front().config;
  if (summary) o["summary"] = *summary;
  return o;
}

tl::expected<run_meta, error> run_meta::from_json(const json::object& o) {
  auto fail = [](errc e, std::string text) {
    return tl::make_unexpected(error{make_error_code(e), std::move(text)});
  };
  run_meta m;
  for (auto& [k, v] : o)
    if (!is_known(k)) m.extra.emplace(k, v);
  auto* study = o.if_contains("study");
  if (study && study->is_string()) {
    // The Rust mira CLI: study name and version as strings, times as Unix seconds.
    m.made_by_rust_host = true;
    m.study = study->get_string();
    m.study_version = text(o, "study_version");
    m.started = iso_utc(integer(o, "started_unix"));
    m.finished = iso_utc(integer(o, "finished_unix"));
    if (auto* s = o.if_contains("summary"); s && s->is_object()) m.summary = s->get_object();
    m.environment = object(o, "environment");
    m.run_id = text(o, "run_id");
    m.format = static_cast<int>(integer(o, "format"));
    m.sessions = sessions_of(o);
    return m;
  }
  if (study && !study->is_object())
    return fail(errc::corrupt, "\"study\" is neither an object nor a string");
  if (study) {
    m.initialize = study->get_object();
    m.study = text(m.initialize, "study");
    m.study_version = text(m.initialize, "study_version");
  }
  if (auto* f = o.if_contains("format"); f && !f->is_number())
    return fail(errc::corrupt, "\"format\" is not a number");
  m.format = static_cast<int>(integer(o, "format"));
  if (m.format > current_format)
    return fail(errc::incompatible, "format " + std::to_string(m.format) +
                                        " is newer than this host reads (" +
                                        std::to_string(current_format) + ")");
  m.run_id = text(o, "run_id");
  if (auto* l = o.if_contains("layout")) {
    auto parsed = l->is_string() ? layout_from_string(l->get_string()) : std::nullopt;
    if (!parsed) return fail(errc::corrupt, "\"layout\" is not \"per-case\" or \"compact\"");
    m.layout = *parsed;
  }
  m.started = text(o, "started");
  m.finished = text(o, "finished");
  m.study_command = strings(o, "study_command");
  m.study_env = object(o, "study_env");
  m.host = object(o, "host");
  m.environment = object(o, "environment");
  m.fingerprints = object(o, "fingerprints");
  if (auto* s = o.if_contains("summary"); s && s->is_object()) m.summary = s->get_object();
  m.sessions = sessions_of(o);
  if (!o.contains("sessions") && o.contains("config")) {
    // Format 1 kept one configuration and no sessions: it becomes the first session.
    session_entry s;
    s.started = m.started;
    s.finished = m.finished;
    s.config = object(o, "config");
    s.argv = strings(s.config, "argv");
    if (m.summary)
      if (auto* secs = m.summary->if_contains("seconds"); secs && secs->is_number())
        s.seconds = secs->to_number<double>();
    m.sessions.push_back(std::move(s));
  }
  return m;
}

}  // namespace mira::store
