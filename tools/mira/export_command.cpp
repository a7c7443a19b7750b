// `mira export RUN_ID --format atif`: one ATIF document per case of a saved run, for SFT/RL and
// trajectory viewers. The study's own trajectory when an execute artifact has one, else one
// synthesised from the saved transcript summary; the verdict and the case identity go in
// `extra`. No study is started.
#include "commands.hpp"
#include "config_step.hpp"
#include "console.hpp"
#include "help.hpp"

#include <mira/protocol/json_text.hpp>
#include <mira/protocol/trajectory.hpp>
#include <mira/store/artifacts.hpp>
#include <mira/store/files.hpp>

#include <cstdio>
#include <optional>

namespace mira::cli {

namespace json = boost::json;
using schedule::case_state;

namespace {

// The trajectory of an execute artifact, when it has a readable one.
std::optional<json::object> artifact_trajectory(const json::object& artifact,
                                                const std::string& key) {
  auto* t = artifact.if_contains("transcript");
  auto* traj = t && t->is_object() ? t->get_object().if_contains("trajectory") : nullptr;
  if (!traj || traj->is_null()) return std::nullopt;
  if (auto projected = protocol::project(*traj); !projected || !traj->is_object()) {
    std::fprintf(stderr,
                 "mira: warning: the trajectory of %s is not ATIF-v1 (%s); exporting one made "
                 "from its transcript\n",
                 printable(key).c_str(),
                 projected ? "not an object" : printable(projected.error().message()).c_str());
    return std::nullopt;
  }
  return traj->get_object();
}

// The document for one case; `from_artifact` tells whether it is the study's own trajectory.
json::object export_document(const std::string& run_id, const plan::planned_case& c,
                             const schedule::case_record& r, const json::object* artifact,
                             bool& from_artifact) {
  std::optional<json::object> doc;
  if (artifact) doc = artifact_trajectory(*artifact, c.key);
  from_artifact = doc.has_value();
  const auto result = r.result();
  if (!doc)
    doc = protocol::synthesize_trajectory(
        result ? result->transcript : protocol::transcript_summary{}, "mira-cpp", version);
  if (!doc->contains("session_id")) (*doc)["session_id"] = run_id;
  if (!doc->contains("trajectory_id")) (*doc)["trajectory_id"] = c.key;
  auto& extra = (*doc)["extra"];
  if (!extra.is_object()) extra = json::object{};
  json::array scorers;
  if (result)
    for (auto& s : result->scores) {
      json::object o{
          {"name", s.scorer}, {"value", s.value}, {"pass", s.pass}, {"reason", s.reason}};
      if (s.na) o["na"] = true;
      scorers.push_back(std::move(o));
    }
  extra.as_object()["reward"] =
      json::object{{"pass", r.state == case_state::passed},
                   {"score", result ? json::value(result->aggregate) : json::value(nullptr)},
                   {"status", to_string(r.state)},
                   {"scorers", std::move(scorers)}};
  json::object mira{{"eval", c.params.eval.str()},
                    {"sample", c.params.sample.str()},
                    {"target", c.params.target.str()},
                    {"run_id", run_id},
                    {"key", c.key}};
  if (!c.params.params.empty()) {
    json::object params;
    for (auto& [k, v] : c.params.params) params[k] = v;
    mira["params"] = std::move(params);
  }
  if (c.params.trials > 1) {
    mira["trial"] = c.params.trial;
    mira["trials"] = c.params.trials;
  }
  extra.as_object()["mira"] = std::move(mira);
  return std::move(*doc);
}

}  // namespace

int cmd_export(const std::vector<std::string>& args) {
  auto a = parse_args(command::export_, args);
  if (a.help) return std::fputs(command_help(command::export_).c_str(), stdout), exit_ok;
  prepare(command::export_, a);
  // Read a case at a time: a run of a million cases is exported in the memory of its keys.
  int rc = exit_ok;
  auto run = open_saved_run(a, rc);
  if (!run) return rc;
  // A run made by `mira score` knows where its artifacts are.
  if (a.artifacts.empty()) {
    auto* dir = run->meta().extra.if_contains("scored_artifacts");
    std::error_code ec;
    if (dir && dir->is_string() && std::filesystem::is_directory(dir->get_string().c_str(), ec))
      a.artifacts = dir->get_string();
  }
  std::map<std::string, json::object> artifacts;
  if (!a.artifacts.empty()) {
    auto dir = store::artifact_dir::open(a.artifacts);
    if (!dir) {
      std::fprintf(stderr, "mira: %s\n", printable(dir.error().message()).c_str());
      return exit_usage;
    }
    std::vector<std::string> unreadable;
    artifacts = dir->load(&unreadable);
    for (auto& u : unreadable)
      std::fprintf(stderr, "mira: warning: cannot read the artifact %s\n", printable(u).c_str());
  }
  const bool to_stdout = a.out == "-";
  auto out_dir = a.out.empty() ? std::filesystem::path(a.results_dir) / a.run_id / "export"
                               : std::filesystem::path(a.out);
  if (!to_stdout) {
    std::error_code ec;
    std::filesystem::create_directories(out_dir, ec);
    if (ec) {
      std::fprintf(stderr, "mira: cannot create %s: %s\n", printable(out_dir.string()).c_str(),
                   ec.message().c_str());
      return exit_host_error;
    }
  }
  // "-": one document a line on stdout; otherwise a file per case in the directory.
  std::optional<store::output_file> stdout_file;
  if (to_stdout) {
    auto f = store::output_file::open("-");
    if (!f) {
      std::fprintf(stderr, "mira: cannot write to stdout: %s\n", f.error().message().c_str());
      return exit_host_error;
    }
    stdout_file.emplace(std::move(*f));
  }
  auto write_doc = [&](const std::filesystem::path& path,
                       const json::object& doc) -> boost::system::error_code {
    auto text = protocol::to_json_text(doc) + "\n";
    if (stdout_file) return stdout_file->write(text);
    auto f = store::output_file::open(path);
    if (!f) return f.error();
    f->write(text);
    return f->commit();
  };
  std::size_t written = 0, from_artifacts = 0;
  bool failed = false;
  auto late = run->visit_cases(
      [&](std::size_t, const plan::planned_case& c, const schedule::case_record& r) {
        if (r.state == case_state::skipped || r.state == case_state::cancelled) return true;
        auto it = artifacts.find(c.key);
        bool from_artifact = false;
        auto doc = export_document(a.run_id, c, r, it == artifacts.end() ? nullptr : &it->second,
                                   from_artifact);
        from_artifacts += from_artifact;
        if (auto ec = write_doc(out_dir / (store::encode_key(c.key) + ".atif.json"), doc)) {
          std::fprintf(stderr, "mira: cannot write the export of %s: %s\n",
                       printable(c.key).c_str(), ec.message().c_str());
          failed = true;
          return false;
        }
        ++written;
        return true;
      },
      [&](std::size_t, std::string_view key) {
        return a.selection.filter.empty() || key.find(a.selection.filter) != std::string::npos;
      });
  if (failed) return exit_host_error;
  for (auto& u : late)
    std::fprintf(stderr, "mira: warning: cannot read %s\n", printable(u).c_str());
  if (stdout_file)
    if (auto ec = stdout_file->commit()) {
      std::fprintf(stderr, "mira: cannot write to stdout: %s\n", ec.message().c_str());
      return exit_host_error;
    }
  if (written == 0) {
    std::fprintf(stderr, "mira: run %s has no case to export%s\n", a.run_id.c_str(),
                 a.selection.filter.empty() ? "" : " that matches the filter");
    return exit_usage;
  }
  std::fprintf(stderr, "exported %zu ATIF document(s) (%zu with the study's own trajectory)%s%s\n",
               written, from_artifacts, to_stdout ? "" : " to ",
               to_stdout ? "" : printable(out_dir.string()).c_str());
  return exit_ok;
}

}  // namespace mira::cli
