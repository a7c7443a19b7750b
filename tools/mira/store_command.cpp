// `mira store convert RUN_ID --to per-case|compact`: rewrites a saved run's case records in the
// other layout under the run's lock, then records the layout in meta.json. Nothing is lost on
// the way: the new layout is durable before the old one's files go (store::convert_run_layout).
#include "commands.hpp"
#include "config_step.hpp"
#include "console.hpp"
#include "help.hpp"

#include <mira/store/layout_convert.hpp>
#include <mira/store/run_store.hpp>

#include <cstdio>

namespace mira::cli {

int cmd_store(const std::vector<std::string>& args) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h")
    return std::fputs(command_help(command::store_convert).c_str(), args.empty() ? stderr : stdout),
           args.empty() ? exit_usage : exit_ok;
  if (args[0] != "convert")
    throw usage_error{"mira store: unknown action '" + printable(args[0]) + "' (convert)"};
  auto a = parse_args(command::store_convert, {args.begin() + 1, args.end()});
  if (a.help) return std::fputs(command_help(command::store_convert).c_str(), stdout), exit_ok;
  prepare(command::store_convert, a);
  const auto& run_id = a.run_id;
  const auto to = a.convert_to;
  auto run = store::run_store::open(a.results_dir, run_id);
  if (!run) {
    std::fprintf(stderr, "mira: %s\n", printable(run.error().message()).c_str());
    return exit_for(run.error());
  }
  if (run->meta().layout == *to) {
    std::fprintf(stderr, "run %s already has the %s layout\n", run_id.c_str(),
                 std::string(store::to_string(*to)).c_str());
    return exit_ok;
  }
  auto done = store::convert_run_layout(run->path(), *to);
  if (!done) {
    std::fprintf(stderr, "mira: %s\n", printable(done.error().message()).c_str());
    return exit_host_error;
  }
  for (auto& note : done->notes) std::fprintf(stderr, "mira: note: %s\n", printable(note).c_str());
  run->meta().layout = *to;
  if (auto e = run->save_meta()) {
    std::fprintf(stderr, "mira: %s\n", printable(e.message()).c_str());
    return exit_host_error;
  }
  std::fprintf(stderr,
               "converted run %s to the %s layout: %zu case record(s), %zu old file(s) removed\n",
               run_id.c_str(), std::string(store::to_string(*to)).c_str(), done->records,
               done->removed_files);
  return exit_ok;
}

}  // namespace mira::cli
