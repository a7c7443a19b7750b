// Rendering a finished run: the terminal table and every report format (json, jsonl, csv,
// junit, md, html), each written to a sink a case at a time where the format allows.
#pragma once

#include <mira/aggregate/summary.hpp>
#include <mira/store/records.hpp>

#include <boost/json/object.hpp>

#include <cstdio>
#include <functional>
#include <string>
#include <string_view>

namespace mira::report {

/// The summary as JSON (counts, overall rate, matrix, trials with `pass@k`, groups, totals).
boost::json::object summary_json(const aggregate::summary& s, const schedule::run_report& report);

/// Where rendered text goes, piece by piece.
using text_sink = std::function<void(std::string_view)>;

/// The report in a file format: json (summary + cases), jsonl (cases, then the summary), csv
/// (RFC 4180, one row per case), junit (one testsuite per eval; XML-illegal characters
/// removed), md or html. json, jsonl and csv go to `out` a case at a time, so a large run's
/// report is never whole in memory; the others as one text.
void render(const std::string& format, const plan::plan& p, const schedule::run_report& report,
            const aggregate::summary& s, const text_sink& out);
/// render() into one string.
std::string render(const std::string& format, const plan::plan& p,
                   const schedule::run_report& report, const aggregate::summary& s);

/// One self-contained HTML page: summary cards, the eval x target matrix, charts per target
/// (pass rate with its 95 % interval, latency, cost, tokens) as inline SVG, and a filterable,
/// sortable case table with each case's scores, transcript excerpt, usage and retries. Written
/// to `out` as it is made. The table holds the first `max_case_rows` cases (a page of a hundred
/// thousand would be tens of megabytes no browser handles); counts and charts cover them all.
void html_report(const plan::plan& p, const schedule::run_report& report,
                 const aggregate::summary& s, std::string_view title, const text_sink& out,
                 std::size_t max_case_rows = 10000);

/// The readable report: every case, the eval x target matrix, trials with `pass@k`, the
/// group-by table, totals, and how the run ended. With `colour`, verdict badges are coloured
/// (ANSI SGR; never any study-provided bytes).
void print_table(std::FILE* out, const plan::plan& p, const schedule::run_report& report,
                 const aggregate::summary& s, bool colour = false);

}  // namespace mira::report
