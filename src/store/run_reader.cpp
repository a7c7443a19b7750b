// Reading a saved run back a case at a time (see run_reader.hpp): the index of its records, and
// the visits that read them again through a window over each segment.
#include <mira/store/run_reader.hpp>

#include <mira/protocol/codec.hpp>
#include <mira/protocol/json_text.hpp>
#include <mira/store/records.hpp>
#include "plan/natural_order.hpp"
#include "protocol/json_scan.hpp"
#include "protocol/precise_json.hpp"
#include "store/case_index.hpp"
#include "store/case_journal.hpp"
#include "store/file_helpers.hpp"
#include "store/key_index.hpp"
#include "store/plan_keys.hpp"
#include "store/run_folder.hpp"
#include "store/run_reader_access.hpp"
#include "store/segment_log.hpp"

#include <boost/json/parse.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <unordered_map>

namespace mira::store {

namespace fs = std::filesystem;
namespace json = boost::json;

namespace {

using entry = detail::reader_entry;
using detail::maybe_superseded;
using detail::per_case;

class segment_window;

}  // namespace

struct run_reader::state {
  fs::path folder;
  run_meta meta;
  std::vector<fs::path> segments;
  std::string keys;   // every key, back to back
  std::string names;  // the per-case folder names, back to back
  std::vector<entry> entries;
  /// Per entry once the index is made: 1 + its record's case_state, 0 when not known. While
  /// reading, per read (by seq).
  std::vector<std::uint8_t> states;
  std::vector<std::uint32_t> crcs;  // the same way: each compact record's CRC-32C
  std::vector<std::string> unreadable, superseded;
  std::optional<missing_cases> missing;
  std::string plan_keys_problem;
  std::vector<maybe_superseded> damaged_from_index;

  std::string_view key(const entry& e) const {
    return std::string_view(keys).substr(e.key_at, e.key_size);
  }

  // The steps of run_reader_access::open_folder, which builds the index once.
  void add(std::string_view key, entry e);
  bool linked(const char* name);
  void read_per_case(std::unordered_map<std::string, fs::path>* dirs);
  std::vector<maybe_superseded> read_compact();
  std::vector<std::pair<std::string, entry>> keep_last();
  struct stamped {
    std::vector<fs::path> segments;
    std::vector<detail::segment_stamp> stamps;
  };
  std::optional<stamped> stamp_compact() const;
  bool from_index(stamped& now);
  bool from_journal(stamped& now);
  void save_index(const std::vector<maybe_superseded>& damaged,
                  const std::vector<std::string>& scan_unreadable,
                  const std::vector<std::string>& duplicates) const;
  void settle(std::vector<maybe_superseded> damaged);

  // A visit's read of entry i: its record, checked as visit hands it over, or nothing (why added
  // to `problems`); a compact record's text, its checksum checked.
  std::optional<json::object> read_record(segment_window& window, std::size_t i,
                                          std::vector<std::string>& problems) const;
  std::optional<std::string_view> read_text(segment_window& window, std::size_t i,
                                            std::vector<std::string>& problems) const;
};

namespace {

// Reads the records of one segment through a window: cases in natural key order are mostly in
// the order they were appended (a session saves them about as it plans them), so one read serves
// a few hundred records.
class segment_window {
 public:
  explicit segment_window(const std::vector<fs::path>& files)
      : files_(files), fds_(files.size(), -1) {}
  segment_window(const segment_window&) = delete;
  segment_window& operator=(const segment_window&) = delete;
  ~segment_window() {
    for (int fd : fds_)
      if (fd >= 0) ::close(fd);
  }

