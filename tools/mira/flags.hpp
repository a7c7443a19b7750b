// The one table of `mira` flags: which commands take each flag, how its value lands in run_args,
// its help line and its key in a saved run's configuration. Parsing, `--help`, meta.json's
// `config` and the check that docs/cli.md lists every flag all read this table, so a flag added
// here is added everywhere (and one missing from the docs fails a test).
#pragma once

#include "args.hpp"

#include <boost/json/object.hpp>

#include <span>
#include <string>
#include <string_view>

namespace mira::cli {

/// A set of commands, one bit per `command`.
constexpr unsigned bit(command c) {
  return 1u << static_cast<unsigned>(c);
}

/// Where a flag is listed in a command's help, in this order.
enum class help_section { launch, selection, output, scheduling, report, saved, execute };

struct flag_spec {
  std::string_view name;     // "--max-concurrent"
  std::string_view alias;    // "-j", or empty
  std::string_view metavar;  // "N"; empty for a switch
  unsigned commands;         // bit(command::run) | ...
  help_section section;
  std::string_view help;  // lines joined by '\n'
  /// Stores the value (empty for a switch) in `out`; throws usage_error naming `flag`.
  void (*apply)(run_args& out, const std::string& flag, const std::string& value);
  /// The key in meta.json's session `config` ("selection.evals" nests); empty: not recorded.
  std::string_view config_key = {};
  boost::json::value (*config)(const run_args&) = nullptr;
};

/// Every flag of every command. A name may appear twice when two commands give it a different
/// meaning or help (`--format` of `export` against that of `run`); never twice for one command.
std::span<const flag_spec> flags();

/// The flag of that name (or alias) that `cmd` takes, or nullptr.
const flag_spec* find_flag(command cmd, std::string_view name);

/// The flag that sets a field of the selection, found in the table by its config key:
/// "--evals", "--samples", "--targets", "--tag", "--axis", "--shard"; empty for
/// plan::field::none.
std::string_view flag_of(plan::field f);

/// A library's message that begins with the name of what it concerns (`name`: a plan field's,
/// compare's "group_by") with `flag` in its place: the command line's words. The message as it
/// is when it does not begin with that name.
std::string in_flag_words(std::string_view message, std::string_view name, std::string_view flag);

/// A plan's refusal (plan::error's, or a session's invalid_selection, which keeps it) in the
/// command line's words: "--evals: ...", "--axis effort: ..."; `flag` in place of the field's
/// own flag when given ("--shard auto").
std::string in_flag_words(std::string_view message, plan::field f, std::string_view flag = {});

/// The options part of `cmd`'s help: each section's flags, aligned.
std::string options_help(command cmd);

/// The arguments with each `--study-env` value cut to its name (values may be secrets).
std::vector<std::string> argv_without_secrets(const std::vector<std::string>& args);

/// A session's effective configuration as meta.json records it: `argv` (with `--study-env`
/// values left out), the positional filter, then every flag with a config key.
boost::json::object config_json(const std::vector<std::string>& argv, const run_args& a);

}  // namespace mira::cli
