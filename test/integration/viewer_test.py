#!/usr/bin/env python3
"""`mira view` in headless Chromium: the runs page, a run's cases filtered on the server, a case
with its trajectory step by step and a deep link to a step, checked against the run folder; and
a hostile case (markup in every field, a 10 MB response, 100 000 steps, a malformed step) that
renders as text, cut and paged, without running anything: one written into a run folder, and
runs of a hostile study process (test/studies/hostile_view_study.py), its notifications and a
line that is not UTF-8 included, through `mira run`.

Usage: viewer_test.py MIRA EXAMPLE_STUDY CHROMIUM. Exits 77 (skipped) without Chromium. With
MIRA_SCREENSHOT_DIR set, saves viewer-run.png and viewer-case.png there (docs/ holds them).
"""
import base64
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serve_api_test as shared  # noqa: E402 (takes MIRA, STUDY and CHROMIUM off sys.argv)

MIRA, STUDY, CHROMIUM, GUARD = shared.MIRA, shared.STUDY, shared.CHROMIUM, shared.GUARD
HOSTILE = '<img src=x onerror="window.pwned=1"><script>window.pwned=2</script>"\'><b>'
HOSTILE_KEY = "hostile/x@sim"
HOSTILE_STUDY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "studies",
                             "hostile_view_study.py")

# Resolves once `cond` holds in the page: the page is watched, not the clock.
WAIT = """new Promise((resolve) => {
  const check = () => { try { if (%s) return resolve(true); } catch (e) {} setTimeout(check, 20); };
  check();
})"""


def hostile_record():
    step = {"source": "agent", "message": HOSTILE, "reasoning_content": HOSTILE,
            "tool_calls": [{"tool_call_id": HOSTILE, "function_name": HOSTILE,
                            "arguments": {"x": HOSTILE}}],
            "observation": {"results": [{"source_call_id": "c", "content": HOSTILE}]}}
    steps = [dict(step, step_id=i + 1) for i in range(100000)]
    steps[1] = "not a step " + HOSTILE
    return {"eval": "hostile", "sample": "x", "target": "sim", "input": [HOSTILE,
            {"kind": "image", "media_type": "image/svg+xml", "source": {"data": "PHN2Zz4="}}],
            "passed": False, "aggregate": 0,
            "scores": [{"scorer": HOSTILE, "value": 0, "pass": False, "reason": HOSTILE,
                        "metadata": {"why": HOSTILE}}],
            "transcript": {"final_response": HOSTILE + "y" * (10 << 20),
                           "trajectory": {"schema_version": "ATIF-v1.7", "steps": steps}},
            "key": HOSTILE_KEY, "status": "failed", "attempts": 1, "latency_ms": 1}


