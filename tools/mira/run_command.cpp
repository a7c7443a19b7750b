// `mira run` and `mira score`: named steps over the library — plan, open or resume the run store,
// run the plan through run_plan, save, report, exit code. Also executes without scoring into an
// artifacts directory (--execute-only) and scores such artifacts (`mira score`).
#include "commands.hpp"
#include "config_step.hpp"
#include "experiment.hpp"
#include "flags.hpp"
#include "help.hpp"
#include "session.hpp"
#include "shard_step.hpp"

#include <mira/aggregate/summary.hpp>
#include <mira/protocol/json_text.hpp>
#include <mira/report/render.hpp>
#include <mira/schedule/run_plan.hpp>
#include <mira/store/artifacts.hpp>
#include <mira/store/batch_writer.hpp>
#include <mira/store/files.hpp>
#include <mira/store/records.hpp>
#include <mira/store/run_store.hpp>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json/serialize.hpp>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <random>

namespace mira::cli {

namespace asio = boost::asio;
namespace json = boost::json;
using schedule::case_state;

namespace {

enum class mode { run, execute_only, score };

// Shuts the study down on every way out of a command: awaited on the normal path, and when the
// command leaves early, started on a copy of the handle (or pool) so the io_context finishes it.
class study_guard {
 public:
  study_guard(study_processes& study, asio::any_io_executor ex) : study_(&study), ex_(ex) {}
  study_guard(const study_guard&) = delete;
  study_guard& operator=(const study_guard&) = delete;
  ~study_guard() {
    if (!study_) return;
    asio::co_spawn(
        ex_, [s = *study_]() mutable -> asio::awaitable<void> { co_await s.shutdown(); },
        asio::detached);
  }
  asio::awaitable<void> shutdown() {
    if (auto* s = std::exchange(study_, nullptr)) co_await s->shutdown();
  }