  // The record's bytes (valid until the next call), or why they cannot be read.
  tl::expected<std::string_view, std::string> read(std::uint32_t file, std::uint64_t at,
                                                   std::uint32_t size) {
    if (file != file_ || at < start_ || at + size > start_ + buf_.size()) {
      if (fds_[file] < 0) {
        fds_[file] = ::open(files_[file].c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (fds_[file] < 0) return tl::make_unexpected(detail::open_failure(files_[file], errno));
      }
      // A little before the record too: neighbours finish out of order.
      const std::uint64_t behind = std::min<std::uint64_t>(at, window / 4);
      const std::size_t want = std::max<std::size_t>(window, size + behind);
      buf_.resize(want);
      std::size_t done = 0;
      while (done < want) {
        auto n = ::pread(fds_[file], buf_.data() + done, want - done,
                         static_cast<off_t>(at - behind + done));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
          file_ = no_file;
          return tl::make_unexpected(std::string(std::strerror(errno)));
        }
        if (n == 0) break;
        done += static_cast<std::size_t>(n);
      }
      buf_.resize(done);
      file_ = file;
      start_ = at - behind;
      if (at + size > start_ + buf_.size()) {
        file_ = no_file;
        return tl::make_unexpected(std::string("the file is shorter than when it was read"));
      }
    }
    return std::string_view(buf_).substr(at - start_, size);
  }

