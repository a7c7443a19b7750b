// The session (session/session.hpp): named steps over the layers below — start the study,
// plan, open the run store or the artifacts, run the plan with every finished case saved off
// the event loop, end the session with the run's report files — and nothing of its own about
// how a caller shows it.
#include <mira/session/session.hpp>

#include <mira/protocol/json_text.hpp>
#include <mira/report/render.hpp>
#include <mira/store/artifacts.hpp>
#include <mira/store/files.hpp>
#include <mira/store/records.hpp>
#include <mira/version.hpp>
#include "session/ledger.hpp"
#include "session/result_saver.hpp"

#include "host/serial_executor.hpp"

#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <ctime>
#include <deque>
#include <map>
#include <mutex>
#include <type_traits>

namespace mira {

namespace asio = boost::asio;
namespace json = boost::json;
namespace fs = std::filesystem;
using schedule::case_state;

namespace {

struct session_category_impl : boost::system::error_category {
  const char* name() const noexcept override { return "mira.session"; }
  std::string message(int ev) const override {
    switch (static_cast<session_errc>(ev)) {
      case session_errc::study_failed:
        return "the study could not be started";
      case session_errc::study_incapable:
        return "the study lacks a capability";
      case session_errc::invalid_selection:
        return "invalid selection";
      case session_errc::too_many_cases:
        return "too many cases";
      case session_errc::nothing_to_run:
        return "nothing to run";
      case session_errc::artifacts_unusable:
        return "the artifacts cannot be used";
      case session_errc::refused:
        return "refused";
      case session_errc::cancelled:
        return "cancelled";
    }
    return "unknown session error";
  }
};

struct session_condition_category_impl : boost::system::error_category {
  const char* name() const noexcept override { return "mira.session_condition"; }
  std::string message(int ev) const override {
    return static_cast<session_condition>(ev) == session_condition::study_failed
               ? "the study could not be started"
               : "unknown session condition";
  }
  bool equivalent(const boost::system::error_code& code, int condition) const noexcept override {
    if (static_cast<session_condition>(condition) != session_condition::study_failed) return false;
    return code.category() == mira::category() || code == session_errc::study_failed;
  }
};

}  // namespace

const boost::system::error_category& session_category() noexcept {
  static const session_category_impl c;
  return c;
}

boost::system::error_code make_error_code(session_errc e) noexcept {
  return {static_cast<int>(e), session_category()};
}

const boost::system::error_category& session_condition_category() noexcept {
  static const session_condition_category_impl c;
  return c;
}

boost::system::error_condition make_error_condition(session_condition e) noexcept {
  return {static_cast<int>(e), session_condition_category()};
}

bool session_outcome::resumable() const {
  return !run_id.empty() && (report.stopped != schedule::stop_reason::none || unfinished ||
                             summary.count(case_state::cancelled) > 0);
}

namespace detail {

// What the study says besides its answers: each process's stderr (its last MiB: a flood must
// not grow the host, nor push out what another process of a pool said), kept for
// study.stderr.log, and its notifications, appended to events.ndjson as they come. Shared with
// the study's callbacks, which may run after the session (a child of the study can hold its
// stderr open): once `closed`, nothing is passed on.
struct study_log {
  static constexpr std::size_t max_stderr = std::size_t{1} << 20;
  struct tail {
    std::deque<std::string> lines;
    std::size_t bytes = 0;
  };
  std::map<std::size_t, tail> tails;  // by slot
  store::run_store* store = nullptr;
  bool closed = false;
  std::function<void(std::size_t, std::string_view)> on_line;
  std::function<void(const std::string*, const notification&)> on_notification;

