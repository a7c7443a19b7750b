// Rendering a finished run: the terminal table and every report format (json, jsonl, csv,
// junit, md, html), each written to a sink a case at a time where the format allows.
#pragma once

#include <mira/aggregate/summary.hpp>
#include <mira/store/records.hpp>
#include <mira/store/run_reader.hpp>
#include <mira/store/run_store.hpp>

#include <boost/json/object.hpp>

#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace mira::report {

/// Where rendered text goes, piece by piece.
using text_sink = std::function<void(std::string_view)>;

/// The cases a report is rendered from, visited in order as often as a renderer needs: a run in
/// memory (memory_cases), or a saved run read back a case at a time (saved_cases). Case i of a
/// visit is case i of the summary the report is rendered with.
class case_source {
 public:
  virtual ~case_source() = default;
  /// Called with each case in order; returns false to stop the visit.
  using case_fn = std::function<bool(std::size_t i, const plan::planned_case& c,
                                     const schedule::case_record& r)>;
  using key_fn = std::function<bool(std::size_t i, std::string_view key)>;
  virtual std::size_t size() const = 0;
  virtual void visit(const case_fn& fn) const = 0;
  /// The keys alone, in the same order (a saved run reads no record for them).
  virtual void visit_keys(const key_fn& fn) const = 0;
  /// Each case as the line a report writes of it (store::append_case_line), in the same order;
  /// the line lives until the call returns. By default made from visit().
  using line_fn = std::function<bool(std::size_t i, std::string_view line)>;
  virtual void visit_lines(const line_fn& fn) const;
};

/// A plan and its report in memory (report.cases in plan order), visited in natural key order
/// as a saved run reads back, so a run's reports and `mira report`'s list cases alike. Refers to
/// both.
class memory_cases final : public case_source {
 public:
  memory_cases(const plan::plan& p, const schedule::run_report& report) : p_(p), report_(report) {}
  std::size_t size() const override;
  void visit(const case_fn& fn) const override;
  void visit_keys(const key_fn& fn) const override;

 private:
  /// Plan indexes of the cases in natural key order (sorted on the first visit).
  const std::vector<std::size_t>& order() const;
  const plan::plan& p_;
  const schedule::run_report& report_;
  mutable std::vector<std::size_t> order_;
};

/// A saved run's cases read back through `run` (which must outlive it), every one or those
/// `chosen` marks (by the reader's position). What a visit could not read is left out and kept
/// in problems().
class saved_cases final : public case_source {
 public:
  explicit saved_cases(const store::run_reader& run, std::vector<bool> chosen = {});
  std::size_t size() const override;
  void visit(const case_fn& fn) const override;
  void visit_keys(const key_fn& fn) const override;
  /// The run's compact records as they were saved (run_reader::visit_lines).
  void visit_lines(const line_fn& fn) const override;
  /// "<file>: <why>" of records that could be read when the run was opened but not since.
  const std::vector<std::string>& problems() const { return problems_; }

 private:
  void keep_problems(std::vector<std::string> late) const;
  const store::run_reader& run_;
  std::vector<bool> chosen_;  // empty: every case
  std::size_t size_ = 0;
  mutable std::vector<std::string> problems_;
};

/// Why a failed or errored case is one, as the Markdown report's failures table says: its
/// record's message, else its transcript's error, else its first failing score (with its reason).
/// Empty when none of them says.
std::string failure_reason(const schedule::case_record& r);

/// The report in a file format: json (summary + cases), jsonl (cases, then the summary), csv
/// (RFC 4180, one row per case), junit (one testsuite per eval; XML-illegal characters
/// removed), md or html. json, jsonl and csv go to `out` a case at a time, so a large run's
/// report is never whole in memory; the others as one text.
void render(const std::string& format, const plan::plan& p, const schedule::run_report& report,
            const aggregate::summary& s, const text_sink& out);
/// render() over any case source; `run` gives the run's seconds and how it stopped (its cases are
/// not read).
void render(const std::string& format, const case_source& cases, const schedule::run_report& run,
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

/// run_files() over any case source (see render()), which the files keep until they go.
std::vector<store::report_file> run_files(std::shared_ptr<const case_source> whole,
                                          const schedule::run_report& run,
                                          const aggregate::summary& s);

/// run_files() over every case of a saved run, read back through `run` (which must outlive the
/// files): what store::merge_options::report_files takes.
std::vector<store::report_file> saved_run_files(const store::run_reader& run,
                                                const schedule::run_report& header,
                                                const aggregate::summary& s);

/// Ends a saved run's session: report.seconds becomes the run time of every session (set the
/// session's seconds first), then the store writes the report files and meta.json with the
/// summary (run_store::finish). Returns the first file that could not be written.
store::write_error finish_run(store::run_store& run, const plan::plan& whole,
                              schedule::run_report& report, const aggregate::summary& s);

/// What every report of a run that did not finish its plan says about it: "16 of 20 planned
/// case(s) not finished: stopped (interrupted): ..." (the cancelled cases are the unfinished
/// ones), "stopped (fail-fast): ..." when it stopped after its last case; "" for a finished run.
std::string incompleteness(const schedule::run_report& report, const aggregate::summary& s);

/// The readable report: every case, the eval x target matrix, trials with `pass@k`, the
/// group-by table, totals, and how the run ended. With `colour`, verdict badges are coloured
/// (ANSI SGR; never any study-provided bytes).
void print_table(std::FILE* out, const plan::plan& p, const schedule::run_report& report,
                 const aggregate::summary& s, bool colour = false);
void print_table(std::FILE* out, const case_source& cases, const schedule::run_report& run,
                 const aggregate::summary& s, bool colour = false);

}  // namespace mira::report
