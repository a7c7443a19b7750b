// The run manager (runs.hpp): a run is one mira::session, opened (its id answers the request)
// and then run, its hooks keeping the run's state and events for the API; saved runs are read
// from their folders.
#include "serve/runs.hpp"

#include "serve/handover.hpp"

#include <mira/aggregate/summary.hpp>
#include <mira/host.hpp>
#include <mira/protocol/codec.hpp>
#include <mira/protocol/json_text.hpp>
#include <mira/report/escape.hpp>
#include <mira/report/render.hpp>
#include <mira/session/session.hpp>
#include <mira/session/study_connection.hpp>
#include <mira/store/files.hpp>
#include <mira/store/records.hpp>
#include <mira/store/run_reader.hpp>
#include <mira/store/run_store.hpp>
#include <mira/store/summary_feed.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <sys/resource.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>
#include <span>
#include <type_traits>

namespace mira::serve::detail {

namespace asio = boost::asio;
namespace json = boost::json;
namespace fs = std::filesystem;
using schedule::case_state;

namespace {

constexpr auto& all_states = schedule::all_case_states;

json::object counts_json(const std::array<std::size_t, schedule::case_state_count>& counts) {
  json::object o;
  for (auto s : all_states) o[to_string(s)] = counts[static_cast<std::size_t>(s)];
  return o;
}

std::shared_ptr<asio::steady_timer> new_notify(const asio::any_io_executor& ex) {
  return std::make_shared<asio::steady_timer>(ex, asio::steady_timer::time_point::max());
}

std::string now_iso() {
  auto t = std::chrono::system_clock::now().time_since_epoch();
  return store::iso_utc(std::chrono::duration_cast<std::chrono::seconds>(t).count());
}

// Built outside the coroutines: g++ 12 rejects a braced list and co_await in one expression.
// `field`: the selection's member the plan refused (evals, samples, targets, tags, axes), as the
// request spells it; none when the listing itself is at fault (two cases with one key).
api_error selection_error(const session_error& e) {
  json::object details{{"member", "selection"}};
  if (e.field != plan::field::none) details["field"] = plan::to_string(e.field);
  return make_error(422, "invalid_selection", e.text, std::move(details));
}

api_error unknown_study(const std::string& name) {
  return make_error(422, "unknown_study", "study: '" + name + "' is not on the allow-list",
                    json::object{{"member", "study"}});
}

json::object page_json(json::array runs, const std::string& next) {
  json::object o{{"runs", std::move(runs)}};
  o["next_cursor"] = next.empty() ? json::value(nullptr) : json::value(next);
  return o;
}

json::object minimal_request(const std::string& study) {
  return json::object{{"study", study}};
}

json::object catalog_json(const std::string& name, const protocol::initialize_result& init,
                          const protocol::list_result& list) {
  return json::object{
      {"study", name}, {"initialize", init.raw}, {"listing", protocol::encode(list)}};
}

// A count in a summary's "counts" (a JSON number); 0 when it is not one.
std::size_t count_of(const json::value& v) {
  return v.is_int64()    ? static_cast<std::size_t>(v.get_int64())
         : v.is_uint64() ? static_cast<std::size_t>(v.get_uint64())
                         : 0;
}

api_error study_unavailable(const std::string& study, const std::string& why,
                            const std::vector<std::string>& stderr_tail) {
  json::array tail;
  for (auto& l : stderr_tail) tail.emplace_back(l);
  auto err = make_error(503, "study_unavailable", "study '" + study + "' is unavailable: " + why,
                        json::object{{"study", study}, {"stderr_tail", std::move(tail)}});
  err.retry_after = 5;
  return err;
}

api_error shutting_down() {
  auto e = make_error(503, "shutting_down", "the server is stopping; it takes no new runs");
  e.retry_after = 10;
  return e;
}

api_error too_many_cases(std::size_t cases, std::size_t max_cases) {
  return make_error(413, "too_many_cases",
                    "the selection plans " + std::to_string(cases) +
                        " cases; this server runs at most " + std::to_string(max_cases) +
                        " in one run (--max-cases)",
                    json::object{{"cases", cases}, {"max_cases", max_cases}});
}

// A session that could not open, as the API says it: `store_what` leads a store failure's
// message (what the store was asked to do).
api_error open_error(const session_error& e, const std::string& study, std::size_t max_cases,
                     const std::string& store_what) {
  if (e.code == session_errc::invalid_selection) return selection_error(e);
  if (e.code == session_errc::too_many_cases) return too_many_cases(e.cases, max_cases);
  if (e.code == session_condition::study_failed)
    return study_unavailable(study, e.text, e.stderr_tail);
  if (e.code == session_errc::cancelled) return shutting_down();
  if (e.code == store::errc::in_use) return make_error(409, "run_locked", e.text);
  if (e.code == store::errc::incompatible) return make_error(422, "cannot_resume", e.text);
  if (e.code.category() == store::category())
    return make_error(500, "store_error", store_what + e.text);
  return make_error(500, "internal_error", e.text);
}

// Refusals a session's `refine` gives (built outside the coroutines, see above).
session_error refusal(session_errc code, std::string text) {
  return session_error{make_error_code(code), std::move(text), {}};
}

host_options serve_host_options(std::size_t) {
  host_options h;
  h.host_name = "mira-cpp";
  return h;
}

// How a run's or a catalog's study is started: the allow-list's command, `procs` processes (a
// pool beyond one) sharing the request's concurrency.
study_launch launch_of(const study_entry& study, const run_options& o,
                       std::chrono::milliseconds init_timeout) {
  study_launch l;
  l.command.argv = study.argv;
  auto& p = l.pool;
  p.processes = o.procs.value_or(1);
  auto j = o.concurrency.value_or(schedule::concurrency_policy{}.max_concurrent);
  p.max_in_flight_per_process = (j + p.processes - 1) / p.processes;
  p.host_options_for = serve_host_options;
  p.init_timeout = init_timeout;
  return l;
}

// A session that ended saved the run's summary; one that did not (the process died) left only
// its records.
bool last_session_ended(const store::run_meta& m) {
  return !m.sessions.empty() && !m.sessions.back().finished.empty();
}

std::string state_of_saved(const store::run_meta& m) {
  if (m.sessions.empty()) return "interrupted";
  auto& last = m.sessions.back();
  if (last.finished.empty()) return "interrupted";  // the process ended without saving
  if (last.stopped.empty()) return "done";
  if (last.stopped == "cancelled" || last.stopped == "interrupted") return last.stopped;
  return "stopped";
}

// `saved`: the run's records, for a run whose last session did not end (its meta.json has no
// summary of it).
json::object saved_status(const store::run_meta& m, const std::vector<store::saved_case>* saved) {
  json::object o{{"run_id", m.run_id},         {"live", false},        {"study", m.study},
                 {"state", state_of_saved(m)}, {"started", m.started}, {"finished", m.finished},
                 {"seconds", m.seconds()}};
  if (auto* s = m.extra.if_contains("serve"); s && s->is_object())
    if (auto* name = s->get_object().if_contains("study"); name && name->is_string())
      o["study"] = *name;
  std::size_t total = 0, done = 0;
  if (saved) {
    std::array<std::size_t, schedule::case_state_count> counts{};
    for (auto& c : *saved) {
      auto* status = c.record.if_contains("status");
      if (!status || !status->is_string()) continue;
      if (auto s = schedule::case_state_from_string(status->get_string()))
        ++counts[static_cast<std::size_t>(*s)];
    }
    for (auto s : all_states)
      if (s != case_state::cancelled) done += counts[static_cast<std::size_t>(s)];
    o["counts"] = counts_json(counts);
    total = std::max(done, m.sessions.empty() ? 0 : m.sessions.back().planned);
  } else if (m.summary) {
    o["summary"] = *m.summary;
    if (auto* c = m.summary->if_contains("counts"); c && c->is_object()) {
      o["counts"] = *c;
      for (auto& [k, v] : c->get_object()) {
        auto n = count_of(v);
        total += n;
        if (k != "cancelled") done += n;
      }
    }
  } else if (!m.sessions.empty()) {
    total = m.sessions.back().planned;
  }
  o["total"] = total;
  o["done"] = done;
  o["resumable"] = o["state"].as_string() != "done" || done < total;
  return o;
}

tl::expected<void, api_error> run_exists(const fs::path& results, const std::string& id) {
  boost::system::error_code ec;
  if (!fs::exists(results / id / "meta.json", ec))
    return tl::unexpected(make_error(404, "run_not_found", "no run '" + id + "'"));
  return {};
}

}  // namespace

std::optional<json::object> saved_counts::find(const std::string& id, const stamp& s) {
  std::lock_guard lock(mutex_);
  auto it = entries_.find(id);
  if (it == entries_.end() || it->second.first != s) return std::nullopt;
  return it->second.second;
}

void saved_counts::keep(const std::string& id, const stamp& s, json::object status) {
  std::lock_guard lock(mutex_);
  if (entries_.size() >= max_entries) entries_.clear();  // a new start, not a growing server
  entries_[id] = {s, std::move(status)};
}

shared_reports::text shared_reports::find(const std::string& id, const std::string& format,
                                          const saved_counts::stamp& s) {
  std::lock_guard lock(mutex_);
  auto it = entries_.find({id, format});
  if (it == entries_.end() || it->second.first != s) return nullptr;
  return it->second.second.lock();
}

void shared_reports::keep(const std::string& id, const std::string& format,
                          const saved_counts::stamp& s, const text& t) {
  std::lock_guard lock(mutex_);
  std::erase_if(entries_, [](const auto& e) { return e.second.second.expired(); });
  entries_[{id, format}] = {s, t};
}

namespace {

// The version of a saved run's meta.json (its time and size), which each session rewrites as it
// begins and ends.
std::optional<saved_counts::stamp> meta_stamp(const fs::path& results, const std::string& id) {
  std::error_code ec;
  const auto file = results / id / "meta.json";
  saved_counts::stamp stamp{fs::last_write_time(file, ec), 0};
  if (!ec) stamp.second = fs::file_size(file, ec);
  if (ec) return std::nullopt;
  return stamp;
}

// A saved run's status from its folder: its meta.json, and its records when its last session
// did not end, counted once per version of its meta.json (`counts`): such a run's records
// change only in a session of its own, which rewrites meta.json as it begins and ends.
tl::expected<json::object, api_error> read_saved_status(const fs::path& results,
                                                        const std::string& id,
                                                        saved_counts& counts) {
  if (auto ok = run_exists(results, id); !ok) return tl::unexpected(ok.error());
  auto meta = store::load_run_meta(results, id);
  if (!meta) return tl::unexpected(make_error(500, "store_error", meta.error().message()));
  if (last_session_ended(*meta)) return saved_status(*meta, nullptr);
  auto stamp = meta_stamp(results, id);
  if (stamp)
    if (auto known = counts.find(id, *stamp)) return std::move(*known);
  auto run = store::load_run(results, id);
  if (!run) return tl::unexpected(make_error(500, "store_error", run.error().message()));
  auto status = saved_status(run->meta, &run->cases);
  if (stamp) counts.keep(id, *stamp, status);
  return status;
}

// A page of saved runs, newest first (ids sort by start time), after `cursor`: each with its
// status, or nothing for the ids in `live` (the caller has theirs). Also the next cursor.
std::pair<std::vector<std::pair<std::string, std::optional<json::object>>>, std::string> saved_page(
    const fs::path& results, std::size_t limit, const std::string& cursor,
    const std::set<std::string>& live, saved_counts& counts) {
  std::vector<std::string> ids;
  boost::system::error_code ec;
  for (fs::directory_iterator it(results, ec), end; !ec && it != end; it.increment(ec)) {
    auto name = it->path().filename().string();
    if (check_run_id(name) || !fs::exists(it->path() / "meta.json")) continue;
    ids.push_back(std::move(name));
  }
  std::sort(ids.begin(), ids.end(), std::greater<>());
  std::vector<std::pair<std::string, std::optional<json::object>>> items;
  std::string next;
  for (auto& id : ids) {
    if (!cursor.empty() && id >= cursor) continue;
    if (items.size() == limit) {
      next = items.back().first;
      break;
    }
    if (live.count(id)) {
      items.emplace_back(id, std::nullopt);
    } else if (auto s = read_saved_status(results, id, counts)) {
      items.emplace_back(id, std::move(*s));
    }
  }
  return {std::move(items), std::move(next)};
}

// What a heavy read skipped or stopped because its client left answers; nobody reads it.
api_error client_gone() {
  return make_error(499, "client_closed_request", "the client closed the connection first");
}

// The records of a run, as NDJSON, of the given states (comma-separated; all without), read one
// at a time, until `gone`.
tl::expected<std::string, api_error> read_cases(const fs::path& results, const std::string& id,
                                                const std::optional<std::string>& states,
                                                const run_manager::abandoned& gone) {
  std::vector<std::string> wanted;
  if (states) {
    std::string_view v = *states;
    while (!v.empty()) {
      auto comma = v.find(',');
      auto name = v.substr(0, comma);
      if (!schedule::case_state_from_string(name)) {
        std::string names;
        for (auto st : all_states)
          names += (names.empty() ? "" : ", ") + std::string(to_string(st));
        return tl::unexpected(make_error(
            400, "invalid_parameter", "state: '" + std::string(name) + "' is not one of " + names,
            json::object{{"parameter", "state"}}));
      }
      wanted.emplace_back(name);
      v = comma == std::string_view::npos ? std::string_view{} : v.substr(comma + 1);
    }
  }
  if (auto ok = run_exists(results, id); !ok) return tl::unexpected(ok.error());
  auto run = store::run_reader::open(results, id);
  if (!run) return tl::unexpected(make_error(500, "store_error", run.error().message()));
  std::string out;
  bool left = false;
  run->visit([&](std::size_t, const store::saved_case& c) {
    if (gone && *gone) {
      left = true;
      return false;
    }
    auto* status = c.record.if_contains("status");
    if (!wanted.empty() && (!status || !status->is_string() ||
                            std::find(wanted.begin(), wanted.end(),
                                      std::string_view(status->get_string())) == wanted.end()))
      return true;
    protocol::append_json_text(out, c.record);
    out += '\n';
    return true;
  });
  if (left) return tl::unexpected(client_gone());
  return out;
}

tl::expected<json::object, api_error> read_case_page(open_runs& opened, const fs::path& results,
                                                     const std::string& id,
                                                     const store::case_query& q,
                                                     const run_manager::abandoned& gone) {
  auto run = opened.open(results, id);
  if (!run) return tl::unexpected(run.error());
  auto page = store::query_cases(**run, q, [&] { return gone && *gone; });
  if (!page)
    return tl::unexpected(make_error(400, "invalid_parameter",
                                     page.error().parameter + ": " + page.error().message,
                                     json::object{{"parameter", page.error().parameter}}));
  if (page->stopped) return tl::unexpected(client_gone());
  return case_page_json(*page);
}

tl::expected<json::object, api_error> read_one_case(open_runs& opened, const fs::path& results,
                                                    const std::string& id, const std::string& key) {
  auto run = opened.open(results, id);
  if (!run) return tl::unexpected(run.error());
  auto d = store::read_case(**run, key);
  if (!d)
    return tl::unexpected(make_error(404, "case_not_found",
                                     "run '" + id + "' has no saved case '" + key + "'",
                                     json::object{{"key", key}}));
  return case_detail_json(*d);
}

tl::expected<json::object, api_error> compare_saved(open_runs& opened, const fs::path& results,
                                                    const compare_query& q,
                                                    const run_manager::abandoned& gone) {
  // One lease per run, taken in the order of their ids: two comparisons of the same runs the
  // other way round wait for each other instead of each holding what the other needs.
  const bool base_first = q.base <= q.candidate;
  auto first = opened.open(results, base_first ? q.base : q.candidate);
  if (!first) return tl::unexpected(first.error());
  std::optional<open_runs::lease> second;
  if (q.base != q.candidate) {
    auto other = opened.open(results, base_first ? q.candidate : q.base);
    if (!other) return tl::unexpected(other.error());
    second.emplace(std::move(*other));
  }
  if (gone && *gone) return tl::unexpected(client_gone());
  const auto& a = **first;
  const auto& b = second ? **second : a;
  auto c = base_first ? compare::compare_runs(a, b) : compare::compare_runs(b, a);
  if (!c)
    return tl::unexpected(make_error(409, "not_comparable", c.error().message(),
                                     json::object{{"base", q.base}, {"candidate", q.candidate}}));
  return compare_page_json(*c, q);
}

// A case source that ends each visit once the reader's client has gone (what was rendered by
// then is thrown away).
class unless_gone final : public report::case_source {
 public:
  unless_gone(const report::case_source& cases, const run_manager::abandoned& gone)
      : cases_(cases), gone_(gone) {}
  bool left() const { return gone_ && *gone_; }
  std::size_t size() const override { return cases_.size(); }
  void visit(const case_fn& fn) const override {
    cases_.visit([&](std::size_t i, const plan::planned_case& c, const schedule::case_record& r) {
      return !left() && fn(i, c, r);
    });
  }
  void visit_keys(const key_fn& fn) const override {
    cases_.visit_keys([&](std::size_t i, std::string_view key) { return !left() && fn(i, key); });
  }