 private:
  static constexpr std::size_t window = std::size_t{256} << 10;
  static constexpr std::uint32_t no_file = per_case;
  const std::vector<fs::path>& files_;
  std::vector<int> fds_;
  std::string buf_;
  std::uint32_t file_ = no_file;
  std::uint64_t start_ = 0;
};

// Why a record's "status" cannot be taken, or nothing: a status this host does not know is not
// read as some other state (it was counted as cancelled). A record without one (the Rust host's)
// has its state read from its verdict.
std::optional<std::string> bad_status(const json::object& record) {
  auto* status = record.if_contains("status");
  if (!status) return std::nullopt;
  if (!status->is_string()) return "its \"status\" is not a string";
  if (schedule::case_state_from_string(status->get_string())) return std::nullopt;
  return "its \"status\" " + protocol::to_json_text(*status) + " is no case state";
}

// A key with two records is a warning unless a resume explains it: a resume saves a case again
// only when its earlier record was cancelled, an error, N/A or failed (--retry-errors,
// --retry-failed), and a layout conversion that was interrupted leaves a case in both layouts.
// Anything else (a passed record twice, two folders of one case) means a record was copied.
void warn_duplicates(const fs::path& folder, const std::vector<fs::path>& segments,
                     const std::vector<std::pair<std::string, entry>>& earlier,
                     std::vector<std::string>& warnings) {
  segment_window window(segments);
  for (auto& [key, e] : earlier) {
    if (e.source == per_case) {
      warnings.push_back("two case folders hold records of " + key + ": the one read is " +
                         "the host's own");
      continue;
    }
    auto text = window.read(e.source, e.at, e.size);
    boost::system::error_code ec;
    auto v = text ? json::parse(*text, ec, {}, mira::detail::host_parse_options()) : json::value();
    auto* status = v.is_object() ? v.get_object().if_contains("status") : nullptr;
    auto state = status && status->is_string()
                     ? schedule::case_state_from_string(status->get_string())
                     : std::nullopt;
    using schedule::case_state;
    if (state && (*state == case_state::cancelled || *state == case_state::error ||
                  *state == case_state::na || *state == case_state::failed))
      continue;
    warnings.push_back(key + " has more than one record in " + (folder / "segments").string() +
                       " (no resume saves it again): the last one is read");
  }
}

struct missing_found {
  std::optional<missing_cases> missing;
  std::string problem;  // why the plan's keys cannot be read
};

// The cases of the last session's plan that are not among the `size` keys of `key_at`, when the
// folder holds that plan's keys.
template <class KeyAt>
missing_found find_missing(const fs::path& folder, const run_meta& meta, std::size_t size,
                           KeyAt key_at) {
  constexpr std::size_t named = 10;
  std::optional<detail::key_index<KeyAt>> saved;  // made at the first key not where expected
  std::size_t next = 0;                           // after the saved key found last
  missing_cases m;
  auto found = detail::read_plan_keys(folder, meta, [&](std::string_view key) {
    // A plan's order is mostly natural key order, the reader's: most keys are the next one, and
    // a whole run is checked without an index (a million keys: 0.06 s, and 0.4 s through one).
    if (next < size && key_at(next) == key) {
      ++next;
      return;
    }
    if (!saved) saved.emplace(size, key_at);
    if (auto i = saved->find(key)) {
      next = *i + 1;
      return;
    }
    if (m.first.size() < named) m.first.emplace_back(key);
    ++m.count;
  });
  if (!found) return {std::nullopt, std::move(found.error())};
  if (!*found) return {};
  return {std::move(m), {}};
}

}  // namespace

// Adds a record of `key` at `e`'s place; its seq is its place in read order.
void run_reader::state::add(std::string_view key, entry e) {
  e.key_at = keys.size();
  e.key_size = static_cast<std::uint32_t>(key.size());
  e.seq = static_cast<std::uint32_t>(entries.size());
  keys += key;
  entries.push_back(e);
  states.push_back(0);
  crcs.push_back(0);
}

// A record folder that is a symbolic link is not read: its records are not the run's.
bool run_reader::state::linked(const char* name) {
  std::error_code ec;
  if (!fs::is_symlink(fs::symlink_status(folder / name, ec))) return false;
  unreadable.push_back(detail::open_failure(folder / name, ELOOP));
  return true;
}

// The records of the per-case layout: one folder a case under cases/.
void run_reader::state::read_per_case(std::unordered_map<std::string, fs::path>* dirs) {
  if (linked("cases")) return;
  auto f = run_folder::open(folder.parent_path(), folder.filename().string());
  if (!f) return;  // no cases/ folder: a compact run
  f->walk_cases(
      [&](std::string key, const fs::path& dir, json::object) {
        auto name = dir.filename().string();
        entry e;
        e.source = per_case;
        e.at = names.size();
        e.size = static_cast<std::uint32_t>(name.size());
        names += name;
        add(key, e);
      },
      &unreadable, dirs, dirs != nullptr);
}

// The records of the compact layout, in its segments. Returns the damaged lines that have a key:
// unreadable, or superseded when that key has a whole record after them (settle() decides: the
// key itself may be damaged).
std::vector<maybe_superseded> run_reader::state::read_compact() {
  std::vector<maybe_superseded> damaged;
  std::error_code ec;
  if (linked("segments") || !fs::exists(folder / "segments", ec)) return damaged;
  segments = list_segments(folder / "segments");
  const std::size_t first = entries.size();  // the entry of the first compact record
  auto scan = scan_segments(
      segments, [&](std::string key, std::string_view record, std::size_t file, std::uint64_t at) {
        entry e;
        e.source = static_cast<std::uint32_t>(file);
        e.at = at;
        e.size = static_cast<std::uint32_t>(record.size());
        add(key, e);
        if (auto st = detail::record_state(record))
          states.back() = static_cast<std::uint8_t>(1 + static_cast<int>(*st));
        crcs.back() = crc32c(record);
      });
  // The damaged lines come first; a torn tail (never acknowledged), if any, is the last entry.
  for (std::size_t i = 0; i < scan.damaged_lines; ++i) {
    auto& d = scan.damaged[i];
    if (d.key)
      damaged.push_back({scan.problems[i], *d.key, d.records_before, 0});
    else  // no key to go by (a line cut short, a linked or unreadable file): never superseded
      unreadable.push_back(scan.problems[i]);
  }
  if (damaged.empty()) return damaged;
  // How many compact records were read up to the newest one of each damaged line's key.
  std::unordered_map<std::string_view, std::size_t> newest;
  for (auto& d : damaged) newest.emplace(d.key, 0);
  for (std::size_t i = first; i < entries.size(); ++i)
    if (auto it = newest.find(key(entries[i])); it != newest.end())
      it->second = entries[i].seq - first + 1;
  for (auto& d : damaged) d.newest = newest[d.key];
  return damaged;
}

// The segments of a compact run with no cases/ folder and their stamps now, which an index or a
// journal must match to be taken; nothing otherwise.
std::optional<run_reader::state::stamped> run_reader::state::stamp_compact() const {
  std::error_code ec;
  if (fs::exists(fs::symlink_status(folder / "cases", ec)) ||
      !fs::is_directory(fs::symlink_status(folder / "segments", ec)))
    return std::nullopt;
  auto listed = list_segments(folder / "segments");
  auto stamps = detail::stamp_segments(listed);
  if (!stamps) return std::nullopt;
  return stamped{std::move(listed), std::move(*stamps)};
}

// The index made from the segments as they are: the scan's findings without the scan.
bool run_reader::state::from_index(stamped& now) {
  auto index = detail::load_case_index(folder, now.stamps);
  if (!index) return false;
  segments = std::move(now.segments);
  keys = std::move(index->keys);
  entries = std::move(index->entries);
  states = std::move(index->states);
  crcs = std::move(index->crcs);
  unreadable = std::move(index->unreadable);
  superseded = std::move(index->superseded);
  damaged_from_index = std::move(index->damaged);
  return true;
}

// The writers' journal that vouches for the segments as they are: the records the scan would
// find, in the order it would find them, without the scan.
bool run_reader::state::from_journal(stamped& now) {
  auto journal = detail::load_case_journal(folder / detail::case_journal_name, now.stamps);
  if (!journal) return false;
  segments = std::move(now.segments);
  keys = std::move(journal->keys);
  entries = std::move(journal->entries);
  states = std::move(journal->states);
  crcs = std::move(journal->crcs);
  return true;
}

// Keeps what the scan found in case-index.bin for the next reader: only for a compact run
// without a per-case record whose last session has finished (while one runs, its segments grow
// and the index would be stale at once). Made from the stamps taken after the scan: a segment
// that grew meanwhile makes a stale index, which its next reader finds out and makes again.
void run_reader::state::save_index(const std::vector<maybe_superseded>& damaged,
                                   const std::vector<std::string>& scan_unreadable,
                                   const std::vector<std::string>& duplicates) const {
  if (entries.empty() || meta.sessions.empty() || meta.sessions.back().finished.empty()) return;
  for (auto& e : entries)
    if (e.source == per_case) return;
  std::error_code ec;
  if (fs::exists(fs::symlink_status(folder / "cases", ec))) return;
  auto stamps = detail::stamp_segments(segments);
  if (!stamps) return;
  const detail::compact_scan_view c{*stamps,         keys,       entries, states, crcs,
                                    scan_unreadable, duplicates, damaged};
  // The journal stays: the index is read first, and a resumed session's writer continues it.
  detail::save_case_index(folder, c);
}

namespace {

// Sorts a range that is mostly in order already: a run's records are saved about as their cases
// were planned, in natural key order, a few dozen in flight. Sorted a block at a time, then each
// block merged into those before it only where they overlap: half the comparisons of one sort of
// the whole, and a sort of the whole after all when the merges come to more than that.
template <class It, class Less>
void sort_mostly_sorted(It first, It last, Less less) {
  constexpr std::ptrdiff_t block = 512;
  const auto n = last - first;
  for (It b = first; b != last; b += std::min(block, last - b))
    std::sort(b, b + std::min(block, last - b), less);
  std::ptrdiff_t merged = 0;
  for (It b = first + std::min(block, n); b != last; b += std::min(block, last - b)) {
    const It e = b + std::min(block, last - b);
    if (!less(*b, *(b - 1))) continue;
    const It from = std::upper_bound(first, b, *b, less);
    const It to = std::lower_bound(b, e, *(b - 1), less);
    if ((merged += to - from) > 2 * n) return std::sort(first, last, less);
    std::inplace_merge(from, b, to, less);
  }
}

}  // namespace

// Puts the entries in natural key order and keeps the last read of each key's records. Returns
// the others, each with its key.
std::vector<std::pair<std::string, entry>> run_reader::state::keep_last() {
  sort_mostly_sorted(entries.begin(), entries.end(), [&](const entry& a, const entry& b) {
    auto ka = key(a), kb = key(b);
    if (ka != kb) return plan::natural_less(ka, kb);
    return a.seq < b.seq;
  });
  std::size_t kept = 0;
  std::vector<std::pair<std::string, entry>> earlier;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    if (i + 1 < entries.size() && key(entries[i]) == key(entries[i + 1])) {
      earlier.emplace_back(key(entries[i]), entries[i]);
      continue;
    }
    entries[kept++] = entries[i];
  }
  entries.resize(kept);
  entries.shrink_to_fit();
  std::vector<std::uint8_t> by_entry(entries.size());
  std::vector<std::uint32_t> crc_by_entry(entries.size());
  for (std::size_t i = 0; i < entries.size(); ++i) {
    by_entry[i] = states[entries[i].seq];
    crc_by_entry[i] = crcs[entries[i].seq];
  }
  states = std::move(by_entry);
  crcs = std::move(crc_by_entry);
  return earlier;
}

