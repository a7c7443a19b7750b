// Reading a saved run back a case at a time: an index of its records (the newest of each key, in
// natural key order: a key and where its record is) and visits that read, parse and hand over one
// record at a time. A run of a million cases is read in the memory of its keys, not of its
// records; `mira report`, `export`, `compare` and `merge` read runs through it, and load_run is
// it holding every record.
#pragma once

#include <mira/plan/plan.hpp>
#include <mira/schedule/results.hpp>
#include <mira/store/error.hpp>
#include <mira/store/run_meta.hpp>
#include <mira/store/run_store.hpp>

#include <tl/expected.hpp>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mira::store {

namespace detail {
struct run_reader_access;  // the store's own ways in (a writer's load, rebuild_meta)
}  // namespace detail

/// The cases of a run's last plan that have no readable record, named.
struct missing_cases {
  std::size_t count = 0;           ///< planned keys with no readable record
  std::vector<std::string> first;  ///< the first 10 of them, in plan order
};

/// A saved run opened for reading, without a lock: both layouts (a run converted half-way has
/// some of each, and the run's own layout wins for a key in both), the folders of the Rust mira
/// CLI, the same unreadable and superseded records as load_run. Opening reads every record once
/// to index it and keeps per case only its key and its place (about 40 bytes and the key); a
/// visit reads the records again, in natural key order, a few hundred KiB at a time.
///
/// What opening a compact run learns (each key's place and state) is kept in the run folder's
/// case-index.bin once the run's last session has finished, and taken from there by the next
/// reader while the segments are as they were (names, sizes and times): a million cases are
/// then opened without reading their records.
///
/// Records are read as they are when visited: a record changed meanwhile (a resume saving its
/// case again) is read as it is then, one removed is a visit problem. Not thread-safe: one visit
/// at a time.
class run_reader {
 public:
  /// Opens `results_dir/run_id`. Fails as load_run does (no such run, an invalid id, a meta.json
  /// that cannot be read).
  static tl::expected<run_reader, error> open(const std::filesystem::path& results_dir,
                                              const std::string& run_id);

  run_reader(run_reader&&) noexcept;
  run_reader& operator=(run_reader&&) noexcept;
  ~run_reader();

  const std::filesystem::path& path() const;
  const run_meta& meta() const;
  /// The readable cases: one per key.
  std::size_t size() const;
  /// The key of case `i` (natural key order), without reading its record.
  std::string_view key(std::size_t i) const;
  /// The state of case `i` as its record's "status" says, without reading the record, when the
  /// reader knows it: for the records of the compact layout (read when the run was opened, or
  /// kept in its case-index.bin), not for per-case folders.
  std::optional<schedule::case_state> status(std::size_t i) const;
  /// The case whose key is `key`, found without reading any record.
  std::optional<std::size_t> find(std::string_view key) const;
  /// "<file>: <why>" of each record that could not be read; their cases count as not saved.
  const std::vector<std::string>& unreadable() const;
  /// Damaged compact records of a case saved again later (see loaded_run::superseded).
  const std::vector<std::string>& superseded() const;
  /// The cases of the last session's plan that have no readable record, named: known when the
  /// run folder holds that plan's keys (plan-keys.ndjson, which begin_session saves); nothing for
  /// a run without them (saved before they were kept, by the Rust host, rebuilt by doctor --fix).
  const std::optional<missing_cases>& missing() const;
  /// Why the run folder's plan-keys.ndjson cannot be read (a symbolic link, damaged), or empty:
  /// the missing cases are then counted, not named.
  const std::string& plan_keys_problem() const;

  /// Which cases a visit reads: case i with key k is read when select(i, k). Everything when
  /// empty.
  using select_fn = std::function<bool(std::size_t i, std::string_view key)>;
  /// Called with each case read, in natural key order; returns false to stop the visit. The
  /// record (with "key", as load_run gives it) lives until the call returns.
  using record_fn = std::function<bool(std::size_t i, const saved_case& c)>;
  /// The same, decoded: the case's identity and key (as a plan would have it) and its record
  /// (decode_case_record).
  using case_fn = std::function<bool(std::size_t i, const plan::planned_case& c,
                                     const schedule::case_record& r)>;

  /// Reads each selected record in turn. Returns what could not be read now that could be when
  /// the run was opened ("<file>: <why>"): those cases are left out and the visit goes on.
  std::vector<std::string> visit(const record_fn& fn, const select_fn& select = {}) const;
  std::vector<std::string> visit_cases(const case_fn& fn, const select_fn& select = {}) const;

  /// Called with each case read, in natural key order, as the line a report writes of it
  /// (append_case_line: the record in the host's form, "key" included) and its state; returns
  /// false to stop. The line lives until the call returns.
  using line_fn = std::function<bool(std::size_t i, std::string_view key, std::string_view line,
                                     schedule::case_state state)>;
  /// The same cases and problems as visit(), for readers that take a record as text: a compact
  /// record whose state the reader knows is handed over as saved (its checksum checked, nothing
  /// parsed), any other is read as visit() reads it and written as append_case_line writes it.
  std::vector<std::string> visit_lines(const line_fn& fn, const select_fn& select = {}) const;

  /// Every readable case in memory (what load_run returns).
  loaded_run load() const;

 private:
  friend struct detail::run_reader_access;
  struct state;
  explicit run_reader(std::unique_ptr<state> s);
  std::unique_ptr<state> s_;
};

/// How far a saved run got: meta.json's last session against the records found. What every
/// report of a saved run says of it, and what `mira report --check` and doctor judge it by.
struct run_completeness {
  std::size_t planned = 0;  ///< the last session's plan (a merged run: the whole plan); 0 unknown
  std::size_t saved = 0;    ///< records found, readable or not
  std::size_t unreadable = 0;  ///< of those, the ones that cannot be read
  /// The planned cases with no readable record, by key, when the run has its plan's keys.
  std::optional<missing_cases> missing;
  /// How the last session stopped: none when it ran to its end; interrupted when it never
  /// finished (killed, or still running).
  schedule::stop_reason stopped = schedule::stop_reason::none;
  /// Why, for people: the stop's, or what became of the missing cases (naming the first when
  /// the keys are known).
  std::string stop_message;
  /// Planned cases that have no saved record. By count, unless the keys tell more: a record
  /// of a case outside the plan does not stand for a planned one (each unreadable record may).
  std::size_t unfinished() const {
    const std::size_t counted = planned > saved ? planned - saved : 0;
    const std::size_t by_key =
        missing && missing->count > unreadable ? missing->count - unreadable : 0;
    return counted > by_key ? counted : by_key;
  }
  bool complete() const { return stopped == schedule::stop_reason::none && unfinished() == 0; }
};
run_completeness completeness_of(const run_reader& run);
/// The same from a run's meta.json and the number of records found (readable or not).
run_completeness completeness_of(const run_meta& meta, std::size_t saved);

/// The header a report over the saved run is rendered with: the run's seconds over every
/// session, its id and study, and how it stopped (`c`).
schedule::run_report report_header(const run_reader& run, const run_completeness& c);

/// A saved case as a planned one: its identity (the record's eval, sample, target, params,
/// trial) and its key.
plan::planned_case planned_case_of(const saved_case& c);

}  // namespace mira::store
