// The run manager (runs.hpp): each run is named steps over the library, as `mira run` takes
// them — start and list the study, plan, open the run store, run_plan with a writer saving each
// finished case, end the session with the reports — with the run's state and events kept for
// the API.
#include "serve/runs.hpp"

#include <mira/aggregate/summary.hpp>
#include <mira/host.hpp>
#include <mira/pool.hpp>
#include <mira/protocol/codec.hpp>
#include <mira/protocol/json_text.hpp>
#include <mira/report/render.hpp>
#include <mira/schedule/run_plan.hpp>
#include <mira/store/files.hpp>
#include <mira/store/records.hpp>
#include <mira/store/run_store.hpp>
#include <mira/version.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#ifdef __GLIBC__
#include <malloc.h>
#endif

#include <algorithm>
#include <deque>
#include <random>
#include <set>
#include <type_traits>
#include <variant>

namespace mira::serve::detail {

namespace asio = boost::asio;
namespace json = boost::json;
namespace fs = std::filesystem;
using namespace asio::experimental::awaitable_operators;
using schedule::case_state;

namespace {

constexpr case_state all_states[] = {case_state::passed,  case_state::failed,    case_state::na,
                                     case_state::skipped, case_state::cancelled, case_state::error,
                                     case_state::executed};

json::object counts_json(const std::array<std::size_t, 7>& counts) {
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

// What the study writes on stderr (its last MiB) and its notifications, for the run folder.
struct study_output {
  static constexpr std::size_t max_bytes = std::size_t{1} << 20;
  std::deque<std::string> lines;
  std::size_t bytes = 0;
  store::run_store* store = nullptr;

  void line(std::string_view l) {
    lines.emplace_back(l);
    bytes += l.size() + 1;
    while (bytes > max_bytes && !lines.empty()) {
      bytes -= lines.front().size() + 1;
      lines.pop_front();
    }
  }
  std::string text() const {
    std::string out;
    for (auto& l : lines) (out += l) += '\n';
    return out;
  }
  void event(const std::string* key, const notification& n) {
    if (!store) return;
    json::object o{{"key", key ? json::value(*key) : json::value(nullptr)},
                   {"method", n.method},
                   {"params", n.params}};
    store->append_event(protocol::to_json_text(o));
  }
};

// Built outside the coroutines: g++ 12 rejects a braced list and co_await in one expression.
api_error selection_error(std::string message) {
  return make_error(422, "invalid_selection", std::move(message),
                    json::object{{"member", "selection"}});
}

api_error unknown_study(const std::string& name) {
  return make_error(422, "unknown_study", "study: '" + name + "' is not on the allow-list",
                    json::object{{"member", "study"}});
}

// Who made a new run and how, as `mira run` records it, plus what a resume needs: the study's
// allow-list name and the request.
void describe_run(store::run_meta& meta, const protocol::initialize_result& init,
                  const protocol::list_result& list, const study_entry& study,
                  const json::object& request) {
  meta.study = init.study;
  meta.study_version = init.study_version;
  meta.initialize = init.raw;
  meta.study_command = study.argv;
  meta.host = json::object{{"name", "mira-cpp"}, {"version", version}};
  meta.fingerprints = store::listing_fingerprints(list);
  meta.extra["serve"] = json::object{{"study", study.name}, {"request", request}};
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

api_error study_error(const std::string& study, const std::string& what, const error& e) {
  json::array tail;
  for (auto& l : e.diag.stderr_tail) tail.emplace_back(l);
  auto err =
      make_error(503, "study_unavailable", "study '" + study + "' " + what + ": " + e.message(),
                 json::object{{"study", study}, {"stderr_tail", std::move(tail)}});
  err.retry_after = 5;
  return err;
}

api_error too_many_cases(std::size_t cases, std::size_t max_cases) {
  return make_error(413, "too_many_cases",
                    "the selection plans " + std::to_string(cases) +
                        " cases; this server runs at most " + std::to_string(max_cases) +
                        " in one run (--max-cases)",
                    json::object{{"cases", cases}, {"max_cases", max_cases}});
}

// Plans `sel`, refused when it has more than `max_cases` cases: when the request sets trials,
// before the plan is made (its size is the cases of one trial times the trials).
tl::expected<plan::plan, api_error> plan_within(const protocol::list_result& list,
                                                const plan::selection& sel, std::size_t max_cases) {
  if (sel.trials && *sel.trials > 1) {
    auto one = sel;
    one.trials = 1;
    auto base = plan::make_plan(list, one);
    if (!base) return tl::unexpected(selection_error(base.error().message));
    auto cases = base->cases.size() * static_cast<std::size_t>(*sel.trials);
    if (cases > max_cases) return tl::unexpected(too_many_cases(cases, max_cases));
  }
  auto p = plan::make_plan(list, sel);
  if (!p) return tl::unexpected(selection_error(p.error().message));
  if (p->cases.size() > max_cases)
    return tl::unexpected(too_many_cases(p->cases.size(), max_cases));
  return std::move(*p);
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
    std::array<std::size_t, 7> counts{};
    for (auto& c : *saved) {
      auto* status = c.record.if_contains("status");
      if (!status || !status->is_string()) continue;
      for (auto s : all_states)
        if (to_string(s) == std::string_view(status->get_string()))
          ++counts[static_cast<std::size_t>(s)];
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
        auto n = v.is_int64()    ? static_cast<std::size_t>(v.get_int64())
                 : v.is_uint64() ? static_cast<std::size_t>(v.get_uint64())
                                 : 0;
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

// A saved run's status from its folder: its meta.json, and its records when its last session
// did not end.
tl::expected<json::object, api_error> read_saved_status(const fs::path& results,
                                                        const std::string& id) {
  if (auto ok = run_exists(results, id); !ok) return tl::unexpected(ok.error());
  auto meta = store::load_run_meta(results, id);
  if (!meta) return tl::unexpected(make_error(500, "store_error", meta.error().message()));
  if (last_session_ended(*meta)) return saved_status(*meta, nullptr);
  auto run = store::load_run(results, id);
  if (!run) return tl::unexpected(make_error(500, "store_error", run.error().message()));
  return saved_status(run->meta, &run->cases);
}

// A page of saved runs, newest first (ids sort by start time), after `cursor`: each with its
// status, or nothing for the ids in `live` (the caller has theirs). Also the next cursor.
std::pair<std::vector<std::pair<std::string, std::optional<json::object>>>, std::string> saved_page(
    const fs::path& results, std::size_t limit, const std::string& cursor,
    const std::set<std::string>& live) {
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
    } else if (auto s = read_saved_status(results, id)) {
      items.emplace_back(id, std::move(*s));
    }
  }
  return {std::move(items), std::move(next)};
}

// The records of a run, as NDJSON, of the given states (comma-separated; all without).
tl::expected<std::string, api_error> read_cases(const fs::path& results, const std::string& id,
                                                const std::optional<std::string>& states) {
  std::vector<std::string> wanted;
  if (states) {
    std::string_view v = *states;
    while (!v.empty()) {
      auto comma = v.find(',');
      auto name = v.substr(0, comma);
      if (std::none_of(std::begin(all_states), std::end(all_states),
                       [&](case_state s) { return to_string(s) == name; }))
        return tl::unexpected(make_error(
            400, "invalid_parameter",
            "state: '" + std::string(name) +
                "' is not one of passed, failed, na, skipped, cancelled, error, executed",
            json::object{{"parameter", "state"}}));
      wanted.emplace_back(name);
      v = comma == std::string_view::npos ? std::string_view{} : v.substr(comma + 1);
    }
  }
  if (auto ok = run_exists(results, id); !ok) return tl::unexpected(ok.error());
  auto run = store::load_run(results, id);
  if (!run) return tl::unexpected(make_error(500, "store_error", run.error().message()));
  std::string out;
  for (auto& c : run->cases) {
    auto* status = c.record.if_contains("status");
    if (!wanted.empty() && (!status || !status->is_string() ||
                            std::find(wanted.begin(), wanted.end(),
                                      std::string_view(status->get_string())) == wanted.end()))
      continue;
    protocol::append_json_text(out, c.record);
    out += '\n';
  }
  return out;
}

// A saved run's report in `format`: its content type and text.
tl::expected<std::pair<std::string, std::string>, api_error> render_report(
    const fs::path& results, const std::string& id, const std::string& format) {
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
  auto run = store::load_run(results, id);
  if (!run) return tl::unexpected(make_error(500, "store_error", run.error().message()));
  auto [p, rep] = run->as_report();
  rep.seconds = run->meta.seconds();
  auto s = aggregate::summarize(p, rep.cases, nullptr);
  return std::pair{type->second, report::render(format, p, rep, s)};
}

// The study of a run: one process or a pool, as `mira run --procs` makes them.
using connection = std::variant<host_handle, study_pool>;

asio::awaitable<void> shutdown(connection& c) {
  if (auto* pool = std::get_if<study_pool>(&c))
    co_await pool->shutdown();
  else
    co_await std::get<host_handle>(c).shutdown();
}

}  // namespace

live_run::live_run(asio::any_io_executor e) : notify(new_notify(e)), ex(std::move(e)) {}

void live_run::publish(std::string type, json::object data) {
  events.append(std::move(type), protocol::to_json_text(data));
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

struct run_manager::prepared {
  std::optional<connection> conn;  // set once the study answered
  protocol::initialize_result init;
  protocol::list_result list;
  plan::plan p;
  plan::plan todo;  // the cases to run when a resume runs fewer than p's
  std::optional<store::run_store> store;
  store::resume_plan resumed;
  run_options options;
  study_entry study;
  std::shared_ptr<study_output> output;
};

struct run_manager::session_ended {
  schedule::run_report session;  // this session's, over the plan
  std::optional<std::pair<plan::plan, schedule::run_report>> whole;  // when it is not `session`
  json::object summary;                                              // the whole run's
  std::string stopped;            // why the session stopped, as meta.json says it; empty when done
  store::write_error unfinished;  // the file that could not be written: the run is not finished
  schedule::run_report& whole_report() { return whole ? whole->second : session; }
};

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
asio::awaitable<std::invoke_result_t<F&>> run_manager::off_executor(F& job) {
  return asio::async_initiate<const asio::use_awaitable_t<>,
                              void(std::exception_ptr, std::invoke_result_t<F&>)>(
      post_to_pool<F>{&work_}, asio::use_awaitable, &job);
}

run_manager::run_manager(asio::any_io_executor ex, const server_config& config)
    : ex_(std::move(ex)), config_(config), changed_(new_notify(ex_)) {}

const study_entry* run_manager::find_study(const std::string& name) const {
  for (auto& s : config_.studies)
    if (s.name == name) return &s;
  return nullptr;
}

tl::expected<void, api_error> run_manager::admit() const {
  if (stopping_) {
    auto e = make_error(503, "shutting_down", "the server is stopping; it takes no new runs");
    e.retry_after = 10;
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

void run_manager::release() {
  --active_;
  notify_changed();
}

void run_manager::notify_changed() {
  changed_->cancel();
  changed_ = new_notify(ex_);
}

namespace {

api_error not_in_time(const std::string& study, const char* what) {
  auto e =
      make_error(503, "study_unavailable", "study '" + study + "' did not " + what + " in time",
                 json::object{{"study", study}});
  e.retry_after = 5;
  return e;
}

// The listing of a started study (one process or a pool) before `timer` fires; on any failure
// the study is shut down.
template <class Connection>
asio::awaitable<tl::expected<protocol::list_result, api_error>> list_in_time(
    Connection& conn, asio::steady_timer& timer, const std::string& study) {
  auto listed = co_await (conn.list_all() || timer.async_wait(asio::as_tuple(asio::use_awaitable)));
  if (listed.index() == 0 && std::get<0>(listed)) co_return std::move(*std::get<0>(listed));
  co_await conn.shutdown();
  if (listed.index() == 1) co_return tl::unexpected(not_in_time(study, "list its evals"));
  co_return tl::unexpected(study_error(study, "failed to list", std::get<0>(listed).error()));
}

}  // namespace

asio::awaitable<tl::expected<run_manager::prepared, api_error>> run_manager::prepare(
    const study_entry& study, const run_options& o) {
  prepared p;
  p.study = study;
  p.options = o;
  p.output = std::make_shared<study_output>();
  auto out = p.output;
  auto options = [out] {
    host_options h;
    h.host_name = "mira-cpp";
    h.on_stderr_line = [out](std::string_view line) { out->line(line); };
    h.on_notification = [out](const notification& n) { out->event(nullptr, n); };
    return h;
  };
  study_command cmd;
  cmd.argv = study.argv;
  asio::steady_timer timer(ex_, config_.init_timeout);
  if (o.procs && *o.procs > 1) {
    pool_options po;
    po.processes = *o.procs;
    auto j = o.concurrency.value_or(schedule::concurrency_policy{}.max_concurrent);
    po.max_in_flight_per_process = (j + *o.procs - 1) / *o.procs;
    po.host_options_for = [options](std::size_t) { return options(); };
    po.init_timeout = config_.init_timeout;
    auto pool = co_await study_pool::start(ex_, cmd, std::move(po));
    if (!pool) co_return tl::unexpected(study_error(study.name, "did not start", pool.error()));
    p.init = pool->study();
    auto list = co_await list_in_time(*pool, timer, study.name);
    if (!list) co_return tl::unexpected(list.error());
    p.list = std::move(*list);
    p.conn = std::move(*pool);
    co_return p;
  }
  auto host = host_handle::spawn(ex_, cmd, options());
  if (!host) co_return tl::unexpected(study_error(study.name, "did not start", host.error()));
  auto inited =
      co_await (host->initialize() || timer.async_wait(asio::as_tuple(asio::use_awaitable)));
  if (inited.index() == 1) {
    co_await host->shutdown();
    co_return tl::unexpected(not_in_time(study.name, "answer initialize"));
  }
  auto& init = std::get<0>(inited);
  if (!init) {
    co_await host->shutdown();
    co_return tl::unexpected(study_error(study.name, "failed to initialize", init.error()));
  }
  p.init = std::move(*init);
  timer.expires_after(config_.init_timeout);
  auto list = co_await list_in_time(*host, timer, study.name);
  if (!list) co_return tl::unexpected(list.error());
  p.list = std::move(*list);
  p.conn = std::move(*host);
  co_return p;
}

asio::awaitable<tl::expected<std::string, api_error>> run_manager::launch(
    const study_entry& study, const run_request& r,
    std::function<tl::expected<std::string, api_error>(prepared&)> ready) {
  ++active_;
  auto prep = co_await prepare(study, r.options);
  auto fail = [&](api_error e) -> asio::awaitable<tl::expected<std::string, api_error>> {
    if (prep) co_await shutdown(*prep->conn);
    release();
    co_return tl::unexpected(std::move(e));
  };
  if (!prep) co_return co_await fail(prep.error());
  if (stopping_) co_return co_await fail(admit().error());
  // Planning, opening the store and choosing the cases to run take seconds over a big run: off
  // the executor. `prep` is this coroutine's alone until the run starts.
  auto plan_and_open = [&,
                        max_cases = config_.max_cases]() -> tl::expected<std::string, api_error> {
    auto planned = plan_within(prep->list, r.selection, max_cases);
    if (!planned) return tl::unexpected(planned.error());
    prep->p = std::move(*planned);
    auto made = ready(*prep);
    if (!made) prep->p = {};  // a big plan takes long to free: here, not on the executor
    if (made && prep->resumed.todo.size() < prep->p.cases.size())
      for (auto i : prep->resumed.todo) prep->todo.cases.push_back(prep->p.cases[i]);
    return made;
  };
  auto id = co_await off_executor(plan_and_open);
  if (!id) co_return co_await fail(id.error());

  auto run = std::make_shared<live_run>(ex_);
  run->id = *id;
  run->study = study.name;
  runs_[run->id] = run;
  asio::co_spawn(ex_, execute(run, std::make_shared<prepared>(std::move(*prep)), owner_.lock()),
                 asio::detached);
  notify_changed();  // a stop under way cancels it
  co_return run->id;
}

asio::awaitable<tl::expected<std::string, api_error>> run_manager::start(run_request r) {
  if (auto ok = admit(); !ok) co_return tl::unexpected(ok.error());
  auto* study = find_study(r.study);
  if (!study) co_return tl::unexpected(unknown_study(r.study));
  // A new run folder for the plan, every case to run.
  auto ready = [&](prepared& prep) -> tl::expected<std::string, api_error> {
    if (prep.p.cases.empty())
      return tl::unexpected(selection_error("no cases match the selection"));
    std::random_device rd;
    tl::expected<store::run_store, store::error> created = tl::unexpected(store::error{});
    for (int attempt = 0; attempt < 8 && !created; ++attempt)
      created =
          store::run_store::create(config_.results_dir,
                                   store::new_run_id(std::chrono::system_clock::now(),
                                                     static_cast<std::uint16_t>(rd() & 0xffff)),
                                   store::layout::per_case);
    if (!created)
      return tl::unexpected(
          make_error(500, "store_error", "cannot create the run: " + created.error().message()));
    prep.store.emplace(std::move(*created));
    describe_run(prep.store->meta(), prep.init, prep.list, *study, r.body);
    prep.resumed.todo.resize(prep.p.cases.size());
    for (std::size_t i = 0; i < prep.p.cases.size(); ++i) prep.resumed.todo[i] = i;
    return prep.store->id();
  };
  co_return co_await launch(*study, r, ready);
}

asio::awaitable<tl::expected<std::string, api_error>> run_manager::resume(std::string id,
                                                                          resume_request rr) {
  if (auto ok = run_exists(config_.results_dir, id); !ok) co_return tl::unexpected(ok.error());
  if (auto l = live(id); l && !l->finished)
    co_return tl::unexpected(make_error(409, "run_active", "run '" + id + "' is still going"));
  if (auto ok = admit(); !ok) co_return tl::unexpected(ok.error());
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

  auto opened = store::run_store::open(config_.results_dir, id);
  if (!opened) {
    if (opened.error().code == store::errc::in_use)
      co_return tl::unexpected(make_error(409, "run_locked", opened.error().message()));
    co_return tl::unexpected(make_error(500, "store_error", opened.error().message()));
  }
  // The saved run's folder (locked since it was opened), the cases it lacks to run.
  auto ready = [&](prepared& prep) -> tl::expected<std::string, api_error> {
    prep.store.emplace(std::move(*opened));
    store::resume_options o{rr.retry_errors, rr.retry_failed, false};
    auto decided =
        store::plan_resume(prep.store->load(), prep.p, prep.init,
                           store::listing_fingerprints(prep.list), decoded->selection.seed, o);
    if (!decided)
      return tl::unexpected(make_error(422, "cannot_resume", decided.error().message()));
    prep.resumed = std::move(*decided);
    prep.store->meta().fingerprints = store::listing_fingerprints(prep.list);
    return id;
  };
  co_return co_await launch(*study, *decoded, ready);
}

asio::awaitable<void> run_manager::execute(std::shared_ptr<live_run> run,
                                           std::shared_ptr<prepared> prep,
                                           std::shared_ptr<void> owner) {
  auto& p = prep->p;
  auto& st = *prep->store;
  auto& resumed = prep->resumed;
  const bool partial = resumed.todo.size() < p.cases.size();  // launch made prep->todo
  const plan::plan& to_run = partial ? prep->todo : p;

  auto failure = std::make_shared<std::optional<std::string>>();
  if (auto e = begin(*run, *prep)) *failure = e.message();
  auto ex = ex_;
  auto writer = st.writer();
  if (!writer && !*failure) *failure = writer.error().message();
  const std::size_t progress_every = std::max<std::size_t>(1, to_run.cases.size() / 100);
  std::size_t starts = 0, finished_attempts = 0;

  schedule::run_hooks hooks;
  hooks.on_start = [&](std::size_t) {
    ++starts;
    run->in_progress = starts - finished_attempts;
  };
  hooks.on_notification = [&](std::size_t j, const notification& n) {
    prep->output->event(&to_run.cases[j].key, n);
  };
  hooks.on_result = [&](std::size_t j, const schedule::case_record& r) {
    finished_attempts += static_cast<std::size_t>(r.attempts);
    run->in_progress = starts - finished_attempts;
    ++run->counts[static_cast<std::size_t>(r.state)];
    auto& c = to_run.cases[j];
    if (r.state != case_state::cancelled) {
      ++run->done;
      if (writer && *writer)
        // The file that failed is asked on the writer's thread, where the callback runs.
        (*writer)->submit(
            c.key, store::case_line(c, r),
            [ex, failure, key = c.key, w = writer->get()](boost::system::error_code ec) {
              if (!ec) return;
              auto message = "cannot save the result of " + key + " to " +
                             w->file_of(key).string() + ": " + ec.message();
              asio::post(ex, [failure, message = std::move(message)]() mutable {
                if (!*failure) *failure = std::move(message);
              });
            });
    }
    json::object e{
        {"key", c.key},           {"state", to_string(r.state)},
        {"attempts", r.attempts}, {"latency_ms", std::round(r.latency_seconds * 1e6) / 1e3},
        {"done", run->done},      {"total", run->total}};
    if (!r.message.empty()) e["message"] = r.message;
    run->publish("case", std::move(e));
    if (run->done % progress_every == 0 || run->done == run->total)
      run->publish("progress", json::object{{"done", run->done},
                                            {"total", run->total},
                                            {"in_progress", run->in_progress},
                                            {"counts", counts_json(run->counts)}});
  };
  hooks.stop_after = [failure](std::size_t, const schedule::case_record&) { return *failure; };

  auto policy = to_policy(prep->options);
  if (std::holds_alternative<host_handle>(*prep->conn)) {
    // A study that dies is started again, as `mira run` does, if it is the same study.
    policy.respawn = [this, prep]() -> asio::awaitable<tl::expected<host_handle, error>> {
      study_command cmd;
      cmd.argv = prep->study.argv;
      host_options h;
      auto out = prep->output;
      h.on_stderr_line = [out](std::string_view line) { out->line(line); };
      auto next =
          co_await restart_study(std::move(cmd), std::move(h), prep->init, config_.init_timeout);
      if (next) prep->conn = *next;
      co_return next;
    };
  }
  auto body = [&]() -> asio::awaitable<schedule::run_report> {
    if (*failure) {
      // Nothing can be saved: no case runs, as its result would be lost. Each stays not run.
      schedule::run_report none;
      none.cases.resize(to_run.cases.size());
      for (auto& c : none.cases) {
        c.state = case_state::cancelled;
        c.message = "not run: " + **failure;
      }
      none.stopped = schedule::stop_reason::requested;
      none.stop_message = **failure;
      co_return none;
    }
    if (auto* pool = std::get_if<study_pool>(&*prep->conn))
      co_return co_await schedule::run_plan(*pool, to_run, policy, hooks);
    co_return co_await schedule::run_plan(std::get<host_handle>(*prep->conn), to_run, policy,
                                          hooks);
  };
  auto part = co_await asio::co_spawn(
      ex, body(), asio::bind_cancellation_slot(run->cancel.slot(), asio::use_awaitable));
  if (writer && *writer) (*writer)->drain();
  co_await asio::post(ex, asio::use_awaitable);  // the save failures reported, if any
  co_await shutdown(*prep->conn);

  // The session's and the whole run's reports, the summary and the run's files: seconds over a
  // big run, so off the executor. The study's stderr reader may still run here (a child of the
  // study can hold its stderr open), so its text is taken now and its events no longer reach
  // the store; then nothing else touches `prep` until the job is done.
  auto stderr_text = prep->output->text();
  prep->output->store = nullptr;
  auto end_it = [p = prep.get(), part = std::move(part), interrupted = run->interrupted,
                 failed = *failure, err = std::move(stderr_text)]() mutable {
    return end_session(*p, std::move(part), interrupted, failed, err);
  };
  auto ended = co_await off_executor(end_it);
  end(*run, ended, *failure);
  if (writer) writer->reset();  // before the store it writes into
  prep.reset();                 // the store's lock is released before the run counts as ended
  forget_old_runs();
#ifdef __GLIBC__
  // Once this frame (the run's reports and writer) is gone too: glibc keeps a big run's freed
  // memory for reuse unless told to give it back.
  asio::post(ex_, [] { ::malloc_trim(0); });
#endif
  release();
  owner.reset();  // last: the server may go with it
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

store::write_error run_manager::begin(live_run& run, prepared& prep) {
  auto& st = *prep.store;
  prep.output->store = &st;
  store::run_session session;
  session.argv = {"mira", "serve"};
  session.config = json::object{{"serve", st.meta().extra["serve"]}};
  session.planned = prep.p.cases.size();
  session.reused = prep.resumed.reused;
  auto failed = st.begin_session(std::move(session));
  // The reused cases count from the start.
  run.total = prep.p.cases.size();
  run.reused = prep.resumed.reused;
  run.started = now_iso();
  run.t0 = std::chrono::steady_clock::now();
  for (auto& r : prep.resumed.records)
    if (r.attempts > 0 || r.state != case_state::cancelled) {
      ++run.counts[static_cast<std::size_t>(r.state)];
      ++run.done;
    }
  run.publish("start", json::object{{"run_id", run.id},
                                    {"study", run.study},
                                    {"total", run.total},
                                    {"reused", run.reused},
                                    {"counts", counts_json(run.counts)}});
  return failed;
}

run_manager::session_ended run_manager::end_session(prepared& prep, schedule::run_report part,
                                                    bool interrupted,
                                                    const std::optional<std::string>& failure,
                                                    const std::string& stderr_text) {
  auto& p = prep.p;
  auto& st = *prep.store;
  session_ended e;
  // The session's report over the plan: reused cases and the ones run now, in plan order.
  e.session = store::session_report(p, prep.resumed, std::move(part));
  auto& report = e.session;
  if (failure && report.stopped == schedule::stop_reason::none) {
    // A result that could not be saved, reported after the last case had ended.
    report.stopped = schedule::stop_reason::requested;
    report.stop_message = *failure;
  }
  auto& s = st.session();
  s.seconds = report.seconds;
  s.ran = 0;
  for (auto i : prep.resumed.todo) s.ran += report.cases[i].state != case_state::cancelled;
  if (report.stopped == schedule::stop_reason::interrupted)
    s.stopped = interrupted ? "interrupted" : "cancelled";
  else if (report.stopped != schedule::stop_reason::none)
    s.stopped = std::string(to_string(report.stopped));
  e.stopped = s.stopped;
  st.append_stderr(stderr_text);
  e.whole = store::whole_run(p, report, prep.resumed);
  auto& whole_plan = e.whole ? e.whole->first : p;
  auto summary = aggregate::summarize(whole_plan, e.whole_report().cases, &prep.list);
  e.unfinished = report::finish_run(st, whole_plan, e.whole_report(), summary);
  e.summary = aggregate::summary_json(summary, e.whole_report());
  return e;
}

void run_manager::end(live_run& run, session_ended& ended,
                      const std::optional<std::string>& failure) {
  auto& session_report = ended.session;
  auto& stopped = ended.stopped;
  run.summary = std::move(ended.summary);
  run.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - run.t0).count();
  run.state = stopped.empty()                                        ? "done"
              : (stopped == "cancelled" || stopped == "interrupted") ? stopped
                                                                     : "stopped";
  if (session_report.stopped != schedule::stop_reason::none)
    run.stop_reason = std::string(to_string(session_report.stopped));
  run.stop_message = failure ? *failure : session_report.stop_message;
  if (ended.unfinished) {
    // Every case saved, but not its report files or meta.json: a resume finishes it.
    run.state = "stopped";
    run.stop_reason = "unfinished";
    run.stop_message = "cannot finish run " + run.id + ": " + ended.unfinished.message();
  }
  for (auto& c : run.counts) c = 0;
  for (auto& r : ended.whole_report().cases) ++run.counts[static_cast<std::size_t>(r.state)];
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
  run.events.trim(kept_ended_events);
}

tl::expected<json::object, api_error> run_manager::cancel(const std::string& id) {
  auto run = live(id);
  if (!run) {
    if (auto ok = run_exists(config_.results_dir, id); !ok) return tl::unexpected(ok.error());
    return tl::unexpected(make_error(409, "run_not_active", "run '" + id + "' is not going"));
  }
  if (run->finished)
    return tl::unexpected(make_error(409, "run_not_active", "run '" + id + "' has ended"));
  if (run->state != "cancelling") {
    run->state = "cancelling";
    run->cancel.emit(asio::cancellation_type::terminal);
  }
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
  auto read = [results = config_.results_dir, id] { return read_saved_status(results, id); };
  co_return co_await off_executor(read);
}

asio::awaitable<tl::expected<json::object, api_error>> run_manager::list(std::size_t limit,
                                                                         std::string cursor) {
  std::set<std::string> live_ids;
  for (auto& [id, run] : runs_) live_ids.insert(id);
  auto read = [results = config_.results_dir, limit, cursor, live_ids] {
    return saved_page(results, limit, cursor, live_ids);
  };
  auto [items, next] = co_await off_executor(read);
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
  if (auto ok = admit(); !ok) co_return tl::unexpected(ok.error());
  ++active_;
  auto load = std::make_shared<catalog_load>(ex_);
  loading_[name] = load;
  // On every path (an exception too) the waiters are woken and the place is freed.
  struct finish {
    run_manager* m;
    std::string name;
    std::shared_ptr<catalog_load> load;
    ~finish() {
      if (!load->result)
        load->result = tl::unexpected(make_error(500, "internal_error", "the catalog failed"));
      m->loading_.erase(name);
      load->done.cancel();
      m->release();
    }
  } guard{this, name, load};
  auto prep = co_await prepare(*study, {});
  if (!prep) {
    load->result = tl::unexpected(prep.error());
    co_return *load->result;
  }
  co_await shutdown(*prep->conn);
  catalogs_[name] = catalog_json(name, prep->init, prep->list);
  load->result = catalogs_[name];
  co_return *load->result;
}

asio::awaitable<tl::expected<std::string, api_error>> run_manager::cases(
    std::string id, std::optional<std::string> states) {
  auto read = [results = config_.results_dir, id, states] {
    return read_cases(results, id, states);
  };
  co_return co_await off_executor(read);
}

asio::awaitable<tl::expected<std::pair<std::string, std::string>, api_error>> run_manager::report(
    std::string id, std::string format) {
  auto render = [results = config_.results_dir, id, format] {
    return render_report(results, id, format);
  };
  co_return co_await off_executor(render);
}

asio::awaitable<void> run_manager::stop() {
  stopping_ = true;
  // A run planned off the executor when the stop came starts meanwhile: each wake-up cancels
  // the runs that have not been.
  while (active_ > 0) {
    for (auto& [id, run] : runs_)
      if (!run->finished && !run->interrupted) {
        run->interrupted = true;
        run->state = "cancelling";
        run->cancel.emit(asio::cancellation_type::terminal);
      }
    auto t = changed_;
    co_await t->async_wait(asio::as_tuple(asio::use_awaitable));
  }
}

}  // namespace mira::serve::detail
