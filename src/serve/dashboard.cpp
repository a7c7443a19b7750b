// The dashboard's HTML shells and script (dashboard.hpp). Study-provided text only ever reaches
// the page through textContent, and the policy allows no inline script, so a hostile case key
// or message cannot run code or change the page's structure.
#include "serve/dashboard.hpp"

#include <mira/report/escape.hpp>

namespace mira::serve::detail {

namespace {

constexpr std::string_view style =
    "body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222}"
    "table{border-collapse:collapse}td,th{padding:.25em .6em;border-bottom:1px solid #ddd;"
    "text-align:left}.cards{display:flex;gap:1em;margin:1em 0}.card{border:1px solid #ccc;"
    "border-radius:6px;padding:.5em 1em;min-width:5em}.card b{display:block;font-size:1.6em}"
    "progress{width:24em}#failures li{font-family:monospace}.sub{color:#666}"
    "#filters{display:flex;gap:.5em;flex-wrap:wrap;margin:.5em 0}tr.selected{background:#eef}"
    "tr[data-status=failed] td:nth-child(2),tr[data-status=error] td:nth-child(2){color:#c33}"
    "pre.text{white-space:pre-wrap;word-break:break-word;margin:.2em 0;max-height:40em;"
    "overflow:auto;background:#f7f7f7;padding:.4em}.step{border-left:3px solid #ccc;"
    "padding:.2em .8em;margin:.8em 0}.step.linked{border-color:#36c}.step h3{margin:.2em 0;"
    "font-size:1em}.source-agent{color:#36c}.source-user{color:#2a7}.tool-call,.observation"
    "{margin:.3em 0 .3em 1em}.bad{color:#c33}.part-image{max-width:32em;display:block}"
    "td pre.text{max-height:10em}.two-up{display:grid;grid-template-columns:1fr 1fr;gap:1.5em}"
    ".two-up>div{min-width:0}";

constexpr std::string_view script = R"JS("use strict";
(function () {
  const body = document.body;
  const token = new URLSearchParams(location.hash.slice(1)).get("token");
  const headers = token ? { Authorization: "Bearer " + token } : {};
  // Links the page shows (a run's HTML report) are opened without its headers: the server takes
  // the token from this cookie on a GET. SameSite=Strict: no other site's page sends it.
  if (token)
    document.cookie = "mira_token=" + encodeURIComponent(token) + "; path=/v1/; SameSite=Strict";
  const $ = (id) => document.getElementById(id);
  const put = (el, v) => { el.textContent = String(v); };
  const shown = ["passed", "failed", "error", "na", "skipped", "cancelled"];

  // Two runs picked on the runs page: the older is the base. Runs are listed newest first.
  let picked = [];
  let order = [];
  function showPicked() {
    const button = $("compare");
    button.disabled = picked.length !== 2;
    put(button, picked.length === 2 ? "Compare the two" : "Pick two runs to compare");
  }
  function compareHref() {
    const [a, b] = picked.slice().sort((x, y) => order.indexOf(y) - order.indexOf(x));
    return "/compare?base=" + encodeURIComponent(a) + "&candidate=" + encodeURIComponent(b) +
           location.hash;
  }

  async function listRuns() {
    try {
      const res = await fetch("/v1/runs?limit=200", { headers, cache: "no-store" });
      const data = await res.json();
      if (!res.ok) { put($("status"), data.error ? data.error.message : res.status); return; }
      const tbody = $("runs").tBodies[0];
      tbody.replaceChildren();
      for (const r of data.runs) {
        const tr = document.createElement("tr");
        const pick = document.createElement("input");
        pick.type = "checkbox";
        pick.checked = picked.includes(r.run_id);
        pick.setAttribute("aria-label", "compare " + r.run_id);
        pick.addEventListener("change", () => {
          picked = picked.filter((id) => id !== r.run_id);
          if (pick.checked) picked.push(r.run_id);
          showPicked();
        });
        const link = document.createElement("a");
        link.href = "/runs/" + encodeURIComponent(r.run_id) + location.hash;
        put(link, r.run_id);
        const first = document.createElement("td");
        first.append(pick, " ", link);
        tr.append(first);
        const c = r.counts || {};
        const scored = (c.passed || 0) + (c.failed || 0);
        for (const v of [r.study, r.state, (r.done || 0) + "/" + (r.total || 0), c.passed || 0,
                         (c.failed || 0) + (c.error || 0),
                         scored ? Math.round((100 * (c.passed || 0)) / scored) + "%" : ""]) {
          const td = document.createElement("td");
          put(td, v);
          tr.append(td);
        }
        tbody.append(tr);
      }
      order = data.runs.map((r) => r.run_id);
      picked = picked.filter((id) => order.includes(id));
      showPicked();
      put($("status"), data.runs.length + " run(s)");
    } catch (e) {
      put($("status"), "cannot reach the server");
    }
  }
  if (body.dataset.page === "runs") {
    $("compare").addEventListener("click", () => { location.href = compareHref(); });
    listRuns();
    setInterval(listRuns, 5000);
    return;
  }

  const runId = body.dataset.runId;
  put($("run-id"), runId);
  let last = 0, total = 0, done = 0, ended = false, counts = {};
  $("report").href = "/v1/runs/" + encodeURIComponent(runId) + "/report?format=html";

  function render(state) {
    for (const s of shown) put($("count-" + s), counts[s] || 0);
    put($("progress-text"), done + " / " + total);
    $("progress").value = total ? done / total : 0;
    if (state) { put($("state"), state); body.dataset.state = state; }
    const svg = $("chart");
    svg.replaceChildren();
    const max = Math.max(1, ...shown.map((s) => counts[s] || 0));
    shown.forEach((s, i) => {
      const h = Math.round(((counts[s] || 0) / max) * 90);
      const bar = document.createElementNS("http://www.w3.org/2000/svg", "rect");
      bar.setAttribute("x", String(10 + i * 64));
      bar.setAttribute("y", String(100 - h));
      bar.setAttribute("width", "48");
      bar.setAttribute("height", String(h));
      bar.setAttribute("fill", s === "passed" ? "#2a7" : s === "failed" || s === "error" ? "#c33" : "#999");
      const label = document.createElementNS("http://www.w3.org/2000/svg", "text");
      label.setAttribute("x", String(10 + i * 64));
      label.setAttribute("y", "116");
      label.setAttribute("font-size", "11");
      label.textContent = s;
      svg.append(bar, label);
    });
  }

  function on(type, d) {
    if (d.counts) counts = Object.assign({}, d.counts);
    if (typeof d.total === "number") total = d.total;
    if (typeof d.done === "number") done = d.done;
    if (type === "case") {
      if (!d.counts) counts[d.state] = (counts[d.state] || 0) + 1;
      if (d.state === "failed" || d.state === "error") {
        const li = document.createElement("li");
        put(li, d.key + " — " + d.state + (d.message ? ": " + d.message : ""));
        $("failures").append(li);
      }
      render("running");
    } else if (type === "end") {
      ended = true;
      render(d.state);
    } else {
      render(type === "start" ? "running" : null);
    }
  }

  function frame(text) {
    let id = 0, type = "message", data = "";
    for (const line of text.split("\n")) {
      if (line === "" || line.startsWith(":")) continue;
      const colon = line.indexOf(":");
      const key = colon < 0 ? line : line.slice(0, colon);
      let value = colon < 0 ? "" : line.slice(colon + 1);
      if (value.startsWith(" ")) value = value.slice(1);
      if (key === "id") id = Number(value);
      else if (key === "event") type = value;
      else if (key === "data") data += value;
    }
    if (id) last = id;
    if (data) on(type, JSON.parse(data));
  }

  // The event stream read with fetch (EventSource cannot send the bearer token); a dropped
  // stream is resumed from the last id seen, so no event is missed or repeated.
  async function stream() {
    while (!ended) {
      try {
        const h = Object.assign({}, headers);
        if (last) h["Last-Event-ID"] = String(last);
        const res = await fetch("/v1/runs/" + encodeURIComponent(runId) + "/events",
                                { headers: h, cache: "no-store" });
        if (!res.ok) {
          const err = await res.json().catch(() => null);
          put($("state"), err && err.error ? err.error.message : "error " + res.status);
          return;
        }
        const reader = res.body.getReader();
        const decoder = new TextDecoder();
        let buffer = "";
        for (;;) {
          const { value, done: eof } = await reader.read();
          if (eof) break;
          buffer += decoder.decode(value, { stream: true });
          let i;
          while ((i = buffer.indexOf("\n\n")) >= 0) {
            frame(buffer.slice(0, i));
            buffer = buffer.slice(i + 2);
          }
        }
      } catch (e) {
        put($("state"), "reconnecting");
      }
      if (!ended) await new Promise((r) => setTimeout(r, 1000));
    }
  }
  // The run's state first (one plain request), then its events as they come.
  async function start() {
    try {
      const res = await fetch("/v1/runs/" + encodeURIComponent(runId), { headers, cache: "no-store" });
      if (res.ok) {
        const d = await res.json();
        if (d.counts) counts = Object.assign({}, d.counts);
        total = d.total || 0;
        done = d.done || 0;
        render(d.state);
      }
    } catch (e) {
      put($("state"), "cannot reach the server");
    }
    stream();
  }
  render(null);
  start();
})();
)JS";

// The run page's cases: the viewer's script fills the table a page at a time.
std::string cases_section() {
  std::string statuses = "<option value=\"\">any status</option>";
  for (auto st : {"passed", "failed", "error", "na", "skipped", "cancelled"})
    statuses += "<option>" + std::string(st) + "</option>";
  return "<div id=\"matrix\"></div><h2>Cases</h2><form id=\"filters\" role=\"search\">"
         "<select id=\"f-status\" "
         "aria-label=\"status\">" +
         statuses +
         "</select><input id=\"f-eval\" placeholder=\"eval\" aria-label=\"eval\"><input "
         "id=\"f-target\" placeholder=\"target\" aria-label=\"target\"><input id=\"f-tag\" "
         "placeholder=\"tag\" aria-label=\"tag\"><input id=\"f-trial\" "
         "type=\"number\" min=\"0\" placeholder=\"trial\" aria-label=\"trial\"><input "
         "id=\"f-score-min\" type=\"number\" step=\"any\" placeholder=\"score from\" "
         "aria-label=\"lowest score\"><input id=\"f-score-max\" type=\"number\" step=\"any\" "
         "placeholder=\"score to\" aria-label=\"highest score\"><input id=\"f-q\" "
         "type=\"search\" placeholder=\"search input and response ( / )\" aria-label=\"search\">"
         "<select id=\"f-sort\" aria-label=\"sort\"><option value=\"\">by key</option>"
         "<option value=\"-latency\">slowest first</option><option value=\"-cost\">costliest "
         "first</option><option value=\"-tokens\">most tokens first</option><option "
         "value=\"score\">lowest score first</option></select></form>"
         "<p id=\"cases-status\" class=\"sub\"></p><table id=\"cases\"><thead><tr><th>Case</th>"
         "<th>Status</th><th>Score</th><th>Latency ms</th><th>Tokens</th><th>Cost $</th>"
         "<th>Tool calls</th><th>Steps</th><th>Response</th></tr></thead><tbody></tbody></table>"
         "<p><button id=\"prev\">Previous</button> <button id=\"next\">Next</button> "
         "<span class=\"sub\">j/k: move · Enter: open · /: search</span></p>";
}

std::string head(std::string_view title) {
  return "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
         "<meta name=\"viewport\" content=\"width=device-width\"><title>" +
         report::html_text(title) + "</title><style>" + std::string(style) + "</style></head>";
}

}  // namespace