 private:
  const report::case_source& cases_;
  const run_manager::abandoned& gone_;
};

// A saved run's report in `format`, as `mira report` renders it (a record at a time, the cases
// it planned and never saved counted as not run): its content type and text. An ended run's is
// taken from another client that holds it (the same meta.json); nothing once `gone`.
tl::expected<std::pair<std::string, shared_reports::text>, api_error> render_report(
    const fs::path& results, const std::string& id, const std::string& format,
    const run_manager::abandoned& gone, shared_reports& shared) {
  static const std::map<std::string, std::string> types{
      {"json", "application/json"},           {"jsonl", "application/x-ndjson"},
      {"csv", "text/csv; charset=utf-8"},     {"junit", "application/xml"},
      {"md", "text/markdown; charset=utf-8"}, {"html", "text/html; charset=utf-8"}};
  auto type = types.find(format);
  if (type == types.end())
    return tl::unexpected(
        make_error(400, "invalid_parameter",
                   "format: '" + format + "' is not one of json, jsonl, csv, junit, md, html",
                   json::object{{"parameter", "format"}}));
  if (auto ok = run_exists(results, id); !ok) return tl::unexpected(ok.error());
  // The stamp is taken before the read: a session that begins meanwhile changes it, and what
  // this read rendered is not kept under the new one.
  auto stamp = meta_stamp(results, id);
  if (stamp)
    if (auto text = shared.find(id, format, *stamp)) return std::pair{type->second, text};
  auto run = store::run_reader::open(results, id);
  if (!run) return tl::unexpected(make_error(500, "store_error", run.error().message()));
  const report::saved_cases cases(*run);
  const unless_gone source(cases, gone);
  store::summary_feed feed;
  source.visit([&](std::size_t, const plan::planned_case& c, const schedule::case_record& r) {
    feed.add(c, r);
    return true;
  });
  auto s = feed.finish();
  const auto completeness = store::completeness_of(*run);
  store::count_unfinished(s, completeness.unfinished());
  const auto header = store::report_header(*run, completeness);
  std::string text;
  report::render(format, source, header, s, [&](std::string_view piece) { text += piece; });
  if (source.left()) return tl::unexpected(client_gone());
  auto shared_text = std::make_shared<const std::string>(std::move(text));
  if (stamp && last_session_ended(run->meta())) shared.keep(id, format, *stamp, shared_text);
  return std::pair{type->second, std::move(shared_text)};
}

}  // namespace

live_run::live_run(asio::any_io_executor e) : notify(new_notify(e)), ex(std::move(e)) {}

void live_run::publish(std::string type, json::object data) {
  events.append(std::move(type), protocol::to_json_text(data));
  wake();
}

void live_run::wake() {
  notify->cancel();
  notify = new_notify(ex);
}

json::object live_run::status() const {
  json::object o{
      {"run_id", id},
      {"live", true},
      {"study", study},
      {"state", state},
      {"started", started},
      {"total", total},
      {"done", done},
      {"reused", reused},
      {"in_progress", in_progress},
      {"progress", total ? static_cast<double>(done) / static_cast<double>(total) : 1.0},
      {"counts", counts_json(counts)},
      {"seconds",
       finished ? seconds
                : std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()},
      {"last_event_id", events.last_id()}};
  if (!stop_reason.empty()) o["stop_reason"] = stop_reason;
  if (!stop_message.empty()) o["stop_message"] = stop_message;
  if (finished) {
    o["summary"] = summary;
    o["resumable"] = state != "done" || counts[static_cast<std::size_t>(case_state::cancelled)] > 0;
  }
  return o;
}

void live_run::stop(std::string label) {
  stop_label = std::move(label);
  if (going) going->set_stop_label(stop_label);
  if (state == "cancelling") return;  // stopped already: only its name changes
  state = "cancelling";
  // Once: a second cancellation would reach the session's end (the study's shutdown).
  if (going) cancel.emit(asio::cancellation_type::terminal);
}

// What a session hook tells, handed to the server's executor in the order the hooks were called.
struct told {
  enum class what { attempt, finished, save_failed } kind = what::attempt;
  std::string text;  // finished: the case's key; save_failed: the message
  schedule::case_record record;
};

// Hook calls handed over in one executor turn: about a millisecond of events on a quiet machine.
constexpr std::size_t told_slice = 256;

// What a run's session hooks keep up to date, on the server's executor: the live run's counts,
// its attempts in flight and its events. The hooks share it; the session keeps them until it
// goes.
struct run_tally {
  std::shared_ptr<live_run> run;
  const plan::plan* plan = nullptr;  // the session's, once it is open
  std::size_t starts = 0, finished_attempts = 0;
  std::size_t progress_every = 1;
  std::optional<std::string> save_failure;  // the first result that could not be saved
  /// The hooks' calls on their way to the executor (made by watch()).
  std::shared_ptr<handover<told>> inbox;

