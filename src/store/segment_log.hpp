// The compact run layout: case records appended to numbered NDJSON segment files, one
// self-checking line per record, made durable in groups. One file write and one fdatasync per
// batch instead of a directory, a file and two renames per case (docs/store.md, "Compact layout").
// Private to the library: users read and write runs through run_store, which chooses the layout.
#pragma once

#include <mira/store/error.hpp>
#include "store/case_batch.hpp"

#include <boost/system/error_code.hpp>
#include <tl/expected.hpp>

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace mira::store {

namespace detail {
template <class Item>
class batch_thread;
struct segment_item;
class case_journal;
}  // namespace detail

struct segment_options {
  std::size_t segment_bytes = 64 << 20;  // rotate to a new segment file beyond this
  std::size_t max_queued = 4096;         // submit() blocks beyond this (like batch_writer)
  /// Where to keep the records' places as they are written (case_journal.hpp), so that the
  /// run's first reader need not scan the segments; none when empty.
  std::filesystem::path journal;
};

/// Appends case records to `<dir>/NNNNNN.ndjson` segments from a thread of its own. Group commit:
/// everything submitted since the last batch is appended with one write and made durable with
/// one fdatasync before any of its callbacks run (a batch that crosses a segment boundary takes
/// one write and one fdatasync per segment).
///
/// Each line is `{"crc32c":"xxxxxxxx","key":...,"record":{...}}`: the checksum covers every byte
/// after the 21-byte prefix up to (not including) the '\n'. A crash leaves at most a torn tail
/// of the last segment (the batch being written), which the next open() truncates.
///
/// One writer per directory: open() takes an exclusive flock on `dir` and fails while another
/// writer holds it. After a write or sync error the writer fails every later record with that
/// error (what reached the disk since the last good sync is unknown; a new writer rescans).
class segment_writer {
 public:
  using done_fn = std::function<void(boost::system::error_code)>;
  /// `results`: one per record of `batch`, in its order.
  using batch_fn =
      std::function<void(case_batch& batch, std::span<const boost::system::error_code> results)>;

  /// Creates `dir` when missing; scans the last segment and truncates a torn tail (its trailing
  /// lines that lack '\n' or fail their checksum) before appending. Fails with errc::in_use
  /// while another writer holds the directory, else errc::io; the message names the file or
  /// directory.
  static tl::expected<std::unique_ptr<segment_writer>, error> open(const std::filesystem::path& dir,
                                                                   segment_options options = {});
  /// Writes and reports what is still queued, then stops the thread and releases the lock.
  ~segment_writer();
  segment_writer(const segment_writer&) = delete;
  segment_writer& operator=(const segment_writer&) = delete;

  /// Queues one record; blocks while `max_queued` records are already waiting. `record_json`:
  /// one JSON object's text with no '\n'. `done` runs on the writer's thread once the record is
  /// durable (or with the error that stopped it: errc::invalid_argument for a record that is not
  /// one JSON object on one line or a key that is not valid UTF-8).
  void submit(std::string key, std::string record_json, done_fn done);
  /// Queues a batch of records (each as submit() takes it) with one callback; blocks while
  /// `max_queued` records are already waiting, or until the queue is empty for a batch larger
  /// than that. `done` runs on the writer's thread once every record is durable or failed,
  /// with the batch as it was given (the callback may keep its buffers).
  void submit(case_batch batch, batch_fn done);
  /// Blocks until everything submitted before the call is written and reported.
  void drain();

  /// What open() dropped from the last segment (the same wording as segment_scan::problems).
  const std::vector<std::string>& repairs() const { return repairs_; }
  /// The segment being appended to; after a failure, the one that failed. Any thread.
  std::filesystem::path current_segment() const;

 private:
  segment_writer(std::filesystem::path dir, segment_options options, int dir_fd, int fd,
                 std::uint64_t number, std::uint64_t size, std::vector<std::string> repairs,
                 std::uint32_t source, std::unique_ptr<detail::case_journal> journal);
  /// On the writer's thread: appends every record of the batches, makes them durable and
  /// reports each batch.
  void write_batch(std::span<detail::segment_item> batch);
  boost::system::error_code append(std::string_view bytes);
  boost::system::error_code next_segment();
  /// A line placed in out_ (write_batch): where its record's text is, to journal once durable.
  struct placed {
    std::size_t at = 0;  // in out_
    std::uint32_t size = 0;
    std::uint32_t crc = 0;
    std::uint8_t state = 0;
    std::string_view key;
  };
  void journal(std::span<const placed> lines, std::uint64_t segment_start);

  std::filesystem::path dir_;
  segment_options options_;
  int dir_fd_ = -1;                        // holds the lock; fsynced when a segment is created
  int fd_ = -1;                            // the segment being appended to
  std::atomic<std::uint64_t> number_ = 0;  // read by current_segment() on any thread
  std::uint32_t source_ = 0;               // the current segment's place in list_segments()
  std::uint64_t size_ = 0;                 // durable bytes in the current segment
  boost::system::error_code error_;        // sticky: see the class comment
  std::vector<std::string> repairs_;
  // The writer thread's buffers, kept from batch to batch so that writing allocates nothing.
  std::string out_;
  std::vector<boost::system::error_code> results_;
  std::vector<placed> placed_;
  std::unique_ptr<detail::case_journal> journal_;  // none when not asked for or not possible
  // The queue and the thread (batch_thread.hpp).
  std::unique_ptr<detail::batch_thread<detail::segment_item>> thread_;
};

struct segment_record {
  std::string key;
  std::string json;
};

struct segment_scan {
  /// Append order; a later record for a key supersedes an earlier one.
  std::vector<segment_record> records;
  /// Human-readable: "torn tail dropped in FILE at byte N (...)", "checksum mismatch at
  /// FILE:LINE (byte N), line skipped", "cannot read FILE: ...".
  std::vector<std::string> problems;  // the damaged lines first; a torn tail, if any, last
  /// Lines skipped before the torn tail of the last segment (damage, not an interrupted write).
  std::size_t damaged_lines = 0;
  /// One per damaged line, in the same order: the key its key field still names (taken as
  /// written: the checksum no longer vouches for it), nothing for an unreadable file or a line
  /// whose key cannot be read, and how many `records` came before it (a record of that key at
  /// or after that index was written later).
  struct damage {
    std::optional<std::string> key;
    std::size_t records_before = 0;
  };
  std::vector<damage> damaged;
};

/// Reads every segment in `dir` without modifying anything. A missing `dir` reads as empty.
segment_scan read_segments(const std::filesystem::path& dir);

/// Each good record of a scan: its key, its text (valid during the call only), the position of
/// its segment in the scanned list and the byte offset of the text in that segment.
using segment_visitor = std::function<void(std::string key, std::string_view record,
                                           std::size_t file, std::uint64_t at)>;
/// read_segments() over `files` (list_segments' order) without keeping the records: each good
/// one goes to `good` as it is found, and the scan's `records` stay empty. One segment is in
/// memory at a time.
segment_scan scan_segments(const std::vector<std::filesystem::path>& files,
                           const segment_visitor& good);

/// The segment files in `dir` (names of digits, at least six, then ".ndjson"), in number order.
std::vector<std::filesystem::path> list_segments(const std::filesystem::path& dir);

/// CRC-32C (Castagnoli, reflected 0x82F63B78, as in iSCSI and ext4): the segment line checksum.
/// `before`: the CRC of the bytes before `data`, to checksum a file written piece by piece
/// (crc32c(b, crc32c(a)) == crc32c(a + b)).
std::uint32_t crc32c(std::string_view data, std::uint32_t before = 0);

}  // namespace mira::store
