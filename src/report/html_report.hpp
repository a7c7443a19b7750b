// The HTML report's renderer, private to the library: render("html", ...) and a saved run's
// report.html (run_files) are its public forms. Body in html_report.cpp.
#pragma once

#include <mira/report/render.hpp>

#include <cstddef>
#include <string_view>

namespace mira::report {

/// One self-contained HTML page: summary cards, the eval x target matrix, charts per target
/// (pass rate with its 95 % interval, latency, cost, tokens) as inline SVG, and a filterable,
/// sortable case table with each case's scores, transcript excerpt, usage and retries. Written
/// to `out` as it is made. The table holds the first `max_case_rows` cases (a page of a hundred
/// thousand would be tens of megabytes no browser handles); counts and charts cover them all.
/// `report` gives the run's seconds and how it stopped; the cases come from `cases` (visited
/// twice: once for every latency, once for the table's rows).
void html_report(const case_source& cases, const schedule::run_report& report,
                 const aggregate::summary& s, std::string_view title, const text_sink& out,
                 std::size_t max_case_rows = 10000);

}  // namespace mira::report
