// Command-line parsing (see args.hpp).
#include "args.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <thread>

namespace mira::cli {

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

double positive_number(const std::string& flag, const std::string& v, bool allow_zero = false) {
  char* end = nullptr;
  double d = std::strtod(v.c_str(), &end);
  if (v.empty() || *end != '\0' || !std::isfinite(d) || d < 0 || (d == 0 && !allow_zero))
    throw usage_error{flag + " needs a " + (allow_zero ? "non-negative" : "positive") +
                      " number, got '" + printable(v) + "'"};
  return d;
}

schedule::duration seconds(const std::string& flag, const std::string& v) {
  return std::chrono::duration_cast<schedule::duration>(
      std::chrono::duration<double>(positive_number(flag, v)));
}

}  // namespace

std::vector<std::string> split_command_line(std::string_view line) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    char c = line[i];
    if (c == ' ' || c == '\t' || c == '\n') {
      if (in_word) words.push_back(std::move(word));
      word.clear();
      in_word = false;
      continue;
    }
    in_word = true;
    if (c == '\\') {
      if (++i >= line.size()) throw usage_error{"--study-cmd ends with a backslash"};
      word += line[i];
    } else if (c == '\'') {
      auto end = line.find('\'', i + 1);
      if (end == std::string_view::npos)
        throw usage_error{"--study-cmd has an unterminated ' quote"};
      word.append(line.substr(i + 1, end - i - 1));
      i = end;
    } else if (c == '"') {
      for (++i;; ++i) {
        if (i >= line.size()) throw usage_error{"--study-cmd has an unterminated \" quote"};
        if (line[i] == '"') break;
        if (line[i] == '\\' && i + 1 < line.size() &&
            std::string_view("\\\"$`").find(line[i + 1]) != std::string_view::npos)
          ++i;
        word += line[i];
      }
    } else {
      word += c;
    }
  }
  if (in_word) words.push_back(std::move(word));
  return words;
}