  void take(std::span<told> calls) {
    for (auto& c : calls) {
      if (c.kind == told::what::attempt)
        attempt();
      else if (c.kind == told::what::finished)
        finished(c.text, c.record);
      else if (!save_failure)
        save_failure = std::move(c.text);
    }
    run->wake();  // once a slice: a waiter reads every event new to it
  }

  void attempt() {
    ++starts;
    run->in_progress = starts - finished_attempts;
  }

  void finished(const std::string& key, const schedule::case_record& r) {
    auto& live = *run;
    finished_attempts += static_cast<std::size_t>(r.attempts);
    live.in_progress = starts - finished_attempts;
    ++live.counts[static_cast<std::size_t>(r.state)];
    if (r.state != case_state::cancelled) ++live.done;  // a cancelled case is not finished
    json::object e{{"key", key},
                   {"state", to_string(r.state)},
                   {"attempts", r.attempts},
                   {"latency_ms", std::round(r.latency_seconds * 1e6) / 1e3},
                   {"done", live.done},
                   {"total", live.total}};
    if (!r.message.empty()) e["message"] = r.message;
    live.events.append("case", protocol::to_json_text(e));
    if (live.done % progress_every == 0 || live.done == live.total)
      live.events.append(
          "progress", protocol::to_json_text(json::object{{"done", live.done},
                                                          {"total", live.total},
                                                          {"in_progress", live.in_progress},
                                                          {"counts", counts_json(live.counts)}}));
  }
};

namespace {

// The session of a run of `study`: the request's selection and options within the server's
// limits, saved as `mira run` saves a run, plus what a resume reads back (meta.json's "serve":
// the study's allow-list name and the request), its long steps on `work`.
session_options session_of(const study_entry& study, const run_request& r, const server_config& c,
                           asio::any_io_executor work) {
  session_options o;
  o.study = launch_of(study, r.options, c.init_timeout);
  o.selection = r.selection;
  o.max_cases = c.max_cases;
  o.policy = to_policy(r.options);
  o.work_executor = std::move(work);
  auto& save = o.save.emplace();
  save.results_dir = c.results_dir;
  save.describe = [serve = json::object{{"study", study.name}, {"request", r.body}}](
                      store::run_meta& meta, store::session_entry& entry) {
    meta.extra["serve"] = serve;
    entry.argv = {"mira", "serve"};
    entry.config = json::object{{"serve", serve}};
  };
  return o;
}

// The hooks run on the session's thread; the run's state lives on the server's executor `home`,
// where the tally's inbox hands over what they tell, in order (execute() waits for the last of
// it before the run's end).
void watch(session_hooks& hooks, const std::shared_ptr<run_tally>& tally,
           const asio::any_io_executor& home) {
  // Weak: the tally holds its inbox. execute() keeps it until the inbox is idle; a session that
  // never ran leaves nothing to deliver.
  tally->inbox = std::make_shared<handover<told>>(
      home, told_slice, [w = std::weak_ptr<run_tally>(tally)](std::span<told> calls) {
        if (auto t = w.lock()) t->take(calls);
      });
  // The server's log: what a run's session warns of (a resume's notes, a file of the run that
  // could not be written as the session began).
  hooks.on_warning = [tally](const std::string& text) {
    auto& run = *tally->run;
    auto which = run.id.empty() ? "a new run of study '" + run.study + "'" : "run " + run.id;
    std::fprintf(stderr, "mira serve: warning: %s: %s\n", which.c_str(),
                 report::printable(text).c_str());
  };
  hooks.on_attempt = [inbox = tally->inbox](std::size_t) { inbox->push({}); };
  // The plan does not change while the session runs: its key is read here.
  hooks.on_case = [tally](std::size_t i, const schedule::case_record& r) {
    tally->inbox->push({told::what::finished, tally->plan->cases[i].key, r});
  };
  hooks.on_save_failed = [inbox = tally->inbox](const std::string&, const std::string& text) {
    inbox->push({told::what::save_failed, text, {}});
  };
}

// The opened session's run goes live: its counts start with the cases it reuses.
void publish_start(live_run& run, run_tally& tally, const session& s) {
  run.id = s.run_id();
  run.total = s.plan().cases.size();
  run.reused = s.resumed().reused;
  run.started = now_iso();
  run.t0 = std::chrono::steady_clock::now();
  for (std::size_t k = 0; k < schedule::case_state_count; ++k)
    run.counts[k] += s.resumed().reused_states[k];
  run.done += s.resumed().reused;
  tally.plan = &s.plan();
  tally.progress_every = std::max<std::size_t>(1, s.resumed().todo.size() / 100);
  run.publish("start", json::object{{"run_id", run.id},
                                    {"study", run.study},
                                    {"total", run.total},
                                    {"reused", run.reused},
                                    {"counts", counts_json(run.counts)}});
}

// The run's final state and its "end" event, from the session's outcome (its summary taken).
void publish_end(live_run& run, const run_tally& tally, session_outcome& out) {
  const auto& report = out.report;
  run.summary = std::move(out.run_summary);
  run.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - run.t0).count();
  // As meta.json names the stop.
  run.state = report.stopped == schedule::stop_reason::none          ? "done"
              : report.stopped == schedule::stop_reason::interrupted ? run.stop_label
                                                                     : "stopped";
  if (report.stopped != schedule::stop_reason::none)
    run.stop_reason = std::string(to_string(report.stopped));
  run.stop_message = tally.save_failure ? *tally.save_failure : report.stop_message;
  if (out.unfinished) {
    // Every case saved, but not its report files or meta.json: a resume finishes it.
    run.state = "stopped";
    run.stop_reason = "unfinished";
    run.stop_message = "cannot finish run " + run.id + ": " + out.unfinished.message();
  }
  // The whole run's counts (also the saved cases this session's selection left out).
  run.counts = {};
  auto* counts = run.summary.if_contains("counts");
  if (counts && counts->is_object()) {
    for (auto s : all_states)
      if (auto* n = counts->get_object().if_contains(to_string(s)))
        run.counts[static_cast<std::size_t>(s)] = count_of(*n);
  } else {
    for (auto& r : report.cases) ++run.counts[static_cast<std::size_t>(r.state)];
  }
  run.in_progress = 0;
  run.finished = true;
  json::object e{{"state", run.state},
                 {"counts", counts_json(run.counts)},
                 {"done", run.done},
                 {"total", run.total},
                 {"seconds", run.seconds}};
  if (!run.stop_reason.empty()) e["stop_reason"] = run.stop_reason;
  run.publish("end", std::move(e));
  // Its case events are in its folder now; an ended run kept in memory stays small.
  run.events.trim(run_manager::kept_ended_events);
}

}  // namespace

