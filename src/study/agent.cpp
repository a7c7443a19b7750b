// An external agent's case (see agent.hpp): the case folder's lifetime, the program's options
// built from the case, and the transcript gathered once it has ended. The plain parts are in
// agent_io.cpp and agent_events.cpp; run_program does the process.
#include <mira/study/agent.hpp>
#include <mira/study/context.hpp>
#include <mira/study/program.hpp>
#include <mira/study/seed_files.hpp>

#include <boost/asio/error.hpp>
#include <boost/system/system_error.hpp>

#include <stdlib.h>
#include <sys/stat.h>

#include <cctype>
#include <cerrno>
#include <stdexcept>

#include "study/agent_io.hpp"

namespace mira::study {

namespace asio = boost::asio;
namespace fs = std::filesystem;

namespace {

class agent_category_impl final : public boost::system::error_category {
 public:
  const char* name() const noexcept override { return "mira.study.agent"; }
  std::string message(int e) const override {
    switch (static_cast<agent_errc>(e)) {
      case agent_errc::workdir_failed:
        return "the case folder could not be made or seeded";
      case agent_errc::bad_seed_path:
        return "a seeded file's path is not a plain relative path";
      case agent_errc::cannot_start:
        return "the agent could not be started";
      case agent_errc::no_transcript:
        return "the agent wrote no events or trajectory file";
      case agent_errc::transcript_too_large:
        return "the agent's events or trajectory file is too large";
      case agent_errc::malformed_events:
        return "the agent's events stream is malformed";
      case agent_errc::malformed_trajectory:
        return "the agent's trajectory is not ATIF-v1.x";
    }
    return "unknown agent error";
  }
};

// Removes a tree the agent may have made unwritable or unreadable (chmod 0 on a folder).
void remove_tree(const fs::path& p) {
  std::error_code ec;
  fs::remove_all(p, ec);
  if (!ec) return;
  std::vector<fs::path> dirs{p};
  while (!dirs.empty()) {
    auto d = std::move(dirs.back());
    dirs.pop_back();
    ::chmod(d.c_str(), 0700);
    for (fs::directory_iterator it(d, ec), end; !ec && it != end; it.increment(ec))
      if (it->is_directory(ec) && !it->is_symlink(ec)) dirs.push_back(it->path());
  }
  fs::remove_all(p, ec);
}

// The case folder: `work/` (the agent's working directory) and, beside it, the events or
// trajectory file. Removed with everything in it when the case is over, unless kept.
class case_folder {
 public:
  explicit case_folder(const std::optional<fs::path>& root) {
    std::error_code ec;
    const fs::path base = root ? *root : fs::temp_directory_path(ec);
    std::string pattern = (base / "mira-agent-XXXXXX").string();
    if (!ec && ::mkdtemp(pattern.data())) {
      path_ = pattern;
      fs::create_directory(work(), ec);
    } else if (!ec) {
      ec = {errno, std::generic_category()};
    }
    if (ec)
      error_ = detail::agent_error{
          make_error_code(agent_errc::workdir_failed),
          "cannot make a case folder in '" + base.string() + "': " + ec.message()};
  }
  case_folder(const case_folder&) = delete;
  case_folder& operator=(const case_folder&) = delete;
  ~case_folder() {
    if (!path_.empty() && !keep_) remove_tree(path_);
  }

  const std::optional<detail::agent_error>& error() const noexcept { return error_; }
  const fs::path& path() const noexcept { return path_; }
  fs::path work() const { return path_ / "work"; }
  void keep() noexcept { keep_ = true; }

