// Command-line parsing (see args.hpp).
#include "args.hpp"

#include "flags.hpp"

#include <mira/command_line.hpp>

#include <cctype>

namespace mira::cli {

namespace {

bool positional(const std::string& a) {
  return !a.empty() && a[0] != '-';
}

// Which arguments a command takes besides its flags, and which checks follow.
struct command_kind {
  bool exports, reports, selects, launches;
  explicit command_kind(command cmd)
      : exports(cmd == command::export_),
        reports(cmd == command::report || exports || cmd == command::store_convert),
        selects(cmd == command::plan || cmd == command::run || cmd == command::score),
        launches(selects || cmd == command::list || cmd == command::doctor) {}
};

// The study after `--`: the rest of the arguments, unless a --study* flag gave it already.
void study_after_dashes(const std::vector<std::string>& args, std::size_t i, run_args& out) {
  if (out.launch.mode)
    throw usage_error{"the study is given twice: by --study" +
                      (*out.launch.mode == config::launch_mode::study
                           ? std::string()
                           : "-" + std::string(config::to_string(*out.launch.mode))) +
                      " and after `--`"};
  out.launch.argv.assign(args.begin() + static_cast<std::ptrdiff_t>(i) + 1, args.end());
  if (out.launch.argv.empty()) throw usage_error{"nothing after `--`: give the study's command"};
}

// A word that is no flag of `cmd` and no positional argument it still takes, with the flag it
// may be a misspelling of.
usage_error unknown_option(command cmd, const std::string& a) {
  std::vector<std::string> names;
  for (auto& known : flags())
    if (known.commands & bit(cmd)) names.emplace_back(known.name);
  auto near = positional(a) ? std::string() : config::did_you_mean(a, names);
  return usage_error{"unknown option '" + printable(a) + "'" +
                     (near.empty() ? std::string() : "; did you mean " + near + "?")};
}

// Each argument in turn: flags (applied by their row of the table), the positional arguments
// `cmd` takes, the study after `--`. False when help was asked for: nothing else is read.
bool read_words(command cmd, const std::vector<std::string>& args, run_args& out) {
  const command_kind k(cmd);
  for (std::size_t i = 0; i < args.size(); ++i) {
    const auto& a = args[i];
    if (a == "--") {
      study_after_dashes(args, i, out);
      break;
    }
    if (a == "-h" || a == "--help") return false;
    if (const auto* f = find_flag(cmd, a)) {
      static const std::string none;
      if (!f->metavar.empty() && (i + 1 >= args.size() || args[i + 1] == "--"))
        throw usage_error{a + " needs a value"};
      f->apply(out, a, f->metavar.empty() ? none : args[++i]);
    } else if (positional(a) &&
               (cmd == command::merge || cmd == command::compare || cmd == command::view)) {
      out.runs.push_back(a);
    } else if (positional(a) && k.reports && out.run_id.empty()) {
      out.run_id = a;
    } else if (positional(a) && (k.selects || k.exports || cmd == command::report) &&
               out.selection.filter.empty()) {
      out.selection.filter = a;
    } else {
      throw unknown_option(cmd, a);
    }
  }
  return true;
}

// Every report goes to a place of its own: a file --format (not the table) for --out, no
// path twice among the --out FORMAT:PATH, none where --format's report goes.
void check_outs(command cmd, const run_args& out) {
  if (cmd != command::export_ && !out.out.empty() && out.format == "table")
    throw usage_error{"--out needs a file --format (json, jsonl, csv, junit, md or html)"};
  for (std::size_t i = 0; i < out.outs.size(); ++i)
    for (std::size_t j = 0; j < i; ++j)
      if (out.outs[i].path == out.outs[j].path)
        throw usage_error{"--out: " + printable(out.outs[i].path) + " is given twice (" +
                          out.outs[j].format + " and " + out.outs[i].format + ")"};
  for (auto& o : out.outs)
    if (o.path == out.out || (o.path == "-" && out.out.empty() && out.format != "table"))
      throw usage_error{"--out " + o.format + ":" + printable(o.path) + ": " +
                        (o.path == "-" ? "stdout already has the --format report"
                                       : "the --format report already goes there")};
}

// The flags of a run that go together: a dry run saves nothing (no --resume, no --run-id),
// --execute-only saves artifacts and resumes by itself, mira score reads them.
void check_saving(command cmd, const run_args& out) {
  if (out.dry_run && !out.resume.empty())
    throw usage_error{"--dry-run and --resume do not go together: a dry run saves nothing"};
  if (!out.new_run_id.empty()) {
    if (out.dry_run || out.execute_only)
      throw usage_error{std::string("--run-id names a saved run; ") +
                        (out.dry_run ? "--dry-run" : "--execute-only") + " saves none"};
    if (!out.resume.empty() && out.resume != out.new_run_id)
      throw usage_error{"--run-id " + out.new_run_id + " and --resume " + printable(out.resume) +
                        " name two runs: --resume ID alone continues a run"};
  }
  if (cmd == command::score && out.artifacts.empty())
    throw usage_error{"mira score needs --artifacts DIR (made by mira run --execute-only)"};
  if (cmd == command::run && out.execute_only) {
    if (out.artifacts.empty()) throw usage_error{"--execute-only needs --artifacts DIR"};
    if (!out.resume.empty() || out.retry_errors || out.retry_failed)
      throw usage_error{
          "--execute-only resumes by itself (cases with an artifact are not executed again); "
          "--resume, --retry-errors and --retry-failed do not apply"};
    if (out.dry_run) throw usage_error{"--execute-only saves artifacts; --dry-run does not apply"};
  }
  if (cmd == command::run && !out.artifacts.empty() && !out.execute_only)
    throw usage_error{"--artifacts goes with --execute-only (mira score reads them back)"};
}

}  // namespace

std::vector<std::string> split_command_line(std::string_view line) {
  auto words = mira::split_command_line(line);
  if (!words) throw usage_error{"--study-cmd " + words.error().message()};
  return std::move(*words);
}

std::string canonical_format(std::string_view name) {
  std::string lower;
  for (char c : name) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower == "xml") return "junit";
  if (lower == "ndjson") return "jsonl";
  if (lower == "markdown") return "md";
  for (auto* f : {"table", "json", "jsonl", "csv", "junit", "md", "html"})
    if (lower == f) return lower;
  return {};
}

run_args parse_args(command cmd, const std::vector<std::string>& args) {
  run_args out;
  const command_kind k(cmd);
  if (k.exports) out.format = "atif";
  if (!read_words(cmd, args, out)) {
    out.help = true;
    return out;
  }
  check_outs(cmd, out);
  if (cmd == command::report && out.min_scored > 0) out.check = true;
  if (cmd == command::compare) {
    if (out.runs.size() != 2)
      throw usage_error{"mira compare needs two runs, BASE and CANDIDATE (got " +
                        std::to_string(out.runs.size()) + ")"};
    return out;
  }
  if (cmd == command::merge) {
    if (out.runs.empty()) throw usage_error{"mira merge needs the shard runs to merge (RUN...)"};
    return out;
  }
  if (k.reports) {
    if (out.run_id.empty()) throw usage_error{"missing RUN_ID"};
    if (cmd == command::store_convert && !out.convert_to)
      throw usage_error{"mira store convert needs --to per-case|compact"};
    return out;
  }
  if (cmd == command::serve || cmd == command::view)
    return out;  // serve's studies are checked with mira.toml's
  if (k.launches) check_saving(cmd, out);
  return out;
}

}  // namespace mira::cli
