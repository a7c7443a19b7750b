// `mira run`: plan, schedule through run_plan, save the run folder, report. Also resumes a
// saved run and re-runs errors or failures.
#include "commands.hpp"
#include "help.hpp"
#include "session.hpp"

#include <mira/aggregate/summary.hpp>
#include <mira/schedule/run_plan.hpp>
#include <mira/store/files.hpp>
#include <mira/store/run_folder.hpp>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json/serialize.hpp>

#include <csignal>
#include <cstdio>
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

json::object meta_json(const run_args& a, const opened& study, const std::string& run_id,
                       const std::string& started) {
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
      {"study_env", json::object{{"cleared", a.study_env_clear}, {"passed", std::move(env_names)}}},
      {"environment", environment_json()},
      {"fingerprints", fingerprints(study.list)}};
}

}  // namespace

int cmd_run(const std::vector<std::string>& args) {
  auto a = parse_args(command::run, args);
  if (a.help) return std::fputs(run_help, stdout), exit_ok;
  return run_io([&](int& rc) -> asio::awaitable<void> {
    auto pl = co_await open_and_plan(a, rc);
    if (!pl) co_return;
    auto* study = &pl->study;
    auto* p = &pl->p;
    if (p->cases.empty()) std::fprintf(stderr, "mira: no cases matched the selection\n");
    bool folder_ok = true;
    auto folder = run_folder_for(a, *study, folder_ok);
    if (!folder_ok) {
      co_await study->host.shutdown();
      rc = a.resume.empty() ? exit_host_error : exit_usage;
      co_return;
    }

    // jsonl on stdout streams each case as it ends; to a file it is written at the end.
    const bool stream_jsonl = a.format == "jsonl" && a.out.empty();
    // Resume: what is saved is not run again (unless asked to), and counts in the report.
    std::vector<schedule::case_record> records(p->cases.size());
    plan::plan todo;
    std::vector<std::size_t> full_index;
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
      if (auto it = saved.find(p->cases[i].key); it != saved.end()) {
        auto rec = case_from_json(it->second);
        bool again =
            (a.retry_errors && (rec.state == case_state::error || rec.state == case_state::na)) ||
            (a.retry_failed && rec.state == case_state::failed) ||
            rec.state == case_state::cancelled;
        if (!again) {
          records[i] = std::move(rec);
          ++reused;
          if (stream_jsonl) std::cout << json::serialize(it->second) << '\n';
          continue;
        }
      }
      todo.cases.push_back(p->cases[i]);
      full_index.push_back(i);
    }
    if (!a.resume.empty())
      std::fprintf(stderr, "resuming run %s: %zu of %zu case(s) already saved\n", a.resume.c_str(),
                   reused, p->cases.size());
    // Kept in memory from here: written now, completed when the run ends.
    json::object meta;
    if (folder) {
      meta = folder->load_meta().value_or(meta_json(a, *study, folder->id(), utc_now()));
      meta["study"] = study->init.raw;
      if (auto ec = folder->save_meta(meta))
        std::fprintf(stderr, "mira: warning: cannot write meta.json: %s\n", ec.message().c_str());
    }

    a.policy.respawn = [&]() -> asio::awaitable<tl::expected<host_handle, error>> {
      auto h = co_await restart_study(command_for(a), study->init);
      if (h) study->host = *h;  // so the final shutdown reaches the live one
      co_return h;
    };
    std::size_t unsaved = 0;
    schedule::run_hooks hooks;
    hooks.on_notification = [&](std::size_t j, const notification& n) {
      the_log().event(&p->cases[full_index[j]].key, n);
    };
    auto& progress = the_progress();
    progress.total = todo.cases.size();
    hooks.on_start = [&](std::size_t) { ++progress.starts; };
    hooks.on_result = [&](std::size_t j, const schedule::case_record& r) {
      progress.finished_attempts += static_cast<std::size_t>(r.attempts);
      ++progress.done;
      progress.passed += r.state == case_state::passed;
      progress.failed += r.state == case_state::failed || r.state == case_state::error;
      progress.na += r.state == case_state::na;
      auto& c = p->cases[full_index[j]];
      auto record = case_json(c, r);
      // A cancelled case is not finished: a resumed run runs it.
      if (folder && r.state != case_state::cancelled)
        if (auto ec = folder->save_case(c.key, record)) {
          ++unsaved;
          stderr_line("mira: error: cannot save " + printable(c.key) + ": " + ec.message());
        }
      if (stream_jsonl) std::cout << json::serialize(record) << '\n' << std::flush;
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
        co_await asio::this_coro::executor, schedule::run_plan(study->host, todo, a.policy, hooks),
        asio::bind_cancellation_slot(interrupt.slot(), asio::use_awaitable));
    signals.cancel();
    progress.active = false;
    progress.clear();
    ticker.cancel();
    schedule::run_report report;
    report.stopped = part.stopped;
    report.stop_message = part.stop_message;
    report.seconds = part.seconds;
    report.restarts = part.restarts;
    for (std::size_t j = 0; j < part.cases.size(); ++j)
      records[full_index[j]] = std::move(part.cases[j]);
    report.cases = std::move(records);

    auto s = aggregate::summarize(*p, report.cases, &study->list, a.group_by);
    bool written = emit_report(a, *p, report, s, stream_jsonl);
    co_await study->host.shutdown();
    if (folder) {
      json::array cases;
      for (std::size_t i = 0; i < p->cases.size(); ++i)
        cases.push_back(case_json(p->cases[i], report.cases[i]));
      auto summary = summary_json(s, report);
      json::object report_file{{"summary", summary}, {"cases", std::move(cases)}};
      auto report_text = json::serialize(report_file) + "\n";
      auto stderr_text = the_log().stderr_text();
      for (auto [name, text] :
           {std::pair<const char*, std::string_view>{"report.json", report_text},
            {"events.ndjson", the_log().events},
            {"study.stderr.log", stderr_text}})
        if (auto ec = store::write_file_atomic(folder->path() / name, text))
          std::fprintf(stderr, "mira: warning: cannot write %s: %s\n", name, ec.message().c_str());
      meta["finished"] = utc_now();
      meta["summary"] = std::move(summary);
      if (auto ec = folder->save_meta(meta))
        std::fprintf(stderr, "mira: warning: cannot write meta.json: %s\n", ec.message().c_str());
      std::fprintf(stderr, "saved run %s to %s\n", folder->id().c_str(), folder->path().c_str());
      if (report.stopped != schedule::stop_reason::none || s.count(case_state::cancelled) > 0)
        std::fprintf(stderr, "resume with: mira run --resume %s --results-dir %s -- ...\n",
                     folder->id().c_str(), a.results_dir.c_str());
    }
    if (report.stopped == schedule::stop_reason::interrupted)
      rc = exit_interrupted;
    else if (unsaved > 0 || !written)
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

}  // namespace mira::cli
