// The run store: a saved run as a library component, for the CLI and for any service. A run
// folder <results>/<run_id>/ holds meta.json (typed: run_meta, with one entry per session),
// the case records in one of two layouts, events.ndjson and study.stderr.log (appended per
// session, each session opened by a marker), report.json and report.html (over every case of
// the run). A writer holds an exclusive lock on the folder (an flock on the directory itself)
// for its whole session and writes nothing before it holds it; readers need none. Folders
// written by the Rust mira CLI are read, reported and resumed too.
#pragma once

#include <mira/aggregate/summary.hpp>
#include <mira/plan/plan.hpp>
#include <mira/protocol/types.hpp>
#include <mira/schedule/results.hpp>
#include <mira/store/error.hpp>
#include <mira/store/files.hpp>
#include <mira/store/run_meta.hpp>

#include <boost/json/object.hpp>
#include <boost/system/error_code.hpp>
#include <tl/expected.hpp>

#include <array>

#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace mira::store {

class run_reader;
// The batches a session hands its writer are the library's own (src/store/case_batch.hpp):
// declared here for case_writer::submit_batch, which only the library calls.
class case_batch;
struct save_failure;
/// Called on the writer's thread once every record of a batch is durable or has failed: the
/// batch as it was given (which records it held; clear() it to reuse its buffers), and the
/// records that failed (usually none). Every other record is durable.
using batch_done_fn = std::function<void(case_batch batch, std::vector<save_failure> failed)>;

/// A file of a run's report. The caller renders it into the sink it is given: the store writes
/// bytes and renders nothing (the report layer is above it).
struct report_file {
  std::string name;  // in the run folder: "report.json"
  std::function<void(const std::function<void(std::string_view)>& sink)> render;
};

/// One saved case: its record as case_line() writes it (a record the Rust host saved gains
/// "key", computed from its identity as the Rust host computes it).
struct saved_case {
  std::string key;
  boost::json::object record;
};

/// Every readable case of a run and what could not be read. Loading never changes the folder.
struct loaded_run {
  run_meta meta;
  std::vector<saved_case> cases;        // one per key (the newest record), natural key order
  std::vector<std::string> unreadable;  // "<file>: <why>"; their cases count as not saved
  /// Damaged compact records of a case saved again later (a resume ran it again): the later
  /// record stands, so nothing is lost. "<where>: <why>, superseded by a later record of KEY".
  std::vector<std::string> superseded;
  /// The saved cases as a plan and a report (plan order = `cases` order), for rendering.
  std::pair<plan::plan, schedule::run_report> as_report() const;
};

/// What a resumed session runs and what it takes from the saved run.
struct resume_options {
  bool retry_errors = false;       // run error and N/A cases again
  bool retry_failed = false;       // run failed cases again
  bool allow_other_study = false;  // a run made by another study (by name) is refused otherwise
};

struct resume_plan {
  std::vector<std::size_t> todo;               // plan indices to run, in plan order
  std::vector<schedule::case_record> records;  // by plan index: the reused ones, else empty
  std::size_t reused = 0;
  /// The reused cases by state (indexed by case_state).
  std::array<std::size_t, schedule::case_state_count> reused_states{};
  std::vector<std::string> warnings;  // study version, seed, eval fingerprints
  /// Saved cases the plan does not select (a narrower resume): kept in the run's report.
  plan::plan outside;
  std::vector<schedule::case_record> outside_records;
};

/// Hands each key of a session's plan to `key`, in plan order: what begin_session saves in the
/// run folder (plan-keys.ndjson), so that readers can name the planned cases that have no record.
using plan_keys = std::function<void(const std::function<void(std::string_view key)>& key)>;
/// The keys of `cases`, which must outlive the call.
plan_keys keys_of(const plan::case_list& cases);

/// SHA-256 of each eval's canonical listing entry (eval name -> hex): what meta.json keeps as
/// `fingerprints`, so a resume can tell which evals changed since the run was made.
boost::json::object listing_fingerprints(const protocol::list_result& list);

