// `mira run` and `mira score`: the command's flags made into one mira::session (study, plan,
// shard, per-target timeouts, the run store or the artifacts), with progress, Ctrl-C and the
// study's output shown while it goes; then the report, what to tell the user and the exit code.
#include "run_command.hpp"

#include "commands.hpp"
#include "config_step.hpp"
#include "experiment.hpp"
#include "flags.hpp"
#include "github_output.hpp"
#include "help.hpp"
#include "shard_step.hpp"

#include <mira/aggregate/summary.hpp>
#include <mira/report/render.hpp>
#include <mira/session/session.hpp>
#include <mira/store/records.hpp>
#include <mira/store/run_reader.hpp>
#include <mira/store/shard_meta.hpp>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <limits>
#include <span>
#include <unordered_map>
#include <unordered_set>

namespace mira::cli {

namespace asio = boost::asio;
namespace json = boost::json;
using schedule::case_state;

namespace {

enum class mode { run, execute_only, score };

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

// mira.toml's `[targets.LABEL] timeout` of the plan: one for every case, or each case's.
void set_timeouts(const run_args& a, const protocol::list_result& list, const plan::plan& p,
                  schedule::run_policy& policy) {
  auto timeouts = planned_timeout(a, a.project, list, p);
  auto as_duration = [](std::optional<double> s) -> std::optional<schedule::duration> {
    if (!s) return std::nullopt;
    return std::chrono::duration_cast<schedule::duration>(std::chrono::duration<double>(*s));
  };
  if (timeouts.by_target.empty()) {
    policy.case_timeout = as_duration(timeouts.common);
    return;
  }
  // Each target its own: one lookup per attempt, by case index.
  std::vector<std::optional<schedule::duration>> per_case(p.cases.size());
  for (std::size_t i = 0; i < p.cases.size(); ++i)
    per_case[i] = as_duration(timeouts.by_target.find(p.cases[i].params.target.str())->second);
  policy.case_timeout_for = [per_case = std::move(per_case)](std::size_t i) { return per_case[i]; };
}

// What the run folder records of the command beside what the session fills in: where it ran,
// which environment names the study got, the shard, the scored artifacts, the experiment.
void describe(store::run_meta& meta, const run_args& a, mode m,
              const std::optional<store::shard_info>& shard, const treatment_label* t) {
  if (meta.study_command.empty()) meta.study_command = a.study;
  if (meta.environment.empty() && a.environment_enabled)
    meta.environment = environment_json(a.environment_labels);
  if (meta.study_env.empty()) {
    json::array env_names;  // names only: values (API keys) never reach a run folder
    for (auto& entry : a.study_env) env_names.emplace_back(entry.substr(0, entry.find('=')));
    meta.study_env = json::object{{"cleared", a.study_env_clear}, {"passed", std::move(env_names)}};
  }
  if (shard) store::set_shard(meta, *shard);
  if (m == mode::score)
    meta.extra["scored_artifacts"] = std::filesystem::absolute(a.artifacts).string();
  if (!t) return;
  meta.extra["experiment"] = json::object{{"id", t->experiment_id},
                                          {"treatment", t->treatment},
                                          {"baseline", t->baseline},
                                          {"plan", t->plan_path}};
  // The environment block is left out when mira.toml turns it off; the labels go with it.
  if (!meta.environment.empty()) {
    auto& labels = meta.environment["labels"];
    if (!labels.is_object()) labels = json::object{};
    labels.as_object()["experiment_id"] = t->experiment_id;
    labels.as_object()["treatment"] = t->treatment;
    labels.as_object()["experiment_baseline"] = t->baseline ? "true" : "false";
  }
}

store::report_file text_file(std::string name, const std::string& text) {
  return {std::move(name), [&text](const auto& sink) { sink(text); }};
}

// Ctrl-C (or SIGTERM): the first stops the run (in-flight cases are sent `cancel`, finished
// ones are saved and reported, the resume command is printed); the second quits at once.
class interrupt_on_signals {
 public:
  interrupt_on_signals(asio::any_io_executor ex, console& out)
      : signals_(std::move(ex), SIGINT, SIGTERM), out_(out) {
    arm();
  }
  ~interrupt_on_signals() { signals_.cancel(); }
  asio::cancellation_slot slot() { return interrupt_.slot(); }