  void line(std::size_t slot, std::string_view l) {
    if (closed) return;
    auto& t = tails[slot];
    t.lines.emplace_back(l);
    t.bytes += l.size() + 1;
    while (t.bytes > max_stderr && !t.lines.empty()) {
      t.bytes -= t.lines.front().size() + 1;
      t.lines.pop_front();
    }
    if (on_line) on_line(slot, l);
  }
  void event(const std::string* key, const notification& n) {
    if (closed) return;
    if (store) {
      json::object o{{"key", key ? json::value(*key) : json::value(nullptr)},
                     {"method", n.method},
                     {"params", n.params}};
      store->append_event(protocol::to_json_text(o));
    }
    if (on_notification) on_notification(key, n);
  }
  /// Each process's tail in turn; a pool's lines start with "[study N] ".
  std::string text() const {
    std::string out;
    for (auto& [slot, t] : tails)
      for (auto& l : t.lines) {
        if (slot != 0) out += "[study " + std::to_string(slot) + "] ";
        (out += l) += '\n';
      }
    return out;
  }
};

struct session_state {
  session_options o;
  std::optional<run_ledger> ledger;  // made as the session opens
  asio::any_io_executor ex;
  std::optional<study_connection> conn;
  bool own_study = false;  // started by the session, so shut down by it
  protocol::list_result list;
  json::object fingerprints;
  plan::plan p;
  std::optional<store::run_store> store;
  store::resume_plan resumed;
  std::optional<store::artifact_dir> artifacts;
  std::map<std::string, json::object> stored;  // artifacts by key
  std::string id;
  fs::path folder;
  std::vector<std::string> warnings;
  // Set by session::set_stop_label from any thread (a server's client), read by the end of the
  // session where long steps run.
  mutable std::mutex stop_label_mutex;
  std::string stop_label = "interrupted";
  std::string stop_label_now() const {
    std::lock_guard lock(stop_label_mutex);
    return stop_label;
  }
  std::shared_ptr<study_log> log = std::make_shared<study_log>();
  bool ran = false;

