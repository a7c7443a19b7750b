// The HTML report: one self-contained page (no external resources), with summary cards, the
// eval x target matrix, charts drawn here as inline SVG, and a case table that filters and sorts
// with a small inline script. Every study-provided string goes through html_text()/safe_href(),
// and a Content-Security-Policy that admits only this page's own script (by hash) backs that
// up: injected markup would be inert even if an escape were missed.
#include "report/html_report.hpp"

#include <mira/report/escape.hpp>
#include "report/html_page.hpp"
#include "store/digest.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>

namespace mira::report {

namespace {

using detail::excerpt;
using detail::fmt;
using detail::pct;
using detail::svg_chart_start;
using detail::svg_row_label;
using detail::svg_whisker;
using schedule::case_state;

std::string base64(const std::string& bytes) {
  static const char* digits = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  std::size_t i = 0;
  for (; i + 2 < bytes.size(); i += 3) {
    unsigned v = static_cast<unsigned char>(bytes[i]) << 16 |
                 static_cast<unsigned char>(bytes[i + 1]) << 8 |
                 static_cast<unsigned char>(bytes[i + 2]);
    for (int k = 18; k >= 0; k -= 6) out += digits[(v >> k) & 63];
  }
  if (i < bytes.size()) {
    unsigned v = static_cast<unsigned char>(bytes[i]) << 16;
    if (i + 1 < bytes.size()) v |= static_cast<unsigned char>(bytes[i + 1]) << 8;
    out += digits[(v >> 18) & 63];
    out += digits[(v >> 12) & 63];
    out += i + 1 < bytes.size() ? digits[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

// The CSP source for a script: 'sha256-<base64 of the digest>'.
std::string script_hash(const std::string& script) {
  auto hex = store::sha256_hex(script);
  std::string raw;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2)
    raw += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
  return "'sha256-" + base64(raw) + "'";
}

// The report's own rules, after the shared ones (html_page.hpp).
const char* const style = R"(#cases th{cursor:pointer;user-select:none}
#cases td{overflow-wrap:anywhere;max-width:36em}#cases td.n{white-space:nowrap}
#cases th[data-dir=asc]::after{content:" \25B2"}#cases th[data-dir=desc]::after{content:" \25BC"}
.b{display:inline-block;border-radius:4px;padding:0 6px;font-size:12px;font-weight:600;color:#fff}
.passed{background:#1a7f37}.failed{background:#cf222e}.error{background:#8250df}
.na,.executed{background:#6e7781}.skipped{background:#9a6700}.cancelled{background:#57606a}
details summary{cursor:pointer}details .d{margin:6px 0 4px;max-width:900px}
pre{white-space:pre-wrap;word-break:break-word;background:#f6f8fa;padding:6px;margin:4px 0}
.charts{display:flex;flex-wrap:wrap;gap:16px}
.controls{margin:8px 0}.controls input{width:320px}
.stop{background:#fff4e5;border:1px solid #f0c36d;padding:8px 12px;border-radius:6px}
)";

// Filtering (text and status) and sorting by a clicked column; marks the page ready so a test
// can tell the script ran.
const char* const script = R"((function(){
var t=document.getElementById('cases'),b=t.tBodies[0],q=document.getElementById('q'),st=document.getElementById('st'),shown=document.getElementById('shown');
function filter(){var s=q.value.toLowerCase(),v=st.value,n=0;
for(var r of b.rows){var ok=(!v||r.dataset.status===v)&&(!s||r.textContent.toLowerCase().indexOf(s)>=0);r.hidden=!ok;if(ok)n++;}
shown.textContent=n;}
q.addEventListener('input',filter);st.addEventListener('change',filter);
var hs=t.tHead.rows[0].cells;
Array.prototype.forEach.call(hs,function(h,i){h.addEventListener('click',function(){
var asc=h.dataset.dir!=='asc';Array.prototype.forEach.call(hs,function(o){delete o.dataset.dir;});h.dataset.dir=asc?'asc':'desc';
var num=h.dataset.type==='num',rows=Array.prototype.slice.call(b.rows);
rows.sort(function(x,y){var a=x.cells[i].dataset.v,c=y.cells[i].dataset.v;
var r=num?(parseFloat(a)||0)-(parseFloat(c)||0):a.localeCompare(c,undefined,{numeric:true});return asc?r:-r;});
rows.forEach(function(r){b.appendChild(r);});});});
filter();document.documentElement.dataset.ready='1';})();)";

struct bar {
  std::string label;
  double value = 0;
  std::optional<aggregate::interval> ci;
  std::string text;
};

// A horizontal bar chart; labels are shortened to fit, the full label is the row's tooltip.
std::string bar_chart(std::string_view title, const std::vector<bar>& bars, double max,
                      std::string_view colour) {
  const int label_w = 170, plot_w = 300, row_h = 24, top = 28, text_w = 130;
  int h = top + row_h * static_cast<int>(bars.size()) + 8;
  std::string out = svg_chart_start(label_w + plot_w + text_w, h, title);
  if (max <= 0) max = 1;
  for (std::size_t i = 0; i < bars.size(); ++i) {
    auto& b = bars[i];
    int y = top + row_h * static_cast<int>(i);
    auto x = [&](double v) { return label_w + std::clamp(v / max, 0.0, 1.0) * plot_w; };
    out += svg_row_label(b.label, y + 16);
    out += "<rect x=\"" + std::to_string(label_w) + "\" y=\"" + std::to_string(y + 4) +
           "\" width=\"" + fmt("%.1f", x(b.value) - label_w) + "\" height=\"16\" fill=\"" +
           std::string(colour) + "\"/>";
    if (b.ci) out += svg_whisker(x(b.ci->low), x(b.ci->high), y);
    out += "<text x=\"" + std::to_string(label_w + plot_w + 6) + "\" y=\"" +
           std::to_string(y + 16) + "\">" + html_text(b.text) + "</text></g>";
  }
  return out + "</svg>";
}

struct spread {
  std::string label;
  aggregate::latency box;  // the summary's, over every case of the target
};

// Latency per target as box plots: whiskers min..max, box p25..p75, a bar at the median and a
// dot at p95.
std::string latency_chart(const std::vector<spread>& rows) {
  const int label_w = 170, plot_w = 300, row_h = 26, top = 28, text_w = 250;
  double max = 0;
  for (auto& r : rows)
    if (r.box.n) max = std::max(max, r.box.max);
  if (max <= 0) max = 1;
  int h = top + row_h * static_cast<int>(rows.size()) + 8;
  std::string out = svg_chart_start(label_w + plot_w + text_w, h,
                                    "Latency per target (s; box p25–p75, bar median, dot p95)");
  for (std::size_t i = 0; i < rows.size(); ++i) {
    auto& r = rows[i];
    auto& b = r.box;
    int y = top + row_h * static_cast<int>(i);
    auto x = [&](double v) { return fmt("%.1f", label_w + v / max * plot_w); };
    out += svg_row_label(r.label, y + 17);
    if (b.n) {
      auto mid = std::to_string(y + 13);
      out += "<path d=\"M" + x(b.min) + " " + mid + "H" + x(b.max) + "\" stroke=\"#5b6475\"/>";
      out += "<rect x=\"" + x(b.p25) + "\" y=\"" + std::to_string(y + 5) + "\" width=\"" +
             fmt("%.1f", std::max(1.0, (b.p75 - b.p25) / max * plot_w)) +
             "\" height=\"16\" fill=\"#9ecbff\" stroke=\"#0969da\"/>";
      out += "<path d=\"M" + x(b.p50) + " " + std::to_string(y + 5) + "V" + std::to_string(y + 21) +
             "\" stroke=\"#0a3069\" stroke-width=\"2\"/>";
      out += "<circle cx=\"" + x(b.p95) + "\" cy=\"" + mid + "\" r=\"3\" fill=\"#cf222e\"/>";
      out += "<text x=\"" + std::to_string(label_w + plot_w + 6) + "\" y=\"" +
             std::to_string(y + 17) + "\">p50 " + fmt("%.3f", b.p50) + " · p95 " +
             fmt("%.3f", b.p95) + " · n " + std::to_string(b.n) + "</text>";
    }
    out += "</g>";
  }
  return out + "</svg>";
}

std::string card(const std::string& value, std::string_view label) {
  return "<div class=\"card\"><b>" + value + "</b><span>" + std::string(label) + "</span></div>";
}

std::string badge(case_state s) {
  static const char* names[] = {"PASS", "FAIL", "N/A", "SKIP", "STOP", "ERR", "EXEC"};
  return "<span class=\"b " + std::string(to_string(s)) + "\">" +
         names[static_cast<std::size_t>(s)] + "</span>";
}

std::string params_text(const protocol::axis_params& p) {
  std::string out;
  for (auto& [k, v] : p) out.append(out.empty() ? "" : ", ").append(k).append("=").append(v);
  return out;
}

// Everything known about one case, shown when its row is opened.
std::string case_details(const schedule::case_record& r,
                         const std::optional<protocol::run_result>& result) {
  std::string d;
  if (!r.message.empty()) d += "<p><b>Host:</b> " + html_text(r.message) + "</p>";
  if (result) {
    auto& res = *result;
    if (!res.scores.empty()) {
      d += "<table><tr><th>scorer</th><th>value</th><th>pass</th><th>reason</th></tr>";
      for (auto& sc : res.scores)
        d += "<tr><td>" + html_text(sc.scorer) + "</td><td class=\"n\">" + fmt("%.4g", sc.value) +
             "</td><td>" +
             (sc.na     ? "n/a"
              : sc.pass ? "yes"
                        : "no") +
             "</td><td>" + html_text(sc.reason) + "</td></tr>";
      d += "</table>";
    }
    auto& t = res.transcript;
    if (t.error)
      d += "<p><b>Error" +
           std::string(t.error_kind == protocol::error_kind::infra ? " (infra)" : "") + ":</b> " +
           html_text(*t.error) + "</p>";
    if (!t.final_response.empty())
      d += "<p><b>Final response</b></p><pre>" + html_text(excerpt(t.final_response, 2000)) +
           "</pre>";
    for (auto& part : t.output.get()) {
      auto* o = part.if_object();
      auto* uri = o ? o->if_contains("uri") : nullptr;
      if (!uri || !uri->is_string()) continue;
      auto href = safe_href(uri->get_string());
      d += "<p><b>Output:</b> " +
           (href.empty() ? html_text(uri->get_string())
                         : "<a href=\"" + href + "\" rel=\"noopener noreferrer\">" +
                               html_text(uri->get_string()) + "</a>") +
           "</p>";
    }
    d += "<p><b>Usage:</b> " + std::to_string(t.usage.input_tokens) + " in, " +
         std::to_string(t.usage.output_tokens) + " out, $" + fmt("%.4f", t.usage.cost_usd) + " · " +
         std::to_string(t.iterations) + " iteration(s), " + std::to_string(t.tool_calls_count) +
         " tool call(s)</p>";
  }
  if (!r.retried.empty()) {
    d += "<p><b>Retries</b></p><ol>";
    for (auto& e : r.retried)
      d += "<li>" + html_text(e.cause) + ": " + html_text(e.message) + "</li>";
    d += "</ol>";
  }
  return d;
}

// The title, the run and what is missing from it.
std::string page_head(const schedule::run_report& report, const aggregate::summary& s,
                      std::string_view title, std::size_t cases) {
  std::string out = "<h1>" + html_text(title) + "</h1><div class=\"sub\">" + std::to_string(cases) +
                    " cases · " + fmt("%.2f", report.seconds) + " s</div>\n";
  if (!report.run_id.empty() || !report.study.empty())
    out += "<div class=\"sub\">run " + html_text(report.run_id) +
           (report.study.empty() ? "" : " · study " + html_text(report.study)) + "</div>\n";
  if (auto incomplete = incompleteness(report, s); !incomplete.empty())
    out += "<p class=\"stop\"><b>Incomplete:</b> " + html_text(incomplete) + "</p>\n";
  return out;
}

std::string summary_cards(const aggregate::summary& s) {
  auto ci = s.overall.ci();
  auto& t = s.total;
  return "<div class=\"cards\">" +
         (s.overall.scored ? card(pct(s.overall.value()),
                                  "pass rate (95% " + pct(ci.low) + "–" + pct(ci.high) + ")")
                           : card("–", "pass rate: no scored cases")) +
         card(std::to_string(s.count(case_state::passed)), "passed") +
         card(std::to_string(s.count(case_state::failed)), "failed") +
         card(std::to_string(s.count(case_state::error)), "errors") +
         card(std::to_string(s.count(case_state::na)), "n/a") +
         card(std::to_string(s.count(case_state::skipped)), "skipped") +
         card(std::to_string(s.count(case_state::cancelled)), "cancelled") +
         card("$" + fmt("%.4f", t.cost_usd), "cost") +
         card(std::to_string(t.input_tokens + t.output_tokens), "tokens (in + out)") +
         card(std::to_string(t.retries), "retries") + "</div>\n";
}

// The eval x target matrix, each cell coloured green to red by its pass rate.
std::string matrix_table(const aggregate::summary& s) {
  std::string out = "<h2>Matrix</h2><table><tr><th>eval</th>";
  for (auto& target : s.target_order) out += "<th>" + html_text(target) + "</th>";
  out += "</tr>";
  for (auto& e : s.eval_order) {
    out += "<tr><th>" + html_text(e) + "</th>";
    for (auto& target : s.target_order) {
      auto it = s.matrix.find({e, target});
      if (it == s.matrix.end() || !it->second.scored) {
        out += "<td>–</td>";
        continue;
      }
      auto& r = it->second;
      int hue = static_cast<int>(std::lround(r.value() * 120));
      out += "<td class=\"n\" style=\"background:hsl(" + std::to_string(hue) + ",60%,88%)\">" +
             std::to_string(r.passed) + "/" + std::to_string(r.scored) + " (" + pct(r.value()) +
             ")</td>";
    }
    out += "</tr>";
  }
  return out + "</table>\n";
}

// Pass rate, latency, cost and tokens per target: everything from the summary, which covers
// every case.
std::string per_target_charts(const aggregate::summary& s) {
  std::map<std::string, double> cost;
  std::map<std::string, std::int64_t> tokens;
  for (auto& [target, sums] : s.totals_by_target) {
    cost[target] = sums.cost_usd;
    tokens[target] = sums.tokens;
  }
  std::vector<bar> rates, costs, token_bars;
  std::vector<spread> spreads;
  double max_cost = 0, max_tokens = 0;
  for (auto& target : s.target_order) {
    auto& r = s.per_target.at(target);
    rates.push_back({target, r.value(), r.scored ? std::optional(r.ci()) : std::nullopt,
                     r.scored ? pct(r.value()) + " of " + std::to_string(r.scored) : "no scores"});
    costs.push_back({target, cost[target], std::nullopt, "$" + fmt("%.4f", cost[target])});
    token_bars.push_back({target, static_cast<double>(tokens[target]), std::nullopt,
                          std::to_string(tokens[target])});
    max_cost = std::max(max_cost, cost[target]);
    max_tokens = std::max(max_tokens, static_cast<double>(tokens[target]));
    spread sp;
    sp.label = target;
    if (auto it = s.latency_by_target.find(target); it != s.latency_by_target.end())
      sp.box = it->second;
    spreads.push_back(std::move(sp));
  }
  return "<h2>Per target</h2><div class=\"charts\"><div class=\"chart\">" +
         bar_chart("Pass rate with 95% interval", rates, 1, "#2da44e") +
         "</div><div class=\"chart\">" + latency_chart(spreads) + "</div><div class=\"chart\">" +
         bar_chart("Cost (USD)", costs, max_cost, "#bf8700") + "</div><div class=\"chart\">" +
         bar_chart("Tokens (in + out)", token_bars, max_tokens, "#8250df") + "</div></div>\n";
}

// The case table's controls (a text filter, a status filter with each status's count) and its
// head, for a table of `rows` rows.
std::string case_table_start(const aggregate::summary& s, std::size_t rows) {
  std::string out =
      "<h2>Cases</h2><div class=\"controls\"><input id=\"q\" type=\"search\" "
      "placeholder=\"filter (any text of the case)\" aria-label=\"filter\"> <select id=\"st\" "
      "aria-label=\"status\"><option value=\"\">every status</option>";
  for (auto st : {case_state::passed, case_state::failed, case_state::error, case_state::na,
                  case_state::skipped, case_state::cancelled})
    out += "<option value=\"" + std::string(to_string(st)) + "\">" + std::string(to_string(st)) +
           " (" + std::to_string(s.count(st)) + ")</option>";
  out += "</select> <span id=\"shown\">" + std::to_string(rows) +
         "</span> shown</div>\n<table id=\"cases\"><thead><tr><th>status</th><th>case</th>"
         "<th>eval</th><th>sample</th><th>target</th><th>params</th><th data-type=\"num\">trial"
         "</th><th data-type=\"num\">score</th><th data-type=\"num\">latency s</th><th "
         "data-type=\"num\">tokens</th><th data-type=\"num\">cost $</th><th "
         "data-type=\"num\">attempts</th></tr></thead><tbody>\n";
  return out;
}

// A cell: `shown` as it reads, `sort_value` what the script sorts it by.
void append_cell(std::string& out, const std::string& sort_value, const std::string& shown,
                 bool num = false) {
  out += std::string(num ? "<td class=\"n\"" : "<td") + " data-v=\"" + html_text(sort_value) +
         "\">" + shown + "</td>";
}

// One case's row, its details folded under its key.
void append_case_row(std::string& out, const plan::planned_case& c,
                     const schedule::case_record& r) {
  auto status = std::string(to_string(r.state));
  const auto result = r.result();
  out += "<tr data-status=\"" + status + "\">";
  append_cell(out, status, badge(r.state));
  append_cell(out, c.key,
              "<details><summary>" + html_text(c.key) + "</summary><div class=\"d\">" +
                  case_details(r, result) + "</div></details>");
  append_cell(out, c.params.eval, html_text(c.params.eval));
  append_cell(out, c.params.sample, html_text(c.params.sample));
  append_cell(out, c.params.target, html_text(c.params.target));
  auto params = params_text(c.params.params);
  append_cell(out, params, html_text(params));
  append_cell(out, std::to_string(c.params.trial), std::to_string(c.params.trial), true);
  if (result && (r.state == case_state::passed || r.state == case_state::failed))
    append_cell(out, fmt("%.6g", result->aggregate), fmt("%.2f", result->aggregate), true);
  else
    append_cell(out, "", "", true);
  if (r.attempts > 0)
    append_cell(out, fmt("%.6f", r.latency_seconds), fmt("%.3f", r.latency_seconds), true);
  else
    append_cell(out, "", "", true);
  if (result) {
    auto& u = result->transcript.usage;
    append_cell(out, std::to_string(u.input_tokens + u.output_tokens),
                std::to_string(u.input_tokens + u.output_tokens), true);
    append_cell(out, fmt("%.6f", u.cost_usd), fmt("%.4f", u.cost_usd), true);
  } else {
    append_cell(out, "", "", true);
    append_cell(out, "", "", true);
  }
  append_cell(out, std::to_string(r.attempts), std::to_string(r.attempts), true);
  out += "</tr>\n";
}

}  // namespace

void html_report(const case_source& cases, const schedule::run_report& report,
                 const aggregate::summary& s, std::string_view title, const text_sink& sink,
                 std::size_t max_case_rows) {
  std::string out;
  out += detail::html_page_start(title, style, script_hash(script));
  // The summary covers every case; `cases` may be the first ones only (a session keeps those).
  std::size_t n = 0;
  for (auto count : s.counts) n += count;
  out += page_head(report, s, title, n);
  out += summary_cards(s);
  out += matrix_table(s);
  out += per_target_charts(s);
  const auto rows = std::min(cases.size(), max_case_rows);
  out += case_table_start(s, rows);
  cases.visit([&](std::size_t i, const plan::planned_case& c, const schedule::case_record& r) {
    if (i >= rows) return false;
    // Written as it grows: a large run's page is never whole in memory.
    if (out.size() >= (std::size_t{64} << 10)) {
      sink(out);
      out.clear();
    }
    append_case_row(out, c, r);
    return true;
  });
  out += "</tbody></table>\n";
  if (rows < n)
    out += "<p class=\"sub\">The table shows the first " + std::to_string(rows) + " of " +
           std::to_string(n) +
           " cases; `mira report RUN_ID --format json` (or csv, jsonl) lists every case, and the "
           "counts and charts above cover them all.</p>\n";
  out += "<script>";
  out += script;
  out += "</script></body></html>\n";
  sink(out);
}

}  // namespace mira::report