/// Decides a resume: every planned case saved with a final verdict is reused (cancelled ones,
/// and per the options errors/N/A or failures, run again). Fails when the run was made by
/// another study and that is not allowed.
tl::expected<resume_plan, error> plan_resume(const loaded_run& run, const plan::plan& p,
                                             const protocol::initialize_result& study,
                                             const boost::json::object& fingerprints,
                                             std::optional<std::int64_t> seed,
                                             const resume_options& options);

/// Where a resume read back a case at a time puts each saved record it takes, as it reads it,
/// instead of keeping it: a reused case by its plan index, a saved case the plan does not select.
/// Records come in the saved run's (natural key) order.
struct resume_sink {
  std::function<void(std::size_t plan_index, const schedule::case_record&)> reused;
  std::function<void(const plan::planned_case&, const schedule::case_record&)> outside;
};

/// plan_resume over a run read back a case at a time (run_store::reader): the decision is the
/// same, but each record is read once and handed to `sink`, so `records` and `outside_records`
/// stay empty (`outside` has the cases) and a resume of a million cases holds their keys, not
/// their records. Records unreadable since the reader opened run again (a warning says so).
tl::expected<resume_plan, error> plan_resume(const run_reader& run, const plan::plan& p,
                                             const protocol::initialize_result& study,
                                             const boost::json::object& fingerprints,
                                             std::optional<std::int64_t> seed,
                                             const resume_options& options,
                                             const resume_sink& sink);

/// The run's cases after a session: this session's plan (`report`, in plan order) and the saved
/// cases it did not select. Returns nothing when there are none of the latter (`p` and
/// `report` are then the whole run).
std::optional<std::pair<plan::plan, schedule::run_report>> whole_run(
    const plan::plan& p, const schedule::run_report& report, const resume_plan& resumed);

/// Reads a saved run without locking it.
tl::expected<loaded_run, error> load_run(const std::filesystem::path& results_dir,
                                         const std::string& run_id);
/// Reads only a saved run's meta.json (no cases), without locking it.
tl::expected<run_meta, error> load_run_meta(const std::filesystem::path& results_dir,
                                            const std::string& run_id);

/// The run `latest` names in `results_dir`: the one whose newest session started last (ties:
/// the meta.json written last, then the greater id). Folders whose meta.json cannot be read, and
/// hidden ones (a merge's temporary folder), are passed over; nullopt when no run is left.
std::optional<std::string> latest_run_id(const std::filesystem::path& results_dir);

/// What rebuild_meta did.
struct meta_rebuild {
  std::filesystem::path damaged;  // where the damaged meta.json was kept
  layout records_layout = layout::per_case;
  std::size_t records = 0;              // the cases meta.json's summary was rebuilt from
  std::vector<std::string> unreadable;  // records that could not be read (left as they are)
};

/// Rebuilds the meta.json of a run whose meta.json cannot be read, from its case records, under
/// the run's lock. The damaged file is kept as meta.json.damaged (refused when that exists);
/// no record is changed or removed. The new meta.json has the run id, the layout the records
/// are in, and the summary of the records; what only the damaged file knew (the study, the
/// sessions, the fingerprints) is lost, so a resume does not check the study. Refused when
/// meta.json reads or the run is in use.
tl::expected<meta_rebuild, error> rebuild_meta(const std::filesystem::path& results_dir,
                                               const std::string& run_id);

class run_store {
 public:
  /// A new run folder; fails when the id is invalid or the folder exists.
  static tl::expected<run_store, error> create(const std::filesystem::path& results_dir,
                                               const std::string& run_id, layout l);
  /// A new run folder under a new id (new_run_id); a clash of two new ids (the same second, the
  /// same 16 random bits) is tried again, a few times.
  static tl::expected<run_store, error> create_new(const std::filesystem::path& results_dir,
                                                   layout l);
  /// An existing run, for a new session. Fails when there is no such run, its meta.json cannot
  /// be read, or another process holds it (the message names that process's pid and host).
  static tl::expected<run_store, error> open(const std::filesystem::path& results_dir,
                                             const std::string& run_id);