  void warn(std::string text) {
    if (o.hooks.on_warning) o.hooks.on_warning(text);
    warnings.push_back(std::move(text));
  }
};

}  // namespace detail

namespace {

using detail::keeping;
using detail::session_state;

session_error make_session_error(boost::system::error_code code, std::string text,
                                 std::vector<std::string> tail = {}) {
  return session_error{code, std::move(text), std::move(tail)};
}

session_error from_store(const store::error& e) {
  return {e.code, e.text, {}};
}

// Runs `*job` on `ex` and completes with its result (or its exception) on the awaiting
// coroutine's executor. Only a pointer goes through the initiation: the job stays in the
// awaiting frame (g++ 12 destroys a temporary in a co_await expression twice).
template <class Job>
struct post_job {
  asio::any_io_executor ex;
  template <class Handler>
  void operator()(Handler handler, Job* job) const {
    asio::post(ex, [handler = std::move(handler), job]() mutable {
      using result = std::invoke_result_t<Job&>;
      std::exception_ptr e;
      std::optional<result> r;
      try {
        r.emplace((*job)());
      } catch (...) {
        e = std::current_exception();
      }
      auto home = asio::get_associated_executor(handler);
      asio::post(home, [handler = std::move(handler), e, r = std::move(r)]() mutable {
        std::move(handler)(e, r ? std::move(*r) : std::invoke_result_t<Job&>{});
      });
    });
  }
};

// `job()` where the session's long steps run (see session_options::work_executor).
template <class F>
asio::awaitable<std::invoke_result_t<F&>> on_work(const session_state& st, F& job) {
  if (!st.o.work_executor) co_return job();
  co_return co_await asio::async_initiate<const asio::use_awaitable_t<>,
                                          void(std::exception_ptr, std::invoke_result_t<F&>)>(
      post_job<F>{*st.o.work_executor}, asio::use_awaitable, &job);
}

// The plan's refusal, its field kept for a front end to name in its own words.
session_error selection_error(const plan::error& e) {
  auto out = make_session_error(session_errc::invalid_selection, e.message());
  out.field = e.field;
  return out;
}

// The plan of `sel`, refused when it has more than `max_cases` cases (0: no limit): when the
// selection sets trials, before the plan is made (its size is one trial's cases times them).
tl::expected<plan::plan, session_error> plan_within(const protocol::list_result& list,
                                                    const plan::selection& sel,
                                                    std::size_t max_cases) {
  auto too_many = [&](std::size_t cases) {
    auto e =
        make_session_error(session_errc::too_many_cases,
                           "the selection plans " + std::to_string(cases) + " cases; at most " +
                               std::to_string(max_cases) + " run in one session");
    e.cases = cases;
    return e;
  };
  if (max_cases > 0 && sel.trials && *sel.trials > 1) {
    auto one = sel;
    one.trials = 1;
    auto base = plan::make_plan(list, one);
    if (!base) return tl::unexpected(selection_error(base.error()));
    auto cases = base->cases.size() * static_cast<std::size_t>(*sel.trials);
    if (cases > max_cases) return tl::unexpected(too_many(cases));
  }
  auto p = plan::make_plan(list, sel);
  if (!p) return tl::unexpected(selection_error(p.error()));
  if (max_cases > 0 && p->cases.size() > max_cases)
    return tl::unexpected(too_many(p->cases.size()));
  return std::move(*p);
}

// The study's own code is kept (errc::spawn_failed, study_exited, timed_out, ...): each matches
// session_condition::study_failed.
session_error study_error(const error& e, const char* step) {
  auto out = make_session_error(
      e.code, e.code == errc::timed_out ? e.diag.message : std::string(step) + ": " + e.message(),
      e.diag.stderr_tail);
  out.exit = e.diag.exit;
  return out;
}

// The launch with the session's log behind each process's stderr and notifications, and its
// diagnostics in hooks.on_log when that is set.
study_launch logged(study_launch launch, const std::shared_ptr<detail::study_log>& log,
                    const session_hooks& hooks) {
  auto base = launch.pool.host_options_for;
  launch.pool.host_options_for = [base, log, sink = hooks.on_log](std::size_t slot) {
    auto h = base ? base(slot) : host_options{};
    if (sink) h.log = sink;
    h.on_stderr_line = [log, slot, theirs = std::move(h.on_stderr_line)](std::string_view line) {
      log->line(slot, line);
      if (theirs) theirs(line);
    };
    h.on_notification = [log, theirs = std::move(h.on_notification)](const notification& n) {
      log->event(nullptr, n);
      if (theirs) theirs(n);
    };
    return h;
  };
  if (!launch.pool.on_restart && hooks.on_restart) launch.pool.on_restart = hooks.on_restart;
  return launch;
}

// The artifacts of session_mode::execute (made) or score (read, the plan cut down to the cases
// that have one).
std::optional<session_error> open_artifacts(session_state& st) {
  auto& o = st.o;
  const bool execute = o.mode == session_mode::execute;
  auto dir =
      execute ? store::artifact_dir::create(o.artifacts) : store::artifact_dir::open(o.artifacts);
  if (!dir) return make_session_error(session_errc::artifacts_unusable, dir.error().message());
  st.artifacts = std::move(*dir);
  std::vector<std::string> unreadable;
  st.stored = st.artifacts->load(&unreadable);
  for (auto& u : unreadable)
    st.warn("cannot read the artifact " + u + "; " +
            (execute ? "that case is executed again" : "it is left out"));
  auto& init = st.conn->study();
  if (auto meta = st.artifacts->load_meta()) {
    auto* made_by = meta->if_contains("study");
    if (made_by && made_by->is_string() && made_by->get_string() != init.study)
      st.warn("the artifacts in " + o.artifacts.string() + " were made by study '" +
              std::string(made_by->get_string()) + "'");
  }
  if (execute) {
    if (auto ec = st.artifacts->save_meta(json::object{{"study", init.study},
                                                       {"study_version", init.study_version},
                                                       {"host_version", version},
                                                       {"fingerprints", st.fingerprints}}))
      st.warn("cannot write " + (o.artifacts / "meta.json").string() + ": " + ec.message());
    return std::nullopt;
  }
  plan::plan scorable;
  std::vector<std::size_t> with_artifact;
  for (std::size_t i = 0; i < st.p.cases.size(); ++i)
    if (st.stored.count(st.p.cases.key(i))) with_artifact.push_back(i);
  scorable.cases = st.p.cases.subset(with_artifact);
  if (scorable.cases.empty())
    return make_session_error(
        session_errc::nothing_to_run,
        "nothing to score: no artifact in " + o.artifacts.string() + " matches the selection");
  if (scorable.cases.size() < st.p.cases.size())
    st.warn(std::to_string(st.p.cases.size() - scorable.cases.size()) + " of " +
            std::to_string(st.p.cases.size()) + " planned case(s) have no artifact in " +
            o.artifacts.string() + "; scoring the other " + std::to_string(scorable.cases.size()));
  scorable.evals = std::move(st.p.evals);
  st.p = std::move(scorable);
  return std::nullopt;
}

// Every planned case to run, nothing reused.
void run_everything(session_state& st) {
  st.resumed.todo.resize(st.p.cases.size());
  for (std::size_t i = 0; i < st.p.cases.size(); ++i) st.resumed.todo[i] = i;
}

// The run store of a saving session: a new run, or the saved one (locked) and what it lacks.
asio::awaitable<std::optional<session_error>> open_store(session_state& st) {
  auto& save = *st.o.save;
  auto& init = st.conn->study();
  if (save.resume.empty()) {
    auto made = save.new_id.empty()
                    ? store::run_store::create_new(save.results_dir, save.layout)
                    : store::run_store::create(save.results_dir, save.new_id, save.layout);
    if (!made) co_return from_store(made.error());
    st.store.emplace(std::move(*made));
    run_everything(st);
  } else {
    auto opened = store::run_store::open(save.results_dir, save.resume);
    if (!opened) co_return from_store(opened.error());
    st.store.emplace(std::move(*opened));
    // Reading a big run and deciding what it lacks take seconds: where long steps run. The
    // saved records are read once, into the summaries, and not kept.
    auto decide = [&st, &save, &init]() -> tl::expected<store::resume_plan, store::error> {
      auto saved = st.store->reader();
      for (auto& u : saved.unreadable())
        st.warnings.push_back("cannot read " + u + "; that case runs again");
      for (auto& u : saved.superseded()) st.warnings.push_back(u);
      auto& ledger = *st.ledger;
      ledger.reading_saved();
      store::resume_sink sink;
      sink.reused = [&ledger](std::size_t i, const schedule::case_record& r) {
        ledger.reused(i, r);
      };
      sink.outside = [&ledger](const plan::planned_case& c, const schedule::case_record& r) {
        ledger.outside(c, r);
      };
      auto decided = store::plan_resume(saved, st.p, init, st.fingerprints, st.o.selection.seed,
                                        save.resume_options, sink);
      ledger.saved_read();
      return decided;
    };
    auto before = st.warnings.size();
    auto decided = co_await on_work(st, decide);
    // The warnings gathered off the executor are told here, on it.
    if (st.o.hooks.on_warning)
      for (auto i = before; i < st.warnings.size(); ++i) st.o.hooks.on_warning(st.warnings[i]);
    if (!decided) co_return from_store(decided.error());
    st.resumed = std::move(*decided);
    for (auto& w : st.resumed.warnings) st.warn(w);
  }
  st.id = st.store->id();
  st.folder = st.store->path();
  st.store->made_by(init, st.o.study.command.argv, st.fingerprints);
  store::session_entry entry;  // begin_session adds the start time, host and pid
  entry.planned = st.p.cases.size();
  entry.reused = st.resumed.reused;
  if (save.describe) save.describe(st.store->meta(), entry);
  // A file that cannot be written here is told, and the cases still run and are saved: their
  // records are the run, and the end of the session writes meta.json again (or, failing,
  // leaves the run unfinished for a resume to finish). The plan's keys (a million cases: 20 MB)
  // are written where long steps run; the study's notifications reach the store after.
  auto begin = [&st, &save, &entry]() -> std::vector<std::string> {
    std::vector<std::string> failed;
    if (auto e = st.store->write_files(save.files)) failed.push_back(e.message());
    if (auto e = st.store->begin_session(std::move(entry), store::keys_of(st.p.cases)))
      failed.push_back(e.message());
    return failed;
  };
  auto failures = co_await on_work(st, begin);
  for (auto& failed : failures) st.warn(std::move(failed));
  st.log->store = &*st.store;
  co_return std::nullopt;
}

// session_mode::execute: the cases with an artifact already are done.
void skip_executed(session_state& st) {
  if (st.stored.empty()) return;
  auto& resumed = st.resumed;
  if (resumed.records.empty()) resumed.records.resize(st.p.cases.size());
  std::vector<std::size_t> todo;
  for (auto i : resumed.todo) {
    if (st.stored.count(st.p.cases.key(i))) {
      resumed.records[i].state = case_state::executed;
      resumed.records[i].message = "executed earlier";
      ++resumed.reused;
      ++resumed.reused_states[static_cast<std::size_t>(case_state::executed)];
    } else {
      todo.push_back(i);
    }
  }
  resumed.todo = std::move(todo);
}

// The steps of opening between the study and the run: its capability, the plan, the refining
// hook, the artifacts, the run store.
asio::awaitable<std::optional<session_error>> plan_and_open(session_state& st) {
  auto& o = st.o;
  auto& init = st.conn->study();
  const char* need = o.mode == session_mode::execute ? "execute"
                     : o.mode == session_mode::score ? "score"
                                                     : nullptr;
  if (need && !init.has_capability(need))
    co_return make_session_error(
        session_errc::study_incapable,
        std::string(o.mode == session_mode::execute ? "executing" : "scoring") +
            " needs the study's '" + need + "' capability, and study '" + init.study +
            "' does not advertise it");
  // The fingerprints go into a run's meta.json or the artifacts' (a dry run keeps none): a
  // digest of every eval's listing, samples included, is not made for nothing.
  const bool fingerprinted = o.mode == session_mode::execute || o.save.has_value();
  auto plan_it = [&st, fingerprinted] {
    if (fingerprinted) st.fingerprints = store::listing_fingerprints(st.list);
    return plan_within(st.list, st.o.selection, st.o.max_cases);
  };
  auto planned = co_await on_work(st, plan_it);
  if (!planned) co_return std::move(planned.error());
  st.p = std::move(*planned);
  if (o.refine)
    if (auto refused = o.refine(st.p, st.list, o.policy)) co_return refused;
  if (o.mode != session_mode::run)
    if (auto e = open_artifacts(st)) co_return e;
  st.ledger->planned(st.p, st.list);
  if (o.save && o.mode != session_mode::execute) co_return co_await open_store(st);
  run_everything(st);
  co_return std::nullopt;
}

asio::awaitable<tl::expected<std::unique_ptr<session_state>, session_error>> open_steps(
    session_options options) {
  auto st = std::make_unique<session_state>();
  st->ex = co_await asio::this_coro::executor;
  st->o = std::move(options);
  auto& o = st->o;
  const auto keeps = o.mode == session_mode::execute ? keeping::artifacts
                     : o.save                        ? keeping::records
                                                     : keeping::nothing;
  st->ledger.emplace(keeps, o.kept_records, o.group_by);
  st->log->on_line = o.hooks.on_stderr_line;
  st->log->on_notification = o.hooks.on_notification;
  if (o.connection) {
    st->conn.emplace(std::move(o.connection->connection));
    st->list = std::move(o.connection->listing);
    o.connection.reset();
  } else {
    auto launch = logged(o.study, st->log, o.hooks);
    auto started = co_await start_study(std::move(launch));
    if (!started) {
      auto cs = co_await asio::this_coro::cancellation_state;
      if (cs.cancelled() != asio::cancellation_type::none)
        co_return tl::unexpected(
            make_session_error(session_errc::cancelled, "cancelled while the study started"));
      co_return tl::unexpected(study_error(started.error(), "the study could not start"));
    }
    st->conn.emplace(std::move(started->connection));
    st->list = std::move(started->listing);
    st->own_study = true;
  }
  if (o.hooks.on_study) o.hooks.on_study(st->conn->study(), st->conn->processes());
  // Whatever fails from here shuts a study the session started down, and frees the plan where
  // long steps run: a big one takes long to free (3.5 million cases: 0.1-0.5 s, more under
  // sanitizers), which would hold a server's executor.
  auto failed = co_await plan_and_open(*st);
  if (failed) {
    if (st->own_study) co_await st->conn->shutdown();
    if (o.work_executor && !st->p.cases.empty())
      asio::post(*o.work_executor, [p = std::move(st->p)]() mutable { p = plan::plan{}; });
    co_return tl::unexpected(std::move(*failed));
  }
  if (o.mode == session_mode::execute) skip_executed(*st);
  // The listing's samples were needed to plan and to fingerprint the run; after that only
  // group_by reads them (their metadata). A large run keeps its ids' bytes and 8 more per
  // sample less.
  if (o.group_by.empty())
    for (auto& e : st->list.evals) e.samples.clear();
  co_return std::move(st);
}

// A cancellation is an answer here (session_errc::cancelled), not an exception. Spawned on the
// session's executor (session::open), so the setting is this coroutine's own.
asio::awaitable<tl::expected<std::unique_ptr<session_state>, session_error>> open_state(
    session_options options) {
  co_await asio::this_coro::throw_if_cancelled(false);
  co_return co_await open_steps(std::move(options));
}

}  // namespace

session::session(std::unique_ptr<detail::session_state> s) : s_(std::move(s)) {}
session::session(session&&) noexcept = default;
session& session::operator=(session&&) noexcept = default;
session::~session() {
  // A session opened and never run still holds its study: shut it down on its executor.
  if (!s_ || s_->ran || !s_->own_study) return;
  try {
    asio::co_spawn(
        s_->ex, [c = *s_->conn]() mutable -> asio::awaitable<void> { co_await c.shutdown(); },
        asio::detached);
  } catch (...) {  // NOLINT(bugprone-empty-catch): no memory to start it; the handle kills it
  }
}

namespace {

// `op` run on `ex` and awaited from the caller's executor, whatever that is: the session's state,
// its hooks and the hosts it starts live on `ex`, which runs one handler at a time. co_spawn
// forwards the caller's cancellation there. A cancellation is an answer here, not an exception:
// the caller's own setting is given back.
template <class T>
asio::awaitable<T> awaited_on(asio::any_io_executor ex, asio::awaitable<T> op) {
  const bool throws = co_await asio::this_coro::throw_if_cancelled();
  co_await asio::this_coro::throw_if_cancelled(false);
  auto spawned = asio::co_spawn(std::move(ex), std::move(op), asio::use_awaitable);
  T out = co_await std::move(spawned);
  co_await asio::this_coro::throw_if_cancelled(throws);
  co_return out;
}

}  // namespace

asio::awaitable<tl::expected<session, session_error>> session::open(session_options o) {
  auto ex = detail::serial_executor(co_await asio::this_coro::executor);
  auto st = co_await awaited_on(std::move(ex), open_state(std::move(o)));
  if (!st) co_return tl::unexpected(std::move(st.error()));
  co_return session(std::move(*st));
}

const std::string& session::run_id() const {
  return s_->id;
}
const fs::path& session::folder() const {
  return s_->folder;
}
const plan::plan& session::plan() const {
  return s_->p;
}
const protocol::initialize_result& session::study() const {
  return s_->conn->study();
}
const protocol::list_result& session::listing() const {
  return s_->list;
}
const store::resume_plan& session::resumed() const {
  return s_->resumed;
}
bool session::saves(const schedule::case_record& r) const {
  return s_->ledger->saves(r);
}
void session::set_stop_label(std::string label) {
  std::lock_guard lock(s_->stop_label_mutex);
  s_->stop_label = std::move(label);
}
asio::any_io_executor session::executor() const {
  return s_->ex;
}

asio::awaitable<session_outcome> session::run() {
  co_return co_await awaited_on(s_->ex, run_steps());
}

namespace {

// The cases this session runs: the plan, or (a resume, an execute session that skips what has an
// artifact) a copy of its part still to run. A fresh run runs the plan itself: a copy of a large
// plan costs hundreds of bytes per case.
struct cases_to_run {
  plan::plan copy;
  const plan::plan* plan;
  const std::vector<std::size_t>* todo = nullptr;  // index in the plan of each case, if partial

