// `mira compare BASE CANDIDATE`: opens both runs, compares them (compare::compare_runs) and
// prints or writes the comparison; with --fail-on-regression, --max-regressions or --min-scored
// its exit code is the gate's.
#include "commands.hpp"
#include "config_step.hpp"
#include "console.hpp"
#include "flags.hpp"
#include "help.hpp"

#include <mira/compare/compare.hpp>

#include <cstdio>

namespace mira::cli {

int cmd_compare(const std::vector<std::string>& args) {
  auto a = parse_args(command::compare, args);
  if (a.help) return std::fputs(command_help(command::compare).c_str(), stdout), exit_ok;
  prepare(command::compare, a);  // mira.toml's [results] dir unless --results-dir
  // Each run is read a case at a time: what is kept is the pairs, not the records.
  std::optional<store::run_reader> runs[2];
  for (int i = 0; i < 2; ++i) {
    auto run = compare::open(a.results_dir, a.runs[static_cast<std::size_t>(i)]);
    if (!run) {
      std::fprintf(stderr, "mira: compare: %s\n", printable(run.error().message()).c_str());
      return exit_usage;
    }
    for (auto& u : run->unreadable())
      std::fprintf(stderr, "mira: warning: cannot read %s\n", printable(u).c_str());
    runs[i] = std::move(*run);
  }
  auto c = compare::compare_runs(*runs[0], *runs[1],
                                 {.group_by = a.group_by,
                                  .alpha = a.alpha,
                                  .gate = {.allow_missing = a.allow_missing,
                                           .max_regressions = a.max_regressions,
                                           .min_scored = a.min_scored_pairs.value_or(1)}});
  if (!c) {
    // The library names its option; the command line its flag.
    auto text = c.error().code == compare::errc::unknown_group
                    ? in_flag_words(c.error().message(), "group_by", "--group-by")
                    : c.error().message();
    std::fprintf(stderr, "mira: compare: %s\n", printable(text).c_str());
    return exit_usage;
  }
  const bool to_stdout = a.out == "-";
  if (a.out.empty() || !to_stdout) {
    // The table on stdout, unless --format asks for another format there.
    const auto shown = a.out.empty() ? a.format : std::string("table");
    compare::render(*c, shown, [](std::string_view piece) {
      std::fwrite(piece.data(), 1, piece.size(), stdout);
    });
  }
  if (!a.out.empty()) {
    std::fflush(stdout);
    if (auto ec = compare::write(*c, a.format, a.out)) {
      std::fprintf(stderr, "mira: cannot write %s: %s\n", printable(a.out).c_str(),
                   ec.message().c_str());
      return exit_host_error;
    }
    if (!to_stdout)
      std::fprintf(stderr, "wrote %s (%s)\n", printable(a.out).c_str(), a.format.c_str());
  }
  // A threshold of the gate asks for the gate: a --max-regressions that did not decide the exit
  // code would let through what it was given to stop.
  const bool gated = a.fail_on_regression || a.max_regressions || a.min_scored_pairs;
  if (!c->gate.passed())
    std::fprintf(stderr, "mira: compare: %s against %s: gate %s%s\n",
                 printable(c->candidate_run).c_str(), printable(c->base_run).c_str(),
                 printable(c->gate.summary()).c_str(),
                 gated ? ""
                       : " (exit 0 without --fail-on-regression, --max-regressions or "
                         "--min-scored)");
  return gated && !c->gate.passed() ? exit_failed : exit_ok;
}

}  // namespace mira::cli