 private:
  void arm() {
    signals_.async_wait([this](boost::system::error_code ec, int) {
      if (ec) return;
      if (++presses_ > 1) std::_Exit(exit_interrupted);
      out_.line("\nmira: interrupted: cancelling the cases in flight (again to quit at once)");
      interrupt_.emit(asio::cancellation_type::terminal);
      arm();
    });
  }
  asio::signal_set signals_;
  console& out_;
  asio::cancellation_signal interrupt_;
  int presses_ = 0;
};

// The progress line, redrawn (on a terminal) or written as a heartbeat until the run ends.
class progress_ticker {
 public:
  progress_ticker(asio::any_io_executor ex, progress_line& p, schedule::duration heartbeat)
      : timer_(std::move(ex)), p_(p) {
    p_.t0 = std::chrono::steady_clock::now();
    p_.active = true;
    period_ = p_.mode == progress_mode::tty
                  ? std::chrono::duration_cast<schedule::duration>(std::chrono::milliseconds(500))
                  : heartbeat;
    if (p_.mode != progress_mode::none) tick();
  }
  ~progress_ticker() {
    p_.active = false;
    p_.clear();
    timer_.cancel();
  }

 private:
  void tick() {
    timer_.expires_after(period_);
    timer_.async_wait([this](boost::system::error_code ec) {
      if (ec || !p_.active) return;
      p_.draw();
      tick();
    });
  }
  asio::steady_timer timer_;
  progress_line& p_;
  schedule::duration period_{};
};

// `--format jsonl` on stdout: a case's line is printed once its record is saved
// (hooks.on_saved), so that a printed case is never one a resume runs and prints again; a case
// the session does not save (cancelled, a dry run) at once. The line of a case whose save fails
// is never printed: the case is listed as unsaved and the resume runs it. Only the lines of
// records on their way to the writer wait here (and those that failed, which stop the run).
class jsonl_stream {
 public:
  void ended(std::size_t i, std::string line, bool saved_later) {
    if (saved_later)
      waiting_.emplace(i, std::move(line));
    else
      std::cout << line << '\n' << std::flush;
  }
  void saved(std::span<const std::size_t> cases) {
    for (auto i : cases)
      if (auto it = waiting_.find(i); it != waiting_.end()) {
        std::cout << it->second << '\n';
        waiting_.erase(it);
      }
    std::cout << std::flush;
  }

 private:
  std::unordered_map<std::size_t, std::string> waiting_;  // by plan index
};

// A treatment's table, on its console (stdout is the experiment's comparison).
void table_on(console& out, const plan::plan& p, const schedule::run_report& report,
              const aggregate::summary& s) {
  char* buf = nullptr;
  std::size_t size = 0;
  FILE* f = ::open_memstream(&buf, &size);
  if (!f) return;
  print_table(f, p, report, s, false);
  std::fclose(f);
  std::string_view text(buf, size);
  while (!text.empty()) {
    auto nl = text.find('\n');
    out.line(std::string(text.substr(0, nl)));
    text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
  }
  std::free(buf);
}

// One `mira run` or `mira score` as named steps around its session: the options it asks for,
// what it says when the session does not open, before the run and after it. The session's hooks
// and these steps share the arguments, the shard refine() picks and the open session, so they are
// members here: each hook a member function, not a lambda over a long function's locals.
class command_run {
 public:
  command_run(const std::vector<std::string>& args, run_args a, mode m, console& out,
              const treatment_label* t)
      : args_(args),
        a_(std::move(a)),
        m_(m),
        out_(out),
        t_(t),
        stream_jsonl_(a_.format == "jsonl" && a_.out.empty() && !t),
        github_(!t && github_output_on(a_, process_env)) {}

  session_options options();
  void not_opened(const session_error& e);
  void opened(const session& s);
  void finished(const session_outcome& done);
  const run_outcome& result() const { return result_; }

 private:
  bool lists_every_case() const;
  session_hooks hooks();
  void case_ended(std::size_t i, const schedule::case_record& r);
  std::optional<session_error> refine(plan::plan& p, const protocol::list_result& list,
                                      schedule::run_policy& policy);
  save_options saving();
  void print_reused_cases(const session& s) const;
  bool print_report(const session_outcome& done) const;
  void tell_what_next(const session_outcome& done) const;