  explicit cases_to_run(const session_state& st) : plan(&st.p) {
    if (st.resumed.todo.size() == st.p.cases.size()) return;
    copy.cases = st.p.cases.subset(st.resumed.todo);
    plan = &copy;
    todo = &st.resumed.todo;
  }
  cases_to_run(const cases_to_run&) = delete;  // `plan` may point into it
  cases_to_run& operator=(const cases_to_run&) = delete;
  std::size_t in_plan(std::size_t j) const { return todo ? (*todo)[j] : j; }
};

// The policy the plan runs with: the session's mode and the transcripts a score session scores (by
// index in `to_run`, kept in `transcripts`).
schedule::run_policy policy_of(session_state& st, const cases_to_run& to_run,
                               std::vector<json::object>& transcripts) {
  auto policy = st.o.policy;
  policy.kept_records = 0;  // the ledger keeps them
  if (st.o.mode == session_mode::execute) policy.op = schedule::operation::execute;
  if (st.o.mode == session_mode::score) {
    auto& cases = to_run.plan->cases;
    for (std::size_t j = 0; j < cases.size(); ++j) {
      auto* t = st.stored.at(cases.key(j)).if_contains("transcript");
      transcripts.push_back(t && t->is_object() ? t->get_object() : json::object{});
    }
    policy.op = schedule::operation::score;
    policy.transcript_for = [&transcripts](std::size_t j) { return transcripts[j]; };
  }
  return policy;
}

// What run_plan tells, passed to the ledger, the saver and the session's hooks.
schedule::run_hooks hooks_of(session_state& st, const cases_to_run& to_run,
                             detail::result_saver& saver) {
  auto& hooks = st.o.hooks;
  schedule::run_hooks run_hooks;
  run_hooks.on_start = [&hooks, &to_run](std::size_t j) {
    if (hooks.on_attempt) hooks.on_attempt(to_run.in_plan(j));
  };
  run_hooks.on_notification = [&st, &to_run](std::size_t j, const notification& n) {
    const auto key = st.p.cases.key(to_run.in_plan(j));
    st.log->event(&key, n);
  };
  run_hooks.on_result = [&st, &to_run, &saver](std::size_t j, const schedule::case_record& r) {
    auto i = to_run.in_plan(j);
    auto action = st.ledger->finished(i, r);
    if (st.o.hooks.on_case) st.o.hooks.on_case(i, r);
    if (action == detail::save_action::record) saver.record(st.p.cases, i, r);
    if (action == detail::save_action::artifact) {
      const auto key = st.p.cases.key(i);
      saver.artifact(i, key, st.artifacts->file_for(key), r);
    }
  };
  run_hooks.stop_after = [&st](std::size_t, const schedule::case_record&) {
    return st.ledger->stop();
  };
  run_hooks.on_sequential_study = hooks.on_sequential_study;
  return run_hooks;
}

// Runs the plan. This operation's cancellation (a Ctrl-C, a deadline, a dropped awaitable) stops
// the run as a terminal cancellation of run_plan does: it still completes with the report.
asio::awaitable<schedule::run_report> run_cases(session_state& st, const cases_to_run& to_run,
                                                const schedule::run_policy& policy,
                                                const schedule::run_hooks& run_hooks) {
  asio::cancellation_signal interrupt;
  auto cs = co_await asio::this_coro::cancellation_state;
  const bool cancelled_already = cs.cancelled() != asio::cancellation_type::none;
  auto slot = cs.slot();  // unconnected when the caller can never cancel
  if (slot.is_connected())
    slot.assign([&interrupt](asio::cancellation_type t) { interrupt.emit(t); });
  if (cancelled_already)
    asio::post(st.ex, [&interrupt] { interrupt.emit(asio::cancellation_type::terminal); });
  // Named: g++ 12 destroys a temporary in a co_await expression twice.
  auto running =
      asio::co_spawn(st.ex, st.conn->run_plan(*to_run.plan, policy, run_hooks),
                     asio::bind_cancellation_slot(interrupt.slot(), asio::use_awaitable));
  auto part = co_await std::move(running);
  if (slot.is_connected()) slot.clear();
  co_return part;
}

// Nothing can be saved (`why`): no case runs, as its result would be lost. Each stays not run.
schedule::run_report run_nothing(session_state& st, const cases_to_run& to_run, std::string why) {
  auto not_run = st.ledger->cannot_save(why);
  for (std::size_t j = 0; j < to_run.plan->cases.size(); ++j) {
    const auto i = to_run.in_plan(j);
    st.ledger->finished(i, not_run);
    if (st.o.hooks.on_case) st.o.hooks.on_case(i, not_run);
  }
  schedule::run_report part;
  part.stopped = schedule::stop_reason::requested;
  part.stop_message = std::move(why);
  return part;
}

// The end of the session's run, where long steps run (seconds over a big run): the summaries,
// and for a saved session its entry in meta.json, the study's stderr and the run's report files.
void end_run(session_state& st, session_outcome& out, const std::string& stderr_text) {
  auto& ledger = *st.ledger;
  auto& rep = out.report;
  out.summary = ledger.finish_plan();
  if (!st.store) return;
  ledger.close(st.store->session(), rep, st.stop_label_now());
  if (auto e = st.store->append_stderr(stderr_text)) st.warnings.push_back(e.message());
  // The run's report covers every saved case, also those this session's selection left out.
  // finish_run sets the report's seconds to every session's; the caller's stay this one's.
  const auto seconds = rep.seconds;
  if (auto whole = ledger.finish_whole()) {
    out.unfinished = report::finish_run(*st.store, *ledger.whole_plan(), rep, *whole);
    out.run_summary = aggregate::summary_json(*whole, rep);
  } else {
    out.unfinished = report::finish_run(*st.store, st.p, rep, out.summary);
    out.run_summary = aggregate::summary_json(out.summary, rep);
  }
  rep.seconds = seconds;
}

// The outcome of a run that ended as `part`, before its end is written.
session_outcome outcome_of(session_state& st, schedule::run_report part) {
  session_outcome out;
  out.run_id = st.id;
  out.folder = st.folder;
  out.reused = st.resumed.reused;
  out.ran = st.ledger->ran();
  out.report = std::move(part);
  st.ledger->end(out.report);
  auto& report = out.report;
  report.run_id = st.id;
  report.study = st.conn->study().study;
  report.started =
      st.store ? st.store->meta().started
               : store::iso_utc(std::time(nullptr) - static_cast<std::time_t>(report.seconds));
  out.unsaved = st.ledger->take_unsaved();
  return out;
}

}  // namespace

asio::awaitable<session_outcome> session::run_steps() {
  // A cancellation stops the run, which still ends as it should: no co_await may throw for it.
  co_await asio::this_coro::throw_if_cancelled(false);
  auto& st = *s_;
  st.ran = true;
  auto& ledger = *st.ledger;
  cases_to_run to_run(st);
  std::vector<json::object> transcripts;  // score: by to_run index
  const auto policy = policy_of(st, to_run, transcripts);

  // Results are saved off the event loop, and a result that cannot be saved stops the run:
  // carrying on would lose more of them.
  auto saver = std::make_shared<detail::result_saver>(st.ex, ledger, st.o.hooks.on_save_failed,
                                                      st.o.hooks.on_saved);
  // However this frame ends, what is still queued for the saver does nothing.
  struct forget_saves {
    detail::result_saver& saver;
    ~forget_saves() { saver.forget(); }
  } forget{*saver};
  std::unique_ptr<store::run_store::case_writer> writer;
  std::optional<std::string> unsaveable;  // why nothing can be saved
  if (st.store) {
    if (auto w = st.store->writer()) {
      writer = std::move(*w);
      saver->use(writer.get());
    } else {
      unsaveable = w.error().message();
      if (st.o.hooks.on_save_failed) st.o.hooks.on_save_failed("", *unsaveable);
    }
  } else if (st.o.mode == session_mode::execute) {
    saver->use(*st.artifacts);
  }
  // Records a session holds from before its run (the artifacts an execute session skips).
  ledger.held(st.resumed.records, st.resumed.todo);
  std::vector<schedule::case_record>().swap(st.resumed.records);

  const auto run_hooks = hooks_of(st, to_run, *saver);
  schedule::run_report part;
  if (unsaveable)
    part = run_nothing(st, to_run, *unsaveable);
  else
    part = co_await run_cases(st, to_run, policy, run_hooks);
  boost::system::error_code ignored;
  co_await saver->async_settle(asio::redirect_error(asio::use_awaitable, ignored));
  if (st.own_study) co_await st.conn->shutdown();

  auto out = outcome_of(st, std::move(part));
  // The study's stderr reader may still run (a child of the study can hold it open): its text
  // is taken now and nothing more reaches the store or the hooks.
  auto stderr_text = st.log->text();
  st.log->closed = true;
  st.log->store = nullptr;
  auto end_it = [&st, &out, &stderr_text] {
    end_run(st, out, stderr_text);
    return 0;
  };
  auto before = st.warnings.size();
  co_await on_work(st, end_it);
  if (st.o.hooks.on_warning)
    for (auto i = before; i < st.warnings.size(); ++i) st.o.hooks.on_warning(st.warnings[i]);
  saver->forget();
  writer.reset();    // before the store it writes into
  st.store.reset();  // the run's lock is released before the session counts as ended
  out.warnings = std::move(st.warnings);
  out.plan = std::move(st.p);
  out.study = st.conn->study();
  out.listing = std::move(st.list);
  co_return out;
}

asio::awaitable<tl::expected<session_outcome, session_error>> run_session(session_options o) {
  auto s = co_await session::open(std::move(o));
  if (!s) co_return tl::unexpected(std::move(s.error()));
  co_return co_await s->run();
}

}  // namespace mira
