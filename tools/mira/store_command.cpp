// `mira store convert RUN_ID --to per-case|compact`: rewrites a saved run's case records in the
// other layout under the run's lock, then records the layout in meta.json. Nothing is lost on
// the way: the new layout is durable before the old one's files go (store::convert_run_layout).
#include "commands.hpp"
#include "help.hpp"
#include "session.hpp"

#include <mira/store/layout_convert.hpp>
#include <mira/store/run_store.hpp>

#include <cstdio>

namespace mira::cli {

int cmd_store(const std::vector<std::string>& args) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h")
    return std::fputs(store_help, args.empty() ? stderr : stdout),
           args.empty() ? exit_usage : exit_ok;
  if (args[0] != "convert")
    throw usage_error{"mira store: unknown action '" + printable(args[0]) + "' (convert)"};
  std::string run_id, results_dir = "results";
  std::optional<store::layout> to;
  for (std::size_t i = 1; i < args.size(); ++i) {
    auto value = [&]() -> const std::string& {
      if (i + 1 >= args.size()) throw usage_error{args[i] + " needs a value"};
      return args[++i];
    };
    if (args[i] == "--to") {
      auto& v = value();
      to = store::layout_from_string(v);
      if (!to) throw usage_error{"--to: '" + printable(v) + "' is not per-case or compact"};
    } else if (args[i] == "--results-dir") {
      results_dir = value();
    } else if (run_id.empty() && !args[i].empty() && args[i][0] != '-') {
      run_id = args[i];
    } else {
      throw usage_error{"mira store convert: unexpected argument '" + printable(args[i]) + "'"};
    }
  }
  if (run_id.empty() || !to) throw usage_error{"mira store convert needs RUN_ID and --to"};
  auto run = store::run_store::open(results_dir, run_id);
  if (!run) {
    std::fprintf(stderr, "mira: %s\n", printable(run.error()).c_str());
    return run.error().find(" is in use by ") != std::string::npos ? exit_host_error : exit_usage;
  }
  if (run->meta().layout == *to) {
    std::fprintf(stderr, "run %s already has the %s layout\n", run_id.c_str(),
                 std::string(store::to_string(*to)).c_str());
    return exit_ok;
  }
  auto done = store::convert_run_layout(run->path(), *to);
  if (!done) {
    std::fprintf(stderr, "mira: %s\n", printable(done.error()).c_str());
    return exit_host_error;
  }
  for (auto& note : done->notes) std::fprintf(stderr, "mira: note: %s\n", printable(note).c_str());
  run->meta().layout = *to;
  if (auto ec = run->save_meta()) {
    std::fprintf(stderr, "mira: cannot write meta.json: %s\n", ec.message().c_str());
    return exit_host_error;
  }
  std::fprintf(stderr,
               "converted run %s to the %s layout: %zu case record(s), %zu old file(s) removed\n",
               run_id.c_str(), std::string(store::to_string(*to)).c_str(), done->records,
               done->removed_files);
  return exit_ok;
}

}  // namespace mira::cli
