// The viewer's reads of a saved run without any I/O: a page of cases asked for by query
// parameters (GET /v1/runs/{id}/cases), and the JSON of a page and of one case whole (GET
// /v1/runs/{id}/cases/{key}). The store answers the query; this turns HTTP into it and it into
// JSON. Private to the library: reached by tests through mira_internal.
#pragma once

#include "serve/api.hpp"

#include <mira/compare/compare.hpp>
#include <mira/store/case_query.hpp>

#include <boost/json/object.hpp>
#include <tl/expected.hpp>

#include <string_view>

namespace mira::serve {

/// Whether GET /v1/runs/{id}/cases asks for the NDJSON dump of every record (`?format=ndjson`,
/// or an Accept that names application/x-ndjson and no `?format=json`) rather than a page.
bool wants_ndjson(const request_target& t, std::string_view accept);

/// The query of a page: status, eval, target and tag (comma-separated lists), trial, score_min,
/// score_max, q (text search), sort (key, latency, cost, tokens, score; "-" before it for
/// largest first), limit (1..500, default 50) and cursor. 400 naming the parameter for a value
/// out of its range and for a parameter the route does not take.
tl::expected<store::case_query, api_error> decode_case_query(const request_target& t);

/// {"cases": [...], "matched", "next_cursor" (null on the last page), "problems"}.
boost::json::object case_page_json(const store::case_page& page);
/// {"key", "record", "trajectory", "trajectory_source", "events", "events_cut",
/// "events_problem"}.
boost::json::object case_detail_json(const store::case_detail& d);

/// GET /v1/compare: two runs of a results folder, and which of their paired cases a page holds.
struct compare_query {
  std::string base, candidate;  ///< run ids, checked by check_run_id
  /// The changes listed, in this order: flipped cases (regressed, then fixed) by default.
  std::vector<compare::change> changes{compare::change::regressed, compare::change::fixed};
  std::size_t limit = 50;  ///< 1..500
  std::size_t offset = 0;  ///< the cursor: where in the listed cases the page starts
};
/// base and candidate (required), change (regressed, fixed, same, unpaired; comma-separated),
/// limit, cursor. 400 naming the parameter.
tl::expected<compare_query, api_error> decode_compare_query(const request_target& t);
/// {"base", "candidate", "overall": {"both_pass", "regressed", "fixed", "both_fail", "delta",
/// "p_value"}, "only_in_base", "only_in_candidate", "matched", "cases": [{"key", "eval",
/// "sample", "target", "trial", "base", "candidate", "change", "why"}], "next_cursor"}.
boost::json::object compare_page_json(const compare::comparison& c, const compare_query& q);

}  // namespace mira::serve
