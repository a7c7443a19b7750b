// The `mira` flag table (see flags.hpp) and what reads it: lookup, help, saved configuration.
#include "flags.hpp"

#include <mira/store/files.hpp>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <thread>

namespace mira::cli {

namespace json = boost::json;

namespace {

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::size_t start = 0;
  for (;;) {
    auto end = s.find(sep, start);
    auto part = s.substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (!part.empty()) out.push_back(part);
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return out;
}

std::int64_t whole_number(const std::string& flag, const std::string& v, std::int64_t min,
                          std::int64_t max) {
  char* end = nullptr;
  errno = 0;
  long long n = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || errno == ERANGE || n < min || n > max)
    throw usage_error{flag + " needs a whole number from " + std::to_string(min) + " to " +
                      std::to_string(max) + ", got '" + printable(v) + "'"};
  return n;
}

double number(const std::string& flag, const std::string& v, bool allow_zero) {
  char* end = nullptr;
  double d = std::strtod(v.c_str(), &end);
  if (v.empty() || *end != '\0' || !std::isfinite(d) || d < 0 || (d == 0 && !allow_zero))
    throw usage_error{flag + " needs a " + (allow_zero ? "non-negative" : "positive") +
                      " number, got '" + printable(v) + "'"};
  return d;
}

schedule::duration seconds(const std::string& flag, const std::string& v) {
  return std::chrono::duration_cast<schedule::duration>(
      std::chrono::duration<double>(number(flag, v, false)));
}

void one_of(const std::string& flag, const std::string& v,
            std::initializer_list<std::string_view> allowed, std::string_view said) {
  if (std::find(allowed.begin(), allowed.end(), v) == allowed.end())
    throw usage_error{flag + " must be " + std::string(said) + ", got '" + printable(v) + "'"};
}

// A comma-separated list of globs; commas inside {a,b} alternatives do not separate.
std::vector<std::string> split_globs(const std::string& s) {
  std::vector<std::string> out;
  std::string part;
  int depth = 0;
  for (char c : s) {
    if (c == ',' && depth == 0) {
      if (!part.empty()) out.push_back(std::move(part));
      part.clear();
      continue;
    }
    depth += c == '{' ? 1 : c == '}' && depth > 0 ? -1 : 0;
    part += c;
  }
  if (!part.empty()) out.push_back(std::move(part));
  return out;
}

// --out PATH, or FORMAT:PATH (a format name before the first colon; ./json:x is a path).
void add_out(run_args& o, const std::string& flag, const std::string& v) {
  auto colon = v.find(':');
  auto format = colon == std::string::npos ? std::string() : canonical_format(v.substr(0, colon));
  if (format.empty()) {
    if (!o.out.empty())
      throw usage_error{flag + " PATH is given twice ('" + printable(o.out) + "' and '" +
                        printable(v) + "'): give the others as FORMAT:PATH"};
    o.out = v;
    return;
  }
  auto path = v.substr(colon + 1);
  if (path.empty()) throw usage_error{flag + " " + printable(v) + ": no PATH after the format"};
  if (format == "table")
    throw usage_error{flag + " " + printable(v) +
                      ": the table goes to stdout; FORMAT is json, jsonl, csv, junit, md or html"};
  o.outs.push_back({format, path});
}

// A name for a new run: a valid run id, and not `latest` (which names the newest run).
std::string run_name(const std::string& flag, const std::string& v) {
  if (auto why = store::invalid_run_id(v))
    throw usage_error{flag + " '" + printable(v) + "': " + *why};
  if (v == "latest")
    throw usage_error{flag + " latest: 'latest' names the newest saved run; choose another id"};
  return v;
}

// Records one way to start the study; a second one is a usage error.
void study_mode(run_args& o, const std::string& flag, config::launch_mode m, const std::string& v) {
  if (o.launch.mode)
    throw usage_error{"give one way to start the study: " + flag + " and " +
                      (*o.launch.mode == config::launch_mode::study
                           ? std::string("--study")
                           : "--study-" + std::string(config::to_string(*o.launch.mode))) +
                      " are both given"};
  if (v.empty()) throw usage_error{flag + " is empty"};
  o.launch.mode = m;
  o.launch.value = v;
}

json::value strings_json(const std::vector<std::string>& v) {
  json::array out;
  for (auto& s : v) out.emplace_back(s);
  return out;
}

json::value seconds_json(const std::optional<schedule::duration>& d) {
  if (!d) return nullptr;
  return std::chrono::duration<double>(*d).count();
}

template <class T>
json::value optional_json(const std::optional<T>& v) {
  return v ? json::value(*v) : json::value(nullptr);
}

constexpr unsigned selecting = bit(command::plan) | bit(command::run) | bit(command::score);
constexpr unsigned launching = selecting | bit(command::list) | bit(command::doctor);
constexpr unsigned running = bit(command::run) | bit(command::score);
constexpr unsigned reporting = running | bit(command::report);

using section = help_section;

// In help order within each section; config keys in the order meta.json has always had them.
const flag_spec table[] = {
    // Study launch.
    {"--study-cmd", "", "\"CMD ARGS\"", launching, section::launch,
     "the study's command line as one string (shell-like quoting)",
     [](run_args& o, const std::string& f, const std::string& v) {
       if (split_command_line(v).empty()) throw usage_error{f + " is empty"};
       study_mode(o, f, config::launch_mode::cmd, v);
     }},
    {"--study", "", "PATH", launching, section::launch,
     "the study file: .py runs with python3 (uv run when uv is\ninstalled and the file has "
     "inline script metadata), .mjs/.js\nwith node, .rs with cargo; an executable runs itself",
     [](run_args& o, const std::string& f, const std::string& v) {
       study_mode(o, f, config::launch_mode::study, v);
     }},
    {"--study-python", "", "\"SCRIPT ARGS\"", launching, section::launch, "python3 SCRIPT ARGS",
     [](run_args& o, const std::string& f, const std::string& v) {
       study_mode(o, f, config::launch_mode::python, v);
     }},
    {"--study-uv", "", "\"SCRIPT ARGS\"", launching, section::launch, "uv run SCRIPT ARGS",
     [](run_args& o, const std::string& f, const std::string& v) {
       study_mode(o, f, config::launch_mode::uv, v);
     }},
    {"--study-bin", "", "NAME", launching, section::launch, "cargo run -q --bin NAME",
     [](run_args& o, const std::string& f, const std::string& v) {
       study_mode(o, f, config::launch_mode::bin, v);
     }},
    {"--study-example", "", "NAME", launching, section::launch, "cargo run -q --example NAME",
     [](run_args& o, const std::string& f, const std::string& v) {
       study_mode(o, f, config::launch_mode::example, v);
     }},
    {"--study-script", "", "PATH", launching, section::launch,
     "a single-file Rust study (cargo script format), whatever\nits extension; built by cargo",
     [](run_args& o, const std::string& f, const std::string& v) {
       study_mode(o, f, config::launch_mode::script, v);
     }},
    {"--package", "", "PKG", launching, section::launch,
     "the cargo package of --study-bin/--study-example",
     [](run_args& o, const std::string&, const std::string& v) { o.launch.package = v; }},
    {"--manifest-path", "", "PATH", launching, section::launch,
     "the Cargo.toml of --study-bin/--study-example",
     [](run_args& o, const std::string&, const std::string& v) { o.launch.manifest_path = v; }},
    {"--launcher", "", "NAME", launching, section::launch,
     "[launchers.NAME] of mira.toml (default: its\ndefault_launcher); a --study* flag replaces "
     "its mode",
     [](run_args& o, const std::string&, const std::string& v) { o.launch.launcher = v; }},
    {"--study-env", "", "KEY[=VALUE]", launching, section::launch,
     "set KEY for the study (KEY alone: the host's value); repeatable",
     [](run_args& o, const std::string& f, const std::string& v) {
       if (v.empty() || v.front() == '=') throw usage_error{f + " needs KEY or KEY=VALUE"};
       o.study_env.push_back(v);
     }},
    {"--study-env-clear", "", "", launching, section::launch,
     "start the study with only the --study-env variables",
     [](run_args& o, const std::string&, const std::string&) { o.study_env_clear = true; }},
    {"--init-timeout", "", "SECONDS", launching, section::launch,
     "how long the study may take to answer initialize, and then to\nlist its evals (default 60 "
     "each)",
     [](run_args& o, const std::string& f, const std::string& v) {
       o.init_timeout = seconds(f, v);
     }},
    {"--idle-timeout", "", "SECONDS", launching, section::launch,
     "kill a study that writes nothing this long while requests are\npending, as if it had "
     "crashed (default: off)",
     [](run_args& o, const std::string& f, const std::string& v) {
       o.idle_timeout = seconds(f, v);
     }},

    // Selection.
    {"--preset", "", "NAME", selecting, section::selection,
     "[presets.NAME] of mira.toml: its evals, samples, targets,\ntag, axes and timeout, each "
     "unless given here",
     [](run_args& o, const std::string&, const std::string& v) { o.preset = v; }, "preset",
     [](const run_args& a) -> json::value { return json::string(a.preset); }},
    {"--evals", "", "GLOBS", selecting, section::selection, "evals to run",
     [](run_args& o, const std::string&, const std::string& v) {
       auto globs = split_globs(v);
       o.selection.evals.insert(o.selection.evals.end(), globs.begin(), globs.end());
     },
     "selection.evals", [](const run_args& a) { return strings_json(a.selection.evals); }},
    {"--samples", "", "GLOBS", selecting, section::selection, "sample ids",
     [](run_args& o, const std::string&, const std::string& v) {
       auto globs = split_globs(v);
       o.selection.samples.insert(o.selection.samples.end(), globs.begin(), globs.end());
     },
     "selection.samples", [](const run_args& a) { return strings_json(a.selection.samples); }},
    {"--targets", "", "GLOBS", selecting, section::selection, "target labels",
     [](run_args& o, const std::string&, const std::string& v) {
       auto globs = split_globs(v);
       o.selection.targets.insert(o.selection.targets.end(), globs.begin(), globs.end());
     },
     "selection.targets", [](const run_args& a) { return strings_json(a.selection.targets); }},
    {"--tag", "", "TAG", selecting, section::selection,
     "samples with this tag (repeatable: any of them)",
     [](run_args& o, const std::string&, const std::string& v) { o.selection.tags.push_back(v); },
     "selection.tags", [](const run_args& a) { return strings_json(a.selection.tags); }},
    {"--axis", "", "NAME=V1,V2", selecting, section::selection,
     "axis values (repeatable; the same NAME twice intersects);\ntarget=GLOBS is --targets GLOBS",
     [](run_args& o, const std::string& f, const std::string& v) {
       auto eq = v.find('=');
       if (eq == std::string::npos || eq == 0 || eq + 1 == v.size())
         throw usage_error{f + " needs NAME=V1,V2, got '" + printable(v) + "'"};
       auto name = v.substr(0, eq);
       auto globs = split_globs(v.substr(eq + 1));
       if (name == "target")  // the primary axis: the same as --targets
         o.selection.targets.insert(o.selection.targets.end(), globs.begin(), globs.end());
       else
         o.selection.axes.emplace_back(name, std::move(globs));
     },
     "selection.axes",
     [](const run_args& a) -> json::value {
       json::object axes;
       for (auto& [name, globs] : a.selection.axes) {
         auto& slot = axes[name];
         if (!slot.is_array()) slot = json::array{};
         slot.as_array().push_back(strings_json(globs));
       }
       return axes;
     }},
    {"--trials", "", "N", selecting, section::selection,
     "trials per case instead of the eval's (0 means 1)",
     [](run_args& o, const std::string& f, const std::string& v) {
       o.selection.trials = whole_number(f, v, 0, 1000000);
     },
     "selection.trials", [](const run_args& a) { return optional_json(a.selection.trials); }},
    {"--seed", "", "S", selecting, section::selection,
     "base seed instead of the eval's; trial t gets S + t",
     [](run_args& o, const std::string& f, const std::string& v) {
       o.selection.seed = whole_number(f, v, INT64_MIN / 2, INT64_MAX / 2);
     },
     "selection.seed", [](const run_args& a) { return optional_json(a.selection.seed); }},
    {"--shard", "", "I/N|auto", selecting, section::selection,
     "only shard I of N (0-based) of the plan; auto: from\nSLURM_ARRAY_TASK_ID/_COUNT, "
     "JOB_COMPLETION_INDEX with\nMIRA_SHARD_COUNT or GitLab's CI_NODE_INDEX/_TOTAL\n(merge the "
     "shards with mira merge)",
     [](run_args& o, const std::string& f, const std::string& v) {
       auto spec = v == "auto" ? plan::shard_from_env([](const char* n) { return std::getenv(n); })
                               : plan::parse_shard(v);
       if (!spec)
         throw usage_error{printable(in_flag_words(spec.error().message(), spec.error().field,
                                                   v == "auto" ? f + " auto" : f))};
       o.shard = *spec;
     },
     "shard",
     [](const run_args& a) -> json::value {
       return a.shard ? json::value(plan::to_string(*a.shard)) : json::value(nullptr);
     }},

    // Output of list and plan.
    {"--json", "", "", bit(command::list) | bit(command::plan), section::output,
     "print the catalogue (list) or every planned case (plan) as JSON",
     [](run_args& o, const std::string&, const std::string&) { o.json = true; }},

    // Scheduling.
    {"--max-concurrent", "-j", "N", running, section::scheduling,
     "cases in flight at once (default 8)",
     [](run_args& o, const std::string& f, const std::string& v) {
       o.policy.concurrency.max_concurrent =
           static_cast<std::size_t>(whole_number(f, v, 1, 100000));
     },
     "max_concurrent",
     [](const run_args& a) -> json::value { return a.policy.concurrency.max_concurrent; }},
    {"--procs", "-P", "N|auto", running, section::scheduling,
     "run N processes of the study (auto: one per CPU), for\nstudies that answer one request at a "
     "time; each takes at\nmost ceil(j / N) cases at once (default 1)",
     [](run_args& o, const std::string& f, const std::string& v) {
       if (v == "auto") {
         o.procs = std::max(1u, std::thread::hardware_concurrency());
         return;
       }
       char* end = nullptr;
       errno = 0;
       long long n = std::strtoll(v.c_str(), &end, 10);
       if (v.empty() || *end != '\0' || errno == ERANGE || n < 1 || n > 1024)
         throw usage_error{f + " needs a whole number from 1 to 1024 or auto, got '" +
                           printable(v) + "'"};
       o.procs = static_cast<std::size_t>(n);
     },
     "procs", [](const run_args& a) -> json::value { return a.procs; }},
    {"--provider-concurrency", "", "p=N,..", running, section::scheduling,
     "per-provider caps (provider from the target's listing)",
     [](run_args& o, const std::string& f, const std::string& v) {
       for (auto& entry : split(v, ',')) {
         auto eq = entry.find('=');
         if (eq == std::string::npos)
           throw usage_error{f + " needs PROVIDER=N,..., got '" + printable(entry) + "'"};
         o.policy.concurrency.provider_limits[entry.substr(0, eq)] =
             static_cast<std::size_t>(whole_number(f, entry.substr(eq + 1), 1, 100000));
       }
     },
     "provider_concurrency",
     [](const run_args& a) -> json::value {
       json::object providers;
       for (auto& [name, n] : a.policy.concurrency.provider_limits) providers[name] = n;
       return providers;
     }},
    {"--no-adaptive", "", "", running, section::scheduling,
     "no adaptive per-provider limits and no rate-limit backoff",
     [](run_args& o, const std::string&, const std::string&) {
       o.policy.concurrency.adaptive = false;
     },
     "adaptive", [](const run_args& a) -> json::value { return a.policy.concurrency.adaptive; }},
    {"--max-retries", "", "N", running, section::scheduling,
     "retries of rate limits, retryable errors, infra errors and\ncases whose study died (default "
     "4); then the case is N/A",
     [](run_args& o, const std::string& f, const std::string& v) {
       o.policy.retry.max_retries = static_cast<int>(whole_number(f, v, 0, 1000));
     },
     "max_retries", [](const run_args& a) -> json::value { return a.policy.retry.max_retries; }},
    {"--max-restarts", "", "N", running, section::scheduling,
     "start a study that died (or hung) again, up to N times\n(default 3; with --procs: per "
     "process); the cases it was running are\nretried on the new one (with --procs: on the "
     "others)",
     [](run_args& o, const std::string& f, const std::string& v) {
       o.max_restarts = static_cast<int>(whole_number(f, v, 0, 1000));
     },
     "max_restarts", [](const run_args& a) -> json::value { return a.max_restarts; }},
    {"--timeout", "", "SECONDS", running, section::scheduling,
     "per-attempt deadline (fractional allowed); the study is\nsent `cancel`; counts as a failure "
     "unless --timeout-is-infra",
     [](run_args& o, const std::string& f, const std::string& v) {
       o.policy.case_timeout = seconds(f, v);
     },
     "timeout_s", [](const run_args& a) { return seconds_json(a.policy.case_timeout); }},
    {"--timeout-is-infra", "", "", running, section::scheduling,
     "retry timeouts, and report them N/A when retries run out",
     [](run_args& o, const std::string&, const std::string&) { o.policy.timeout_is_infra = true; },
     "timeout_is_infra",
     [](const run_args& a) -> json::value { return a.policy.timeout_is_infra; }},
    {"--deadline", "", "SECONDS", running, section::scheduling,
     "whole-run deadline: then in-flight cases are cancelled",
     [](run_args& o, const std::string& f, const std::string& v) {
       o.policy.deadline = seconds(f, v);
     },
     "deadline_s", [](const run_args& a) { return seconds_json(a.policy.deadline); }},
    {"--fail-fast", "", "", running, section::scheduling, "the first failed case cancels the rest",
     [](run_args& o, const std::string&, const std::string&) { o.policy.fail_fast = true; },
     "fail_fast", [](const run_args& a) -> json::value { return a.policy.fail_fast; }},
    {"--max-cost", "", "USD", running, section::scheduling, "stop when transcript costs exceed USD",
     [](run_args& o, const std::string& f, const std::string& v) {
       o.policy.max_cost_usd = number(f, v, true);
     },
     "max_cost_usd", [](const run_args& a) { return optional_json(a.policy.max_cost_usd); }},
    {"--max-tokens", "", "N", running, section::scheduling,
     "stop when transcript tokens (in + out) exceed N",
     [](run_args& o, const std::string& f, const std::string& v) {
       o.policy.max_tokens = whole_number(f, v, 0, INT64_MAX / 2);
     },
     "max_tokens", [](const run_args& a) { return optional_json(a.policy.max_tokens); }},

    // Report.
    {"--group-by", "", "KEY", reporting, section::report,
     "pass rate by KEY: axis param, sample, target or transcript\nmetadata",
     [](run_args& o, const std::string&, const std::string& v) { o.group_by = v; }},
    {"--format", "", "F", reporting, section::report,
     "table (default); json, jsonl (one line per case once its\nrecord is saved, then the "
     "summary), csv, junit, md or\nhtml (one self-contained page with charts); any case; xml\nis "
     "junit, ndjson is jsonl, markdown is md",
     [](run_args& o, const std::string& f, const std::string& v) {
       auto format = canonical_format(v);
       if (format.empty())
         throw usage_error{f +
                           " must be table, json, jsonl (ndjson), csv, junit (xml), md "
                           "(markdown) or html, got '" +
                           printable(v) + "'"};
       o.format = format;
     }},
    {"--out", "", "[FORMAT:]PATH", reporting, section::report,
     "write the --format report to PATH (a file is replaced\nwhole; a device, FIFO or symlink "
     "target is written\nthrough); the table to stdout; - for the report on stdout.\n"
     "FORMAT:PATH (repeatable) writes that format there as well,\ne.g. --out junit:junit.xml "
     "--out md:summary.md",
     [](run_args& o, const std::string& f, const std::string& v) { add_out(o, f, v); }},
    {"--check", "", "", bit(command::report), section::report,
     "exit as `mira run` would have for this run: 0 every scored\ncase passed, 1 a case failed "
     "or errored, 3 incomplete (a case\nnot saved), 4 budget or deadline, 130 interrupted",
     [](run_args& o, const std::string&, const std::string&) { o.check = true; }},
    {"--min-scored", "", "N", reporting, section::report,
     "fewer than N scored cases (passed or failed) is a failure,\nexit 1 (report: implies --check)",
     [](run_args& o, const std::string& f, const std::string& v) {
       o.min_scored = static_cast<std::size_t>(whole_number(f, v, 0, 1'000'000'000'000));
     }},
    {"--color", "", "WHEN", reporting, section::report,
     "colour the table: auto (on a live terminal, not with\n--progress plain), always or never; "
     "never when NO_COLOR\nis set",
     [](run_args& o, const std::string& f, const std::string& v) {
       one_of(f, v, {"auto", "always", "never"}, "auto, always or never");
       o.color = v;
     }},
    {"--progress", "", "WHEN", running, section::report,
     "progress on stderr: auto (tty on a terminal, else plain), tty\n(a line redrawn in place), "
     "plain (a line every --heartbeat,\nnever a redraw or an escape code) or none",
     [](run_args& o, const std::string& f, const std::string& v) {
       one_of(f, v, {"auto", "tty", "plain", "none"}, "auto, tty, plain or none");
       o.progress = v == "tty"     ? progress_mode::tty
                    : v == "plain" ? progress_mode::plain
                    : v == "none"  ? progress_mode::none
                                   : progress_mode::automatic;
     }},
    {"--heartbeat", "", "SECONDS", running, section::report,
     "the interval of plain progress lines (10)",
     [](run_args& o, const std::string& f, const std::string& v) { o.heartbeat = seconds(f, v); }},
    {"--no-github", "", "", running, section::report,
     "no GitHub Actions annotations or step summary (written when\nGITHUB_ACTIONS=true)",
     [](run_args& o, const std::string&, const std::string&) { o.github = false; }},
    {"--format", "", "atif", bit(command::export_), section::report,
     "the only format (ATIF-v1.7), and the default",
     [](run_args& o, const std::string&, const std::string& v) {
       if (v != "atif")
         throw usage_error{"mira export writes --format atif only, got '" + printable(v) + "'"};
       o.format = v;
     }},
    {"--out", "", "DIR|-", bit(command::export_), section::report,
     "where <encoded key>.atif.json files go (default RUN_FOLDER/export);\n- writes one document "
     "per line on stdout",
     [](run_args& o, const std::string&, const std::string& v) { o.out = v; }},

    // Saved runs.
    {"--results-dir", "", "DIR",
     reporting | bit(command::export_) | bit(command::store_convert) | bit(command::merge) |
         bit(command::doctor) | bit(command::serve) | bit(command::view),
     section::saved, "where run folders are (default: mira.toml's [results] dir,\nelse ./results)",
     [](run_args& o, const std::string&, const std::string& v) {
       o.results_dir = v;
       o.results_dir_given = true;
     }},
    {"--dry-run", "", "", running, section::saved, "save nothing",
     [](run_args& o, const std::string&, const std::string&) { o.dry_run = true; }},
    {"--store", "", "LAYOUT", running, section::saved,
     "per-case (default: a folder and result.json per case,\nas the Rust mira CLI keeps them) or "
     "compact (checksummed\nappend-only segments, for large runs)",
     [](run_args& o, const std::string& f, const std::string& v) {
       auto l = store::layout_from_string(v);
       if (!l) throw usage_error{f + ": '" + printable(v) + "' is not per-case or compact"};
       o.store_layout = *l;
     },
     "store",
     [](const run_args& a) -> json::value {
       return json::string(store::to_string(a.store_layout));
     }},
    {"--resume", "", "RUN_ID", running, section::saved,
     "run only what the saved run lacks; report the whole plan",
     [](run_args& o, const std::string&, const std::string& v) { o.resume = v; }},
    {"--retry-errors", "", "", running, section::saved, "with --resume: also re-run errors and N/A",
     [](run_args& o, const std::string&, const std::string&) { o.retry_errors = true; }},
    {"--retry-failed", "", "", running, section::saved, "with --resume: also re-run failures",
     [](run_args& o, const std::string&, const std::string&) { o.retry_failed = true; }},
    {"--allow-other-study", "", "", running, section::saved,
     "with --resume: accept a study of another name",
     [](run_args& o, const std::string&, const std::string&) { o.allow_other_study = true; }},

    {"--to", "", "LAYOUT", bit(command::store_convert), section::saved,
     "per-case: a folder and result.json per case (what the Rust mira\nCLI reads); compact: "
     "checksummed append-only segments (fast, small)",
     [](run_args& o, const std::string& f, const std::string& v) {
       o.convert_to = store::layout_from_string(v);
       if (!o.convert_to)
         throw usage_error{f + ": '" + printable(v) + "' is not per-case or compact"};
     }},

    {"--run-id", "", "ID", bit(command::merge), section::saved,
     "the merged run's id (default: a new one); it must not exist",
     [](run_args& o, const std::string& f, const std::string& v) {
       o.new_run_id = run_name(f, v);
     }},
    {"--run-id", "", "ID", running, section::saved,
     "the new run's id (default: the time and 4 random hex digits);\nrefused when the run exists "
     "(resume it with --resume ID)",
     [](run_args& o, const std::string& f, const std::string& v) {
       o.new_run_id = run_name(f, v);
     }},
    {"--allow-partial", "", "", bit(command::merge), section::saved,
     "merge even when shards are missing or unfinished: their cases\nare reported as not run, "
     "exit 4; `mira run --resume ID` runs them",
     [](run_args& o, const std::string&, const std::string&) { o.allow_partial = true; }},

    // compare.
    {"--group-by", "", "KEY", bit(command::compare), section::report,
     "also break the comparison down by KEY: eval, target, sample\nor an axis name",
     [](run_args& o, const std::string&, const std::string& v) { o.group_by = v; }},
    {"--alpha", "", "A", bit(command::compare), section::report,
     "significance level of the McNemar test; intervals are at\n1 - A (default 0.05)",
     [](run_args& o, const std::string& f, const std::string& v) {
       o.alpha = number(f, v, false);
       if (o.alpha >= 1) throw usage_error{f + " must be below 1, got '" + printable(v) + "'"};
     }},
    {"--fail-on-regression", "", "", bit(command::compare), section::report,
     "exit 1 when the gate fails: the overall pass rate dropped\nsignificantly, baseline cases "
     "are missing from the candidate\nor it stopped, or no case was scored in both runs",
     [](run_args& o, const std::string&, const std::string&) { o.fail_on_regression = true; }},
    {"--max-regressions", "", "N", bit(command::compare), section::report,
     "the gate also fails on more than N regressions (passed ->\nfailed or error), whatever the "
     "test says; turns the gate on",
     [](run_args& o, const std::string& f, const std::string& v) {
       o.max_regressions = static_cast<std::size_t>(whole_number(f, v, 0, 1000000000));
     }},
    {"--min-scored", "", "N", bit(command::compare), section::report,
     "the gate also fails when fewer than N cases were scored in\nboth runs; turns the gate on",
     [](run_args& o, const std::string& f, const std::string& v) {
       o.min_scored_pairs = static_cast<std::size_t>(whole_number(f, v, 1, 1000000000));
     }},
    {"--allow-missing", "", "", bit(command::compare), section::report,
     "the gate accepts baseline cases missing from the candidate\nand a candidate run that "
     "stopped before its end",
     [](run_args& o, const std::string&, const std::string&) { o.allow_missing = true; }},
    {"--format", "", "F", bit(command::compare), section::report,
     "table (default), json, md, html (a page with a chart of\nper-eval deltas) or junit (each "
     "regressed case a failure);\nany case; xml is junit, markdown is md",
     [](run_args& o, const std::string& f, const std::string& v) {
       auto format = canonical_format(v);
       if (format.empty() || format == "jsonl" || format == "csv")
         throw usage_error{f + " must be table, json, md (markdown), html or junit (xml), got '" +
                           printable(v) + "'"};
       o.format = format;
     }},
    {"--out", "", "PATH", bit(command::compare), section::report,
     "write the --format comparison to PATH (as mira report\n--out); the table to stdout",
     [](run_args& o, const std::string&, const std::string& v) { o.out = v; }},
    {"--results-dir", "", "DIR", bit(command::compare), section::saved,
     "where run folders are (default ./results)",
     [](run_args& o, const std::string&, const std::string& v) {
       o.results_dir = v;
       o.results_dir_given = true;
     }},

    // run --experiment.
    {"--experiment", "", "PLAN.toml", bit(command::run), section::saved,
     "run each [[treatments]] of the plan as a saved run (the other\nflags apply to each), then "
     "compare each with the baseline",
     [](run_args& o, const std::string&, const std::string& v) { o.experiment = v; }},
    {"--experiment-parallel", "", "N", bit(command::run), section::saved,
     "with --experiment: treatments run at once (default 1)",
     [](run_args& o, const std::string& f, const std::string& v) {
       o.experiment_parallel = static_cast<std::size_t>(whole_number(f, v, 1, 64));
     }},

    // Execute now, score later.
    {"--execute-only", "", "", bit(command::run), section::execute,
     "send `execute` instead of `run`: save each case's full\ntranscript, score nothing; needs "
     "--artifacts",
     [](run_args& o, const std::string&, const std::string&) { o.execute_only = true; }},
    {"--artifacts", "", "DIR", running, section::execute,
     "run --execute-only: where one ExecuteResult per case is\nsaved (cases that have one are not "
     "executed again);\nscore: the artifacts to score",
     [](run_args& o, const std::string&, const std::string& v) { o.artifacts = v; }},
    {"--artifacts", "", "DIR", bit(command::export_), section::execute,
     "execute artifacts: a case whose artifact carries the study's own\ntrajectory exports that "
     "one; the others get one made from the saved\ntranscript summary (default: the artifacts a "
     "`mira score` run scored)",
     [](run_args& o, const std::string&, const std::string& v) { o.artifacts = v; }},

    // mira serve.
    {"--listen", "", "ADDR:PORT", bit(command::serve), section::launch,
     "where the HTTP API listens (default 127.0.0.1:8750; port 0: any\nfree port); an address "
     "other than loopback needs --token-file",
     [](run_args& o, const std::string& f, const std::string& v) {
       auto colon = v.rfind(':');
       if (colon == std::string::npos || colon == 0 || colon + 1 == v.size())
         throw usage_error{f + " needs ADDR:PORT, got '" + printable(v) + "'"};
       whole_number(f, v.substr(colon + 1), 0, 65535);
       o.listen = v;
     }},
    {"--study", "", "NAME=CMD", bit(command::serve), section::launch,
     "a study requests may name (repeatable): its name and the command\nline that starts it; "
     "requests never give a command or a path",
     [](run_args& o, const std::string&, const std::string& v) { o.serve_studies.push_back(v); }},
    {"--token-file", "", "FILE", bit(command::serve), section::launch,
     "a file holding the bearer token every API request must send\n(Authorization: Bearer ...)",
     [](run_args& o, const std::string&, const std::string& v) { o.token_file = v; }},
    {"--allow-host", "", "NAME", bit(command::serve), section::launch,
     "a Host name requests may give (repeatable), e.g. the name a proxy\nforwards; loopback "
     "names and the listen address are always allowed,\nothers are answered 421",
     [](run_args& o, const std::string& f, const std::string& v) {
       // A name without a port; an IPv6 address in brackets.
       const bool v6 = v.size() > 2 && v.front() == '[' && v.back() == ']';
       if (v.empty() || v.find_first_of(" /@") != std::string::npos ||
           (!v6 && v.find(':') != std::string::npos))
         throw usage_error{f + " needs a host name, got '" + printable(v) + "'"};
       o.allowed_hosts.push_back(v);
     }},
    {"--port", "", "N", bit(command::view), section::launch,
     "the port on 127.0.0.1 the viewer listens on (default: a free one)",
     [](run_args& o, const std::string& f, const std::string& v) {
       o.view_port = static_cast<unsigned short>(whole_number(f, v, 0, 65535));
     }},
    {"--open", "", "", bit(command::view), section::launch,
     "start the desktop's browser on the viewer (xdg-open)",
     [](run_args& o, const std::string&, const std::string&) { o.open_browser = true; }},
    {"--max-runs", "", "N", bit(command::serve), section::scheduling,
     "runs going at once (default 4); one more is answered 429",
     [](run_args& o, const std::string& f, const std::string& v) {
       o.max_runs = static_cast<std::size_t>(whole_number(f, v, 1, 1000));
     }},
    {"--max-procs", "", "N", bit(command::serve), section::scheduling,
     "the study processes one run may start (options.procs, default\n16); more is answered 422",
     [](run_args& o, const std::string& f, const std::string& v) {
       o.max_procs = static_cast<std::size_t>(whole_number(f, v, 1, 256));
     }},
    {"--max-cases", "", "N", bit(command::serve), section::scheduling,
     "the cases one run may plan (default 100000); a bigger selection\nis answered 413 before "
     "anything starts",
     [](run_args& o, const std::string& f, const std::string& v) {
       o.max_cases = static_cast<std::size_t>(whole_number(f, v, 1, 100000000));
     }},
    {"--fix", "", "", bit(command::doctor), section::saved,
     "create a missing results dir, rebuild a run's unreadable\nmeta.json from its records (kept "
     "as meta.json.damaged) and\nremove what killed merges left",
     [](run_args& o, const std::string&, const std::string&) { o.fix = true; }},
    {"--init", "", "", bit(command::doctor), section::saved,
     "write a starter mira.toml in the working directory when\nnone is found (never over a file)",
     [](run_args& o, const std::string&, const std::string&) { o.init = true; }},
};

std::string_view section_title(help_section s) {
  switch (s) {
    case section::launch:
      return "Study launch";
    case section::selection:
      return "Selection (globs: * ? [...] {a,b}; comma-separated lists; each must match something)";
    case section::output:
      return "Output";
    case section::scheduling:
      return "Scheduling";
    case section::report:
      return "Report";
    case section::saved:
      return "Saved runs";
    case section::execute:
      return "Execute now, score later";
  }
  return {};
}

std::string label(const flag_spec& f) {
  std::string out;
  if (!f.alias.empty()) out.append(f.alias).append(", ");
  out.append(f.name);
  if (!f.metavar.empty()) out.append(" ").append(f.metavar);
  return out;
}

void append_row(std::string& out, std::string_view head, std::string_view help, std::size_t width) {
  out.append("  ").append(head);
  if (head.size() + 2 > width) {
    out.append("\n").append(width + 2, ' ');
  } else {
    out.append(width - head.size(), ' ');
  }
  for (char c : help) {
    out += c;
    if (c == '\n') out.append(width + 2, ' ');
  }
  out += '\n';
}

}  // namespace