// A flipped bit in a damaged line's key can name another case, which has a record: the case of
// the line would then be lost unseen. So a damaged line counts as superseded only while the run
// has a record of every case its last session planned (by key when the run has its plan's keys,
// else by count; a run with no session, made by another host or rebuilt by doctor, vouches for
// none). Then it is, whatever key it shows: a resume that re-ran its case (the key damaged to
// name one saved before it) made the run whole again, and the line is an old copy, not a loss.
void run_reader::state::settle(std::vector<maybe_superseded> damaged) {
  const std::size_t planned = meta.sessions.empty() ? 0 : meta.sessions.back().planned;
  const bool whole = planned > 0 && (missing ? missing->count == 0 : entries.size() >= planned);
  for (auto& d : damaged) {
    if (!whole)
      unreadable.push_back(std::move(d.problem));
    else if (d.newest > d.records_before)
      superseded.push_back(d.problem + ", superseded by a later record of " + d.key);
    else
      superseded.push_back(d.problem + ", superseded: the run has a record of each of its " +
                           std::to_string(planned) + " planned case(s)");
  }
}

run_reader detail::run_reader_access::open_folder(const fs::path& folder, run_meta meta,
                                                  std::unordered_map<std::string, fs::path>* dirs) {
  auto s = std::make_unique<run_reader::state>();
  s->folder = folder;
  s->meta = std::move(meta);
  std::vector<maybe_superseded> damaged;
  // The index and the journal are taken only for a folder without cases/: `dirs` (the per-case
  // folders a run's own store writes to) then has nothing to hold.
  auto now = s->stamp_compact();
  if (now && s->from_index(*now)) {
    damaged = std::move(s->damaged_from_index);
  } else {
    // Both layouts are read (a run converted half-way has some of each); the run's own layout
    // is read last, so its record of a key wins.
    if (s->meta.layout == layout::compact) {
      if (!now || !s->from_journal(*now)) {
        s->read_per_case(dirs);
        damaged = s->read_compact();
      }
    } else {
      damaged = s->read_compact();
      s->read_per_case(dirs);
    }
    const auto scan_unreadable = s->unreadable;
    auto earlier = s->keep_last();  // superseded by a later record of their key
    warn_duplicates(folder, s->segments, earlier, s->superseded);
    s->save_index(damaged, scan_unreadable, s->superseded);
  }
  auto found = find_missing(folder, s->meta, s->entries.size(),
                            [&s](std::size_t i) { return s->key(s->entries[i]); });
  s->missing = std::move(found.missing);
  s->plan_keys_problem = std::move(found.problem);
  s->settle(std::move(damaged));
  return run_reader(std::move(s));
}

