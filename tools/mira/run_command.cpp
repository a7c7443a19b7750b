// `mira run` and `mira score`: plan, schedule through run_plan, save the run folder, report.
// Also resumes a saved run (re-running errors or failures when asked), executes without scoring
// into an artifacts directory (--execute-only), and scores such artifacts (`mira score`).
#include "commands.hpp"
#include "help.hpp"
#include "session.hpp"

#include <mira/aggregate/summary.hpp>
#include <mira/schedule/run_plan.hpp>
#include <mira/store/artifacts.hpp>
#include <mira/store/batch_writer.hpp>
#include <mira/store/files.hpp>
#include <mira/store/run_folder.hpp>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
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

// The run folder of this run: a new one, the one being resumed, or none for --dry-run.
// Prints why and sets rc when it cannot be had.
std::optional<store::run_folder> run_folder_for(const run_args& a, const opened& study, bool& ok) {
  ok = true;
  if (a.dry_run) return std::nullopt;
  if (!a.resume.empty()) {
    auto f = store::run_folder::open(a.results_dir, a.resume);
    if (!f) {
      std::fprintf(stderr, "mira: --resume: %s\n", printable(f.error()).c_str());
      ok = false;
      return std::nullopt;
    }
    if (auto meta = f->load_meta()) {
      auto* s = meta->if_contains("study");
      auto* name = s && s->is_object() ? s->get_object().if_contains("study") : nullptr;
      if (name && name->is_string() && name->get_string() != study.init.study) {
        std::fprintf(stderr,
                     "mira: --resume: run %s was made by study '%s', this is '%s' "
                     "(--allow-other-study resumes anyway)\n",
                     a.resume.c_str(), printable(name->get_string()).c_str(),
                     printable(study.init.study).c_str());
        if (!a.allow_other_study) {
          ok = false;
          return std::nullopt;
        }
      }
      auto* study_version =
          s && s->is_object() ? s->get_object().if_contains("study_version") : nullptr;
      if (study_version && study_version->is_string() &&
          study_version->get_string() != study.init.study_version)
        std::fprintf(stderr, "mira: warning: run %s was made by study version %s, this is %s\n",
                     a.resume.c_str(), printable(study_version->get_string()).c_str(),
                     printable(study.init.study_version).c_str());
      auto* config = meta->if_contains("config");
      auto* sel =
          config && config->is_object() ? config->get_object().if_contains("selection") : nullptr;
      auto* seed = sel && sel->is_object() ? sel->get_object().if_contains("seed") : nullptr;
      auto now_seed = a.selection.seed ? json::value(*a.selection.seed) : json::value(nullptr);
      if (seed && *seed != now_seed)
        std::fprintf(stderr,
                     "mira: warning: run %s was made with --seed %s, this run uses %s: saved "
                     "trials keep their old seeds\n",
                     a.resume.c_str(), json::serialize(*seed).c_str(),
                     json::serialize(now_seed).c_str());
      auto* saved = meta->if_contains("fingerprints");
      auto now = fingerprints(study.list);
      if (saved && saved->is_object())
        for (auto& [eval, hash] : now)
          if (auto* old = saved->get_object().if_contains(eval); old && *old != hash)
            std::fprintf(stderr, "mira: warning: eval '%s' changed since run %s was saved\n",
                         printable(eval).c_str(), a.resume.c_str());
    }
    return std::move(*f);
  }
  std::random_device rd;
  auto id = store::new_run_id(std::chrono::system_clock::now(),
                              static_cast<std::uint16_t>(rd() & 0xffff));
  auto f = store::run_folder::create(a.results_dir, id);
  if (!f) {
    std::fprintf(stderr, "mira: %s\n", printable(f.error()).c_str());
    ok = false;
    return std::nullopt;
  }
  return std::move(*f);
}

std::optional<double> seconds_of(const std::optional<schedule::duration>& d) {
  if (!d) return std::nullopt;
  return std::chrono::duration<double>(*d).count();
}

json::value optional_json(const std::optional<double>& v) {
  return v ? json::value(*v) : json::value(nullptr);
}

json::array strings_json(const std::vector<std::string>& v) {
  json::array out;
  for (auto& s : v) out.emplace_back(s);
  return out;
}

