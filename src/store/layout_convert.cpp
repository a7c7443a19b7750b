// Converting a saved run between the per-case and the compact layout (see layout_convert.hpp).
#include <mira/store/layout_convert.hpp>

#include <mira/protocol/json_text.hpp>
#include <mira/store/records.hpp>
#include "protocol/json_scan.hpp"
#include "store/batch_writer.hpp"
#include "store/case_index.hpp"
#include "store/case_journal.hpp"
#include "store/file_helpers.hpp"
#include "store/run_folder.hpp"
#include "store/segment_log.hpp"

#include <boost/json/parse.hpp>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <unordered_map>

namespace mira::store {

namespace fs = std::filesystem;
namespace json = boost::json;

namespace {

using result = tl::expected<convert_counts, error>;

tl::unexpected<error> fail(boost::system::error_code code, std::string message) {
  return tl::make_unexpected(error{code, std::move(message)});
}

// Failures reported by writer callbacks (on the writer's thread).
struct failures {
  std::mutex mutex;
  std::size_t count = 0;
  std::string first;
  void add(const std::string& what, boost::system::error_code ec) {
    std::lock_guard lock(mutex);
    if (count++ == 0) first = what + ": " + ec.message();
  }
};

tl::expected<run_folder, error> folder_of(const fs::path& run) {
  return run_folder::open(run.parent_path(), run.filename().string());
}

// Removes a directory if it is empty; a non-empty one is what it should be left as.
void remove_if_empty(const fs::path& dir) {
  ::rmdir(dir.c_str());
}

// Makes what was created, renamed or removed in `dir` durable; a failure is noted: the records
// are whole either way.
void sync_noting(const fs::path& dir, convert_counts& counts) {
  if (auto ec = store::detail::sync_directory(dir))
    counts.notes.push_back("cannot sync " + dir.string() + ": " + ec.message());
}

result to_compact(const fs::path& run) {
  auto folder = folder_of(run);
  if (!folder)
    return fail(folder.error().code, "no per-case layout to convert: " + folder.error().message());
  std::vector<std::string> unreadable;
  auto cases = folder->load_cases(&unreadable);
  if (!unreadable.empty())
    return fail(errc::corrupt, std::to_string(unreadable.size()) + " unreadable case file(s) in " +
                                   (run / "cases").string() + " (the first: " + unreadable.front() +
                                   "); nothing converted");
  segment_options options;
  options.journal = run / detail::case_journal_name;
  auto writer = segment_writer::open(run / "segments", options);
  if (!writer)
    return fail(writer.error().code, writer.error().message() + "; the per-case layout is intact");
  failures failed;
  for (auto& [key, record] : cases)
    (*writer)->submit(key, protocol::to_json_text(record),
                      [&failed, k = key, w = writer->get()](boost::system::error_code ec) {
                        if (ec)
                          failed.add("the record of " + k + " to " + w->current_segment().string(),
                                     ec);
                      });
  convert_counts counts;
  counts.notes = (*writer)->repairs();  // a torn tail left by an earlier, interrupted writer
  writer->reset();                      // drains: every callback has run
  if (failed.count)
    return fail(errc::io, "cannot append " + failed.first + " (" + std::to_string(failed.count) +
                              " of " + std::to_string(cases.size()) +
                              " records failed); the per-case layout is intact");

  counts.records = cases.size();
  // Remove only files whose record the segments now hold, as read again now.
  std::error_code ec;
  for (auto& entry : fs::directory_iterator(run / "cases", ec)) {
    std::error_code ignored;
    if (entry.is_symlink(ignored) || !entry.is_directory(ignored)) continue;
    auto file = entry.path() / "result.json";
    if (fs::exists(file, ignored)) {
      auto record = read_json_object(file);
      auto key = record ? key_of(*record) : std::nullopt;
      if (key) (*record)["key"] = *key;  // as load_cases read it
      auto it = key ? cases.find(*key) : cases.end();
      if (it == cases.end() || it->second != *record) {
        counts.notes.push_back("kept " + file.string() + ": the segments do not hold its record");
        continue;
      }
      if (::unlink(file.c_str()) != 0) {
        counts.notes.push_back("cannot remove " + file.string() + ": " + std::strerror(errno));
        continue;
      }
      ++counts.removed_files;
    }
    remove_if_empty(entry.path());
  }
  remove_if_empty(run / "cases");
  sync_noting(run, counts);
  return counts;
}

result to_per_case(const fs::path& run) {
  auto dir = run / "segments";
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    return fail(errc::not_found,
                "no compact layout to convert in " + run.string() + " (no segments folder)");
  // The writer's lock: no segment_writer may append while the segments are read and removed.
  int lock_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (lock_fd < 0) {
    const int err = errno;
    return fail(store::detail::is_link(dir) ? errc::corrupt : errc::io,
                "cannot open " + store::detail::open_failure(dir, err));
  }
  struct closer {
    int fd;
    ~closer() { ::close(fd); }
  } lock{lock_fd};
  if (::flock(lock_fd, LOCK_EX | LOCK_NB) != 0)
    return fail(errc::in_use, "segment directory " + dir.string() + " is in use by a writer");

  auto files = list_segments(dir);
  auto scan = read_segments(dir);
  if (scan.damaged_lines)
    return fail(errc::corrupt, std::to_string(scan.damaged_lines) + " damaged line(s) in " +
                                   dir.string() + " (the first: " + scan.problems.front() +
                                   "); nothing converted");
  convert_counts counts;
  counts.notes = scan.problems;  // torn tails: writes no callback ever confirmed

  // The latest record of each key, checked and made into its file's text before anything is
  // written.
  std::unordered_map<std::string_view, std::size_t> latest;
  for (std::size_t i = 0; i < scan.records.size(); ++i) latest[scan.records[i].key] = i;
  std::vector<std::pair<std::size_t, std::string>> texts;
  texts.reserve(latest.size());
  for (auto& [key, i] : latest) {
    auto& r = scan.records[i];
    auto v = json::parse(r.json, ec, {}, mira::detail::host_parse_options());
    if (ec || !v.is_object())
      return fail(errc::corrupt, "the record of " + r.key + " in " + dir.string() +
                                     " does not parse; nothing converted");
    auto& o = v.as_object();
    auto* k = o.if_contains("key");
    if (!k) {
      o["key"] = r.key;  // run_folder::load_cases finds a case by its record's "key"
      texts.emplace_back(i, protocol::to_json_text(o) + "\n");
    } else if (!k->is_string() || k->get_string() != r.key) {
      return fail(errc::corrupt, "the record of " + r.key + " in " + dir.string() +
                                     " names another key; nothing converted");
    } else {
      texts.emplace_back(i, r.json + "\n");
    }
  }

  fs::create_directories(run / "cases", ec);
  if (ec)
    return fail(errc::io, "cannot create " + (run / "cases").string() + ": " + ec.message() +
                              "; the compact layout is intact");
  auto folder = folder_of(run);
  if (!folder) return tl::make_unexpected(folder.error());
  failures failed;
  {
    batch_writer writer(run);
    for (auto& [i, text] : texts) {
      auto file = folder->case_file(scan.records[i].key);
      auto what = file.string();
      writer.submit(std::move(file), std::move(text), [&failed, what](boost::system::error_code e) {
        if (e) failed.add(what, e);
      });
    }
    writer.drain();
  }
  if (failed.count)
    return fail(errc::io, "cannot write " + failed.first + " (" + std::to_string(failed.count) +
                              " of " + std::to_string(texts.size()) +
                              " records failed); the compact layout is intact");

  counts.records = texts.size();
  for (auto& file : files) {
    if (::unlink(file.c_str()) != 0) {
      counts.notes.push_back("cannot remove " + file.string() + ": " + std::strerror(errno));
      continue;
    }
    ++counts.removed_files;
  }
  sync_noting(dir, counts);
  remove_if_empty(dir);
  // The readers' index of the segments (run_reader.hpp) and its writers' journal list nothing now.
  ::unlink((run / detail::case_index_name).c_str());
  ::unlink((run / detail::case_journal_name).c_str());
  sync_noting(run, counts);
  return counts;
}

}  // namespace

tl::expected<convert_counts, error> convert_run_layout(const fs::path& run_dir, layout to) {
  auto run = run_dir.lexically_normal();
  if (run.filename().empty()) run = run.parent_path();
  return to == layout::compact ? to_compact(run) : to_per_case(run);
}

}  // namespace mira::store