tl::expected<run_reader, error> run_reader::open(const fs::path& results_dir,
                                                 const std::string& run_id) {
  auto meta = load_run_meta(results_dir, run_id);
  if (!meta) return tl::make_unexpected(meta.error());
  return detail::run_reader_access::open_folder(results_dir / run_id, std::move(*meta), nullptr);
}

run_reader::run_reader(std::unique_ptr<state> s) : s_(std::move(s)) {}
run_reader::run_reader(run_reader&&) noexcept = default;
run_reader& run_reader::operator=(run_reader&&) noexcept = default;
run_reader::~run_reader() = default;

const fs::path& run_reader::path() const {
  return s_->folder;
}
const run_meta& run_reader::meta() const {
  return s_->meta;
}
std::size_t run_reader::size() const {
  return s_->entries.size();
}
std::string_view run_reader::key(std::size_t i) const {
  return s_->key(s_->entries[i]);
}
std::optional<schedule::case_state> run_reader::status(std::size_t i) const {
  auto st = s_->states[i];
  if (st == 0) return std::nullopt;
  return static_cast<schedule::case_state>(st - 1);
}
std::optional<std::size_t> run_reader::find(std::string_view key) const {
  auto& e = s_->entries;
  auto it = std::lower_bound(e.begin(), e.end(), key, [&](const entry& a, std::string_view k) {
    return plan::natural_less(s_->key(a), k);
  });
  if (it == e.end() || s_->key(*it) != key) return std::nullopt;
  return static_cast<std::size_t>(it - e.begin());
}
const std::vector<std::string>& run_reader::unreadable() const {
  return s_->unreadable;
}
const std::vector<std::string>& run_reader::superseded() const {
  return s_->superseded;
}
const std::optional<missing_cases>& run_reader::missing() const {
  return s_->missing;
}
const std::string& run_reader::plan_keys_problem() const {
  return s_->plan_keys_problem;
}