namespace {

// A study's pipes on the server's side (stdin, stdout, stderr) and, while it is spawned, its own.
constexpr std::size_t descriptors_per_process = 6;

// The study processes the descriptors this process may open allow, beside `connections` client
// connections and a reserve for the listener, the stores' files and the reports being read.
std::size_t process_budget_of(std::size_t connections) {
  rlimit rl{};
  std::size_t open_max = 1024;
  if (::getrlimit(RLIMIT_NOFILE, &rl) == 0)
    open_max =
        rl.rlim_cur == RLIM_INFINITY ? std::size_t{1} << 20 : static_cast<std::size_t>(rl.rlim_cur);
  const std::size_t reserve = connections + 64;
  return open_max > reserve ? (open_max - reserve) / descriptors_per_process : 0;
}

api_error too_many_procs(std::size_t procs, std::size_t max_procs) {
  return make_error(422, "invalid_request",
                    "options.procs: " + std::to_string(procs) +
                        " processes; this server starts at most " + std::to_string(max_procs) +
                        " for one run (--max-procs)",
                    json::object{{"member", "options.procs"}, {"max_procs", max_procs}});
}

// session::open run where it is spawned: the session, its hooks and its processes live there.
// Optional only because co_spawn's result must be default-constructible.
asio::awaitable<std::optional<tl::expected<session, session_error>>> open_session(
    session_options o) {
  co_return co_await mira::session::open(std::move(o));
}

// A study's initialize and listing, the study started and shut down where this is spawned.
asio::awaitable<tl::expected<json::object, api_error>> list_study(study_entry study,
                                                                  std::chrono::milliseconds init) {
  auto started = co_await start_study(launch_of(study, run_options{}, init));
  if (!started) {
    auto& e = started.error();
    co_return tl::unexpected(study_unavailable(study.name, e.message(), e.diag.stderr_tail));
  }
  co_await started->connection.shutdown();
  co_return catalog_json(study.name, started->connection.study(), started->listing);
}

}  // namespace

