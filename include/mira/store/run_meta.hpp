// meta.json of a saved run, typed: who made the run, how, and one entry per session (each
// invocation that ran or resumed it), appended and never replaced. Reads this host's formats 1
// and 2 and the Rust mira CLI's meta.json; fields it does not know are kept as they were.
#pragma once

#include <mira/store/error.hpp>

#include <boost/json/object.hpp>
#include <tl/expected.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mira::store {

/// How a run keeps its case records: a folder and result.json per case (the default, readable
/// by the Rust mira CLI), or append-only checksummed segments (large runs).
enum class layout { per_case, compact };
std::string_view to_string(layout l);
std::optional<layout> layout_from_string(std::string_view s);

/// A Unix time as meta.json writes times ("2026-11-30T08:15:02Z"); empty for 0 or less (the
/// Rust host's "never finished").
std::string iso_utc(std::int64_t unix_seconds);

/// One invocation that ran or resumed the run.
struct session_entry {
  std::string started;            // UTC, ISO 8601 (begin_session: now, when empty)
  std::string finished;           // empty while it runs, or when it was killed
  std::string hostname;           // begin_session: this host's, when empty
  std::int64_t pid = 0;           // begin_session: this process's, when 0
  std::vector<std::string> argv;  // the host's arguments, --study-env values removed
  boost::json::object config;     // the effective configuration (selection, policy, ...)
  std::size_t planned = 0;        // cases in this session's plan
  std::size_t reused = 0;         // of those, already saved before it
  std::size_t ran = 0;            // finished in this session
  double seconds = 0;             // wall time of its run
  std::string stopped;            // stop reason when it did not run to the end
  std::string stop_message;       // and why, for people

  boost::json::object to_json() const;
  static session_entry from_json(const boost::json::object& o);
};

struct run_meta {
  static constexpr int current_format = 2;
  int format = current_format;
  std::string run_id;
  store::layout layout = store::layout::per_case;
  std::string started;   // the first session's start
  std::string finished;  // the last finished session's end
  std::string study;     // initialize.study
  std::string study_version;
  boost::json::object initialize;  // the study's whole initialize result, as sent
  std::vector<std::string> study_command;
  boost::json::object study_env;     // {"cleared": bool, "passed": [names]}
  boost::json::object host;          // {"name", "version"}
  boost::json::object environment;   // where the first session ran
  boost::json::object fingerprints;  // eval name -> SHA-256 of its listing entry
  std::vector<session_entry> sessions;
  std::optional<boost::json::object> summary;  // over every case of the run
  bool made_by_rust_host = false;              // read from a Rust mira CLI meta.json
  boost::json::object extra;                   // members this host does not know, kept

  /// Seconds of run time over every session (what a report shows as the run's duration).
  double seconds() const;

  boost::json::object to_json() const;
  /// Fails with errc::corrupt naming the member that has the wrong type, or errc::incompatible
  /// when the format is newer than this host reads.
  static tl::expected<run_meta, error> from_json(const boost::json::object& o);
};

}  // namespace mira::store
