// A comparison of two runs in each output format (see compare.hpp). Every study-provided name
// goes through the escaping of report/escape.hpp for the place it lands; the HTML page carries
// the same Content-Security-Policy as the run report, without any script at all.
#include <mira/compare/compare.hpp>

#include <mira/report/escape.hpp>
#include <mira/store/files.hpp>
#include "report/html_page.hpp"

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>

namespace mira::compare {

namespace json = boost::json;
using report::html_text;
using report::md_cell;
using report::printable;
using report::xml_text;
using report::detail::fmt;
using report::detail::pct;
using report::detail::svg_chart_start;
using report::detail::svg_row_label;
using report::detail::svg_whisker;

namespace {

// A difference of rates in percentage points, signed.
std::string pp(double v) {
  // -0.0 would print as "-0.0".
  return fmt("%+.1f", std::abs(v) < 5e-4 ? 0.0 : v * 100);
}

std::string ci_text(const group_delta& g) {
  if (!g.ci) return "–";
  return "[" + pp(g.ci->low) + ", " + pp(g.ci->high) + "]";
}

std::string p_text(double p) {
  return fmt("%.4g", p);
}

std::string verdict(const group_delta& g) {
  if (g.table.n() == 0) return "no case scored in both runs";
  if (g.significant_drop) return "significant drop";
  if (g.significant_gain) return "significant gain";
  return "no significant change";
}

std::string confidence_label(const comparison& c) {
  return fmt("%g%%", (1 - c.opts.alpha) * 100);
}

std::string state_text(const side& s) {
  return s.state ? std::string(to_string(*s.state)) : std::string("missing");
}

json::object group_json(const group_delta& g) {
  json::object o{{"name", g.name},
                 {"paired", g.table.n()},
                 {"both_pass", g.table.both_pass},
                 {"regressed", g.table.regressed},
                 {"fixed", g.table.fixed},
                 {"both_fail", g.table.both_fail},
                 {"unpaired", g.unpaired},
                 {"base_rate", g.table.n() ? json::value(g.table.base_rate()) : nullptr},
                 {"candidate_rate", g.table.n() ? json::value(g.table.candidate_rate()) : nullptr},
                 {"delta", g.table.n() ? json::value(g.table.delta()) : nullptr},
                 {"p_value", g.p_value},
                 {"significant_drop", g.significant_drop},
                 {"significant_gain", g.significant_gain}};
  o["ci"] = g.ci ? json::value(json::array{g.ci->low, g.ci->high}) : json::value(nullptr);
  return o;
}

json::array groups_json(const std::vector<group_delta>& gs) {
  json::array out;
  for (auto& g : gs) out.push_back(group_json(g));
  return out;
}

json::object pair_json(const case_pair& p) {
  json::object params;
  for (auto& [k, v] : p.params) params[k] = v;
  json::object o{{"key", p.key},
                 {"eval", p.eval.str()},
                 {"sample", p.sample},
                 {"target", p.target.str()},
                 {"params", params},
                 {"trial", p.trial},
                 {"base", state_text(p.base)},
                 {"candidate", state_text(p.candidate)}};
  if (auto why = p.why(); !why.empty()) o["why"] = why;
  return o;
}

// A rule of the gate: whether it fired, why, and the numbers it was decided on.
json::object check_json(const comparison& c, const gate_check& g) {
  json::object o{{"rule", to_string(g.rule)}, {"fired", g.fired}, {"detail", g.detail}};
  switch (g.rule) {
    case gate_rule::missing:
      o["missing"] = c.only_in_base;
      o["candidate_stopped"] =
          c.candidate_stopped.empty() ? json::value(nullptr) : json::value(c.candidate_stopped);
      o["allowed"] = c.opts.gate.allow_missing;
      break;
    case gate_rule::regressions:
      o["regressions"] = c.overall.table.regressed;
      o["max"] = c.opts.gate.max_regressions ? json::value(*c.opts.gate.max_regressions)
                                             : json::value(nullptr);
      break;
    case gate_rule::significant_drop:
      o["p_value"] = c.overall.p_value;
      o["alpha"] = c.opts.alpha;
      break;
    case gate_rule::min_scored:
      o["scored"] = c.overall.table.n();
      o["min"] = std::max<std::size_t>(1, c.opts.gate.min_scored);
      break;
  }
  return o;
}

json::object gate_json(const comparison& c) {
  json::array rules;
  for (auto& g : c.gate.checks) rules.push_back(check_json(c, g));
  return {{"passed", c.gate.passed()}, {"rules", std::move(rules)}};
}

std::string as_json(const comparison& c) {
  json::array regressions, fixes, unpaired;
  for (auto& p : c.cases) {
    if (p.what == change::regressed) regressions.push_back(pair_json(p));
    if (p.what == change::fixed) fixes.push_back(pair_json(p));
    if (p.what == change::unpaired) unpaired.push_back(pair_json(p));
  }
  json::array warnings;
  for (auto& w : c.warnings) warnings.emplace_back(w);
  json::object o{{"study", c.study},
                 {"base", c.base_run},
                 {"candidate", c.candidate_run},
                 {"alpha", c.opts.alpha},
                 {"confidence", 1 - c.opts.alpha},
                 {"interval_method", "Newcombe hybrid score (1998, method 10)"},
                 {"test", "exact McNemar (two-sided binomial on discordant pairs)"},
                 {"regression", c.regression()},
                 {"gate", gate_json(c)},
                 {"overall", group_json(c.overall)},
                 {"per_eval", groups_json(c.per_eval)},
                 {"per_target", groups_json(c.per_target)},
                 {"only_in_base", c.only_in_base},
                 {"only_in_candidate", c.only_in_candidate},
                 {"not_scored", c.not_scored},
                 {"regressions", std::move(regressions)},
                 {"fixes", std::move(fixes)},
                 {"unpaired", std::move(unpaired)},
                 {"warnings", std::move(warnings)}};
  if (!c.opts.group_by.empty()) {
    o["group_by"] = c.opts.group_by;
    o["groups"] = groups_json(c.groups);
  }
  return json::serialize(o) + "\n";
}

// Terminal columns a UTF-8 text takes, one per code point: "–" and non-ASCII names are one
// column each, not their byte count.
std::size_t columns(std::string_view s) {
  return static_cast<std::size_t>(std::count_if(
      s.begin(), s.end(), [](char ch) { return (static_cast<unsigned char>(ch) & 0xC0) != 0x80; }));
}

// Fixed-width columns for the terminal table.
std::string pad(std::string s, std::size_t w) {
  if (auto n = columns(s); n < w) s.append(w - n, ' ');
  return s;
}

// A group's row as every format shows it: base and candidate pass rates, delta (pp), interval,
// McNemar p, regressed, fixed, paired, unpaired.
std::array<std::string, 9> group_cells(const group_delta& g) {
  auto& t = g.table;
  return {t.n() ? pct(t.base_rate()) : "–",
          t.n() ? pct(t.candidate_rate()) : "–",
          t.n() ? pp(t.delta()) : "–",
          ci_text(g),
          p_text(g.p_value),
          std::to_string(t.regressed),
          std::to_string(t.fixed),
          std::to_string(t.n()),
          std::to_string(g.unpaired)};
}

std::string overall_line(const comparison& c) {
  auto& g = c.overall;
  auto& t = g.table;
  if (t.n() == 0) return "no case was scored (passed or failed) in both runs";
  return pct(t.base_rate()) + " -> " + pct(t.candidate_rate()) + " over " + std::to_string(t.n()) +
         " paired case(s): " + pp(t.delta()) + " pp, " + confidence_label(c) + " CI " + ci_text(g) +
         " pp; McNemar exact p = " + p_text(g.p_value) + " (" + std::to_string(t.regressed) +
         " regressed, " + std::to_string(t.fixed) + " fixed): " + verdict(g);
}

std::string unpaired_line(const comparison& c) {
  return std::to_string(c.only_in_base) + " only in the base, " +
         std::to_string(c.only_in_candidate) + " only in the candidate, " +
         std::to_string(c.not_scored) +
         " not scored in one run or both (n/a, error, skipped, cancelled): left out of the "
         "rates";
}

void table_groups(std::string& out, std::string_view title, const std::vector<group_delta>& gs,
                  const comparison& c) {
  if (gs.empty()) return;
  std::size_t w = 6;
  for (auto& g : gs) w = std::max(w, columns(printable(g.name)) + 2);
  out += "\n" + std::string(title) + ":\n  " + pad("", w) + pad("base", 8) + pad("cand", 8) +
         pad("delta", 8) + pad(confidence_label(c) + " CI (pp)", 18) + pad("p", 10) +
         pad("reg", 5) + pad("fix", 5) + pad("paired", 8) + "unpaired\n";
  constexpr std::size_t widths[] = {8, 8, 8, 18, 10, 5, 5, 8, 0};
  for (auto& g : gs) {
    out += "  " + pad(printable(g.name), w);
    auto cells = group_cells(g);
    for (std::size_t i = 0; i < cells.size(); ++i) out += pad(std::move(cells[i]), widths[i]);
    out += std::string(g.significant_drop ? "  DROP" : "") + (g.significant_gain ? "  gain" : "") +
           "\n";
  }
}

std::string as_table(const comparison& c) {
  std::string out = "compare " + printable(c.study) + ": base " + printable(c.base_run) +
                    ", candidate " + printable(c.candidate_run) + ", alpha " +
                    fmt("%g", c.opts.alpha) + "\n";
  out += "overall: " + overall_line(c) + "\n";
  out += "unpaired: " + unpaired_line(c) + "\n";
  out += "gate: " + c.gate.summary() + "\n";
  table_groups(out, "per eval", c.per_eval, c);
  table_groups(out, "per target", c.per_target, c);
  if (!c.opts.group_by.empty()) table_groups(out, "by " + printable(c.opts.group_by), c.groups, c);
  auto list = [&](std::string_view title, change what) {
    if (c.count(what) == 0) return;
    out += "\n" + std::string(title) + ":\n";
    for (auto& p : c.cases)
      if (p.what == what) {
        auto why = p.why();
        out += "  " + printable(p.key) + (why.empty() ? "" : "  (" + why + ")") + "\n";
      }
  };
  list("regressed (passed -> failed or error)", change::regressed);
  list("fixed (failed -> passed)", change::fixed);
  list("unpaired (left out of the rates)", change::unpaired);
  for (auto& w : c.warnings) out += "warning: " + printable(w) + "\n";
  return out;
}

void md_groups(std::string& out, std::string_view title, const std::vector<group_delta>& gs,
               const comparison& c) {
  if (gs.empty()) return;
  out += "\n### " + std::string(title) + "\n\n| | base | candidate | delta (pp) | " +
         confidence_label(c) +
         " CI (pp) | McNemar p | regressed | fixed | paired | unpaired | |\n"
         "|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---|\n";
  for (auto& g : gs) {
    out += "| " + md_cell(g.name);
    for (auto& cell : group_cells(g)) out += " | " + cell;
    out += std::string(" | ") +
           (g.significant_drop   ? "**drop**"
            : g.significant_gain ? "gain"
                                 : "") +
           " |\n";
  }
}

std::string as_md(const comparison& c) {
  // One "##" title and "###" sections, as the run's Markdown report: `cat run.md compare.md`
  // reads as one document.
  std::string out = "## Comparison of " + md_cell(c.study) + "\n\nBase `" + md_cell(c.base_run) +
                    "`, candidate `" + md_cell(c.candidate_run) + "`, alpha " +
                    fmt("%g", c.opts.alpha) + ".\n\n**Overall:** " + overall_line(c) +
                    ".\n\n**Unpaired:** " + unpaired_line(c) + ".\n\n**Gate:** " +
                    md_cell(c.gate.summary()) + ".\n";
  md_groups(out, "Per eval", c.per_eval, c);
  md_groups(out, "Per target", c.per_target, c);
  if (!c.opts.group_by.empty()) md_groups(out, "By " + md_cell(c.opts.group_by), c.groups, c);
  auto list = [&](std::string_view title, change what) {
    if (c.count(what) == 0) return;
    out += "\n### " + std::string(title) + "\n\n| case | base | candidate |\n|---|---|---|\n";
    for (auto& p : c.cases)
      if (p.what == what)
        out += "| " + md_cell(p.key) + " | " + state_text(p.base) + " | " +
               state_text(p.candidate) + " |\n";
  };
  list("Regressed (passed → failed or error)", change::regressed);
  list("Fixed (failed → passed)", change::fixed);
  list("Unpaired (left out of the rates)", change::unpaired);
  if (!c.warnings.empty()) {
    out += "\n### Warnings\n\n";
    for (auto& w : c.warnings) out += "- " + md_cell(w) + "\n";
  }
  return out;
}

// The comparison's own rules, after the shared ones (report/html_page.hpp).
const char* const style = R"(td{overflow-wrap:anywhere;max-width:40em}
.drop{background:#ffebe9}.gain{background:#dafbe1}
.chart{display:inline-block}
.warn{background:#fff4e5;border:1px solid #f0c36d;padding:8px 12px;border-radius:6px}
)";

// Per-eval deltas as bars from a zero line, each with its interval as a whisker; red for a
// significant drop, green for a significant gain, grey otherwise.
std::string delta_chart(const comparison& c) {
  const int label_w = 170, plot_w = 360, row_h = 24, top = 40, text_w = 190;
  double span = 0.05;
  for (auto& g : c.per_eval) {
    span = std::max(span, std::abs(g.table.delta()));
    if (g.ci) span = std::max({span, std::abs(g.ci->low), std::abs(g.ci->high)});
  }
  span = std::min(1.0, span);
  auto xv = [&](double v) {
    return label_w + (std::clamp(v, -span, span) + span) / (2 * span) * plot_w;
  };
  auto x = [&](double v) { return fmt("%.1f", xv(v)); };
  const int h = top + row_h * static_cast<int>(c.per_eval.size()) + 8;
  std::string out = svg_chart_start(label_w + plot_w + text_w, h,
                                    "Pass-rate delta per eval (candidate − base, pp) with its " +
                                        confidence_label(c) + " interval");
  out += "<text x=\"" + x(-span) + "\" y=\"34\" font-size=\"11\">" + pp(-span) +
         "</text><text x=\"" + x(0) +
         "\" y=\"34\" font-size=\"11\" text-anchor=\"middle\">0</text>" + "<text x=\"" + x(span) +
         "\" y=\"34\" font-size=\"11\" text-anchor=\"end\">" + pp(span) + "</text>";
  out += "<path d=\"M" + x(0) + " " + std::to_string(top - 2) + "V" + std::to_string(h - 4) +
         "\" stroke=\"#5b6475\"/>";
  for (std::size_t i = 0; i < c.per_eval.size(); ++i) {
    auto& g = c.per_eval[i];
    const int y = top + row_h * static_cast<int>(i);
    out += svg_row_label(g.name, y + 16);
    if (g.table.n()) {
      const double d = g.table.delta();
      const auto colour = g.significant_drop   ? "#cf222e"
                          : g.significant_gain ? "#2da44e"
                                               : "#8c959f";
      const double x0 = xv(std::min(0.0, d)), x1 = xv(std::max(0.0, d));
      out += "<rect x=\"" + fmt("%.1f", x0) + "\" y=\"" + std::to_string(y + 4) + "\" width=\"" +
             fmt("%.1f", std::max(1.0, x1 - x0)) + "\" height=\"16\" fill=\"" + colour + "\"/>";
      if (g.ci) out += svg_whisker(xv(g.ci->low), xv(g.ci->high), y);
    }
    out += "<text x=\"" + std::to_string(label_w + plot_w + 6) + "\" y=\"" +
           std::to_string(y + 16) + "\">" +
           (g.table.n() ? pp(g.table.delta()) + " pp, p " + p_text(g.p_value) : "no pairs") +
           "</text></g>";
  }
  return out + "</svg>";
}

void html_groups(std::string& out, std::string_view title, const std::vector<group_delta>& gs,
                 const comparison& c) {
  if (gs.empty()) return;
  out += "<h2>" + html_text(title) +
         "</h2><table><tr><th></th><th>base</th><th>candidate</th><th>delta (pp)</th><th>" +
         confidence_label(c) +
         " CI (pp)</th><th>McNemar p</th><th>regressed</th><th>fixed</th><th>paired</th>"
         "<th>unpaired</th></tr>";
  for (auto& g : gs) {
    out += std::string("<tr") +
           (g.significant_drop   ? " class=\"drop\""
            : g.significant_gain ? " class=\"gain\""
                                 : "") +
           "><th>" + html_text(g.name) + "</th>";
    for (auto& cell : group_cells(g)) out += "<td class=\"n\">" + cell + "</td>";
    out += "</tr>";
  }
  out += "</table>\n";
}

void as_html(const comparison& c, const text_sink& sink) {
  const auto title = "Comparison of " + c.study + ": " + c.candidate_run + " against " + c.base_run;
  std::string out = report::detail::html_page_start(title, style) + "<h1>" + html_text(title) +
                    "</h1><div class=\"sub\">alpha " + fmt("%g", c.opts.alpha) +
                    " · intervals: Newcombe hybrid score for paired proportions · test: exact "
                    "McNemar</div>\n";
  auto& g = c.overall;
  auto& t = g.table;
  auto card = [](const std::string& value, std::string_view label) {
    return "<div class=\"card\"><b>" + value + "</b><span>" + std::string(label) + "</span></div>";
  };
  out += "<div class=\"cards\">" + card(t.n() ? pct(t.base_rate()) : "–", "base pass rate") +
         card(t.n() ? pct(t.candidate_rate()) : "–", "candidate pass rate") +
         card(t.n() ? pp(t.delta()) + " pp" : "–", confidence_label(c) + " CI " + ci_text(g)) +
         card(p_text(g.p_value), "McNemar exact p") + card(html_text(verdict(g)), "verdict") +
         card(std::to_string(t.regressed), "regressed") + card(std::to_string(t.fixed), "fixed") +
         card(std::to_string(t.n()), "paired") +
         card(std::to_string(c.count(change::unpaired)), "unpaired") +
         card(c.gate.passed() ? "passed" : "failed", "gate") + "</div>\n";
  out += "<p>" + html_text(unpaired_line(c)) + ".</p>\n<h2>Gate</h2><ul>";
  for (auto& r : c.gate.checks)
    out += std::string("<li") + (r.fired ? " class=\"drop\"><b>fired</b>" : "><b>ok</b>") + " " +
           html_text(to_string(r.rule)) + ": " + html_text(r.detail) + "</li>";
  out += "</ul>\n";
  for (auto& w : c.warnings) out += "<p class=\"warn\">" + html_text(w) + "</p>\n";
  if (!c.per_eval.empty())
    out += "<h2>Per eval</h2><div class=\"chart\">" + delta_chart(c) + "</div>\n";
  html_groups(out, "Per eval (table)", c.per_eval, c);
  html_groups(out, "Per target", c.per_target, c);
  if (!c.opts.group_by.empty()) html_groups(out, "By " + c.opts.group_by, c.groups, c);
  auto list = [&](std::string_view heading, change what) {
    if (c.count(what) == 0) return;
    out += "<h2>" + html_text(heading) +
           "</h2><table><tr><th>case</th><th>base</th>"
           "<th>candidate</th></tr>";
    for (auto& p : c.cases) {
      if (p.what != what) continue;
      if (out.size() >= (std::size_t{64} << 10)) {
        sink(out);
        out.clear();
      }
      out += "<tr><td>" + html_text(p.key) + "</td><td>" + state_text(p.base) + "</td><td>" +
             state_text(p.candidate) + "</td></tr>";
    }
    out += "</table>\n";
  };
  list("Regressed (passed → failed or error)", change::regressed);
  list("Fixed (failed → passed)", change::fixed);
  list("Unpaired (left out of the rates)", change::unpaired);
  out += "</body></html>\n";
  sink(out);
}

void as_junit(const comparison& c, const text_sink& sink) {
  std::size_t tests = c.gate.checks.size(), failures = 0;
  for (auto& g : c.gate.checks) failures += g.fired ? 1 : 0;
  for (auto& p : c.cases) {
    if (p.what == change::regressed || p.what == change::fixed || p.what == change::same) ++tests;
    if (p.what == change::regressed) ++failures;
  }
  // The suite is named by the study alone, the run ids are properties: test-history tools key
  // suites by name, and a name with the run ids would be a new suite every run.
  std::string out =
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"mira compare\" "
      "tests=\"" +
      std::to_string(tests) + "\" failures=\"" + std::to_string(failures) +
      "\">\n<testsuite name=\"" + xml_text("compare " + c.study) + "\" tests=\"" +
      std::to_string(tests) + "\" failures=\"" + std::to_string(failures) +
      "\">\n<properties><property name=\"base\" value=\"" + xml_text(c.base_run) +
      "\"/><property name=\"candidate\" value=\"" + xml_text(c.candidate_run) +
      "\"/><property name=\"alpha\" value=\"" + fmt("%g", c.opts.alpha) + "\"/></properties>\n";
  for (auto& g : c.gate.checks) {
    const auto rule = std::string(to_string(g.rule));
    out += "<testcase classname=\"gate\" name=\"" + rule + "\">";
    if (g.fired) out += "<failure message=\"" + xml_text(g.detail) + "\" type=\"" + rule + "\"/>";
    out += "<system-out>" +
           xml_text(g.rule == gate_rule::significant_drop ? overall_line(c) : g.detail) +
           "</system-out></testcase>\n";
  }
  for (auto& p : c.cases) {
    if (p.what == change::unpaired) continue;
    if (out.size() >= (std::size_t{64} << 10)) {
      sink(out);
      out.clear();
    }
    out += "<testcase classname=\"" + xml_text(p.eval) + "\" name=\"" + xml_text(p.key) + "\"";
    if (p.what == change::regressed)
      out += "><failure message=\"passed in " + xml_text(c.base_run) + ", " +
             state_text(p.candidate) + " in " + xml_text(c.candidate_run) +
             "\" type=\"regressed\"/></testcase>\n";
    else
      out += "/>\n";
  }
  out += "</testsuite>\n</testsuites>\n";
  sink(out);
}

}  // namespace

bool render(const comparison& c, std::string_view format, const text_sink& out) {
  if (format == "table")
    out(as_table(c));
  else if (format == "json")
    out(as_json(c));
  else if (format == "md")
    out(as_md(c));
  else if (format == "html")
    as_html(c, out);
  else if (format == "junit")
    as_junit(c, out);
  else
    return false;
  return true;
}

std::string render(const comparison& c, std::string_view format) {
  std::string s;
  render(c, format, [&](std::string_view piece) { s.append(piece); });
  return s;
}

boost::system::error_code write(const comparison& c, std::string_view format,
                                const std::filesystem::path& path) {
  // Checked first: a file that is opened and then not committed stays as it was, but a device or
  // FIFO would have been opened for nothing.
  if (std::find(std::begin(formats), std::end(formats), format) == std::end(formats))
    return make_error_code(boost::system::errc::invalid_argument);
  auto file = store::output_file::open(path);
  if (!file) return file.error();
  render(c, format, [&](std::string_view piece) { file->write(piece); });
  return file->commit();
}

}  // namespace mira::compare