struct run_manager::catalog_load {
  explicit catalog_load(asio::any_io_executor ex)
      : done(ex, asio::steady_timer::time_point::max()) {}
  std::optional<tl::expected<json::object, api_error>> result;
  asio::steady_timer done;
};

namespace {

// Runs `*job` on `pool` and completes with its result (or its exception) on the handler's
// executor. Only pointers go through the initiation: the job stays in the awaiting frame.
template <class Job>
struct post_to_pool {
  asio::thread_pool* pool;
  template <class Handler>
  void operator()(Handler handler, Job* job) const {
    asio::post(*pool, [handler = std::move(handler), job]() mutable {
      using result = std::invoke_result_t<Job&>;
      std::exception_ptr e;
      result r{};
      try {
        r = (*job)();
      } catch (...) {
        e = std::current_exception();
      }
      auto ex = asio::get_associated_executor(handler);
      asio::post(ex, [handler = std::move(handler), e, r = std::move(r)]() mutable {
        std::move(handler)(e, std::move(r));
      });
    });
  }
};

}  // namespace

template <class F>
asio::awaitable<std::invoke_result_t<F&>> run_manager::off_executor(F& job,
                                                                    asio::thread_pool& lane) {
  return asio::async_initiate<const asio::use_awaitable_t<>,
                              void(std::exception_ptr, std::invoke_result_t<F&>)>(
      post_to_pool<F>{&lane}, asio::use_awaitable, &job);
}