std::string dashboard_page(std::string_view run_id) {
  if (run_id.empty())
    return head("mira serve: runs") +
           "<body data-page=\"runs\"><h1>Runs</h1><table id=\"runs\"><thead><tr><th>Run</th>"
           "<th>Study</th><th>State</th><th>Done</th><th>Passed</th><th>Failed</th>"
           "<th>Pass rate</th></tr></thead><tbody></tbody></table><p><button id=\"compare\" "
           "disabled>Pick two runs to compare</button></p><p id=\"status\" class=\"sub\"></p>"
           "<script src=\"/dashboard.js\"></script></body></html>\n";
  auto id = report::html_text(run_id);
  std::string cards;
  for (auto s : {"passed", "failed", "error", "na", "skipped", "cancelled"})
    cards += "<div class=\"card\"><b id=\"count-" + std::string(s) + "\">0</b>" + s + "</div>";
  return head("mira serve: run " + std::string(run_id)) + "<body data-page=\"run\" data-run-id=\"" +
         id +
         "\"><p><a href=\"/\">All runs</a></p><h1>Run <span id=\"run-id\"></span></h1>"
         "<p>State: <b id=\"state\">connecting</b> · <progress id=\"progress\" max=\"1\" "
         "value=\"0\"></progress> <span id=\"progress-text\"></span></p><div class=\"cards\">" +
         cards +
         "</div><svg id=\"chart\" width=\"400\" height=\"120\" viewBox=\"0 0 400 120\" "
         "role=\"img\" aria-label=\"cases by state\"></svg><p><a id=\"report\">The report</a></p>"
         "<h2>Failures</h2><ul id=\"failures\"></ul>" +
         cases_section() +
         "<script src=\"/dashboard.js\"></script><script src=\"/viewer.js\"></script>"
         "</body></html>\n";
}

