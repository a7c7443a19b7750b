// /viewer.js (dashboard.hpp): the run page's table of cases, paged and filtered on the server,
// and the case page, which shows one record's input, trajectory, scores and events. Everything a
// study wrote reaches the page through textContent or as an image's data: URI of an image type;
// long texts and long trajectories are cut, with a button that shows the rest.
#include "serve/dashboard.hpp"

namespace mira::serve::detail {

namespace {

constexpr std::string_view script = R"JS("use strict";
(function () {
  const body = document.body;
  const $ = (id) => document.getElementById(id);
  const put = (e, v) => { e.textContent = v == null ? "" : String(v); };
  const el = (tag, text, cls) => {
    const e = document.createElement(tag);
    if (text != null) e.textContent = String(text);
    if (cls) e.className = cls;
    return e;
  };
  // The token: a cookie the server set (the printed ?token= URL), or #token= as the dashboard
  // takes it.
  const hashToken = new URLSearchParams(location.hash.slice(1)).get("token");
  const headers = hashToken ? { Authorization: "Bearer " + hashToken } : {};
  const keep = hashToken ? "#token=" + encodeURIComponent(hashToken) : "";
  const runId = body.dataset.runId;
  const api = "/v1/runs/" + encodeURIComponent(runId);
  const runHref = "/runs/" + encodeURIComponent(runId);
  const caseHref = (key) => runHref + "/cases/" + encodeURIComponent(key);

  async function getJson(url) {
    const res = await fetch(url, { headers, cache: "no-store" });
    const data = await res.json().catch(() => null);
    if (!res.ok) throw new Error(data && data.error ? data.error.message : "HTTP " + res.status);
    return data;
  }
  const fmt = (v) => (typeof v === "number" ? String(Math.round(v * 1000) / 1000) : v);

  // A text shown up to `limit` characters; the rest on demand.
  function textBlock(s, limit) {
    const pre = el("pre", null, "text");
    const text = typeof s === "string" ? s : String(JSON.stringify(s, null, 2));
    const max = limit || 20000;
    if (text.length <= max) { put(pre, text); return pre; }
    put(pre, text.slice(0, max));
    const more = el("button", "show all " + text.length + " characters", "more");
    more.addEventListener("click", () => { put(pre, text); more.remove(); });
    const box = el("div");
    box.append(pre, more);
    return box;
  }

  const imageTypes = ["image/png", "image/jpeg", "image/gif", "image/webp"];
  // One Part (or a plain string): text as text, an image of a known type from a data: URI or
  // inline base64 as an image, anything else (a file, a URL) named.
  function part(p) {
    if (typeof p === "string") return textBlock(p);
    if (!p || typeof p !== "object") return textBlock(JSON.stringify(p));
    if (p.kind === "text" && typeof p.text === "string") return textBlock(p.text);
    const src = p.source || {};
    if (p.kind === "image") {
      let uri = null;
      if (typeof src.data === "string" && imageTypes.includes(p.media_type))
        uri = "data:" + p.media_type + ";base64," + src.data;
      else if (typeof src.uri === "string" &&
               imageTypes.some((t) => src.uri.startsWith("data:" + t + ";base64,")))
        uri = src.uri;
      if (uri) {
        const img = el("img", null, "part-image");
        img.alt = p.name || p.media_type || "image";
        img.src = uri;
        return img;
      }
    }
    const where = typeof src.uri === "string" ? src.uri.slice(0, 200) : "inline data";
    return el("p", (p.kind || "part") + ": " + (p.name || "") + " " + (p.media_type || "") +
              " (" + where + ")", "file");
  }

  function content(c) {
    const box = el("div", null, "content");
    if (Array.isArray(c)) for (const p of c) box.append(part(p));
    else if (c != null) box.append(part(c));
    return box;
  }

  // The input: strings, Parts, or messages ({role, content}).
  function showInput(box, input) {
    if (input == null) { box.append(el("p", "The result does not carry the input.", "sub")); return; }
    if (!Array.isArray(input)) { box.append(textBlock(JSON.stringify(input))); return; }
    for (const item of input) {
      if (item && typeof item === "object" && "role" in item) {
        const m = el("div", null, "message");
        m.append(el("b", item.role), content(item.content));
        box.append(m);
      } else {
        box.append(part(item));
      }
    }
  }

  function step(s, i, prefix) {
    const sec = el("section", null, "step");
    sec.id = prefix + "step-" + (i + 1);
    if (!s || typeof s !== "object") {
      sec.append(el("p", "step " + (i + 1) + " is not an object:", "bad"), textBlock(JSON.stringify(s)));
      return sec;
    }
    const h = el("h3");
    const link = el("a", "#" + (s.step_id != null ? s.step_id : i + 1));
    link.href = "#" + sec.id;
    h.append(link, " ", el("span", s.source || "?", "source source-" + String(s.source)));
    if (s.model_name) h.append(" ", el("span", s.model_name, "sub"));
    if (s.timestamp) h.append(" ", el("span", s.timestamp, "sub"));
    sec.append(h);
    if (s.message != null && s.message !== "") sec.append(content(s.message));
    if (s.reasoning_content) {
      const d = el("details", null, "reasoning");
      d.append(el("summary", "reasoning"), textBlock(s.reasoning_content));
      sec.append(d);
    }
    for (const call of Array.isArray(s.tool_calls) ? s.tool_calls : []) {
      const c = el("div", null, "tool-call");
      c.dataset.tool = String(call && call.function_name);
      c.append(el("b", "call " + String(call && call.function_name)),
               el("span", " " + String((call && call.tool_call_id) || ""), "sub"),
               textBlock(call ? call.arguments : null));
      sec.append(c);
    }
    const results = s.observation && Array.isArray(s.observation.results) ? s.observation.results : [];
    for (const r of results) {
      const o = el("div", null, "observation");
      o.append(el("b", "result" + (r && r.source_call_id ? " of " + r.source_call_id : "")),
               content(r ? r.content : r));
      sec.append(o);
    }
    if (s.metrics && typeof s.metrics === "object") {
      const m = s.metrics;
      const parts = [];
      for (const k of ["prompt_tokens", "completion_tokens", "cached_tokens", "cost_usd"])
        if (m[k] != null) parts.push(k + " " + fmt(m[k]));
      if (parts.length) sec.append(el("p", parts.join(" · "), "sub metrics"));
    }
    return sec;
  }

  // The steps a few hundred at a time: a trajectory of 100 000 steps stays usable. `prefix`
  // tells apart the steps of two cases on one page.
  function showTrajectory(box, count, t, prefix) {
    if (t == null) {
      box.append(el("p", "No trajectory: a run result carries none; a run made by mira score " +
                    "from execute artifacts shows theirs.", "sub"));
      return;
    }
    if (typeof t !== "object" || !Array.isArray(t.steps)) {
      box.append(el("p", "The trajectory is not an ATIF document (no steps array); as it came:", "bad"),
                 textBlock(JSON.stringify(t)));
      return;
    }
    put(count, t.steps.length + " step(s)");
    let shown = 0;
    const batch = 200;
    const more = el("button", "", "more");
    function next() {
      const end = Math.min(t.steps.length, shown + batch);
      for (; shown < end; ++shown) box.insertBefore(step(t.steps[shown], shown, prefix), more);
      if (shown < t.steps.length) put(more, "show " + Math.min(batch, t.steps.length - shown) +
                                      " more of " + (t.steps.length - shown) + " steps");
      else more.remove();
    }
    more.addEventListener("click", next);
    box.append(more);
    next();
    // A step's link (#step-N) shows that step, whether the page opened on it or it was followed.
    function linked() {
      const m = new RegExp("^#" + prefix + "step-(\\d+)$").exec(location.hash);
      if (!m) return;
      while (shown < Math.min(Number(m[1]), t.steps.length)) next();
      for (const old of box.querySelectorAll(".step.linked")) old.classList.remove("linked");
      const target = document.getElementById(prefix + "step-" + m[1]);
      if (target) { target.classList.add("linked"); target.scrollIntoView(); }
    }
    window.addEventListener("hashchange", linked);
    linked();
  }

  function table(cls, heads, rows) {
    const t = el("table", null, cls);
    const head = el("tr");
    for (const h of heads) head.append(el("th", h));
    t.append(el("thead"), el("tbody"));
    t.tHead.append(head);
    for (const r of rows) {
      const row = el("tr");
      for (const v of r) {
        const td = el("td");
        if (v instanceof Node) td.append(v); else put(td, v == null ? "" : fmt(v));
        row.append(td);
      }
      t.tBodies[0].append(row);
    }
    return t;
  }

  // One case whole (GET /v1/runs/{id}/cases/{key}) into `root`.
  function renderCase(root, d, prefix) {
    const r = d.record && typeof d.record === "object" ? d.record : {};
    const tr = r.transcript && typeof r.transcript === "object" ? r.transcript : {};
    root.dataset.status = String(r.status);
    const part = (title, cls) => {
      const box = el("div", null, cls);
      root.append(el("h2", title), box);
      return box;
    };
    const facts = [["status", r.status], ["eval", r.eval], ["sample", r.sample],
                   ["target", r.target], ["params", r.params ? JSON.stringify(r.params) : ""],
                   ["tags", Array.isArray(r.tags) ? r.tags.map(String).join(", ") : ""],
                   ["trial", r.trial], ["attempts", r.attempts], ["latency ms", r.latency_ms],
                   ["score", r.aggregate], ["message", r.host_message || tr.error]];
    root.append(table("facts", ["", ""], facts.filter((f) => f[1] != null && f[1] !== "")));
    showInput(part("Input", "input"), r.input);
    const response = part("Response", "response");
    if (tr.final_response != null) response.append(textBlock(tr.final_response));
    if (Array.isArray(tr.output)) response.append(content(tr.output));
    const count = el("span", null, "sub steps-count");
    const h = el("h2", "Trajectory ");
    h.append(count);
    const steps = el("div", null, "trajectory");
    root.append(h, steps);
    if (d.trajectory_source && d.trajectory_source !== "record")
      steps.append(el("p", "from the execute artifact " + d.trajectory_source, "sub"));
    showTrajectory(steps, count, d.trajectory, prefix);
    const scores = Array.isArray(r.scores) ? r.scores : [];
    part("Scores", "scores").append(table("scores", ["scorer", "value", "pass", "reason", "metadata"],
      scores.map((s) => [s.scorer, s.value, s.na ? "n/a" : String(s.pass), s.reason,
                         s.metadata ? textBlock(JSON.stringify(s.metadata, null, 2), 2000) : ""])));
    const events = part("Events", "events");
    if (d.events_cut) events.append(el("p", "Only the first events are shown.", "sub"));
    if (d.events_problem) events.append(el("p", d.events_problem, "bad"));
    events.append(table("events", ["#", "method", "kind", "what"],
      (d.events || []).map((e, i) => {
        const p = Object.assign({}, e.params || {});
        const kind = p.kind || p.level || "";
        for (const k of ["request_id", "eval", "sample", "target", "kind", "level"]) delete p[k];
        return [i + 1, e.method, kind, textBlock(JSON.stringify(p), 2000)];
      })));
    part("Retries", "retries").append(table("retries", ["attempt", "error"],
      (Array.isArray(r.retried) ? r.retried : []).map((a, i) => [i + 1, JSON.stringify(a)])));
    const raw = part("Raw record", "raw");
    const show = el("button", "Show the record as JSON");
    show.addEventListener("click", () => {
      show.replaceWith(textBlock(JSON.stringify(r, null, 2), 200000));
    });
    raw.append(show);
  }

  async function casePage() {
    const key = body.dataset.caseKey;
    put($("case-key"), key);
    $("back").href = runHref + keep;
    try {
      renderCase($("case"), await getJson(api + "/cases/" + encodeURIComponent(key)), "");
      body.dataset.state = "ready";
    } catch (e) {
      put($("case-status"), e.message);
      body.dataset.state = "error";
    }
  }

  // One case of two runs side by side (/compare/cases/{key}?base=A&candidate=B).
  async function compareCasePage() {
    const key = body.dataset.caseKey;
    const q = new URLSearchParams(location.search);
    put($("case-key"), key);
    $("back").href = "/compare?base=" + encodeURIComponent(q.get("base") || "") + "&candidate=" +
                     encodeURIComponent(q.get("candidate") || "") + keep;
    await Promise.all(["base", "candidate"].map(async (side) => {
      const id = q.get(side) || "";
      const root = $(side);
      const link = el("a", side + ": " + id);
      link.href = "/runs/" + encodeURIComponent(id) + "/cases/" + encodeURIComponent(key) + keep;
      const h = el("h2");
      h.append(link);
      root.append(h);
      try {
        renderCase(root, await getJson("/v1/runs/" + encodeURIComponent(id) + "/cases/" +
                                       encodeURIComponent(key)), side + "-");
      } catch (e) {
        root.append(el("p", e.message, "bad"));
      }
    }));
    body.dataset.state = "ready";
  }

  // Two runs compared: flipped cases first, a page at a time.
  function comparePage() {
    const q = new URLSearchParams(location.search);
    const base = q.get("base") || "", candidate = q.get("candidate") || "";
    const change = $("f-change");
    if (q.has("change")) change.value = q.get("change");
    let cursors = [""], page = 0;
    async function load() {
      const p = new URLSearchParams({ base, candidate, change: change.value, limit: "50" });
      if (cursors[page]) p.set("cursor", cursors[page]);
      body.dataset.pairs = "loading";
      try {
        const d = await getJson("/v1/compare?" + p);
        cursors[page + 1] = d.next_cursor || "";
        const o = d.overall;
        put($("compare-summary"), d.base + " → " + d.candidate + ": " + o.regressed +
            " regressed, " + o.fixed + " fixed, " + o.both_pass + " passed both, " + o.both_fail +
            " failed both · pass rate change " + fmt(o.delta * 100) + " points (p " +
            fmt(o.p_value) + ")");
        const tbody = $("pairs").tBodies[0];
        tbody.replaceChildren();
        for (const c of d.cases) {
          const tr = el("tr");
          tr.dataset.change = c.change;
          const a = el("a", c.key);
          a.href = "/compare/cases/" + encodeURIComponent(c.key) + "?base=" +
                   encodeURIComponent(base) + "&candidate=" + encodeURIComponent(candidate) + keep;
          const first = el("td");
          first.append(a);
          tr.append(first, el("td", c.base || "missing"), el("td", c.candidate || "missing"),
                    el("td", c.why || c.change));
          tbody.append(tr);
        }
        put($("compare-status"), d.matched + " case(s) · page " + (page + 1));
        $("prev").disabled = page === 0;
        $("next").disabled = !d.next_cursor;
        body.dataset.pairs = "ready";
      } catch (e) {
        put($("compare-status"), e.message);
        body.dataset.pairs = "error";
      }
    }
    change.addEventListener("change", () => { cursors = [""]; page = 0; load(); });
    $("next").addEventListener("click", () => { ++page; load(); });
    $("prev").addEventListener("click", () => { if (page > 0) { --page; load(); } });
    load();
  }

  // The run's evals x targets, passed/scored per cell with the rate, from its saved summary
  // (the dashboard above shows a live run's counts as they come).
  async function showMatrix() {
    const box = $("matrix");
    try {
      const d = await getJson(api);
      const s = d.summary;
      if (!s || !s.matrix || !s.per_eval || !s.per_target) return;
      const targets = Object.keys(s.per_target);
      const rate = (r) => r && r.scored ? r.passed + "/" + r.scored + " (" +
          Math.round(r.passed / r.scored * 1000) / 10 + "%)" : r ? "-" : "";
      const rows = Object.keys(s.per_eval).map((e) =>
          [e, ...targets.map((t) => rate((s.matrix[e] || {})[t])), rate(s.per_eval[e])]);
      rows.push(["all", ...targets.map((t) => rate(s.per_target[t])), rate(s.overall)]);
      box.replaceChildren(el("h2", "Evals x targets"),
                          table("matrix", ["eval", ...targets, "all targets"], rows));
      body.dataset.matrix = "ready";
    } catch (e) {
      put(box, e.message);
    }
  }

  function runPage() {
    showMatrix();
    const f = { status: $("f-status"), eval: $("f-eval"), target: $("f-target"), tag: $("f-tag"),
                q: $("f-q"),
                trial: $("f-trial"), score_min: $("f-score-min"), score_max: $("f-score-max"),
                sort: $("f-sort") };
    const given = new URLSearchParams(location.search);
    for (const [k, input] of Object.entries(f)) if (given.has(k)) input.value = given.get(k);
    let cursors = [""], page = 0, rows = [], selected = -1, asked = 0;
    function query() {
      const p = new URLSearchParams();
      for (const [k, input] of Object.entries(f)) if (input.value) p.set(k, input.value);
      return p;
    }
    function show(d) {
      const tbody = $("cases").tBodies[0];
      tbody.replaceChildren();
      rows = [];
      for (const c of d.cases) {
        const tr = el("tr");
        tr.dataset.status = c.status;
        tr.dataset.key = c.key;
        const a = el("a", c.key);
        a.href = caseHref(c.key) + keep;
        const first = el("td");
        first.append(a);
        tr.append(first);
        for (const v of [c.status, fmt(c.score), fmt(c.latency_ms), c.tokens, fmt(c.cost_usd),
                         c.tool_calls, c.steps, c.response || c.message])
          tr.append(el("td", v == null ? "" : v));
        tbody.append(tr);
        rows.push(tr);
      }
      selected = -1;
      const lost = (d.unreadable || []).length + (d.problems || []).length;
      put($("cases-status"), d.matched + " matching case(s) · page " + (page + 1) +
          (lost ? " · " + lost + " saved record(s) cannot be read" : ""));
      $("cases-status").title = [...(d.unreadable || []), ...(d.problems || [])].join("\n");
      $("prev").disabled = page === 0;
      $("next").disabled = !d.next_cursor;
      body.dataset.cases = "ready";
    }
    async function load() {
      const p = query();
      const s = p.toString();
      history.replaceState(null, "", location.pathname + (s ? "?" + s : "") + location.hash);
      p.set("limit", "50");
      if (cursors[page]) p.set("cursor", cursors[page]);
      const mine = ++asked;
      body.dataset.cases = "loading";
      try {
        const d = await getJson(api + "/cases?" + p);
        if (mine !== asked) return;  // a newer filter was asked for meanwhile
        cursors[page + 1] = d.next_cursor || "";
        show(d);
      } catch (e) {
        put($("cases-status"), e.message);
        body.dataset.cases = "error";
      }
    }
    function restart() { cursors = [""]; page = 0; load(); }
    let typing;
    for (const input of Object.values(f)) {
      input.addEventListener("input", () => { clearTimeout(typing); typing = setTimeout(restart, 250); });
      input.addEventListener("change", restart);
    }
    $("filters").addEventListener("submit", (e) => { e.preventDefault(); restart(); });
    $("next").addEventListener("click", () => { ++page; load(); });
    $("prev").addEventListener("click", () => { if (page > 0) { --page; load(); } });
    function select(i) {
      if (!rows.length) return;
      if (selected >= 0) rows[selected].classList.remove("selected");
      selected = Math.max(0, Math.min(rows.length - 1, i));
      rows[selected].classList.add("selected");
      rows[selected].scrollIntoView({ block: "nearest" });
    }
    // j/k move through the page, Enter opens the case, / goes to the search.
    document.addEventListener("keydown", (e) => {
      const typingIn = e.target instanceof HTMLInputElement || e.target instanceof HTMLSelectElement;
      if (typingIn) { if (e.key === "Escape") e.target.blur(); return; }
      if (e.key === "/") { e.preventDefault(); f.q.focus(); }
      else if (e.key === "j") select(selected + 1);
      else if (e.key === "k") select(selected - 1);
      else if (e.key === "Enter" && selected >= 0) location.href = rows[selected].querySelector("a").href;
    });
    load();
  }

  const pages = { case: casePage, run: runPage, compare: comparePage,
                  "compare-case": compareCasePage };
  if (pages[body.dataset.page]) pages[body.dataset.page]();
})();
)JS";

}  // namespace

std::string_view viewer_script() {
  return script;
}

}  // namespace mira::serve::detail