run_manager::run_manager(asio::any_io_executor ex, const server_config& config)
    : ex_(std::move(ex)), config_(config), changed_(new_notify(ex_)) {
  process_budget_ = process_budget_of(config.max_connections);
}

const study_entry* run_manager::find_study(const std::string& name) const {
  for (auto& s : config_.studies)
    if (s.name == name) return &s;
  return nullptr;
}

tl::expected<void, api_error> run_manager::admit(std::size_t processes) const {
  if (stopping_) return tl::unexpected(shutting_down());
  if (processes_ + processes > process_budget_) {
    auto e = make_error(429, "too_many_processes",
                        "the runs going hold " + std::to_string(processes_) +
                            " study processes; this server's descriptors allow " +
                            std::to_string(process_budget_) + " at once",
                        json::object{{"processes", processes_}, {"budget", process_budget_}});
    e.retry_after = 5;
    return tl::unexpected(e);
  }
  if (active_ >= config_.max_runs) {
    auto e =
        make_error(429, "too_many_runs",
                   "the server runs at most " + std::to_string(config_.max_runs) + " runs at once",
                   json::object{{"max_runs", config_.max_runs}});
    e.retry_after = 5;
    return tl::unexpected(e);
  }
  return {};
}

void run_manager::release(std::size_t processes) {
  --active_;
  processes_ -= processes;
  notify_changed();
}

void run_manager::notify_changed() {
  changed_->cancel();
  changed_ = new_notify(ex_);
}