 private:
  fs::path path_;
  std::optional<detail::agent_error> error_;
  bool keep_ = false;
};

// The seeded files written into work/ (materialize_files checks every path on the way).
std::optional<detail::agent_error> seed(const case_folder& f, const std::vector<seed_file>& files) {
  auto written = materialize_files(files, f.work());
  if (written) return std::nullopt;
  const bool unsafe = written.error().code == errc::unsafe_path;
  return detail::agent_error{
      make_error_code(unsafe ? agent_errc::bad_seed_path : agent_errc::workdir_failed),
      written.error().message()};
}

protocol::transcript failed(const detail::agent_error& e) {
  protocol::transcript t;
  t.error = e.message;
  t.metadata = json::object{{"agent_error", to_string(static_cast<agent_errc>(e.code.value()))}};
  return t;
}

fs::path transcript_file(const case_folder& f, transcript_source s) {
  return f.path() / (s == transcript_source::events_file ? "events.jsonl" : "trajectory.json");
}

program_options program_for(const agent_options& o, const agent_case& c, const case_folder& f) {
  const auto work = f.work().string();
  const detail::placeholders vars{{"prompt", c.prompt}, {"workdir", work},
                                  {"eval", c.eval},     {"sample", c.sample},
                                  {"target", c.target}, {"provider", c.provider}};
  program_options p;
  for (const auto& a : o.argv) p.argv.push_back(detail::expand(a, vars));
  // The agent runs in its work folder; a relative program path is the study's.
  if (!p.argv.empty() && p.argv[0].find('/') != std::string::npos)
    p.argv[0] = fs::absolute(p.argv[0]).string();
  for (const auto& [name, value] : o.env) p.env.emplace_back(name, detail::expand(value, vars));
  p.env.emplace_back("MIRA_WORKDIR", work);
  p.env.emplace_back("MIRA_EVAL", c.eval);
  p.env.emplace_back("MIRA_SAMPLE", c.sample);
  p.env.emplace_back("MIRA_TARGET", c.target);
  p.env.emplace_back("MIRA_PROVIDER", c.provider);
  if (o.source == transcript_source::events_file)
    p.env.emplace_back("MIRA_EVENTS_PATH", transcript_file(f, o.source).string());
  if (o.source == transcript_source::trajectory_file)
    p.env.emplace_back("MIRA_TRAJECTORY_PATH", transcript_file(f, o.source).string());
  p.cwd = f.work();
  if (o.prompt_on_stdin) p.stdin_data = c.prompt;
  p.time_limit = o.time_limit;
  p.kill_grace = o.kill_grace;
  p.max_output = o.max_output;
  return p;
}

// The last lines of stderr, at most about 1000 bytes of them.
std::string stderr_tail(std::string_view err) {
  while (!err.empty() && (err.back() == '\n' || err.back() == ' ')) err.remove_suffix(1);
  if (err.size() > 1000) {
    err = err.substr(err.size() - 1000);
    if (auto nl = err.find('\n'); nl != std::string_view::npos) err = err.substr(nl + 1);
  }
  return detail::to_valid_utf8(err);
}

// The transcript from `source`, or the SDK's error reading it.
std::optional<detail::agent_error> read_source(const agent_options& o, const case_folder& f,
                                               const program_result& r, protocol::transcript& t) {
  const auto agent = fs::path(o.argv.front()).filename().string();
  switch (o.source) {
    case transcript_source::stdout_text: {
      std::string_view out = r.out;
      while (!out.empty() && std::isspace(static_cast<unsigned char>(out.back())))
        out.remove_suffix(1);
      t.final_response = detail::to_valid_utf8(out);
      return std::nullopt;
    }
    case transcript_source::stdout_events:
      return detail::read_events(detail::to_valid_utf8(r.out), agent, t);
    case transcript_source::events_file:
    case transcript_source::trajectory_file:
      break;
  }
  const bool events = o.source == transcript_source::events_file;
  auto text = detail::read_bounded(transcript_file(f, o.source), o.max_transcript_bytes,
                                   events ? "$MIRA_EVENTS_PATH" : "$MIRA_TRAJECTORY_PATH");
  if (!text) return text.error();
  if (events) return detail::read_events(detail::to_valid_utf8(*text), agent, t);
  return detail::read_trajectory(*text, t);
}

// The transcript of a program that ran: its own failure first, then the SDK's, then captures.
protocol::transcript gather(const agent_options& o, const case_folder& f, const program_result& r) {
  auto t = to_transcript(r);
  t.final_response.clear();
  if (t.error && !r.timed_out) {
    auto tail = stderr_tail(r.err);
    if (!tail.empty()) *t.error += ": " + tail;
  }
  json::object metadata;
  if (auto e = read_source(o, f, r, t); e && !t.error) {
    t.error = e->message;
    metadata["agent_error"] = to_string(static_cast<agent_errc>(e->code.value()));
  }
  auto got = detail::capture(f.work(), o.capture, o.limits);
  t.files = std::move(got.files);
  if (!got.skipped.empty()) metadata["files_skipped"] = std::move(got.skipped);
  if (!metadata.empty()) t.metadata = metadata;
  return t;
}

void keep_if_failed(const agent_options& o, case_folder& f, protocol::transcript& t) {
  if (!o.keep_failed || !t.error || f.path().empty()) return;
  f.keep();
  auto metadata = t.metadata.get();
  metadata["workdir"] = f.path().string();
  t.metadata = metadata;
}

}  // namespace

const boost::system::error_category& agent_category() noexcept {
  static const agent_category_impl c;
  return c;
}

boost::system::error_code make_error_code(agent_errc e) noexcept {
  return {static_cast<int>(e), agent_category()};
}

std::string_view to_string(agent_errc e) noexcept {
  switch (e) {
    case agent_errc::workdir_failed:
      return "workdir_failed";
    case agent_errc::bad_seed_path:
      return "bad_seed_path";
    case agent_errc::cannot_start:
      return "cannot_start";
    case agent_errc::no_transcript:
      return "no_transcript";
    case agent_errc::transcript_too_large:
      return "transcript_too_large";
    case agent_errc::malformed_events:
      return "malformed_events";
    case agent_errc::malformed_trajectory:
      return "malformed_trajectory";
  }
  return "unknown";
}

asio::awaitable<protocol::transcript> run_agent(agent_options options, agent_case c) {
  if (options.argv.empty()) throw std::invalid_argument("run_agent: argv is empty");
  case_folder folder(options.temp_root);
  std::optional<detail::agent_error> failure = folder.error();
  if (!failure) failure = seed(folder, c.files);
  protocol::transcript t;
  if (!failure) {
    auto p = program_for(options, c, folder);
    try {
      auto run = run_program(std::move(p));
      auto r = co_await std::move(run);
      t = gather(options, folder, r);
    } catch (const boost::system::system_error& e) {
      // A cancellation is the case's end, not its result: the folder goes as the frame unwinds.
      if (e.code() == asio::error::operation_aborted) throw;
      failure = detail::agent_error{make_error_code(agent_errc::cannot_start), e.what()};
    }
  }
  if (failure) t = failed(*failure);
  keep_if_failed(options, folder, t);
  co_return t;
}

study::subject agent_subject(agent_options options) {
  if (options.argv.empty()) throw std::invalid_argument("agent_subject: argv is empty");
  // Not a coroutine: run_agent's parameters own the copies, whatever becomes of this lambda.
  return [options = std::move(options)](run_context& c) {
    agent_case ac;
    ac.prompt = input_text(c.sample().input);
    ac.eval = c.id().eval;
    ac.sample = c.id().sample;
    ac.target = c.target().label;
    ac.provider = c.target().provider;
    ac.files = options.files ? options.files(c.sample()) : c.sample().files;
    return run_agent(options, std::move(ac));
  };
}

}  // namespace mira::study