// The effective configuration: what a later reader needs to know how the run was made.
json::object config_json(const std::vector<std::string>& host_args, const run_args& a) {
  auto& sel = a.selection;
  json::object axes;
  for (auto& [name, globs] : sel.axes) {
    auto& slot = axes[name];
    if (!slot.is_array()) slot = json::array{};
    slot.as_array().push_back(strings_json(globs));
  }
  json::object providers;
  for (auto& [name, n] : a.policy.concurrency.provider_limits) providers[name] = n;
  auto& pol = a.policy;
  // --study-env values may be secrets: only their names are kept.
  json::array argv;
  for (std::size_t i = 0; i < host_args.size(); ++i) {
    bool env_value = i > 0 && host_args[i - 1] == "--study-env";
    argv.emplace_back(env_value ? host_args[i].substr(0, host_args[i].find('=')) : host_args[i]);
  }
  return {{"argv", std::move(argv)},
          {"selection",
           json::object{{"filter", sel.filter},
                        {"evals", strings_json(sel.evals)},
                        {"samples", strings_json(sel.samples)},
                        {"targets", strings_json(sel.targets)},
                        {"tags", strings_json(sel.tags)},
                        {"axes", std::move(axes)},
                        {"trials", sel.trials ? json::value(*sel.trials) : json::value(nullptr)},
                        {"seed", sel.seed ? json::value(*sel.seed) : json::value(nullptr)}}},
          {"max_concurrent", pol.concurrency.max_concurrent},
          {"procs", a.procs},
          {"provider_concurrency", std::move(providers)},
          {"adaptive", pol.concurrency.adaptive},
          {"max_retries", pol.retry.max_retries},
          {"max_restarts", pol.max_restarts},
          {"timeout_s", optional_json(seconds_of(pol.case_timeout))},
          {"timeout_is_infra", pol.timeout_is_infra},
          {"deadline_s", optional_json(seconds_of(pol.deadline))},
          {"fail_fast", pol.fail_fast},
          {"max_cost_usd", optional_json(pol.max_cost_usd)},
          {"max_tokens", pol.max_tokens ? json::value(*pol.max_tokens) : json::value(nullptr)}};
}

json::object meta_json(const std::vector<std::string>& host_args, const run_args& a,
                       const opened& study, const std::string& run_id, const std::string& started) {
  json::array argv;
  for (auto& s : a.study) argv.emplace_back(s);
  // Names only: values (API keys) never reach a run folder.
  json::array env_names;
  for (auto& entry : a.study_env) env_names.emplace_back(entry.substr(0, entry.find('=')));
  return {
      {"format", 1},
      {"run_id", run_id},
      {"started", started},
      {"host", json::object{{"name", "mira-cpp"}, {"version", version}}},
      {"study", study.init.raw},
      {"study_command", std::move(argv)},
      {"config", config_json(host_args, a)},
      {"study_env", json::object{{"cleared", a.study_env_clear}, {"passed", std::move(env_names)}}},
      {"environment", environment_json()},
      {"fingerprints", fingerprints(study.list)}};
}

// A word as a POSIX shell reads it back: bare when it is plain, else single-quoted.
std::string shell_word(const std::string& w) {
  if (!w.empty() && w.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                        "0123456789@%+=:,./_-") == std::string::npos)
    return w;
  std::string out = "'";
  for (char c : w) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// The command that resumes this run: the same arguments, with --resume ID.
std::string resume_command(std::vector<std::string> args, const std::string& id) {
  auto it = std::find(args.begin(), args.end(), "--resume");
  if (it != args.end() && it + 1 != args.end())
    *(it + 1) = id;
  else
    args.insert(args.begin(), {"--resume", id});
  std::string out = "mira run";
  for (auto& w : args) out += " " + shell_word(w);
  return out;
}

enum class mode { run, execute_only, score };

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

// What is already done before the run starts: saved cases of a resumed run, artifacts of an
// earlier --execute-only, and for scoring the cases that have no artifact to score.
struct prior_work {
  std::vector<schedule::case_record> records;  // by plan index
  plan::plan todo;
  std::vector<std::size_t> full_index;    // todo index -> plan index
  std::vector<json::object> transcripts;  // score: by todo index
};

}  // namespace