class Viewer(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="mira-viewer-")
        results, art = os.path.join(cls.tmp, "results"), os.path.join(cls.tmp, "art")

        def mira(*args):
            subprocess.run([MIRA, *args, "--results-dir", results, "--", STUDY], check=True,
                           capture_output=True, timeout=GUARD)

        # The base: scored from execute artifacts (so its cases have trajectories), with a
        # hostile case added. The candidate: a plain run, where greet/hi failed and the
        # hostile case passed: one flipped case each way.
        cls.run_id, cls.candidate = "20261201T000000Z-aaaa", "20261202T000000Z-bbbb"
        mira("run", "--execute-only", "--artifacts", art)
        mira("score", "--artifacts", art, "--run-id", cls.run_id)
        mira("run", "--run-id", cls.candidate)
        cls.folder = os.path.join(results, cls.run_id)
        for run, status in [(cls.run_id, "failed"), (cls.candidate, "passed")]:
            case_dir = os.path.join(results, run, "cases", "hostile_2fx_40sim")
            os.makedirs(case_dir)
            record = hostile_record() if status == "failed" else {
                "eval": "hostile", "sample": "x", "target": "sim", "passed": True,
                "aggregate": 1, "scores": [], "key": HOSTILE_KEY, "status": "passed",
                "attempts": 1, "latency_ms": 1}
            with open(os.path.join(case_dir, "result.json"), "w") as f:
                json.dump(record, f)
        # A saved record with bytes that are not UTF-8 (a damaged file): it cannot be read.
        bad = os.path.join(results, cls.run_id, "cases", "bad_2futf8_40sim")
        os.makedirs(bad)
        with open(os.path.join(bad, "result.json"), "wb") as f:
            f.write(b'{"eval":"bad","sample":"utf8","target":"sim","passed":true,"aggregate":1,'
                    b'"transcript":{"final_response":"\xff\xfe<b>x</b>"},"key":"bad/utf8@sim",'
                    b'"status":"passed","attempts":1,"latency_ms":1}')
        flipped = os.path.join(results, cls.candidate, "cases", "greet_2fhi_40sim",
                               "result.json")
        with open(flipped) as f:
            record = json.load(f)
        record.update(passed=False, aggregate=0, status="failed")
        with open(flipped, "w") as f:
            json.dump(record, f)
        cls.view = subprocess.Popen([MIRA, "view", cls.folder], stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True)
        cls.url = cls.view.stdout.readline().strip()
        m = re.fullmatch(r"http://127\.0\.0\.1:(\d+)/runs/([^?]+)\?token=([0-9a-f]{64})", cls.url)
        assert m, cls.url
        cls.base = "http://127.0.0.1:%s" % m.group(1)
        cls.browser, pages = shared.open_chromium(
            CHROMIUM, os.path.join(cls.tmp, "profile"), cls.url,
            ("--window-size=1200,900", "--hide-scrollbars"), GUARD)
        cls.page = shared.Cdp(pages[0]["webSocketDebuggerUrl"])

    @classmethod
    def tearDownClass(cls):
        cls.browser.kill()
        cls.browser.wait(GUARD)
        cls.browser.stderr.close()
        cls.view.terminate()
        cls.view.wait(GUARD)
        cls.view.stdout.close()
        cls.view.stderr.close()
        shutil.rmtree(cls.tmp)

    def wait(self, cond):
        # A navigation under way ends an evaluation in the page it leaves: ask the new one.
        for _ in range(50):
            try:
                self.assertTrue(self.page.evaluate(WAIT % cond), cond)
                return
            except AssertionError as e:
                if "navigated" not in str(e):
                    raise
        self.fail("the page kept navigating: " + cond)

    def value(self, expression):
        return self.page.evaluate(expression)

    def open(self, path):
        self.page.evaluate("location.href = %s" % json.dumps(self.base + path))
        self.wait("document.readyState === 'complete' && location.pathname === %s"
                  % json.dumps(path.split("?")[0].split("#")[0]))

    def screenshot(self, name):
        where = os.environ.get("MIRA_SCREENSHOT_DIR")
        if not where:
            return
        page = self.page
        page.last_id += 1
        page._send(json.dumps({"id": page.last_id, "method": "Page.captureScreenshot",
                               "params": {"format": "png"}}))
        while True:
            m = page._message()
            if m.get("id") == page.last_id:
                break
        with open(os.path.join(where, name), "wb") as f:
            f.write(base64.b64decode(m["result"]["data"]))

    def case_path(self, key):
        return "/runs/%s/cases/%s" % (self.run_id, urllib.parse.quote(key, safe=""))

    def test_0_bad_arguments_are_named(self):
        other = os.path.join(self.tmp, "elsewhere", self.candidate)
        shutil.copytree(os.path.join(self.tmp, "results", self.candidate), other)
        for args, says in [(["/nonexistent/run"], "no saved run at /nonexistent/run"),
                           ([self.folder, other], "one results folder"),
                           (["--port", "70000"], "--port")]:
            r = subprocess.run([MIRA, "view", *args], capture_output=True, text=True,
                               timeout=GUARD)
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertIn(says, r.stderr)
        shutil.rmtree(os.path.dirname(other))

    def test_1_runs_run_filter_case_step(self):
        # The printed URL's token became a cookie, and the browser was sent on without it.
        self.wait("document.body.dataset.cases === 'ready'")
        self.assertEqual(self.value("location.search"), "")
        rows = self.value("document.querySelectorAll('#cases tbody tr').length")
        self.assertEqual(rows, 38)  # the example study's 37 scored cases and the hostile one
        self.open("/")
        self.wait("document.querySelectorAll('#runs a').length === 2")
        self.assertEqual(self.value("[...document.querySelectorAll('#runs a')]"
                                    ".map((a) => a.textContent).sort()"),
                         [self.run_id, self.candidate])

        self.open("/runs/%s" % self.run_id)
        self.wait("document.body.dataset.cases === 'ready'")
        self.value("(() => { const s = document.getElementById('f-status'); s.value = 'failed';"
                   " s.dispatchEvent(new Event('change')); })()")
        self.wait("document.querySelectorAll('#cases tbody tr').length === 1")
        self.assertEqual(self.value("document.querySelector('#cases tbody a').textContent"),
                         HOSTILE_KEY)
        self.assertEqual(self.value("location.search"), "?status=failed")
        # The evals x targets matrix: the run's saved summary, a row per eval and one for all.
        with open(os.path.join(self.folder, "meta.json")) as f:
            summary = json.load(f)["summary"]
        self.wait("document.body.dataset.matrix === 'ready'")
        matrix = self.value("[...document.querySelectorAll('table.matrix tbody tr')].map((r) =>"
                            " [...r.cells].map((c) => c.textContent))")
        self.assertEqual([r[0] for r in matrix], list(summary["per_eval"]) + ["all"])
        overall = summary["overall"]
        self.assertTrue(matrix[-1][-1].startswith("%d/%d" % (overall["passed"], overall["scored"])))
        # A trial filter, against the run folder's records.
        records = []
        for d in os.listdir(os.path.join(self.folder, "cases")):
            if d == "bad_2futf8_40sim":
                continue  # not UTF-8: no case (test_2)
            with open(os.path.join(self.folder, "cases", d, "result.json")) as f:
                records.append(json.load(f))
        second = sorted(r["key"] for r in records if r.get("trial") == 1)
        self.assertTrue(second)
        self.open("/runs/%s?trial=1" % self.run_id)
        self.wait("document.body.dataset.cases === 'ready'")
        self.assertEqual(self.value("document.getElementById('f-trial').value"), "1")
        self.assertEqual(sorted(self.value("[...document.querySelectorAll('#cases tbody a')]"
                                           ".map((a) => a.textContent)")), second)
        # A tag filter: the cases whose sample the listing tagged, as their records say.
        smoke = sorted(r["key"] for r in records if "smoke" in r.get("tags", []))
        self.assertEqual(smoke, ["greet/hello@sim", "greet/hi@sim"])
        self.open("/runs/%s?tag=smoke" % self.run_id)
        self.wait("document.body.dataset.cases === 'ready'")
        self.assertEqual(self.value("document.getElementById('f-tag').value"), "smoke")
        self.assertEqual(sorted(self.value("[...document.querySelectorAll('#cases tbody a')]"
                                           ".map((a) => a.textContent)")), smoke)
        self.open("/runs/%s?status=passed&sort=-tokens" % self.run_id)
        self.wait("document.body.dataset.cases === 'ready' && "
                  "document.body.dataset.matrix === 'ready'")
        self.value("document.getElementById('matrix').scrollIntoView()")
        self.screenshot("viewer-run.png")

        # The agent loop's case: what the page shows against the run folder.
        key = "events/tool-use@sim"
        with open(os.path.join(self.tmp, "art", "events_2ftool-use_40sim.json")) as f:
            steps = json.load(f)["transcript"]["trajectory"]["steps"]
        with open(os.path.join(self.folder, "events.ndjson")) as f:
            events = [l for l in f if l.startswith('{"key":"%s"' % key)]
        self.open(self.case_path(key))
        self.wait("document.body.dataset.state === 'ready'")
        self.assertEqual(self.value("document.querySelectorAll('#case .step').length"), len(steps))
        calls = [c["function_name"] for s in steps for c in s.get("tool_calls", [])]
        self.assertEqual(calls, ["search", "weather"])
        self.assertEqual(self.value("[...document.querySelectorAll('#case .tool-call')]"
                                    ".map((c) => c.dataset.tool)"), calls)
        args = self.value("[...document.querySelectorAll('#case .tool-call pre')]"
                          ".map((p) => JSON.parse(p.textContent))")
        self.assertEqual(args, [c["arguments"] for s in steps for c in s.get("tool_calls", [])])
        self.assertIn("Lisbon", self.value("document.querySelector('#case .observation').textContent"))
        self.assertEqual(self.value("document.querySelectorAll('#case table.scores tbody tr').length"), 1)
        self.assertIn("succeeded", self.value("document.querySelector('#case table.scores').textContent"))
        self.assertEqual(self.value("document.querySelectorAll('#case table.events tbody tr').length"),
                         len(events))
        self.screenshot("viewer-case.png")

        self.open(self.case_path(key) + "#step-3")
        self.wait("document.querySelector('.step.linked') !== null")
        self.assertEqual(self.value("document.querySelector('.step.linked').id"), "step-3")

    def test_2_a_hostile_case_renders_as_text(self):
        self.open(self.case_path(HOSTILE_KEY))
        self.wait("document.body.dataset.state === 'ready'")
        self.assertIsNone(self.value("window.pwned === undefined ? null : window.pwned"))
        # No element came from the study: no image (an SVG is not shown), one script (the viewer's).
        self.assertEqual(self.value("document.querySelectorAll('img').length"), 0)
        self.assertEqual(self.value("document.scripts.length"), 1)
        self.assertIn(HOSTILE, self.value("document.getElementById('case-key').textContent") +
                      self.value("document.querySelector('#case .input pre').textContent"))
        self.assertEqual(self.value("document.querySelectorAll('#case .step').length"), 200)
        self.assertEqual(self.value("document.querySelector('#case .steps-count').textContent"),
                         "100000 step(s)")
        self.assertIn("not an object", self.value("document.getElementById('step-2').textContent"))
        self.assertEqual(self.value("document.querySelector('#case .response pre').textContent.length"),
                         20000)
        self.value("document.querySelector('#case .trajectory > button.more').click()")
        self.wait("document.querySelectorAll('#case .step').length === 400")
        # The page is still answering.
        self.assertEqual(self.value("1 + 1"), 2)

    def test_2_invalid_utf8_is_named_not_shown(self):
        # The record that is not UTF-8 is counted on the run page, which lists the others.
        self.open("/runs/%s" % self.run_id)
        self.wait("document.body.dataset.cases === 'ready'")
        self.assertIn("38 matching case(s)", self.value(
            "document.getElementById('cases-status').textContent"))
        self.assertIn("1 saved record(s) cannot be read", self.value(
            "document.getElementById('cases-status').textContent"))
        self.assertIn("bad_2futf8_40sim", self.value(
            "document.getElementById('cases-status').title"))
        # A key of bytes that are not UTF-8, in a URL: refused, in JSON that is UTF-8 and
        # parses; the page for it says so as text.
        code, text = self.value(
            "fetch('/v1/runs/%s/cases/%%FF%%FEx').then(async (r) => [r.status, new TextDecoder("
            "'utf-8', {fatal: true}).decode(await r.arrayBuffer())])" % self.run_id)
        self.assertEqual(code, 400, text)
        self.assertIn("not UTF-8", json.loads(text)["error"]["message"])
        self.open("/runs/%s/cases/%%FF%%FEx" % self.run_id)
        self.assertIn("not UTF-8", self.value("document.body.textContent"))
        self.assertIsNone(self.value("window.pwned === undefined ? null : window.pwned"))

    def test_3_compare_flipped_cases_then_one_case_side_by_side(self):
        self.open("/")
        self.wait("document.querySelectorAll('#runs input[type=checkbox]').length === 2")
        self.value("document.querySelectorAll('#runs input[type=checkbox]')"
                   ".forEach((c) => c.click())")
        self.wait("!document.getElementById('compare').disabled")
        self.value("document.getElementById('compare').click()")
        self.wait("location.pathname === '/compare' && document.body.dataset.pairs === 'ready'")
        rows = self.value("[...document.querySelectorAll('#pairs tbody tr')].map((r) =>"
                          " [...r.cells].map((c) => c.textContent))")
        self.assertEqual(rows, [["greet/hi@sim", "passed", "failed", "regressed"],
                                [HOSTILE_KEY, "failed", "passed", "fixed"]])
        self.assertIn("%s → %s" % (self.run_id, self.candidate),
                      self.value("document.getElementById('compare-summary').textContent"))

        self.value("document.querySelector('#pairs tbody a').click()")
        self.wait("location.pathname.startsWith('/compare/cases/') && "
                  "document.body.dataset.state === 'ready'")
        self.assertEqual(self.value("document.getElementById('base').dataset.status"), "passed")
        self.assertEqual(self.value("document.getElementById('candidate').dataset.status"),
                         "failed")
        # The base was scored from artifacts: its trajectory; the candidate's run result has none.
        self.assertEqual(self.value("document.querySelectorAll('#base .step').length"), 2)
        self.assertEqual(self.value("document.querySelectorAll('#candidate .step').length"), 0)

    def test_4_a_hostile_study_process_is_shown_as_text(self):
        # What a hostile study sends through the protocol (hostile_view_study.py), saved by
        # `mira run` and shown by a `mira view` of that run: every name, field, log and event as
        # text, the page usable; and the two runs compared.
        results = os.path.join(self.tmp, "hostile")
        runs = ["20261203T000000Z-cccc", "20261204T000000Z-dddd"]
        for run, extra, code in zip(runs, [[], ["--pass"]], [1, 0]):  # 1: a case failed
            r = subprocess.run([MIRA, "run", "--results-dir", results, "--run-id", run, "--",
                                sys.executable, HOSTILE_STUDY, *extra],
                               capture_output=True, text=True, timeout=GUARD)
            self.assertEqual(r.returncode, code, r.stderr)
            # The line that is not UTF-8, named in the host's warning as text.
            self.assertIn("\\xff\\xfe<b>not UTF-8</b>", r.stderr)
        folder = os.path.join(results, runs[0])
        [case] = os.listdir(os.path.join(folder, "cases"))
        with open(os.path.join(folder, "cases", case, "result.json")) as f:
            key = json.load(f)["key"]
        self.assertIn(HOSTILE, key)
        with open(os.path.join(folder, "events.ndjson")) as f:
            events = [e for e in map(json.loads, f) if e.get("key") == key]
        self.assertEqual([e["method"] for e in events], ["event", "log"])
        view = subprocess.Popen([MIRA, "view", folder], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        try:
            url = view.stdout.readline().strip()
            base = url.split("/runs/")[0]

            def go(path):
                self.page.evaluate("location.href = %s" % json.dumps(path))

            go(url)
            self.wait("document.body.dataset.cases === 'ready'")
            self.assertEqual(self.value("[...document.querySelectorAll('#cases tbody a')]"
                                        ".map((a) => a.textContent)"), [key])
            self.assertNotEqual(self.value("getComputedStyle(document.body).display"), "none")

            go(base + "/runs/%s/cases/%s" % (runs[0], urllib.parse.quote(key, safe="")))
            self.wait("document.body.dataset.state === 'ready'")
            self.assertEqual(self.value("document.getElementById('case-key').textContent"), key)
            self.assertEqual(self.value("document.querySelectorAll('img').length"), 0)
            self.assertEqual(self.value("document.scripts.length"), 1)
            self.assertEqual(self.value("document.querySelector('#case .steps-count')"
                                        ".textContent"), "100000 step(s)")
            self.assertEqual(self.value("document.querySelectorAll('#case .step').length"), 200)
            self.assertIn("not an object",
                          self.value("document.getElementById('step-2').textContent"))
            self.assertIn(HOSTILE, self.value("document.getElementById('step-1').textContent"))
            self.assertEqual(self.value("document.querySelector('#case .response pre')"
                                        ".textContent.length"), 20000)
            self.assertIn(HOSTILE, self.value("document.querySelector('#case table.scores')"
                                              ".textContent"))
            self.assertEqual(self.value("document.querySelectorAll('#case table.events tbody tr')"
                                        ".length"), len(events))
            self.assertIn(HOSTILE, self.value("document.querySelector('#case table.events')"
                                              ".textContent"))
            # Every element hovered, as a reader's mouse would: no handler came from the study.
            self.value("document.querySelectorAll('*').forEach((e) =>"
                       " e.dispatchEvent(new MouseEvent('mouseover', {bubbles: true})))")
            self.assertIsNone(self.value("window.pwned === undefined ? null : window.pwned"))
            self.assertNotEqual(self.value("getComputedStyle(document.body).display"), "none")

            go(base + "/compare?base=%s&candidate=%s" % tuple(runs))
            self.wait("document.body.dataset.pairs === 'ready'")
            rows = self.value("[...document.querySelectorAll('#pairs tbody tr')].map((r) =>"
                              " [...r.cells].map((c) => c.textContent))")
            self.assertEqual(rows, [[key, "failed", "passed", "fixed"]])
            self.assertIsNone(self.value("window.pwned === undefined ? null : window.pwned"))
        finally:
            view.terminate()
            view.wait(GUARD)
            view.stdout.close()
            view.stderr.close()


if __name__ == "__main__":
    if not shutil.which(CHROMIUM):
        print("skipped: %s (Debian's chromium, installed by scripts/test.sh) is not here"
              % CHROMIUM)
        sys.exit(77)
    unittest.main(verbosity=2)
