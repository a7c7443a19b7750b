// What a reader of a compact run learns by scanning its segments, kept beside them in
// case-index.bin so that the next reader does not scan again: each key's place, each case's
// state, and what the scan found damaged. Valid only for the segments it was made from: their
// names, sizes and modification times are in it and are checked on every load. Private to the
// library (run_reader.cpp).
#pragma once

#include <mira/schedule/results.hpp>

#include <boost/json/array.hpp>
#include <boost/json/value.hpp>

#include <cstdint>
#include <filesystem>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace mira::store::detail {

/// Where one record is. 32 bytes: with the key's bytes, what a reader keeps per case.
struct reader_entry {
  std::uint64_t key_at = 0;  // in the reader's keys
  std::uint32_t key_size = 0;
  std::uint32_t seq = 0;     // read order: of two records of a key, the later one stands
  std::uint64_t at = 0;      // a segment's byte offset, or the folder name's place in names
  std::uint32_t size = 0;    // of the record, or of the folder name
  std::uint32_t source = 0;  // the segment's index, or per_case
};
static_assert(sizeof(reader_entry) == 32);
inline constexpr std::uint32_t per_case = std::numeric_limits<std::uint32_t>::max();

/// A damaged line whose key, as far as it can be read, may have a whole record after it.
struct maybe_superseded {
  std::string problem;
  std::string key;
  std::size_t records_before = 0;  // compact records read before it
  std::size_t newest = 0;          // compact records read up to the newest one of `key`
};

struct segment_stamp {
  std::string name;
  std::uint64_t size = 0;
  std::int64_t mtime_ns = 0;
  std::uint64_t inode = 0;  // a file put in its place, of the same size, within the same tick
  bool operator==(const segment_stamp&) const = default;
};
/// The stamps of `segments` now; nothing when one cannot be read.
std::optional<std::vector<segment_stamp>> stamp_segments(
    const std::vector<std::filesystem::path>& segments);

/// A scan of a compact run's segments, its entries in natural key order (one per key).
struct compact_scan {
  std::vector<segment_stamp> stamps;
  std::string keys;
  std::vector<reader_entry> entries;
  /// Per entry: 1 + the record's case_state, or 0 when its "status" is missing or unknown.
  std::vector<std::uint8_t> states;
  /// Per entry: the CRC-32C of the record's text, which a visit checks, so that a record
  /// damaged after the scan (whose line checksum the index does not check again) is not read.
  std::vector<std::uint32_t> crcs;
  std::vector<std::string> unreadable;  // the scan's (lines without a key, unreadable files)
  std::vector<std::string> superseded;  // records of a key read again later
  std::vector<maybe_superseded> damaged;
};

inline constexpr std::string_view case_index_name = "case-index.bin";
/// An index or a journal is at most this large (about 24 million cases): a bigger file is not
/// one of ours.
inline constexpr std::size_t max_index_bytes = std::size_t{2} << 30;

/// The whole regular file at `path` (never through a link) when it is at most `max` bytes.
std::optional<std::string> read_bounded(const std::filesystem::path& path, std::size_t max);
/// Stamps as an index or a journal keeps them: [name, size, mtime_ns, inode] each.
boost::json::array stamps_json(const std::vector<segment_stamp>& stamps);
/// What stamps_json() made, or nothing for anything else.
std::optional<std::vector<segment_stamp>> take_stamps(const boost::json::value* segs);

/// The index in `folder`, when there is one made from segments with exactly `stamps`, whole
/// (its checksum) and consistent (every entry inside its segment and the keys); else nothing.
std::optional<compact_scan> load_case_index(const std::filesystem::path& folder,
                                            const std::vector<segment_stamp>& stamps);
/// What save_case_index() writes, borrowed from the reader that made it: a scan's findings.
struct compact_scan_view {
  const std::vector<segment_stamp>& stamps;
  std::string_view keys;
  std::span<const reader_entry> entries;
  std::span<const std::uint8_t> states;
  std::span<const std::uint32_t> crcs;
  const std::vector<std::string>& unreadable;
  const std::vector<std::string>& superseded;
  const std::vector<maybe_superseded>& damaged;
};

/// Writes `scan` as `folder`'s index, atomically; false when it cannot (a read-only folder: the
/// next reader scans again).
bool save_case_index(const std::filesystem::path& folder, const compact_scan_view& scan);

/// The top-level "status" of a record's text as a case state, or nothing.
std::optional<schedule::case_state> record_state(std::string_view record);

}  // namespace mira::store::detail