  run_store(run_store&&) noexcept;
  run_store& operator=(run_store&&) noexcept;
  ~run_store();

  const std::filesystem::path& path() const;
  const std::string& id() const;
  run_meta& meta();
  const run_meta& meta() const;
  /// Says in meta() who makes this session's records: the study (`init`, its command line), this
  /// host, and the evals' fingerprints. Who made the run is kept from its first session on,
  /// except that a run a Rust host began gains the study's names and this host.
  void made_by(const protocol::initialize_result& init, const std::vector<std::string>& command,
               boost::json::object fingerprints);
  /// Every case saved so far (see load_run).
  loaded_run load() const;
  /// The cases saved so far, to read back a case at a time (see run_reader).
  run_reader reader() const;

  /// Starts a session: appends it to meta.json (saved) and a marker to events.ndjson and
  /// study.stderr.log, and saves the keys of its plan (`s.planned` of them) in plan-keys.ndjson.
  /// Without `keys` the run has none for this session, and readers only count its missing
  /// cases. Every write_error below names the file that could not be written.
  write_error begin_session(session_entry s, const plan_keys& keys = {});
  /// The current (last) session.
  session_entry& session();

  /// Saves case records off the caller's thread, in batches made durable before their
  /// callbacks run (see batch_writer). Submit blocks while too many wait.
  class case_writer {
   public:
    using done_fn = std::function<void(boost::system::error_code)>;
    virtual ~case_writer() = default;
    /// `record`: case_line()'s text, without a newline.
    virtual void submit(const std::string& key, std::string record, done_fn done) = 0;
    /// Saves a batch of records (each as submit() takes it) with one callback: what a busy
    /// writer is given, since a record then costs no allocation and no hand-over of its own.
    /// The compact layout appends the batch with one write (and with what else is waiting, one
    /// fdatasync); the per-case one writes a file per record. Blocks while too many wait. The
    /// callback gets the batch back as given and the records that failed; an empty batch is
    /// reported at once, on the caller's thread.
    virtual void submit_batch(case_batch batch, batch_done_fn done) = 0;
    /// Blocks until everything submitted is written and reported.
    virtual void drain() = 0;
    /// The file a record of `key` goes to (for a message about a failed save): its
    /// result.json, or the segment being appended (after a failure, the one that failed).
    /// Callable from the writer's callbacks.
    virtual std::filesystem::path file_of(const std::string& key) const = 0;
  };
  /// A writer for this run's layout. The store must outlive it.
  tl::expected<std::unique_ptr<case_writer>, error> writer();

  /// A notification line (NDJSON, no newline) for events.ndjson; buffered, written by flush().
  void append_event(std::string_view line);
  /// The study's stderr of this session (its last MiB is what a caller keeps) for
  /// study.stderr.log, appended after the session's marker.
  write_error append_stderr(std::string_view text);
  write_error flush_events();

  /// The run time of every session, this one's included (set session().seconds first).
  double seconds() const;
  /// Writes each file into the run folder atomically (replaced whole or not at all). Returns
  /// the first that could not be written.
  write_error write_files(const std::vector<report_file>& files);
  /// Ends the session: `files` (report.json and report.html over every case of the run:
  /// report::finish_run renders them), then meta.json with `summary` and the session's end.
  /// Returns the first file that could not be written: the run is then not finished (a resume
  /// or `mira report` writes its report files again).
  write_error finish(const std::vector<report_file>& files, boost::json::object summary);

  write_error save_meta();

 private:
  struct state;
  explicit run_store(std::unique_ptr<state> s);
  std::unique_ptr<state> s_;
};

}  // namespace mira::store
