// `mira merge RUN... [--results-dir R] [--run-id ID] [--allow-partial]`: the shard runs of one
// plan (`mira run --shard I/N` on several machines) become one run folder
// (store::merge_runs); the command only resolves its arguments and says what happened.
#include "commands.hpp"
#include "session.hpp"

#include <mira/store/merge.hpp>

#include <cstdio>

namespace mira::cli {

namespace fs = std::filesystem;

namespace {

constexpr const char* merge_help =
    R"(mira merge - merge the shard runs of one plan into one run

Usage: mira merge RUN... [--results-dir DIR] [--run-id ID] [--allow-partial]

  RUN                  a shard run (made by mira run --shard I/N): a path to its folder, or
                       its run id in --results-dir
  --results-dir DIR    where run ids are looked up and the merged run goes (default ./results)
  --run-id ID          the merged run's id (default: a new one); it must not exist
  --allow-partial      merge even when shards are missing or unfinished: their cases are
                       reported as not run, exit 4; `mira run --resume ID` runs them

Every input must be a shard run of the same study (name and version), the same plan
(fingerprint) and the same shard count; each index once, no case twice, and every index there
(else the missing ones are listed). Otherwise nothing is written. The merged run holds every
case record, each shard's events and study stderr, meta.json with the shards and their timing,
report.json and report.html; the inputs are not changed. mira report, mira export and mira run
--resume work on it. Exit codes: 0 merged; 2 bad input (nothing written); 3 the merged run could
not be written (nothing left behind); 4 merged with --allow-partial, cases not run.

Example:
  mira merge results/shards/0/* results/shards/1/* --run-id nightly
)";

// A RUN argument: a path to a run folder, or a run id in the results directory.
fs::path run_folder_of(const std::string& arg, const fs::path& results_dir) {
  std::error_code ec;
  if (arg.find('/') == std::string::npos && fs::is_directory(results_dir / arg, ec))
    return results_dir / arg;
  return fs::path(arg).lexically_normal();
}

}  // namespace

int cmd_merge(const std::vector<std::string>& args) {
  store::merge_options o;
  std::vector<std::string> runs;
  for (std::size_t i = 0; i < args.size(); ++i) {
    auto value = [&]() -> const std::string& {
      if (i + 1 >= args.size()) throw usage_error{args[i] + " needs a value"};
      return args[++i];
    };
    const auto& a = args[i];
    if (a == "-h" || a == "--help") return std::fputs(merge_help, stdout), exit_ok;
    if (a == "--results-dir")
      o.results_dir = value();
    else if (a == "--run-id")
      o.run_id = value();
    else if (a == "--allow-partial")
      o.allow_partial = true;
    else if (!a.empty() && a[0] != '-')
      runs.push_back(a);
    else
      throw usage_error{"mira merge: unknown option '" + printable(a) + "'"};
  }
  if (runs.empty()) throw usage_error{"mira merge needs the shard runs to merge (RUN...)"};
  std::vector<fs::path> folders;
  for (auto& r : runs) {
    auto f = run_folder_of(r, o.results_dir);
    if (f.filename().empty()) f = f.parent_path();  // "run/" names the folder "run"
    folders.push_back(std::move(f));
  }
  o.argv.push_back("merge");
  o.argv.insert(o.argv.end(), args.begin(), args.end());
  auto merged = store::merge_runs(folders, o);
  if (!merged) {
    std::fprintf(stderr, "mira: merge: %s; nothing was written\n",
                 printable(merged.error().message).c_str());
    return merged.error().what == store::merge_error::kind::bad_input ? exit_usage
                                                                      : exit_host_error;
  }
  auto& info = merged->info;
  for (auto& s : info.shards)
    std::fprintf(stderr, "shard %zu/%zu: run %s, %zu case(s), %.1f s\n", s.index, info.count,
                 printable(s.run_id).c_str(), s.cases, s.seconds);
  for (auto& s : merged->incomplete)
    std::fprintf(stderr, "mira: warning: %s\n", printable(s).c_str());
  std::fprintf(stderr, "merged %zu of %zu shard(s), %zu case(s), into run %s at %s\n",
               info.shards.size(), info.count, merged->cases, merged->run_id.c_str(),
               printable(merged->path.string()).c_str());
  if (merged->complete()) return exit_ok;
  std::string missing;
  for (auto m : info.missing) missing += (missing.empty() ? "" : ", ") + std::to_string(m);
  std::fprintf(stderr,
               "mira: the merged run is partial: %zu of the plan's %zu case(s) not run%s%s; "
               "`mira run --resume %s --results-dir %s -- STUDY_CMD` runs them\n",
               info.not_run, info.plan_cases, missing.empty() ? "" : " (missing shard(s) ",
               missing.empty() ? "" : (missing + ")").c_str(), merged->run_id.c_str(),
               printable(o.results_dir.string()).c_str());
  return exit_stopped;
}

}  // namespace mira::cli