namespace {

int run_cases(const std::vector<std::string>& args, run_args a, mode m) {
  return run_io([&](int& rc) -> asio::awaitable<void> {
    auto pl = co_await open_and_plan(a, rc);
    if (!pl) co_return;
    auto* study = &pl->study;
    auto* p = &pl->p;
    if (!study_can(*study, m)) {
      co_await study->host.shutdown();
      rc = exit_usage;
      co_return;
    }
    if (p->cases.empty()) std::fprintf(stderr, "mira: no cases matched the selection\n");

    // Artifacts: written by --execute-only, read by score.
    std::optional<store::artifact_dir> artifacts;
    std::map<std::string, json::object> stored;
    if (m != mode::run) {
      auto dir = m == mode::execute_only ? store::artifact_dir::create(a.artifacts)
                                         : store::artifact_dir::open(a.artifacts);
      if (!dir) {
        std::fprintf(stderr, "mira: %s\n", printable(dir.error()).c_str());
        co_await study->host.shutdown();
        rc = m == mode::score ? exit_usage : exit_host_error;
        co_return;
      }
      artifacts = std::move(*dir);
      std::vector<std::string> unreadable;
      stored = artifacts->load(&unreadable);
      for (auto& u : unreadable)
        std::fprintf(stderr, "mira: warning: cannot read the artifact %s; %s\n",
                     printable(u).c_str(),
                     m == mode::execute_only ? "that case is executed again" : "it is left out");
      if (auto meta = artifacts->load_meta()) {
        auto* made_by = meta->if_contains("study");
        if (made_by && made_by->is_string() && made_by->get_string() != study->init.study)
          std::fprintf(stderr, "mira: warning: the artifacts in %s were made by study '%s'\n",
                       printable(a.artifacts).c_str(), printable(made_by->get_string()).c_str());
      }
    }
    if (m == mode::score) {
      // Only what was executed can be scored.
      plan::plan scorable;
      for (auto& c : p->cases)
        if (stored.count(c.key)) scorable.cases.push_back(c);
      if (scorable.cases.size() < p->cases.size())
        std::fprintf(stderr,
                     "mira: %zu of %zu planned case(s) have no artifact in %s; scoring the "
                     "other %zu\n",
                     p->cases.size() - scorable.cases.size(), p->cases.size(),
                     printable(a.artifacts).c_str(), scorable.cases.size());
      if (scorable.cases.empty()) {
        std::fprintf(stderr, "mira: nothing to score: no artifact in %s matches the selection\n",
                     printable(a.artifacts).c_str());
        co_await study->host.shutdown();
        rc = exit_usage;
        co_return;
      }
      scorable.evals = std::move(p->evals);
      *p = std::move(scorable);
    }

    bool folder_ok = true;
    std::optional<store::run_folder> folder;
    if (m != mode::execute_only) folder = run_folder_for(a, *study, folder_ok);
    if (!folder_ok) {
      co_await study->host.shutdown();
      rc = a.resume.empty() ? exit_host_error : exit_usage;
      co_return;
    }

    // jsonl on stdout streams each case as it ends; to a file it is written at the end.
    const bool stream_jsonl = a.format == "jsonl" && a.out.empty();
    prior_work w;
    w.records.resize(p->cases.size());
    std::size_t reused = 0;
    std::map<std::string, json::object> saved;
    if (!a.resume.empty()) {
      std::vector<std::string> unreadable;
      saved = folder->load_cases(&unreadable);
      for (auto& u : unreadable)
        std::fprintf(stderr, "mira: warning: cannot read %s; that case runs again\n",
                     printable(u).c_str());
    }
    for (std::size_t i = 0; i < p->cases.size(); ++i) {
      auto& key = p->cases[i].key;
      if (auto it = saved.find(key); it != saved.end()) {
        auto rec = case_from_json(it->second);
        bool again =
            (a.retry_errors && (rec.state == case_state::error || rec.state == case_state::na)) ||
            (a.retry_failed && rec.state == case_state::failed) ||
            rec.state == case_state::cancelled;
        if (!again) {
          w.records[i] = std::move(rec);
          ++reused;
          if (stream_jsonl) std::cout << json::serialize(it->second) << '\n';
          continue;
        }
      }
      if (m == mode::execute_only && stored.count(key)) {
        w.records[i].state = case_state::executed;
        w.records[i].message = "executed earlier";
        ++reused;
        continue;
      }
      if (m == mode::score) {
        auto& artifact = stored.at(key);
        auto* skipped = artifact.if_contains("skipped");
        if (skipped && skipped->is_bool() && skipped->get_bool()) {
          w.records[i].state = case_state::skipped;
          w.records[i].message = "skipped when executed";
          continue;
        }
        auto* t = artifact.if_contains("transcript");
        w.transcripts.push_back(t && t->is_object() ? t->get_object() : json::object{});
      }
      w.full_index.push_back(i);
    }
    // Only a partial plan is copied: a fresh run runs the plan itself (a copy of a large plan
    // costs hundreds of bytes per case).
    const bool partial = w.full_index.size() < p->cases.size();
    if (partial)
      for (auto i : w.full_index) w.todo.cases.push_back(p->cases[i]);
    const plan::plan& to_run = partial ? w.todo : *p;
    if (!partial) std::vector<schedule::case_record>().swap(w.records);
    if (!a.resume.empty())
      std::fprintf(stderr, "resuming run %s: %zu of %zu case(s) already saved\n", a.resume.c_str(),
                   reused, p->cases.size());
    if (m == mode::execute_only && reused > 0)
      std::fprintf(stderr, "%zu of %zu case(s) already have an artifact in %s\n", reused,
                   p->cases.size(), printable(a.artifacts).c_str());
    if (artifacts && m == mode::execute_only)
      if (auto ec = artifacts->save_meta(json::object{{"study", study->init.study},
                                                      {"study_version", study->init.study_version},
                                                      {"host_version", version},
                                                      {"fingerprints", fingerprints(study->list)}}))
        std::fprintf(stderr, "mira: warning: cannot write %s/meta.json: %s\n",
                     printable(a.artifacts).c_str(), ec.message().c_str());
    // Kept in memory from here: written now, completed when the run ends.
    json::object meta;
    if (folder) {
      meta = folder->load_meta().value_or(meta_json(args, a, *study, folder->id(), utc_now()));
      meta["study"] = study->init.raw;
      if (m == mode::score)
        meta["scored_artifacts"] = std::filesystem::absolute(a.artifacts).string();
      if (auto ec = folder->save_meta(meta))
        std::fprintf(stderr, "mira: warning: cannot write meta.json: %s\n", ec.message().c_str());
    }

    if (m == mode::execute_only) a.policy.op = schedule::operation::execute;
    if (m == mode::score) {
      a.policy.op = schedule::operation::score;
      a.policy.transcript_for = [&](std::size_t j) { return w.transcripts[j]; };
    }
    a.policy.respawn = [&]() -> asio::awaitable<tl::expected<host_handle, error>> {
      auto h = co_await restart_study(a, study->init);
      if (h) study->host = *h;  // so the final shutdown reaches the live one
      co_return h;
    };
    // Results are saved on a writer thread, in batches (one filesystem sync per batch, not an
    // fsync per file on this loop). A result that cannot be saved stops the run: carrying on
    // would lose more of them.
    // Shared with the writer's callbacks, which may be posted after this frame is gone (if it
    // ends by an exception before the writer is drained).
    struct save_failures {
      std::vector<std::string> keys;
      std::optional<std::string> first;  // stops the run
    };
    auto failures = std::make_shared<save_failures>();
    std::optional<store::batch_writer> writer;
    if (folder)
      writer.emplace(folder->path());
    else if (artifacts && m == mode::execute_only)
      writer.emplace(artifacts->path());
    auto ex = co_await asio::this_coro::executor;
    auto save = [&writer, ex, failures](std::filesystem::path path, std::string text,
                                        std::string key, std::string what) {
      writer->submit(std::move(path), std::move(text),
                     [ex, failures, key, what](boost::system::error_code ec) {
                       if (!ec) return;
                       asio::post(ex, [failures, key, what, ec] {
                         failures->keys.push_back(key);
                         auto message = "cannot save " + what + key + ": " + ec.message();
                         stderr_line("mira: error: " + printable(message));
                         if (!failures->first) failures->first = std::move(message);
                       });
                     });
    };
    schedule::run_hooks hooks;
    hooks.on_notification = [&](std::size_t j, const notification& n) {
      the_log().event(&p->cases[w.full_index[j]].key, n);
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
      auto& c = p->cases[w.full_index[j]];
      if (artifacts && m == mode::execute_only && r.has_result() &&
          (r.state == case_state::executed || r.state == case_state::skipped)) {
        auto artifact = result_object(r);
        artifact["key"] = c.key;
        save(artifacts->file_for(c.key), json::serialize(artifact) + "\n", c.key,
             "the artifact of ");
      }
      // A cancelled case is not finished: a resumed run runs it.
      const bool saving = folder && r.state != case_state::cancelled;
      if (!saving && !stream_jsonl) return;  // the record is only built to be written
      auto line = json::serialize(case_json(c, r));
      if (stream_jsonl) std::cout << line << '\n' << std::flush;
      if (saving) save(folder->case_file(c.key), std::move(line) + "\n", c.key, "the result of ");
    };
    hooks.stop_after = [failures](std::size_t, const schedule::case_record&) {
      return failures->first;
    };
    // Ctrl-C (or SIGTERM): the first stops the run (in-flight cases are sent `cancel`, finished
    // ones are saved and reported, the resume command is printed); the second quits at once.
    asio::cancellation_signal interrupt;
    asio::signal_set signals(co_await asio::this_coro::executor, SIGINT, SIGTERM);
    int presses = 0;
    std::function<void()> arm = [&] {
      signals.async_wait([&](boost::system::error_code ec, int) {
        if (ec) return;
        if (++presses > 1) std::_Exit(exit_interrupted);
        std::fprintf(
            stderr,
            "\nmira: interrupted: cancelling the cases in flight (again to quit at once)\n");
        interrupt.emit(asio::cancellation_type::terminal);
        arm();
      });
    };
    arm();
    // The progress ticker runs until the run ends.
    progress.t0 = std::chrono::steady_clock::now();
    progress.active = true;
    asio::steady_timer ticker(co_await asio::this_coro::executor);
    auto period =
        progress.tty
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
    auto part = co_await asio::co_spawn(
        co_await asio::this_coro::executor,
        run_study(study->host, to_run, a.policy, hooks),
        asio::bind_cancellation_slot(interrupt.slot(), asio::use_awaitable));
    if (writer) {
      writer->drain();
      co_await asio::post(ex, asio::use_awaitable);  // the failures it reported, if any
    }
    signals.cancel();
    progress.active = false;
    progress.clear();
    ticker.cancel();
    schedule::run_report report;
    report.stopped = part.stopped;
    report.stop_message = part.stop_message;
    report.seconds = part.seconds;
    report.restarts = part.restarts;
    if (partial) {
      for (std::size_t j = 0; j < part.cases.size(); ++j)
        w.records[w.full_index[j]] = std::move(part.cases[j]);
      report.cases = std::move(w.records);
    } else {
      report.cases = std::move(part.cases);
    }

    auto s = aggregate::summarize(*p, report.cases, &study->list, a.group_by);
    bool written = emit_report(a, *p, report, s, stream_jsonl);
    std::fflush(stdout);  // the report before what stderr says about it
    co_await study->host.shutdown();
    if (folder) {
      auto summary = summary_json(s, report);
      if (auto ec = write_report(folder->path() / "report.json", "json", *p, report, s))
        std::fprintf(stderr, "mira: warning: cannot write report.json: %s\n", ec.message().c_str());
      auto stderr_text = the_log().stderr_text();
      for (auto [name, text] :
           {std::pair<const char*, std::string_view>{"events.ndjson", the_log().events},
            {"study.stderr.log", stderr_text}})
        if (auto ec = store::write_file_atomic(folder->path() / name, text))
          std::fprintf(stderr, "mira: warning: cannot write %s: %s\n", name, ec.message().c_str());
      meta["finished"] = utc_now();
      meta["summary"] = std::move(summary);
      if (auto ec = folder->save_meta(meta))
        std::fprintf(stderr, "mira: warning: cannot write meta.json: %s\n", ec.message().c_str());
      std::fprintf(stderr, "saved run %s to %s\n", folder->id().c_str(), folder->path().c_str());
      if (report.stopped != schedule::stop_reason::none || s.count(case_state::cancelled) > 0)
        std::fprintf(stderr, "resume with: %s\n",
                     printable(resume_command(args, folder->id())).c_str());
    }
    if (artifacts && m == mode::execute_only) {
      std::fprintf(stderr, "executed %zu case(s); artifacts in %s\n", s.count(case_state::executed),
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
    if (report.stopped == schedule::stop_reason::interrupted)
      rc = exit_interrupted;
    else if (!unsaved.empty() || !written)
      rc = exit_host_error;
    else if (report.stopped == schedule::stop_reason::study_failed)
      rc = exit_host_error;
    else if (report.stopped == schedule::stop_reason::budget ||
             report.stopped == schedule::stop_reason::deadline)
      rc = exit_stopped;
    else if (s.count(case_state::failed) + s.count(case_state::error) > 0)
      rc = exit_failed;
    else
      rc = exit_ok;
  });
}

}  // namespace

int cmd_run(const std::vector<std::string>& args) {
  auto a = parse_args(command::run, args);
  if (a.help) return std::fputs(run_help, stdout), exit_ok;
  auto m = a.execute_only ? mode::execute_only : mode::run;
  return run_cases(args, std::move(a), m);
}

int cmd_score(const std::vector<std::string>& args) {
  auto a = parse_args(command::score, args);
  if (a.help) return std::fputs(score_help, stdout), exit_ok;
  return run_cases(args, std::move(a), mode::score);
}

}  // namespace mira::cli