 private:
  study_processes* study_;  // the live study: a restarted one replaces what it points to
  asio::any_io_executor ex_;
};

// A word as a POSIX shell reads it back: bare when it is plain, else single-quoted.
std::string shell_word(const std::string& w) {
  if (!w.empty() && w.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                        "0123456789@%+=:,./_-") == std::string::npos)
    return w;
  std::string out = "'";
  for (char c : w) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// The command that resumes this run: the same arguments, with --resume ID (and without
// --shard: a resumed shard run keeps its own).
std::string resume_command(std::vector<std::string> args, const std::string& id) {
  if (auto sh = std::find(args.begin(), args.end(), "--shard"); sh != args.end())
    args.erase(sh, sh + 1 == args.end() ? sh + 1 : sh + 2);
  auto it = std::find(args.begin(), args.end(), "--resume");
  if (it != args.end() && it + 1 != args.end())
    *(it + 1) = id;
  else
    args.insert(args.begin(), {"--resume", id});
  std::string out = "mira run";
  for (auto& w : args) out += " " + shell_word(w);
  return out;
}

// The study must advertise what the mode sends.
bool study_can(const opened& study, mode m) {
  const char* need = m == mode::execute_only ? "execute" : m == mode::score ? "score" : nullptr;
  if (!need || study.init.has_capability(need)) return true;
  std::fprintf(stderr,
               "mira: %s needs the study's '%s' capability, and study '%s' does not advertise it\n",
               m == mode::execute_only ? "--execute-only" : "mira score", need,
               printable(study.init.study).c_str());
  return false;
}

// The exit code of a finished command, from how it ended. One place, so `run`, `score` and a
// resumed run agree.
int exit_code_for(const schedule::run_report& report, const aggregate::summary& s,
                  bool saving_failed) {
  using schedule::stop_reason;
  if (report.stopped == stop_reason::interrupted) return exit_interrupted;
  if (saving_failed || report.stopped == stop_reason::study_failed) return exit_host_error;
  if (report.stopped == stop_reason::budget || report.stopped == stop_reason::deadline)
    return exit_stopped;
  if (s.count(case_state::failed) + s.count(case_state::error) > 0) return exit_failed;
  return exit_ok;
}

// Step: the execute artifacts this command writes (--execute-only) or scores (`mira score`),
// with the plan cut down to what can be scored. Nothing for a plain run.
struct artifacts_input {
  std::optional<store::artifact_dir> dir;
  std::map<std::string, json::object> stored;
};

std::optional<artifacts_input> open_artifacts(const run_args& a, mode m, const opened& study,
                                              plan::plan& p, int& rc) {
  artifacts_input in;
  if (m == mode::run) return in;
  auto dir = m == mode::execute_only ? store::artifact_dir::create(a.artifacts)
                                     : store::artifact_dir::open(a.artifacts);
  if (!dir) {
    std::fprintf(stderr, "mira: %s\n", printable(dir.error()).c_str());
    rc = m == mode::score ? exit_usage : exit_host_error;
    return std::nullopt;
  }
  in.dir = std::move(*dir);
  std::vector<std::string> unreadable;
  in.stored = in.dir->load(&unreadable);
  for (auto& u : unreadable)
    std::fprintf(stderr, "mira: warning: cannot read the artifact %s; %s\n", printable(u).c_str(),
                 m == mode::execute_only ? "that case is executed again" : "it is left out");
  if (auto meta = in.dir->load_meta()) {
    auto* made_by = meta->if_contains("study");
    if (made_by && made_by->is_string() && made_by->get_string() != study.init.study)
      std::fprintf(stderr, "mira: warning: the artifacts in %s were made by study '%s'\n",
                   printable(a.artifacts).c_str(), printable(made_by->get_string()).c_str());
  }
  if (m == mode::score) {
    plan::plan scorable;
    for (auto& c : p.cases)
      if (in.stored.count(c.key)) scorable.cases.push_back(c);
    if (scorable.cases.size() < p.cases.size())
      std::fprintf(stderr,
                   "mira: %zu of %zu planned case(s) have no artifact in %s; scoring the other "
                   "%zu\n",
                   p.cases.size() - scorable.cases.size(), p.cases.size(),
                   printable(a.artifacts).c_str(), scorable.cases.size());
    if (scorable.cases.empty()) {
      std::fprintf(stderr, "mira: nothing to score: no artifact in %s matches the selection\n",
                   printable(a.artifacts).c_str());
      rc = exit_usage;
      return std::nullopt;
    }
    scorable.evals = std::move(p.evals);
    p = std::move(scorable);
  } else if (auto ec = in.dir->save_meta(
                 json::object{{"study", study.init.study},
                              {"study_version", study.init.study_version},
                              {"host_version", version},
                              {"fingerprints", store::listing_fingerprints(study.list)}})) {
    std::fprintf(stderr, "mira: warning: cannot write %s/meta.json: %s\n",
                 printable(a.artifacts).c_str(), ec.message().c_str());
  }
  return in;
}

// Step: the run store of this run — a new one, the one being resumed (locked), or none for a
// dry run or --execute-only — and what a resume reuses.
struct store_input {
  std::optional<store::run_store> store;
  store::resume_plan resumed;  // for a fresh run: every case to run, nothing reused
};

std::optional<store_input> open_store(const std::vector<std::string>& args, const run_args& a,
                                      mode m, const opened& study, const plan::plan& p,
                                      const std::optional<store::shard_info>& shard, int& rc) {
  if (auto wrong = experiment_study_mismatch(study.init.study)) {
    std::fprintf(stderr, "mira: %s\n", printable(*wrong).c_str());
    rc = exit_usage;
    return std::nullopt;
  }
  store_input in;
  auto fresh = [&] {
    in.resumed.todo.resize(p.cases.size());
    for (std::size_t i = 0; i < p.cases.size(); ++i) in.resumed.todo[i] = i;
  };
  if (a.dry_run || m == mode::execute_only) {
    fresh();
    return in;
  }
  if (a.resume.empty()) {
    std::random_device rd;
    auto id = store::new_run_id(std::chrono::system_clock::now(),
                                static_cast<std::uint16_t>(rd() & 0xffff));
    auto s = store::run_store::create(a.results_dir, id, a.store_layout);
    if (!s) {
      std::fprintf(stderr, "mira: %s\n", printable(s.error().message()).c_str());
      rc = exit_host_error;
      return std::nullopt;
    }
    in.store = std::move(*s);
    fresh();
  } else {
    auto s = store::run_store::open(a.results_dir, a.resume);
    if (!s) {
      std::fprintf(stderr, "mira: --resume: %s\n", printable(s.error().message()).c_str());
      // Another process holding the run is a host condition, not a usage mistake.
      rc = exit_for(s.error());
      return std::nullopt;
    }
    in.store = std::move(*s);
    auto saved = in.store->load();
    for (auto& u : saved.unreadable)
      std::fprintf(stderr, "mira: warning: cannot read %s; that case runs again\n",
                   printable(u).c_str());
    for (auto& u : saved.superseded)
      std::fprintf(stderr, "mira: warning: %s\n", printable(u).c_str());
    store::resume_options o{a.retry_errors, a.retry_failed, a.allow_other_study};
    auto decided = store::plan_resume(saved, p, study.init, store::listing_fingerprints(study.list),
                                      a.selection.seed, o);
    if (!decided) {
      std::fprintf(stderr, "mira: --resume: %s (--allow-other-study resumes anyway)\n",
                   printable(decided.error().message()).c_str());
      rc = exit_usage;
      return std::nullopt;
    }
    in.resumed = std::move(*decided);
    for (auto& w : in.resumed.warnings)
      std::fprintf(stderr, "mira: warning: %s\n", printable(w).c_str());
    std::fprintf(stderr, "resuming run %s: %zu of %zu case(s) already saved\n", a.resume.c_str(),
                 in.resumed.reused, p.cases.size());
  }
  // Who made the run, kept from the first session on; this session appended.
  auto& meta = in.store->meta();
  if (meta.study.empty() || meta.made_by_rust_host) {
    meta.study = study.init.study;
    meta.study_version = study.init.study_version;
  }
  if (!meta.made_by_rust_host) meta.initialize = study.init.raw;
  if (meta.study_command.empty()) meta.study_command = a.study;
  if (meta.host.empty()) meta.host = json::object{{"name", "mira-cpp"}, {"version", version}};
  if (meta.environment.empty() && a.environment_enabled)
    meta.environment = environment_json(a.environment_labels);
  meta.fingerprints = store::listing_fingerprints(study.list);
  if (meta.study_env.empty()) {
    json::array env_names;  // names only: values (API keys) never reach a run folder
    for (auto& entry : a.study_env) env_names.emplace_back(entry.substr(0, entry.find('=')));
    meta.study_env = json::object{{"cleared", a.study_env_clear}, {"passed", std::move(env_names)}};
  }
  if (shard) store::set_shard(meta, *shard);
  if (m == mode::score)
    meta.extra["scored_artifacts"] = std::filesystem::absolute(a.artifacts).string();
  if (auto labelled = experiment_annotate(meta, in.store->path()); !labelled) {
    std::fprintf(stderr, "mira: %s\n", printable(labelled.error()).c_str());
    rc = exit_host_error;
    return std::nullopt;
  }
  store::run_session session;  // begin_session adds the start time, host and pid
  session.argv = argv_without_secrets(args);
  session.config = config_json(args, a);
  session.planned = p.cases.size();
  session.reused = in.resumed.reused;
  if (auto e = in.store->begin_session(std::move(session)))
    std::fprintf(stderr, "mira: warning: %s\n", printable(e.message()).c_str());
  return in;
}

// Results are saved off the event loop, through the store's writer (or, for --execute-only,
// a batch_writer into the artifacts directory). A result that cannot be saved stops the run:
// carrying on would lose more of them. Shared with the writers' callbacks by ownership: they may
// be posted after the run's frame is gone.
struct save_failures {
  std::vector<std::string> keys;
  std::optional<std::string> first;  // stops the run
};

// Step: the plan's cases to run through run_plan, with progress, Ctrl-C handling, saving and
// the study's notifications. Returns the session's report over the whole plan (reused cases
// included, in plan order).
asio::awaitable<schedule::run_report> run_session(const run_args& a, mode m, opened& study,
                                                  const plan::plan& p, store_input& st,
                                                  artifacts_input& arts,
                                                  std::shared_ptr<save_failures> failures) {
  auto ex = co_await asio::this_coro::executor;
  auto& resumed = st.resumed;
  const bool stream_jsonl = a.format == "jsonl" && a.out.empty();
  if (stream_jsonl)  // reused cases first; the rest stream as they end
    for (std::size_t i = 0; i < resumed.records.size(); ++i)
      if (resumed.records[i].attempts > 0 || resumed.records[i].state != case_state::cancelled)
        std::cout << store::case_line(p.cases[i], resumed.records[i]) << '\n';

  // --execute-only: cases with an artifact already are done.
  if (m == mode::execute_only && !arts.stored.empty()) {
    std::vector<std::size_t> todo;
    if (resumed.records.empty()) resumed.records.resize(p.cases.size());
    for (auto i : resumed.todo) {
      if (arts.stored.count(p.cases[i].key)) {
        resumed.records[i].state = case_state::executed;
        resumed.records[i].message = "executed earlier";
        ++resumed.reused;
      } else {
        todo.push_back(i);
      }
    }
    resumed.todo = std::move(todo);
    std::fprintf(stderr, "%zu of %zu case(s) already have an artifact in %s\n", resumed.reused,
                 p.cases.size(), printable(a.artifacts).c_str());
  }
  // A fresh run runs the plan itself; only a partial one is copied (a copy of a large plan
  // costs hundreds of bytes per case).
  const bool partial = resumed.todo.size() < p.cases.size();
  plan::plan todo_plan;
  if (partial)
    for (auto i : resumed.todo) todo_plan.cases.push_back(p.cases[i]);
  const plan::plan& to_run = partial ? todo_plan : p;
  std::vector<json::object> transcripts;  // score: by to_run index
  if (m == mode::score)
    for (auto& c : to_run.cases) {
      auto* t = arts.stored.at(c.key).if_contains("transcript");
      transcripts.push_back(t && t->is_object() ? t->get_object() : json::object{});
    }
  auto full_index = [&](std::size_t j) { return partial ? resumed.todo[j] : j; };

  auto policy = a.policy;
  if (m == mode::execute_only) policy.op = schedule::operation::execute;
  if (m == mode::score) {
    policy.op = schedule::operation::score;
    policy.transcript_for = [&](std::size_t j) { return transcripts[j]; };
  }
  policy.respawn = [&]() -> asio::awaitable<tl::expected<host_handle, error>> {
    auto h = co_await restart_study(a, study.init);
    if (h) study.host = *h;  // so the final shutdown reaches the live one
    co_return h;
  };

  std::unique_ptr<store::run_store::case_writer> writer;
  std::optional<store::batch_writer> artifact_writer;
  if (st.store) {
    auto w = st.store->writer();
    if (!w) {
      std::fprintf(stderr, "mira: %s\n", printable(w.error().message()).c_str());
      failures->first = w.error().message();
    } else {
      writer = std::move(*w);
    }
  } else if (arts.dir && m == mode::execute_only) {
    artifact_writer.emplace(arts.dir->path());
  }
  if (failures->first) {
    // Nothing could be saved: no case runs, as its result would be lost. Each stays not run.
    schedule::run_report none;
    none.cases.resize(to_run.cases.size());
    for (auto& c : none.cases) {
      c.state = case_state::cancelled;
      c.message = "not run: " + *failures->first;
    }
    none.stopped = schedule::stop_reason::requested;
    none.stop_message = *failures->first;
    co_return store::session_report(p, resumed, std::move(none));
  }
  // `file_of` is asked on the writer's thread when a save fails: the file that failed.
  auto on_saved = [ex, failures](std::string key, std::string what,
                                 std::function<std::filesystem::path()> file_of) {
    return [ex, failures, key = std::move(key), what = std::move(what),
            file_of = std::move(file_of)](boost::system::error_code ec) {
      if (!ec) return;
      auto message =
          "cannot save " + what + key + " to " + file_of().string() + ": " + ec.message();
      asio::post(ex, [failures, key, message = std::move(message)]() mutable {
        failures->keys.push_back(key);
        stderr_line("mira: error: " + printable(message));
        if (!failures->first) failures->first = std::move(message);
      });
    };
  };

  schedule::run_hooks hooks;
  hooks.on_notification = [&](std::size_t j, const notification& n) {
    auto& key = p.cases[full_index(j)].key;
    the_log().event(&key, n);
    if (n.method != "log") return;
    auto* msg = n.params.if_contains("message");
    if (msg && msg->is_string())
      stderr_line("  study [" + printable(key) + "]: " + printable(msg->get_string()));
  };
  auto& progress = the_progress();
  progress.total = to_run.cases.size();
  hooks.on_start = [&](std::size_t) { ++progress.starts; };
  hooks.on_result = [&](std::size_t j, const schedule::case_record& r) {
    progress.finished_attempts += static_cast<std::size_t>(r.attempts);
    ++progress.done;
    progress.passed += r.state == case_state::passed || r.state == case_state::executed;
    progress.failed += r.state == case_state::failed || r.state == case_state::error;
    progress.na += r.state == case_state::na;
    auto& c = p.cases[full_index(j)];
    if (artifact_writer && r.has_result() &&
        (r.state == case_state::executed || r.state == case_state::skipped)) {
      auto artifact = store::result_object(r);
      artifact["key"] = c.key;
      auto file = arts.dir->file_for(c.key);
      artifact_writer->submit(file, protocol::to_json_text(artifact) + "\n",
                              on_saved(c.key, "the artifact of ", [file] { return file; }));
    }
    // A cancelled case is not finished: a resumed run runs it.
    const bool saving = writer && r.state != case_state::cancelled;
    if (!saving && !stream_jsonl) return;  // the record is only built to be written
    auto line = store::case_line(c, r);
    if (stream_jsonl) std::cout << line << '\n' << std::flush;
    if (saving)
      writer->submit(c.key, std::move(line),
                     on_saved(c.key, "the result of ",
                              [w = writer.get(), key = c.key] { return w->file_of(key); }));
  };
  hooks.stop_after = [failures](std::size_t, const schedule::case_record&) {
    return failures->first;
  };

  // Ctrl-C (or SIGTERM): the first stops the run (in-flight cases are sent `cancel`, finished
  // ones are saved and reported, the resume command is printed); the second quits at once.
  asio::cancellation_signal interrupt;
  asio::signal_set signals(ex, SIGINT, SIGTERM);
  int presses = 0;
  std::function<void()> arm = [&] {
    signals.async_wait([&](boost::system::error_code ec, int) {
      if (ec) return;
      if (++presses > 1) std::_Exit(exit_interrupted);
      std::fprintf(stderr,
                   "\nmira: interrupted: cancelling the cases in flight (again to quit at once)\n");
      interrupt.emit(asio::cancellation_type::terminal);
      arm();
    });
  };
  arm();
  // The progress ticker runs until the run ends.
  progress.t0 = std::chrono::steady_clock::now();
  progress.active = true;
  asio::steady_timer ticker(ex);
  auto period = progress.tty
                    ? std::chrono::duration_cast<schedule::duration>(std::chrono::milliseconds(500))
                    : a.heartbeat;
  std::function<void()> tick = [&] {
    ticker.expires_after(period);
    ticker.async_wait([&](boost::system::error_code ec) {
      if (ec || !progress.active) return;
      progress.draw();
      tick();
    });
  };
  tick();
  auto part =
      co_await asio::co_spawn(ex, run_study(study.host, to_run, policy, hooks),
                              asio::bind_cancellation_slot(interrupt.slot(), asio::use_awaitable));
  if (writer) writer->drain();
  if (artifact_writer) artifact_writer->drain();
  co_await asio::post(ex, asio::use_awaitable);  // the save failures they reported, if any
  signals.cancel();
  progress.active = false;
  progress.clear();
  ticker.cancel();

  co_return store::session_report(p, resumed, std::move(part));
}

// Step: the end of a saved session — the study's stderr, report.json and report.html over every
// case of the run, meta.json with the session's end — and what to tell the user. False when the
// run folder could not be finished (its report files or meta.json not written): a failed run.
bool save_session(const std::vector<std::string>& args, const run_args& a, const opened& study,
                  const plan::plan& p, schedule::run_report& report, store_input& st,
                  const aggregate::summary& session_summary) {
  auto& s = *st.store;
  auto& session = s.session();
  session.seconds = report.seconds;
  session.ran = 0;
  for (auto i : st.resumed.todo) session.ran += report.cases[i].state != case_state::cancelled;
  if (report.stopped != schedule::stop_reason::none)
    session.stopped = std::string(to_string(report.stopped));
  if (auto e = s.append_stderr(the_log().stderr_text()))
    std::fprintf(stderr, "mira: warning: %s\n", printable(e.message()).c_str());
  // The run's report covers every saved case, also those this session's selection left out.
  auto whole = store::whole_run(p, report, st.resumed);
  auto& whole_plan = whole ? whole->first : p;
  auto& whole_report = whole ? whole->second : report;
  auto whole_summary =
      whole ? aggregate::summarize(whole_plan, whole_report.cases, &study.list, a.group_by)
            : session_summary;
  auto failed = report::finish_run(s, whole_plan, whole_report, whole_summary);
  if (failed)
    std::fprintf(stderr,
                 "mira: error: cannot finish run %s: %s (once the file can be written, resume "
                 "the run to finish it)\n",
                 s.id().c_str(), printable(failed.message()).c_str());
  else
    std::fprintf(stderr, "saved run %s to %s\n", s.id().c_str(), s.path().c_str());
  if (failed || report.stopped != schedule::stop_reason::none ||
      session_summary.count(case_state::cancelled) > 0)
    std::fprintf(stderr, "resume with: %s\n", printable(resume_command(args, s.id())).c_str());
  return !failed;
}

int run_cases(const std::vector<std::string>& args, run_args a, mode m) {
  return run_io([&](int& rc) -> asio::awaitable<void> {
    auto pl = co_await open_and_plan(a, rc);
    if (!pl) co_return;
    auto& study = pl->study;
    auto& p = pl->p;
    study_guard guard(study.host, co_await asio::this_coro::executor);
    if (!study_can(study, m)) {
      rc = exit_usage;
      co_return;
    }
    std::optional<store::shard_info> shard;
    if (!select_shard(a, p, shard, rc)) co_return;
    if (p.cases.empty()) std::fprintf(stderr, "mira: no cases matched the selection\n");
    auto timeouts = planned_timeout(a, a.project, study.list, p);
    auto as_duration = [](std::optional<double> s) -> std::optional<schedule::duration> {
      if (!s) return std::nullopt;
      return std::chrono::duration_cast<schedule::duration>(std::chrono::duration<double>(*s));
    };
    if (timeouts.by_target.empty()) {
      a.policy.case_timeout = as_duration(timeouts.common);
    } else {
      // Each target its own `[targets.LABEL] timeout`: one lookup per attempt, by case index.
      std::vector<std::optional<schedule::duration>> per_case(p.cases.size());
      for (std::size_t i = 0; i < p.cases.size(); ++i)
        per_case[i] = as_duration(timeouts.by_target.find(p.cases[i].params.target.str())->second);
      a.policy.case_timeout_for = [per_case = std::move(per_case)](std::size_t i) {
        return per_case[i];
      };
    }
    auto arts = open_artifacts(a, m, study, p, rc);
    if (!arts) co_return;
    auto st = open_store(args, a, m, study, p, shard, rc);
    if (!st) co_return;
    the_log().store = st->store ? &*st->store : nullptr;
    // The listing's samples were needed to plan and to fingerprint the run; after that only
    // --group-by reads them (their metadata). A large run keeps about 70 bytes per sample less.
    if (a.group_by.empty())
      for (auto& e : study.list.evals) std::vector<protocol::sample_info>().swap(e.samples);

    auto failures = std::make_shared<save_failures>();
    auto report = co_await run_session(a, m, study, p, *st, *arts, failures);
    auto s = aggregate::summarize(p, report.cases, &study.list, a.group_by);
    bool written = emit_report(a, p, report, s, a.format == "jsonl" && a.out.empty());
    std::fflush(stdout);  // the report before what stderr says about it
    co_await guard.shutdown();
    const bool finished = !st->store || save_session(args, a, study, p, report, *st, s);
    the_log().store = nullptr;
    if (arts->dir && m == mode::execute_only) {
      std::fprintf(stderr, "executed %zu case(s) in this session; artifacts in %s\n",
                   s.count(case_state::executed) - st->resumed.reused,
                   printable(a.artifacts).c_str());
      std::string study_cmd;
      for (auto& word : a.study) study_cmd += " " + shell_word(word);
      std::fprintf(stderr, "score them with: mira score --artifacts %s --%s\n",
                   printable(shell_word(a.artifacts)).c_str(), printable(study_cmd).c_str());
    }
    auto& unsaved = failures->keys;
    if (!unsaved.empty()) {
      std::string keys;
      for (auto& k : unsaved) keys += "\n  " + printable(k);
      std::fprintf(stderr,
                   "mira: error: %zu finished case(s) could not be saved (their results are in "
                   "the report above):%s\n",
                   unsaved.size(), keys.c_str());
    }
    rc = exit_code_for(report, s,
                       !unsaved.empty() || !written || !finished || failures->first.has_value());
  });
}

}  // namespace

int cmd_run(const std::vector<std::string>& args) {
  auto a = parse_args(command::run, args);
  if (a.help) return std::fputs(command_help(command::run).c_str(), stdout), exit_ok;
  if (!a.experiment.empty()) return run_experiment(args, a);
  prepare(command::run, a);
  auto m = a.execute_only ? mode::execute_only : mode::run;
  return run_cases(args, std::move(a), m);
}

int cmd_score(const std::vector<std::string>& args) {
  auto a = parse_args(command::score, args);
  if (a.help) return std::fputs(command_help(command::score).c_str(), stdout), exit_ok;
  prepare(command::score, a);
  return run_cases(args, std::move(a), mode::score);
}

}  // namespace mira::cli