std::optional<std::string_view> run_reader::state::read_text(
    segment_window& window, std::size_t i, std::vector<std::string>& problems) const {
  auto& e = entries[i];
  auto text = window.read(e.source, e.at, e.size);
  if (!text) {
    problems.push_back("cannot read the record of " + std::string(key(e)) + " in " +
                       segments[e.source].string() + ": " + text.error());
    return std::nullopt;
  }
  if (crc32c(*text) != crcs[i]) {
    problems.push_back(segments[e.source].string() + ": the record of " + std::string(key(e)) +
                       " has changed since it was read (its checksum differs)");
    return std::nullopt;
  }
  return *text;
}

std::optional<json::object> run_reader::state::read_record(
    segment_window& window, std::size_t i, std::vector<std::string>& problems) const {
  auto& e = entries[i];
  const auto k = key(e);
  const auto per_case_file = [&] {
    return folder / "cases" / std::string_view(names).substr(e.at, e.size) / "result.json";
  };
  std::optional<json::object> record;
  if (e.source == per_case) {
    record = read_json_object(per_case_file());
    if (!record) {
      problems.push_back(per_case_file().string() +
                         ": not a JSON object (changed since it was read)");
      return std::nullopt;
    }
  } else {
    auto text = read_text(window, i, problems);
    if (!text) return std::nullopt;
    boost::system::error_code ec;
    auto v = mira::detail::parse_json_precise(*text, ec, mira::detail::host_parse_options());
    if (ec || !v.is_object()) {
      problems.push_back(segments[e.source].string() + ": the record of " + std::string(k) +
                         " is not a JSON object");
      return std::nullopt;
    }
    record = std::move(v.as_object());
  }
  if (auto why = bad_status(*record)) {
    problems.push_back((e.source == per_case ? per_case_file() : segments[e.source]).string() +
                       ": the record of " + std::string(k) + " cannot be read: " + *why);
    return std::nullopt;
  }
  (*record)["key"] = k;
  return record;
}

std::vector<std::string> run_reader::visit(const record_fn& fn, const select_fn& select) const {
  std::vector<std::string> problems;
  segment_window window(s_->segments);
  saved_case c;
  for (std::size_t i = 0; i < s_->entries.size(); ++i) {
    auto key = s_->key(s_->entries[i]);
    if (select && !select(i, key)) continue;
    auto record = s_->read_record(window, i, problems);
    if (!record) continue;
    c.key.assign(key);
    c.record = std::move(*record);
    if (!fn(i, c)) break;
  }
  return problems;
}

std::vector<std::string> run_reader::visit_lines(const line_fn& fn, const select_fn& select) const {
  std::vector<std::string> problems;
  segment_window window(s_->segments);
  std::string line;
  for (std::size_t i = 0; i < s_->entries.size(); ++i) {
    auto& e = s_->entries[i];
    auto key = s_->key(e);
    if (select && !select(i, key)) continue;
    if (e.source != per_case && s_->states[i] != 0) {
      // Written by append_case_line and checked when the run was opened (its key, its state):
      // the host's line as it is, once its checksum says it is still the line that was read.
      auto text = s_->read_text(window, i, problems);
      if (!text) continue;
      if (!fn(i, key, *text, static_cast<schedule::case_state>(s_->states[i] - 1))) break;
      continue;
    }
    auto record = s_->read_record(window, i, problems);
    if (!record) continue;
    saved_case c{std::string(key), std::move(*record)};
    const auto r = decode_case_record(c.record);
    line.clear();
    append_case_line(line, planned_case_of(c), r);
    if (!fn(i, key, line, r.state)) break;
  }
  return problems;
}