std::span<const flag_spec> flags() {
  return table;
}

const flag_spec* find_flag(command cmd, std::string_view name) {
  for (auto& f : table)
    if ((f.commands & bit(cmd)) && (f.name == name || (!f.alias.empty() && f.alias == name)))
      return &f;
  return nullptr;
}

std::string_view flag_of(plan::field f) {
  if (f == plan::field::none) return {};
  const std::string key = f == plan::field::shard ? std::string(plan::to_string(f))
                                                  : "selection." + std::string(plan::to_string(f));
  for (auto& spec : table)
    if (spec.config_key == key) return spec.name;
  return {};
}

std::string in_flag_words(std::string_view message, std::string_view name, std::string_view flag) {
  // The name whole: "axes" is followed by ':' or by a space and the axis.
  const bool named = !name.empty() && message.substr(0, name.size()) == name &&
                     message.size() > name.size() &&
                     (message[name.size()] == ':' || message[name.size()] == ' ');
  if (!named || flag.empty()) return std::string(message);
  return std::string(flag).append(message.substr(name.size()));
}

std::string in_flag_words(std::string_view message, plan::field f, std::string_view flag) {
  return in_flag_words(message, plan::to_string(f), flag.empty() ? flag_of(f) : flag);
}

std::string options_help(command cmd) {
  std::size_t width = 0;
  for (auto& f : table)
    if (f.commands & bit(cmd)) width = std::max(width, label(f).size() + 2);
  // A long label goes on its own line rather than pushing every help column right.
  width = std::min<std::size_t>(width, 28);
  std::string out;
  for (auto s : {section::launch, section::selection, section::output, section::scheduling,
                 section::report, section::saved, section::execute}) {
    bool titled = false;
    for (auto& f : table) {
      if (!(f.commands & bit(cmd)) || f.section != s) continue;
      if (!titled) {
        if (!out.empty()) out += '\n';
        out.append(section_title(s)).append(":\n");
        if (s == section::selection)
          append_row(out, "FILTER", "keep cases whose eval/sample@target[k=v] contains FILTER",
                     width);
        titled = true;
      }
      append_row(out, label(f), f.help, width);
    }
  }
  return out;
}

std::vector<std::string> argv_without_secrets(const std::vector<std::string>& args) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < args.size(); ++i) {
    bool env_value = i > 0 && args[i - 1] == "--study-env";
    out.push_back(env_value ? args[i].substr(0, args[i].find('=')) : args[i]);
  }
  return out;
}

json::object config_json(const std::vector<std::string>& argv, const run_args& a) {
  json::object out{{"argv", strings_json(argv_without_secrets(argv))},
                   {"selection", json::object{{"filter", a.selection.filter}}}};
  for (auto& f : table) {
    if (f.config_key.empty()) continue;
    auto dot = f.config_key.find('.');
    if (dot == std::string_view::npos)
      out[f.config_key] = f.config(a);
    else {
      auto& parent = out[f.config_key.substr(0, dot)];
      if (!parent.is_object()) parent = json::object{};
      parent.as_object()[f.config_key.substr(dot + 1)] = f.config(a);
    }
  }
  return out;
}

}  // namespace mira::cli