asio::awaitable<tl::expected<std::string, api_error>> run_manager::launch(const study_entry& study,
                                                                          run_request r,
                                                                          std::string resume,
                                                                          resume_request rr) {
  place held(*this, r.options.procs.value_or(1));
  auto run = std::make_shared<live_run>(ex_);
  run->study = study.name;
  run->id = resume;  // a new run's when its session has opened
  auto tally = std::make_shared<run_tally>();
  tally->run = run;
  auto o = session_of(study, r, config_, heavy_.get_executor());
  o.save->resume = resume;
  o.save->resume_options = store::resume_options{rr.retry_errors, rr.retry_failed, false};
  watch(o.hooks, tally, ex_);
  // Refused before anything is saved: a new run that plans nothing, or a server that began to
  // stop meanwhile (a stop that comes later cancels the run once it has started).
  o.refine = [this, fresh = resume.empty()](plan::plan& p, const protocol::list_result&,
                                            schedule::run_policy&) -> std::optional<session_error> {
    if (stopping_) return refusal(session_errc::cancelled, "the server is stopping");
    if (fresh && p.cases.empty())
      return refusal(session_errc::invalid_selection, "no cases match the selection");
    return std::nullopt;
  };
  // Opened on the run thread, the session lives there: it starts its processes, schedules and
  // saves there.
  auto open =
      asio::co_spawn(sessions_.ctx.get_executor(), open_session(std::move(o)), asio::use_awaitable);
  auto opened = std::move(*co_await std::move(open));
  if (!opened) {
    auto what = resume.empty() ? std::string("cannot create the run: ") : std::string();
    co_return tl::unexpected(open_error(opened.error(), study.name, config_.max_cases, what));
  }
  publish_start(*run, *tally, *opened);
  runs_[run->id] = run;
  asio::co_spawn(ex_, execute(run, std::move(*opened), tally, std::move(held), owner_.lock()),
                 asio::detached);
  notify_changed();  // a stop under way cancels it
  co_return run->id;
}

asio::awaitable<tl::expected<std::string, api_error>> run_manager::start(run_request r) {
  if (auto procs = r.options.procs.value_or(1); procs > config_.max_procs)
    co_return tl::unexpected(too_many_procs(procs, config_.max_procs));
  if (auto ok = admit(r.options.procs.value_or(1)); !ok) co_return tl::unexpected(ok.error());
  auto* study = find_study(r.study);
  if (!study) co_return tl::unexpected(unknown_study(r.study));
  std::string new_run;
  resume_request none;
  co_return co_await launch(*study, std::move(r), new_run, none);
}

asio::awaitable<tl::expected<std::string, api_error>> run_manager::resume(std::string id,
                                                                          resume_request rr) {
  if (auto ok = run_exists(config_.results_dir, id); !ok) co_return tl::unexpected(ok.error());
  if (auto l = live(id); l && !l->finished)
    co_return tl::unexpected(make_error(409, "run_active", "run '" + id + "' is still going"));
  auto meta = store::load_run_meta(config_.results_dir, id);
  if (!meta) co_return tl::unexpected(make_error(500, "store_error", meta.error().message()));
  // The study and the selection the run was started with; never a command from the request.
  const study_entry* study = nullptr;
  json::object request;
  if (auto* s = meta->extra.if_contains("serve"); s && s->is_object()) {
    if (auto* n = s->get_object().if_contains("study"); n && n->is_string())
      study = find_study(std::string(n->get_string()));
    if (auto* q = s->get_object().if_contains("request"); q && q->is_object())
      request = q->get_object();
  }
  if (!study)
    for (auto& s : config_.studies)
      if (s.argv == meta->study_command) study = &s;
  if (!study)
    co_return tl::unexpected(make_error(
        422, "unknown_study", "run '" + id + "' was not made by a study on the allow-list"));
  if (request.empty()) request = minimal_request(study->name);
  auto decoded = decode_run_request("application/json", json::serialize(request));
  if (!decoded) co_return tl::unexpected(decoded.error());
  if (auto procs = decoded->options.procs.value_or(1); procs > config_.max_procs)
    co_return tl::unexpected(too_many_procs(procs, config_.max_procs));
  if (auto ok = admit(decoded->options.procs.value_or(1)); !ok)
    co_return tl::unexpected(ok.error());
  co_return co_await launch(*study, std::move(*decoded), id, rr);
}

asio::awaitable<void> run_manager::execute(std::shared_ptr<live_run> run, mira::session s,
                                           std::shared_ptr<run_tally> tally, place held,
                                           std::shared_ptr<void> owner) {
  // Locals, so that whatever ends this body (an exception too) gives the place back first and
  // lets the server go last.
  auto server = std::move(owner);
  auto place_held = std::move(held);
  struct attached {
    live_run& run;
    ~attached() { run.going = nullptr; }
  } attach{*run};
  run->going = &s;
  s.set_stop_label(run->stop_label);
  // Stopped before this coroutine began, when the signal had no handler to reach.
  if (run->state == "cancelling")
    asio::post(ex_, [run] { run->cancel.emit(asio::cancellation_type::terminal); });
  auto token = asio::bind_cancellation_slot(run->cancel.slot(), asio::use_awaitable);
  auto outcome = co_await s.async_run(token);
  // The hooks' last calls may still be on their way: the end comes after them.
  while (!tally->inbox->idle()) co_await asio::post(ex_, asio::use_awaitable);
  publish_end(*run, *tally, outcome);
  forget_old_runs();
#ifdef __GLIBC__
  // Once this frame (the run's plan and reports) is gone too: glibc keeps a big run's freed
  // memory for reuse unless told to give it back.
  asio::post(ex_, [] { ::malloc_trim(0); });
#endif
}

void run_manager::forget_old_runs() {
  // Ended runs keep their events for clients that resume a stream; the oldest beyond the cap
  // are answered from their folders instead, so a long-lived server does not grow.
  std::vector<std::string> ended;
  for (auto& [id, r] : runs_)
    if (r->finished) ended.push_back(id);
  std::sort(ended.begin(), ended.end());
  for (std::size_t i = 0; i + kept_ended_runs < ended.size(); ++i) runs_.erase(ended[i]);
}

tl::expected<json::object, api_error> run_manager::cancel(const std::string& id) {
  auto run = live(id);
  if (!run) {
    if (auto ok = run_exists(config_.results_dir, id); !ok) return tl::unexpected(ok.error());
    return tl::unexpected(make_error(409, "run_not_active", "run '" + id + "' is not going"));
  }
  if (run->finished)
    return tl::unexpected(make_error(409, "run_not_active", "run '" + id + "' has ended"));
  if (run->state != "cancelling") run->stop("cancelled");
  return run->status();
}