std::vector<std::string> run_reader::visit_cases(const case_fn& fn, const select_fn& select) const {
  return visit(
      [&](std::size_t i, const saved_case& c) {
        return fn(i, planned_case_of(c), decode_case_record(c.record));
      },
      select);
}

loaded_run run_reader::load() const {
  loaded_run run;
  run.meta = s_->meta;
  run.unreadable = s_->unreadable;
  run.superseded = s_->superseded;
  run.cases.reserve(size());
  auto late = visit([&](std::size_t, const saved_case& c) {
    run.cases.push_back(c);
    return true;
  });
  run.unreadable.insert(run.unreadable.end(), late.begin(), late.end());
  return run;
}

plan::planned_case planned_case_of(const saved_case& c) {
  plan::planned_case pc;
  if (auto params = protocol::decode_run_params(c.record)) pc.params = *params;
  pc.key = c.key;
  if (auto* tags = c.record.if_contains("tags"); tags && tags->is_array())
    for (auto& t : tags->get_array())
      if (t.is_string()) pc.tags.emplace_back(t.get_string());
  return pc;
}

namespace {

// ": KEY, KEY and N more": the missing cases' first keys, when they are known.
std::string named_missing(const run_completeness& c) {
  if (!c.missing || c.missing->first.empty()) return {};
  // With unreadable records among the saved ones, a key named may be one of theirs.
  std::string out = c.unreadable > 0 ? "; with no readable record: " : ": ";
  for (std::size_t i = 0; i < c.missing->first.size(); ++i)
    out += (i > 0 ? ", " : "") + c.missing->first[i];
  if (c.missing->count > c.missing->first.size())
    out += " and " + std::to_string(c.missing->count - c.missing->first.size()) + " more";
  return out;
}

run_completeness completeness(const run_meta& meta, std::size_t saved, std::size_t unreadable,
                              std::optional<missing_cases> missing) {
  run_completeness c;
  c.saved = saved;
  c.unreadable = unreadable;
  c.missing = std::move(missing);
  auto& sessions = meta.sessions;
  if (sessions.empty()) return c;
  auto& last = sessions.back();
  c.planned = last.planned;
  if (!last.stopped.empty()) {
    c.stopped = schedule::stop_reason_from_label(last.stopped);
    c.stop_message = last.stop_message;
    if (c.stop_message.empty()) c.stop_message = last.stopped;  // a caller's label ("cancelled")
    if (c.stop_message == to_string(c.stopped)) c.stop_message.clear();  // says nothing more
  } else if (last.finished.empty()) {
    c.stopped = schedule::stop_reason::interrupted;
    c.stop_message = "its last session (started " + last.started +
                     (last.hostname.empty() ? "" : " on " + last.hostname) +
                     ") did not finish: it was killed, or could not write its report";
  } else if (c.unfinished() > 0) {
    c.stop_message = std::to_string(c.unfinished()) + " of " + std::to_string(c.planned) +
                     " planned case(s) have no saved record" + named_missing(c);
  }
  return c;
}

}  // namespace

run_completeness completeness_of(const run_reader& run) {
  return completeness(run.meta(), run.size() + run.unreadable().size(), run.unreadable().size(),
                      run.missing());
}

run_completeness completeness_of(const run_meta& meta, std::size_t saved) {
  return completeness(meta, saved, 0, std::nullopt);
}

schedule::run_report report_header(const run_reader& run, const run_completeness& c) {
  schedule::run_report header;
  header.seconds = run.meta().seconds();
  header.run_id = run.meta().run_id.empty() ? run.path().filename().string() : run.meta().run_id;
  header.study = run.meta().study;
  header.started = run.meta().started;
  header.stopped = c.stopped;
  header.stop_message = c.stop_message;
  return header;
}

}  // namespace mira::store