std::string case_page(std::string_view run_id, std::string_view key) {
  return head("mira: " + std::string(key)) + "<body data-page=\"case\" data-run-id=\"" +
         report::html_text(run_id) + "\" data-case-key=\"" + report::html_text(key) +
         "\"><p><a id=\"back\">The run</a></p><h1 id=\"case-key\"></h1>"
         "<p id=\"case-status\" class=\"bad\"></p><div id=\"case\"></div>"
         "<script src=\"/viewer.js\"></script></body></html>\n";
}

std::string compare_page() {
  return head("mira: compare") +
         "<body data-page=\"compare\"><p><a href=\"/\">All runs</a></p><h1>Compare</h1>"
         "<p id=\"compare-summary\"></p><form id=\"filters\"><select id=\"f-change\" "
         "aria-label=\"change\"><option value=\"regressed,fixed\">flipped (regressed, then "
         "fixed)</option><option value=\"regressed\">regressed</option><option value=\"fixed\">"
         "fixed</option><option value=\"same\">same</option><option value=\"unpaired\">"
         "unpaired</option></select></form><p id=\"compare-status\" class=\"sub\"></p>"
         "<table id=\"pairs\"><thead><tr><th>Case</th><th>Base</th><th>Candidate</th>"
         "<th>Change</th></tr></thead><tbody></tbody></table><p><button id=\"prev\">Previous"
         "</button> <button id=\"next\">Next</button></p>"
         "<script src=\"/viewer.js\"></script></body></html>\n";
}

std::string compare_case_page(std::string_view key) {
  return head("mira: " + std::string(key)) + "<body data-page=\"compare-case\" data-case-key=\"" +
         report::html_text(key) +
         "\"><p><a id=\"back\">The comparison</a></p><h1 id=\"case-key\"></h1>"
         "<div class=\"two-up\"><div id=\"base\"></div><div id=\"candidate\"></div></div>"
         "<script src=\"/viewer.js\"></script></body></html>\n";
}

std::string_view dashboard_script() {
  return script;
}

std::string_view dashboard_csp() {
  return "default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'unsafe-inline'; "
         "img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";
}

}  // namespace mira::serve::detail
