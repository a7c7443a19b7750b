// The plain parts of an external agent's case (see agent_io.hpp).
#include "study/agent_io.hpp"

#include <mira/protocol/trajectory.hpp>
#include <mira/study/trajectory.hpp>
#include "protocol/utf8.hpp"

#include <boost/json/parse.hpp>

#include <algorithm>
#include <fstream>
#include <span>

namespace mira::study::detail {

namespace fs = std::filesystem;

namespace {

agent_error make(agent_errc code, std::string message) {
  return {make_error_code(code), std::move(message)};
}

std::vector<std::string_view> segments(std::string_view path) {
  std::vector<std::string_view> out;
  for (std::size_t begin = 0;;) {
    auto end = path.find('/', begin);
    out.push_back(path.substr(begin, end == std::string_view::npos ? end : end - begin));
    if (end == std::string_view::npos) return out;
    begin = end + 1;
  }
}

// '*' and '?' within one segment, by backtracking to the last '*'.
bool match_segment(std::string_view p, std::string_view s) {
  std::size_t pi = 0, si = 0, star = std::string_view::npos, mark = 0;
  while (si < s.size()) {
    if (pi < p.size() && (p[pi] == '?' || p[pi] == s[si])) {
      ++pi;
      ++si;
    } else if (pi < p.size() && p[pi] == '*') {
      star = pi++;
      mark = si;
    } else if (star != std::string_view::npos) {
      pi = star + 1;
      si = ++mark;
    } else {
      return false;
    }
  }
  while (pi < p.size() && p[pi] == '*') ++pi;
  return pi == p.size();
}

bool match_segments(std::span<const std::string_view> p, std::span<const std::string_view> s) {
  if (p.empty()) return s.empty();
  if (p.front() == "**") {
    for (std::size_t skip = 0; skip <= s.size(); ++skip)
      if (match_segments(p.subspan(1), s.subspan(skip))) return true;
    return false;
  }
  return !s.empty() && match_segment(p.front(), s.front()) &&
         match_segments(p.subspan(1), s.subspan(1));
}

// Whether a path under a folder (its segments) can match the pattern: the folder is walked only
// then, so a capture of "out.txt" does not read a tree of thousands of files.
bool may_match_under(std::span<const std::string_view> p, std::span<const std::string_view> dir) {
  if (dir.empty()) return !p.empty();
  if (p.empty()) return false;
  if (p.front() == "**") return true;
  return match_segment(p.front(), dir.front()) && may_match_under(p.subspan(1), dir.subspan(1));
}

// The regular files under root that match a pattern, '/'-separated and relative, without
// following links.
void walk(const fs::path& root, const fs::path& dir, const std::vector<std::string>& patterns,
          std::vector<std::string>& out) {
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const auto st = it->symlink_status(ec);
    if (ec) break;
    const auto rel = it->path().lexically_relative(root).generic_string();
    if (fs::is_directory(st)) {
      const auto segs = segments(rel);
      if (std::any_of(patterns.begin(), patterns.end(),
                      [&](const auto& p) { return may_match_under(segments(p), segs); }))
        walk(root, it->path(), patterns, out);
    } else if (fs::is_regular_file(st) &&
               std::any_of(patterns.begin(), patterns.end(),
                           [&](const auto& p) { return glob_match(p, rel); })) {
      out.push_back(rel);
    }
  }
}

std::optional<std::string> read_file(const fs::path& file, std::size_t size, std::string& out) {
  std::ifstream in(file, std::ios::binary);
  out.resize(size);
  if (!in.read(out.data(), static_cast<std::streamsize>(size))) return "cannot be read";
  out.resize(static_cast<std::size_t>(in.gcount()));
  return std::nullopt;
}

}  // namespace

std::string expand(std::string_view text, const placeholders& values) {
  std::string out;
  out.reserve(text.size());
  std::size_t i = 0;
  while (i < text.size()) {
    if (text[i] == '{') {
      const auto close = text.find('}', i + 1);
      if (close != std::string_view::npos) {
        const auto name = text.substr(i + 1, close - i - 1);
        auto it = std::find_if(values.begin(), values.end(),
                               [&](const auto& v) { return v.first == name; });
        if (it != values.end()) {
          out += it->second;
          i = close + 1;
          continue;
        }
      }
    }
    out += text[i++];
  }
  return out;
}

bool glob_match(std::string_view pattern, std::string_view path) {
  const auto p = segments(pattern);
  const auto s = segments(path);
  return match_segments(p, s);
}

captured capture(const fs::path& root, const std::vector<std::string>& patterns,
                 const capture_limits& limits) {
  captured c;
  if (patterns.empty()) return c;
  std::vector<std::string> matched;
  walk(root, root, patterns, matched);
  std::sort(matched.begin(), matched.end());
  std::size_t total = 0;
  for (const auto& path : matched) {
    const auto key = to_valid_utf8(path);
    std::error_code ec;
    const auto size = static_cast<std::size_t>(fs::file_size(root / path, ec));
    std::string contents;
    std::optional<std::string> why;
    if (key != path)
      why = "its name is not UTF-8";
    else if (c.files.size() >= limits.max_files)
      why = "over max_files (" + std::to_string(limits.max_files) + ")";
    else if (ec)
      why = ec.message();
    else if (size > limits.max_file_bytes)
      why = std::to_string(size) + " bytes, over max_file_bytes (" +
            std::to_string(limits.max_file_bytes) + ")";
    else if (total + size > limits.max_total_bytes)
      why = "over max_total_bytes (" + std::to_string(limits.max_total_bytes) + ")";
    else if (auto e = read_file(root / path, size, contents))
      why = *e;
    else if (!valid_utf8(contents))
      why = "not UTF-8 text";
    if (why) {
      c.skipped[key] = *why;
      continue;
    }
    total += contents.size();
    c.files[key] = contents;
  }
  return c;
}

namespace {

using mira::detail::utf8_length;

}  // namespace

bool valid_utf8(std::string_view s) {
  for (std::size_t i = 0; i < s.size();) {
    const auto n = utf8_length(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

std::string to_valid_utf8(std::string_view s) {
  if (valid_utf8(s)) return std::string(s);
  std::string out;
  out.reserve(s.size() + 8);
  for (std::size_t i = 0; i < s.size();) {
    const auto n = utf8_length(s, i);
    if (n == 0) {
      out += "\xEF\xBF\xBD";
      ++i;
    } else {
      out.append(s.substr(i, n));
      i += n;
    }
  }
  return out;
}

tl::expected<std::string, agent_error> read_bounded(const fs::path& file, std::size_t max,
                                                    std::string_view what) {
  std::error_code ec;
  const auto st = fs::symlink_status(file, ec);
  if (ec || !fs::is_regular_file(st))
    return tl::make_unexpected(make(
        agent_errc::no_transcript, std::string(what) + " was not written (" + file.string() + ")"));
  const auto size = static_cast<std::size_t>(fs::file_size(file, ec));
  if (ec)
    return tl::make_unexpected(
        make(agent_errc::no_transcript, std::string(what) + " cannot be read: " + ec.message()));
  if (size > max)
    return tl::make_unexpected(make(agent_errc::transcript_too_large,
                                    std::string(what) + " is " + std::to_string(size) +
                                        " bytes, over the limit of " + std::to_string(max)));
  std::string text;
  if (auto why = read_file(file, size, text))
    return tl::make_unexpected(make(agent_errc::no_transcript, std::string(what) + " " + *why));
  return text;
}

}  // namespace mira::study::detail