run_args parse_args(command cmd, const std::vector<std::string>& args) {
  run_args out;
  bool selects = cmd == command::plan || cmd == command::run || cmd == command::score;
  bool runs = cmd == command::run || cmd == command::score;
  bool exports = cmd == command::export_;
  bool reports = cmd == command::report || exports;
  if (exports) out.format = "atif";
  std::size_t i = 0;
  auto value = [&](const std::string& flag) -> const std::string& {
    if (i + 1 >= args.size() || args[i + 1] == "--") throw usage_error{flag + " needs a value"};
    return args[++i];
  };
  for (; i < args.size(); ++i) {
    const auto& a = args[i];
    if (a == "--") {
      out.study.assign(args.begin() + static_cast<std::ptrdiff_t>(i) + 1, args.end());
      break;
    }
    if (a == "-h" || a == "--help") {
      out.help = true;
      return out;
    }
    if (a == "--json" && !runs) {
      out.json = true;
    } else if (a == "--study-cmd") {
      out.study = split_command_line(value(a));
      if (out.study.empty()) throw usage_error{"--study-cmd is empty"};
    } else if (a == "--study-env") {
      const auto& v = value(a);
      if (v.empty() || v.front() == '=') throw usage_error{"--study-env needs KEY or KEY=VALUE"};
      out.study_env.push_back(v);
    } else if (a == "--study-env-clear") {
      out.study_env_clear = true;
    } else if (a == "--init-timeout") {
      out.init_timeout = seconds(a, value(a));
    } else if (a == "--idle-timeout") {
      out.idle_timeout = seconds(a, value(a));
    } else if (selects && a == "--evals") {
      auto v = split(value(a), ',');
      out.selection.evals.insert(out.selection.evals.end(), v.begin(), v.end());
    } else if (selects && a == "--samples") {
      auto v = split(value(a), ',');
      out.selection.samples.insert(out.selection.samples.end(), v.begin(), v.end());
    } else if (selects && a == "--targets") {
      auto v = split(value(a), ',');
      out.selection.targets.insert(out.selection.targets.end(), v.begin(), v.end());
    } else if (selects && a == "--tag") {
      out.selection.tags.push_back(value(a));
    } else if (selects && a == "--axis") {
      const auto& v = value(a);
      auto eq = v.find('=');
      if (eq == std::string::npos || eq == 0 || eq + 1 == v.size())
        throw usage_error{"--axis needs NAME=V1,V2, got '" + printable(v) + "'"};
      out.selection.axes.emplace_back(v.substr(0, eq), split(v.substr(eq + 1), ','));
    } else if (selects && a == "--trials") {
      out.selection.trials = whole_number(a, value(a), 0, 1000000);
    } else if (selects && a == "--shard") {
      const auto& v = value(a);
      auto spec = v == "auto" ? plan::shard_from_env([](const char* n) { return std::getenv(n); })
                              : plan::parse_shard(v);
      if (!spec) throw usage_error{printable(spec.error())};
      out.shard = *spec;
    } else if (selects && a == "--seed") {
      out.selection.seed = whole_number(a, value(a), INT64_MIN / 2, INT64_MAX / 2);
    } else if (runs && (a == "-j" || a == "--max-concurrent")) {
      out.policy.concurrency.max_concurrent =
          static_cast<std::size_t>(whole_number(a, value(a), 1, 100000));
    } else if (runs && (a == "-P" || a == "--procs")) {
      const auto& v = value(a);
      if (v == "auto") {
        out.procs = std::max(1u, std::thread::hardware_concurrency());
      } else {
        char* end = nullptr;
        errno = 0;
        long long n = std::strtoll(v.c_str(), &end, 10);
        if (v.empty() || *end != '\0' || errno == ERANGE || n < 1 || n > 1024)
          throw usage_error{a + " needs a whole number from 1 to 1024 or auto, got '" +
                            printable(v) + "'"};
        out.procs = static_cast<std::size_t>(n);
      }
    } else if (runs && a == "--provider-concurrency") {
      for (auto& entry : split(value(a), ',')) {
        auto eq = entry.find('=');
        if (eq == std::string::npos)
          throw usage_error{"--provider-concurrency needs PROVIDER=N,..., got '" +
                            printable(entry) + "'"};
        out.policy.concurrency.provider_limits[entry.substr(0, eq)] =
            static_cast<std::size_t>(whole_number(a, entry.substr(eq + 1), 1, 100000));
      }
    } else if (runs && a == "--no-adaptive") {
      out.policy.concurrency.adaptive = false;
    } else if (runs && a == "--max-retries") {
      out.policy.retry.max_retries = static_cast<int>(whole_number(a, value(a), 0, 1000));
    } else if (runs && a == "--max-restarts") {
      out.policy.max_restarts = static_cast<int>(whole_number(a, value(a), 0, 1000));
    } else if (runs && a == "--timeout") {
      out.policy.case_timeout = seconds(a, value(a));
    } else if (runs && a == "--timeout-is-infra") {
      out.policy.timeout_is_infra = true;
    } else if (runs && a == "--deadline") {
      out.policy.deadline = seconds(a, value(a));
    } else if (runs && a == "--heartbeat") {
      out.heartbeat = seconds(a, value(a));
    } else if (runs && a == "--fail-fast") {
      out.policy.fail_fast = true;
    } else if (runs && a == "--max-cost") {
      out.policy.max_cost_usd = positive_number(a, value(a), true);
    } else if (runs && a == "--max-tokens") {
      out.policy.max_tokens = whole_number(a, value(a), 0, INT64_MAX / 2);
    } else if ((runs || reports) && a == "--results-dir") {
      out.results_dir = value(a);
    } else if (runs && a == "--store") {
      auto v = value(a);
      auto l = store::layout_from_string(v);
      if (!l) throw usage_error{"--store: '" + printable(v) + "' is not per-case or compact"};
      out.store_layout = *l;
    } else if (runs && a == "--dry-run") {
      out.dry_run = true;
    } else if (runs && a == "--resume") {
      out.resume = value(a);
    } else if (runs && a == "--retry-errors") {
      out.retry_errors = true;
    } else if (runs && a == "--retry-failed") {
      out.retry_failed = true;
    } else if (cmd == command::run && a == "--execute-only") {
      out.execute_only = true;
    } else if (runs && a == "--artifacts") {
      out.artifacts = value(a);
    } else if (runs && a == "--allow-other-study") {
      out.allow_other_study = true;
    } else if ((runs || reports) && a == "--group-by") {
      out.group_by = value(a);
    } else if (exports && a == "--format") {
      out.format = value(a);
      if (out.format != "atif")
        throw usage_error{"mira export writes --format atif only, got '" + printable(out.format) +
                          "'"};
    } else if (exports && a == "--artifacts") {
      out.artifacts = value(a);
    } else if ((runs || reports) && a == "--format") {
      out.format = value(a);
      if (out.format != "table" && out.format != "json" && out.format != "jsonl" &&
          out.format != "csv" && out.format != "junit" && out.format != "md" &&
          out.format != "html")
        throw usage_error{"--format must be table, json, jsonl, csv, junit, md or html, got '" +
                          printable(out.format) + "'"};
    } else if ((runs || reports) && a == "--color") {
      out.color = value(a);
      if (out.color != "auto" && out.color != "always" && out.color != "never")
        throw usage_error{"--color must be auto, always or never, got '" + printable(out.color) +
                          "'"};
    } else if ((runs || reports) && a == "--out") {
      out.out = value(a);
    } else if (selects && !a.empty() && a[0] != '-' && out.selection.filter.empty()) {
      out.selection.filter = a;
    } else if (reports && !a.empty() && a[0] != '-' && out.run_id.empty()) {
      out.run_id = a;
    } else if (exports && !a.empty() && a[0] != '-' && out.selection.filter.empty()) {
      out.selection.filter = a;
    } else {
      throw usage_error{"unknown option '" + printable(a) + "'"};
    }
  }
  if (!exports && !out.out.empty() && out.format == "table")
    throw usage_error{"--out needs a file --format (json, jsonl, csv, junit, md or html)"};
  if (reports) {
    if (out.run_id.empty()) throw usage_error{"missing RUN_ID"};
    return out;
  }
  if (out.study.empty())
    throw usage_error{"missing study command: put it after `--` or give --study-cmd"};
  if (out.dry_run && !out.resume.empty())
    throw usage_error{"--dry-run and --resume do not go together: a dry run saves nothing"};
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
  return out;
}

}  // namespace mira::cli
