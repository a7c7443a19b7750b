// One page of a saved run's cases, filtered and sorted, and one case whole with its
// notifications: what a viewer or an API client asks of a run it shows a page at a time. A page
// is chosen by a cursor that names the last case of the page before it (its sort value and key),
// so a page follows from where the last one ended even when a resume adds cases meanwhile.
#pragma once

#include <mira/store/error.hpp>
#include <mira/store/run_reader.hpp>

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <tl/expected.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mira::store {

/// What a page is sorted by: the natural key order, or a measure of the case (cases without it
/// come last either way, then in key order).
enum class case_sort { key, latency, cost, tokens, score };
/// "key", "latency", "cost", "tokens", "score".
std::string_view to_string(case_sort s) noexcept;
std::optional<case_sort> case_sort_from(std::string_view name) noexcept;

/// Which cases a page is drawn from. An empty list or an unset bound lets every case through.
struct case_filter {
  std::vector<std::string> statuses;  ///< "passed", "failed", "error", "na", "skipped", "cancelled"
  std::vector<std::string> evals;
  std::vector<std::string> targets;
  std::vector<std::string> tags;  ///< a case whose sample has any of them (its record's "tags")
  std::optional<std::int64_t> trial;
  std::optional<double> score_min;  ///< the case's aggregate score, inclusive
  std::optional<double> score_max;
  /// Found, without regard to ASCII case, in the input's or the final response's text.
  std::string text;
};

struct case_query {
  case_filter filter;
  case_sort sort = case_sort::key;
  bool descending = false;  ///< largest first (the key order is ascending only)
  std::size_t limit = 50;   ///< 1 to max_page_size
  std::string cursor;       ///< a page's next_cursor, or empty for the first page
  static constexpr std::size_t max_page_size = 500;
};

/// A case as a row of a table: what it is and how it went, with the first characters of its
/// input and response. Text from the study is as it came (escaping is the renderer's).
struct case_summary {
  std::string key, eval, sample, target;
  boost::json::object params;
  std::int64_t trial = 0;
  std::vector<std::string> tags;  ///< its sample's, from the study's listing
  std::string status;
  std::int64_t attempts = 0;
  std::optional<double> latency_ms, score, cost_usd;
  std::optional<std::int64_t> tokens;  ///< input + output
  std::int64_t tool_calls = 0;
  std::optional<std::size_t> steps;  ///< the trajectory's, when there is one
  std::string input_preview, response_preview;
  std::string message;  ///< the error or host message, when there is one
};

struct case_page {
  std::vector<case_summary> cases;
  std::size_t matched = 0;  ///< cases that pass the filter, in the whole run
  std::string next_cursor;  ///< empty on the last page
  /// "<file>: <why>" of records that could not be read now that could when the run was opened.
  std::vector<std::string> problems;
  /// "<file>: <why>" of the run's records that could not be read when it was opened
  /// (run_reader::unreadable): cases no page has.
  std::vector<std::string> unreadable;
  bool stopped = false;
};

/// Why a query cannot be answered: a bad `cursor` (from another sort, or damaged) or `limit`.
struct query_error {
  std::string parameter;
  std::string message;
};

/// Characters of input and response a summary keeps (cut at a UTF-8 boundary, "…" added).
inline constexpr std::size_t preview_chars = 160;

/// Reads every record once; keeps only the page's cases. `stop`, when given, is asked before
/// each record: true ends the read, and the page is then `stopped` (and incomplete).
tl::expected<case_page, query_error> query_cases(const run_reader& run, const case_query& q,
                                                 const std::function<bool()>& stop = {});

/// The summary of one record, as a page shows it.
case_summary summarize_case(const saved_case& c);

/// One case whole: its record, its trajectory, and the notifications events.ndjson holds for
/// it (each line's JSON, in the order they came, at most `max_events`; `events_cut` when there
/// were more).
///
/// A `run` result carries no trajectory (the protocol keeps it to `execute`): the trajectory is
/// the record's own when a study sent one anyway, else the one in the execute artifact of the
/// case when the run was made by `mira score` (meta.json's `scored_artifacts`), if that artifact
/// names the case.
struct case_detail {
  saved_case record;
  std::optional<boost::json::value> trajectory;
  std::string trajectory_source;  ///< "record", or the artifact's path
  boost::json::array events;
  bool events_cut = false;
  std::string events_problem;  ///< why events.ndjson could not be read, when it could not
};
inline constexpr std::size_t max_case_events = 10000;
/// Nothing when the run has no readable record of `key`.
std::optional<case_detail> read_case(const run_reader& run, std::string_view key,
                                     std::size_t max_events = max_case_events);

}  // namespace mira::store
