// Where a compact run's writer put each record, appended to case-index.journal as the records
// are written, so that the first reader of the run builds its index (case_index.hpp) from it
// instead of scanning every segment: at a million records, a read of some 50 MB instead of
// 400 MB of JSON. A cache, never the record of anything: it counts only while the segments are
// exactly as its writer left them (their names, sizes, modification times and inodes at its
// close, in its trailer); otherwise the reader scans, as for a folder written without one.
// Private to the library (segment_log.cpp writes it, run_reader.cpp reads it).
#pragma once

#include "store/case_index.hpp"

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mira::store::detail {

inline constexpr std::string_view case_journal_name = "case-index.journal";

/// One written record: its segment (its place in list_segments' order), where its text starts
/// in it, the text's size and CRC-32C, 1 + its case_state (0: none known) and its key.
struct journal_record {
  std::uint32_t source = 0;
  std::uint64_t at = 0;
  std::uint32_t size = 0;
  std::uint32_t crc = 0;
  std::uint8_t state = 0;
  std::string_view key;
};

/// The writer's side, used on the segment writer's thread only. Nothing it does fails a write of
/// records: a journal that cannot be written is removed, and its run's first reader scans.
class case_journal {
 public:
  /// The journal at `path` for a writer about to append to `segments` (list_segments' order, as
  /// they are now, a torn tail already cut): continued when it vouches for exactly them, begun
  /// when there are none. Otherwise nothing, and a journal left at `path` (by a writer that
  /// stopped without closing it, or before the segments changed) is removed.
  static std::unique_ptr<case_journal> open(const std::filesystem::path& path,
                                            const std::vector<std::filesystem::path>& segments);
  ~case_journal();
  case_journal(const case_journal&) = delete;
  case_journal& operator=(const case_journal&) = delete;

  /// Keeps `r` back until the next commit().
  void add(const journal_record& r);
  /// Appends what add() kept back: its records are durable in their segments. False when the
  /// journal could not be written (and is gone): drop it.
  bool commit();
  /// Ends the journal with the stamps of `segments` (list_segments' order), which its writer
  /// will not touch again.
  void close(const std::vector<std::filesystem::path>& segments);

 private:
  case_journal(std::filesystem::path path, int fd, std::uint64_t size, std::uint32_t crc,
               std::uint64_t count);
  void fail();

  std::filesystem::path path_;
  int fd_ = -1;
  std::uint64_t size_ = 0;  // bytes written
  std::uint32_t crc_ = 0;   // CRC-32C of those bytes
  std::uint64_t count_ = 0;
  std::string pending_;
};

/// What a closed journal lists, in the order the records were written (`entries[i].seq == i`).
struct journal_contents {
  std::string keys;
  std::vector<reader_entry> entries;
  std::vector<std::uint8_t> states;  // 1 + case_state, 0 when not known
  std::vector<std::uint32_t> crcs;
};

/// The closed journal at `path` when it is whole (its checksum) and vouches for segments with
/// exactly `stamps`, each record inside its segment; else nothing.
std::optional<journal_contents> load_case_journal(const std::filesystem::path& path,
                                                  const std::vector<segment_stamp>& stamps);

}  // namespace mira::store::detail
