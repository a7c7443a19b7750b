// Command-line parsing (see args.hpp).
#include "args.hpp"

#include "flags.hpp"

namespace mira::cli {

namespace {

bool positional(const std::string& a) {
  return !a.empty() && a[0] != '-';
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
  const bool exports = cmd == command::export_;
  const bool reports = cmd == command::report || exports || cmd == command::store_convert;
  const bool selects = cmd == command::plan || cmd == command::run || cmd == command::score;
  if (exports) out.format = "atif";
  for (std::size_t i = 0; i < args.size(); ++i) {
    const auto& a = args[i];
    if (a == "--") {
      out.study.assign(args.begin() + static_cast<std::ptrdiff_t>(i) + 1, args.end());
      break;
    }
    if (a == "-h" || a == "--help") {
      out.help = true;
      return out;
    }
    if (const auto* f = find_flag(cmd, a)) {
      static const std::string none;
      if (!f->metavar.empty() && (i + 1 >= args.size() || args[i + 1] == "--"))
        throw usage_error{a + " needs a value"};
      f->apply(out, a, f->metavar.empty() ? none : args[++i]);
    } else if (positional(a) && cmd == command::merge) {
      out.runs.push_back(a);
    } else if (positional(a) && reports && out.run_id.empty()) {
      out.run_id = a;
    } else if (positional(a) && (selects || exports) && out.selection.filter.empty()) {
      out.selection.filter = a;
    } else {
      throw usage_error{"unknown option '" + printable(a) + "'"};
    }
  }
  if (!exports && !out.out.empty() && out.format == "table")
    throw usage_error{"--out needs a file --format (json, jsonl, csv, junit, md or html)"};
  if (cmd == command::merge) {
    if (out.runs.empty()) throw usage_error{"mira merge needs the shard runs to merge (RUN...)"};
    return out;
  }
  if (reports) {
    if (out.run_id.empty()) throw usage_error{"missing RUN_ID"};
    if (cmd == command::store_convert && !out.convert_to)
      throw usage_error{"mira store convert needs --to per-case|compact"};
    return out;
  }
  if (cmd == command::serve) {
    if (out.serve_studies.empty())
      throw usage_error{"mira serve needs at least one --study NAME=CMD"};
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
