// Rendering a finished run: the terminal table and every report format (json, jsonl, csv,
// junit, md, html), each written to a sink a case at a time where the format allows.
#pragma once

#include <mira/aggregate/summary.hpp>
#include <mira/store/records.hpp>
#include <mira/store/run_store.hpp>

#include <boost/json/object.hpp>

#include <cstdio>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace mira::report {

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

/// A saved run's report files over `whole` (every case of the run), for run_store::finish or
/// write_files: report.json, the summary and where the records are (not a copy of them; the
/// json format of render() is the whole report), and report.html, the bounded page (counts and
/// charts over every case, a table of the cases whose records `report` holds, at most 10 000).
/// They refer to their arguments until written.
std::vector<store::report_file> run_files(const plan::plan& whole,
                                          const schedule::run_report& report,
                                          const aggregate::summary& s);

/// Ends a saved run's session: report.seconds becomes the run time of every session (set the
/// session's seconds first), then the store writes the report files and meta.json with the
/// summary (run_store::finish). Returns the first file that could not be written.
store::write_error finish_run(store::run_store& run, const plan::plan& whole,
                              schedule::run_report& report, const aggregate::summary& s);

/// The readable report: every case, the eval x target matrix, trials with `pass@k`, the
/// group-by table, totals, and how the run ended. With `colour`, verdict badges are coloured
/// (ANSI SGR; never any study-provided bytes).
void print_table(std::FILE* out, const plan::plan& p, const schedule::run_report& report,
                 const aggregate::summary& s, bool colour = false);

}  // namespace mira::report
