// `mira merge RUN... [--results-dir R] [--run-id ID] [--allow-partial]`: the shard runs of one
// plan (`mira run --shard I/N` on several machines) become one run folder
// (store::merge_runs); the command only resolves its arguments and says what happened.
#include "commands.hpp"
#include "config_step.hpp"
#include "console.hpp"
#include "help.hpp"

#include <mira/report/render.hpp>
#include <mira/store/merge.hpp>

#include <cstdio>

namespace mira::cli {

namespace fs = std::filesystem;

int cmd_merge(const std::vector<std::string>& args) {
  auto a = parse_args(command::merge, args);
  if (a.help) return std::fputs(command_help(command::merge).c_str(), stdout), exit_ok;
  prepare(command::merge, a);
  store::merge_options o;
  o.report_files = report::saved_run_files;
  o.results_dir = a.results_dir;
  o.run_id = a.new_run_id;
  o.allow_partial = a.allow_partial;
  const auto& runs = a.runs;
  std::vector<fs::path> folders;
  for (auto& r : runs) {
    folders.push_back(run_folder_of(r, o.results_dir));
  }
  o.argv.push_back("merge");
  o.argv.insert(o.argv.end(), args.begin(), args.end());
  auto merged = store::merge_runs(folders, o);
  if (!merged) {
    // The library says what is wrong; the command line how its flags get past it.
    const auto& code = merged.error().code;
    const char* hint = code == store::merge_errc::incomplete
                           ? " (--allow-partial merges what is there; resume an unfinished shard "
                             "with mira run --resume)"
                       : code == store::errc::exists ? ": give another --run-id"
                                                     : "";
    std::fprintf(stderr, "mira: merge: %s%s; nothing was written\n",
                 printable(merged.error().message()).c_str(), hint);
    return code == store::merge_errc::cannot_write ? exit_host_error : exit_usage;
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