  const std::vector<std::string>& args_;
  run_args a_;
  const mode m_;
  console& out_;
  const treatment_label* const t_;
  const bool stream_jsonl_;  // `--format jsonl` on stdout: each case as it ends
  const bool github_;        // GitHub Actions output
  run_outcome result_;
  std::optional<store::shard_info> shard_;  // refine()'s, for meta.json
  std::string study_name_;                  // initialize's, for refine()
  const session* running_ = nullptr;        // set once the session is open
  jsonl_stream jsonl_;
};

// A report that lists every case (json, csv, junit, md, jsonl after the run, and GitHub's step
// summary, an md report) needs every record; the table and the saved report.html show the
// first 10 000.
bool command_run::lists_every_case() const {
  bool every = !t_ && ((a_.format != "table" && a_.format != "html" && !stream_jsonl_) || github_);
  for (auto& out_file : a_.outs) every = every || out_file.format != "html";
  return every;
}

// The session the flags ask for: its study, selection, policy and mode, the records its report
// keeps, the hooks that show it and, unless it is a dry run or executes only, where it saves.
session_options command_run::options() {
  session_options o;
  o.study = launch_of(a_);
  o.selection = a_.selection;
  o.policy = a_.policy;
  o.group_by = a_.group_by;
  if (lists_every_case()) o.kept_records = std::numeric_limits<std::size_t>::max();
  o.mode = m_ == mode::execute_only ? session_mode::execute
           : m_ == mode::score      ? session_mode::score
                                    : session_mode::run;
  o.artifacts = a_.artifacts;
  o.hooks = hooks();
  o.refine = [this](plan::plan& p, const protocol::list_result& list,
                    schedule::run_policy& policy) { return refine(p, list, policy); };
  if (!a_.dry_run && m_ != mode::execute_only) o.save = saving();
  return o;
}

// The hooks that show the study (shown_on), and this command's own: the study's name kept for
// refine(), the progress counts and the jsonl lines, a save that failed.
session_hooks command_run::hooks() {
  auto h = shown_on(out_, a_.procs);
  h.on_study = [this, shown = h.on_study](const protocol::initialize_result& init, std::size_t n) {
    study_name_ = init.study;
    shown(init, n);
  };
  h.on_attempt = [this](std::size_t) { ++out_.progress.starts; };
  h.on_case = [this](std::size_t i, const schedule::case_record& r) { case_ended(i, r); };
  if (stream_jsonl_)
    h.on_saved = [this](std::span<const std::size_t> cases) { jsonl_.saved(cases); };
  h.on_save_failed = [this](const std::string&, const std::string& text) {
    out_.line("mira: error: " + printable(text));
  };
  return h;
}

void command_run::case_ended(std::size_t i, const schedule::case_record& r) {
  auto& progress = out_.progress;
  progress.finished_attempts += static_cast<std::size_t>(r.attempts);
  ++progress.done;
  progress.passed += r.state == case_state::passed || r.state == case_state::executed;
  progress.failed += r.state == case_state::failed || r.state == case_state::error;
  progress.na += r.state == case_state::na;
  if (stream_jsonl_)
    jsonl_.ended(i, store::case_line(running_->plan().cases[i], r), running_->saves(r));
}

// The plan cut to this command's: refused when an experiment's study is another, cut to the
// shard, each case's timeout set. A refusal without text was said already (rc set).
std::optional<session_error> command_run::refine(plan::plan& p, const protocol::list_result& list,
                                                 schedule::run_policy& policy) {
  if (t_ && study_name_ != t_->study)
    return session_error{session_errc::refused,
                         "the experiment plan is for study '" + t_->study +
                             "' but this study is '" + study_name_ + "'",
                         {}};
  if (!select_shard(a_, p, shard_, result_.rc)) return session_error{session_errc::refused, "", {}};
  if (p.cases.empty()) out_.line("mira: no cases matched the selection");
  set_timeouts(a_, list, p, policy);
  a_.policy.case_timeout = policy.case_timeout;  // what meta.json's config records
  return std::nullopt;
}

// Where the run is saved (a new run, or the one resumed) and what meta.json says of the command;
// an experiment's treatment archives the plan beside it.
save_options command_run::saving() {
  save_options save;
  save.results_dir = a_.results_dir;
  save.resume = a_.resume;
  if (a_.resume.empty()) save.new_id = a_.new_run_id;
  save.layout = a_.store_layout;
  save.resume_options = {a_.retry_errors, a_.retry_failed, a_.allow_other_study};
  save.describe = [this](store::run_meta& meta, store::session_entry& entry) {
    describe(meta, a_, m_, shard_, t_);
    entry.argv = argv_without_secrets(args_);
    entry.config = config_json(args_, a_);
  };
  if (t_)
    save.files = {text_file("experiment-source.toml", t_->plan_source),
                  text_file("experiment.toml", t_->plan_resolved)};
  return save;
}

// What the session could not do, with what it is about when its own words do not say it, and
// the exit code.
void command_run::not_opened(const session_error& e) {
  if (e.code == session_errc::refused && e.text.empty()) return;  // said, rc set
  std::string where;
  if (e.code == session_errc::study_incapable)
    where = m_ == mode::score ? "mira score: " : "--execute-only: ";
  else if (!a_.resume.empty() && e.code.category() == store::category())
    where = "--resume: ";
  std::string hint =
      e.code == store::errc::incompatible ? " (--allow-other-study resumes anyway)" : "";
  const auto text =
      e.code == session_errc::invalid_selection ? in_flag_words(e.message(), e.field) : e.message();
  out_.line("mira: " + where + printable(text) + hint);
  for (auto& l : e.stderr_tail) out_.line("  | " + printable(l));
  result_.rc = e.code == session_errc::artifacts_unusable
                   ? (m_ == mode::score ? exit_usage : exit_host_error)
                   : exit_for(e);
}

// Before the run: how much of it a resume (or the artifacts) already has, those cases' jsonl
// lines, and the progress line's total.
void command_run::opened(const session& s) {
  running_ = &s;
  auto& plan = s.plan();
  auto& resumed = s.resumed();
  if (m_ == mode::execute_only && resumed.reused > 0)
    out_.line(std::to_string(resumed.reused) + " of " + std::to_string(plan.cases.size()) +
              " case(s) already have an artifact in " + printable(a_.artifacts));
  if (!a_.resume.empty())
    out_.line("resuming run " + a_.resume + ": " + std::to_string(resumed.reused) + " of " +
              std::to_string(plan.cases.size()) + " case(s) already saved");
  if (stream_jsonl_ && resumed.reused > 0) print_reused_cases(s);
  out_.progress.total = resumed.todo.size();
}

// The reused cases' jsonl lines first, read back from the run (the session keeps only their
// summary); the rest stream as they end.
void command_run::print_reused_cases(const session& s) const {
  auto& plan = s.plan();
  auto& resumed = s.resumed();
  std::unordered_set<std::string> reused;
  for (std::size_t i = 0, next = 0; i < plan.cases.size(); ++i) {
    if (next < resumed.todo.size() && resumed.todo[next] == i) {
      ++next;
      continue;
    }
    reused.insert(plan.cases.key(i));
  }
  if (auto saved = store::run_reader::open(a_.results_dir, s.run_id()))
    saved->visit_cases(
        [](std::size_t, const plan::planned_case& c, const schedule::case_record& r) {
          std::cout << store::case_line(c, r) << '\n';
          return true;
        },
        [&](std::size_t, std::string_view key) { return reused.count(std::string(key)) > 0; });
}

// After the run: the report, then what stderr says about it, and the exit code.
void command_run::finished(const session_outcome& done) {
  const bool written = print_report(done);
  result_.run_id = done.run_id;
  tell_what_next(done);
  if (!done.unsaved.empty()) {
    std::string keys;
    for (auto& k : done.unsaved) keys += "\n  " + printable(k);
    out_.line(
        "mira: error: " + std::to_string(done.unsaved.size()) +
        " finished case(s) could not be saved (their results are in the report above):" + keys);
  }
  const bool saving_failed = !done.unsaved.empty() || !written || done.unfinished ||
                             done.report.stopped == schedule::stop_reason::requested;
  result_.rc = exit_code_for(done.report, done.summary, saving_failed, a_.min_scored);
}

// The report (a treatment's table on its console), and GitHub's output. False when a report
// file could not be written.
bool command_run::print_report(const session_outcome& done) const {
  bool written = true;
  if (t_)
    table_on(out_, done.plan, done.report, done.summary);
  else
    written = emit_report(a_, done.plan, done.report, done.summary, stream_jsonl_);
  std::fflush(stdout);  // the report before what stderr says about it
  if (github_)
    write_github_output(report::memory_cases(done.plan, done.report), done.report, done.summary,
                        out_, process_env);
  return written;
}

// Where the run was saved and how to resume it; after --execute-only, how to score it.
void command_run::tell_what_next(const session_outcome& done) const {
  if (!done.run_id.empty()) {
    if (done.unfinished)
      out_.line("mira: error: cannot finish run " + done.run_id + ": " +
                printable(done.unfinished.message()) +
                " (once the file can be written, resume the run to finish it)");
    else
      out_.line("saved run " + done.run_id + " to " + done.folder.string());
    if (done.resumable())
      out_.line("resume with: " + printable(resume_command(args_, done.run_id)));
  }
  if (m_ == mode::execute_only) {
    out_.line("executed " + std::to_string(done.summary.count(case_state::executed) - done.reused) +
              " case(s) in this session; artifacts in " + printable(a_.artifacts));
    std::string study_cmd;
    for (auto& word : a_.study) study_cmd += " " + shell_word(word);
    out_.line("score them with: mira score --artifacts " + printable(shell_word(a_.artifacts)) +
              " --" + printable(study_cmd));
  }
}

}  // namespace

asio::awaitable<run_outcome> run_cases(const std::vector<std::string>& args, run_args a,
                                       bool scoring, console& out, const treatment_label* t) {
  const mode m = scoring ? mode::score : a.execute_only ? mode::execute_only : mode::run;
  auto ex = co_await asio::this_coro::executor;
  const auto heartbeat = a.heartbeat;
  command_run run(args, std::move(a), m, out, t);
  auto o = run.options();
  auto opened = co_await session::open(std::move(o));
  if (!opened) {
    run.not_opened(opened.error());
    co_return run.result();
  }
  auto& s = *opened;
  run.opened(s);
  session_outcome done;
  {
    interrupt_on_signals signals(ex, out);
    progress_ticker ticker(ex, out.progress, heartbeat);
    auto token = asio::bind_cancellation_slot(signals.slot(), asio::use_awaitable);
    done = co_await s.async_run(std::move(token));
  }
  run.finished(done);
  co_return run.result();
}

namespace {

// What must hold before the study starts: every --out can be written, a --run-id is new.
bool refuse_before_start(const run_args& a) {
  if (refuse_outs(a)) return true;
  std::error_code ec;
  if (!a.new_run_id.empty() && a.resume.empty() &&
      std::filesystem::exists(std::filesystem::path(a.results_dir) / a.new_run_id, ec)) {
    std::fprintf(stderr,
                 "mira: --run-id %s: run %s already exists in %s (resume it with --resume %s, "
                 "or choose another id)\n",
                 printable(a.new_run_id).c_str(), printable(a.new_run_id).c_str(),
                 printable(a.results_dir).c_str(), printable(a.new_run_id).c_str());
    return true;
  }
  return false;
}

}  // namespace

int cmd_run(const std::vector<std::string>& args) {
  auto a = parse_args(command::run, args);
  if (a.help) return std::fputs(command_help(command::run).c_str(), stdout), exit_ok;
  if (!a.experiment.empty()) return run_experiment(args, a);
  prepare(command::run, a);
  if (refuse_before_start(a)) return exit_usage;
  return run_io([&](int& rc) -> asio::awaitable<void> {
    console out;
    out.progress.mode = progress_for(a);
    rc = (co_await run_cases(args, std::move(a), false, out)).rc;
  });
}

int cmd_score(const std::vector<std::string>& args) {
  auto a = parse_args(command::score, args);
  if (a.help) return std::fputs(command_help(command::score).c_str(), stdout), exit_ok;
  prepare(command::score, a);
  if (refuse_before_start(a)) return exit_usage;
  return run_io([&](int& rc) -> asio::awaitable<void> {
    console out;
    out.progress.mode = progress_for(a);
    rc = (co_await run_cases(args, std::move(a), true, out)).rc;
  });
}

}  // namespace mira::cli