std::shared_ptr<live_run> run_manager::live(const std::string& id) const {
  auto it = runs_.find(id);
  return it == runs_.end() ? nullptr : it->second;
}

bool run_manager::exists(const std::string& id) const {
  return live(id) || run_exists(config_.results_dir, id);
}

asio::awaitable<tl::expected<json::object, api_error>> run_manager::status(std::string id) {
  if (auto run = live(id)) co_return run->status();
  auto read = [results = config_.results_dir, id, counts = counts_] {
    return read_saved_status(results, id, *counts);
  };
  co_return co_await off_executor(read, light_);
}

asio::awaitable<tl::expected<json::object, api_error>> run_manager::list(std::size_t limit,
                                                                         std::string cursor) {
  std::set<std::string> live_ids;
  for (auto& [id, run] : runs_) live_ids.insert(id);
  auto read = [results = config_.results_dir, limit, cursor, live_ids, counts = counts_] {
    return saved_page(results, limit, cursor, live_ids, *counts);
  };
  auto [items, next] = co_await off_executor(read, light_);
  json::array runs;
  for (auto& [id, saved] : items) {
    if (saved) {
      runs.push_back(std::move(*saved));
    } else if (auto run = live(id)) {
      runs.push_back(run->status());
    } else if (auto s = co_await status(id)) {  // forgotten meanwhile: its folder has it
      runs.push_back(std::move(*s));
    }
  }
  co_return page_json(std::move(runs), next);
}

asio::awaitable<tl::expected<json::object, api_error>> run_manager::catalog(std::string name) {
  auto* study = find_study(name);
  if (!study)
    co_return tl::unexpected(
        make_error(404, "study_not_found", "no study '" + name + "' on the allow-list"));
  if (auto it = catalogs_.find(name); it != catalogs_.end()) co_return it->second;
  if (auto it = loading_.find(name); it != loading_.end()) {
    auto load = it->second;
    while (!load->result) co_await load->done.async_wait(asio::as_tuple(asio::use_awaitable));
    co_return *load->result;
  }
  if (auto ok = admit(1); !ok) co_return tl::unexpected(ok.error());
  place held(*this, 1);
  auto load = std::make_shared<catalog_load>(ex_);
  loading_[name] = load;
  // On every path (an exception too) the waiters are woken, and then the place is given back.
  struct finish {
    run_manager* m;
    std::string name;
    std::shared_ptr<catalog_load> load;
    ~finish() {
      if (!load->result)
        load->result = tl::unexpected(make_error(500, "internal_error", "the catalog failed"));
      m->loading_.erase(name);
      load->done.cancel();
    }
  } guard{this, name, load};
  auto listing = asio::co_spawn(sessions_.ctx.get_executor(),
                                list_study(*study, config_.init_timeout), asio::use_awaitable);
  load->result = co_await std::move(listing);
  if (*load->result) catalogs_[name] = **load->result;
  co_return *load->result;
}

asio::awaitable<tl::expected<std::string, api_error>> run_manager::cases(
    std::string id, std::optional<std::string> states, abandoned gone) {
  auto read = [results = config_.results_dir, id, states,
               gone]() -> tl::expected<std::string, api_error> {
    if (gone && *gone) return tl::unexpected(client_gone());
    return read_cases(results, id, states, gone);
  };
  co_return co_await off_executor(read, heavy_);
}

asio::awaitable<tl::expected<json::object, api_error>> run_manager::case_page(std::string id,
                                                                              store::case_query q,
                                                                              abandoned gone) {
  auto read = [results = config_.results_dir, id, q = std::move(q), gone,
               opened = opened_]() -> tl::expected<json::object, api_error> {
    if (gone && *gone) return tl::unexpected(client_gone());
    return read_case_page(*opened, results, id, q, gone);
  };
  co_return co_await off_executor(read, heavy_);
}

asio::awaitable<tl::expected<json::object, api_error>> run_manager::compare(compare_query q,
                                                                            abandoned gone) {
  auto read = [results = config_.results_dir, q = std::move(q), gone,
               opened = opened_]() -> tl::expected<json::object, api_error> {
    if (gone && *gone) return tl::unexpected(client_gone());
    return compare_saved(*opened, results, q, gone);
  };
  co_return co_await off_executor(read, heavy_);
}

asio::awaitable<tl::expected<json::object, api_error>> run_manager::one_case(std::string id,
                                                                             std::string key) {
  auto read = [results = config_.results_dir, id, key,
               opened = opened_]() -> tl::expected<json::object, api_error> {
    return read_one_case(*opened, results, id, key);
  };
  co_return co_await off_executor(read, heavy_);
}

asio::awaitable<tl::expected<std::pair<std::string, shared_reports::text>, api_error>>
run_manager::report(std::string id, std::string format, abandoned gone) {
  auto render = [results = config_.results_dir, id, format, gone, shared = reports_]()
      -> tl::expected<std::pair<std::string, shared_reports::text>, api_error> {
    if (gone && *gone) return tl::unexpected(client_gone());
    return render_report(results, id, format, gone, *shared);
  };
  co_return co_await off_executor(render, heavy_);
}

asio::awaitable<void> run_manager::stop() {
  stopping_ = true;
  // A run whose session was opening when the stop came starts meanwhile: each wake-up cancels
  // the runs that have not been.
  while (active_ > 0) {
    for (auto& [id, run] : runs_)
      if (!run->finished && !run->interrupted) {
        run->interrupted = true;
        run->stop("interrupted");
      }
    auto t = changed_;
    co_await t->async_wait(asio::as_tuple(asio::use_awaitable));
  }
}

}  // namespace mira::serve::detail
