#!/usr/bin/env python3
"""`mira serve` through a real HTTP client (http.client) against running servers: every route,
every error status, auth, limits, idempotency, SSE resume with Last-Event-ID, cancel, resume,
SIGTERM and a restart that resumes the interrupted run, and the dashboard in headless Chromium.
Nothing waits on the clock: each step waits for stream content or a process exit, with
generous timeouts as a deadlock guard only.

Usage: serve_api_test.py MIRA EXAMPLE_STUDY CHROMIUM
"""
import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cdp import Cdp, open_chromium  # noqa: E402 (the DevTools client, shared with the viewer test)

MIRA, STUDY, CHROMIUM = sys.argv[1:4]
del sys.argv[1:4]
GUARD = 120  # seconds: a deadlock guard, never a synchronisation
# test/faults/fault_fs.c, which makes chosen file system calls fail (set by CTest).
FAULT_FS = os.environ.get("MIRA_FAULT_FS")
EXAMPLE_CASES = 41  # the example study's plan without a selection
TOKEN = "t0ken-for-the-serve-test-0123456789"


class Server:
    """A `mira serve` process on a free loopback port."""

    def __init__(self, results, studies, token=None, max_runs=4, listen="127.0.0.1:0", extra=(),
                 env=None):
        self.dir = tempfile.mkdtemp(prefix="mira-serve-")
        args = [MIRA, "serve", "--listen", listen, "--max-runs", str(max_runs), *extra]
        if results:
            args += ["--results-dir", results]
        for s in studies:
            args += ["--study", s]
        if token:
            path = os.path.join(self.dir, "token")
            with open(path, "w") as f:
                f.write(token + "\n")
            args += ["--token-file", path]
        self.token = token
        self.stderr = open(os.path.join(self.dir, "stderr"), "w+")
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=self.stderr, text=True,
                                     env=dict(os.environ, **(env or {})))
        line = self.proc.stdout.readline()
        m = re.match(r"listening on http://127\.0\.0\.1:(\d+)/", line)
        if not m:
            self.proc.wait(GUARD)
            self.stderr.seek(0)
            raise AssertionError("mira serve did not start: " + line + self.stderr.read())
        self.port = int(m.group(1))

    def request(self, method, path, body=None, headers=None, auth=True):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=GUARD)
        h = dict(headers or {})
        if auth and self.token:
            h.setdefault("Authorization", "Bearer " + self.token)
        if isinstance(body, (dict, list)):
            body = json.dumps(body)
            h.setdefault("Content-Type", "application/json")
        conn.request(method, path, body=body, headers=h)
        r = conn.getresponse()
        data = r.read()
        conn.close()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, data

    def json(self, method, path, body=None, headers=None, auth=True):
        status, h, data = self.request(method, path, body, headers, auth)
        return status, h, json.loads(data) if data else None

    def events(self, run_id, last=None, stop=None):
        """The run's events (dicts: id, event, data) until the stream ends or stop(event)."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=GUARD)
        h = {"Authorization": "Bearer " + self.token} if self.token else {}
        if last is not None:
            h["Last-Event-ID"] = str(last)
        conn.request("GET", "/v1/runs/%s/events" % run_id, headers=h)
        r = conn.getresponse()
        assert r.status == 200, (r.status, r.read())
        assert r.getheader("Content-Type") == "text/event-stream"
        out, cur = [], {}
        while True:
            line = r.fp.readline()
            if not line:
                break
            line = line.decode().rstrip("\n")
            if line.startswith(":"):
                continue
            if line == "":
                if cur:
                    cur["id"] = int(cur["id"])
                    cur["data"] = json.loads(cur["data"])
                    out.append(cur)
                    cur = {}
                    if stop and stop(out[-1]):
                        break
                continue
            key, _, value = line.partition(": ")
            cur[key] = value
        conn.close()
        return out

    def start_run(self, body, headers=None):
        status, h, data = self.json("POST", "/v1/runs", body, headers)
        assert status == 201, (status, data)
        return data["run_id"]

    def wait_end(self, run_id):
        ev = self.events(run_id)
        assert ev and ev[-1]["event"] == "end", ev[-3:]
        return ev

    def stop(self):
        """SIGTERM; the exit code."""
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(GUARD)

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(GUARD)
        self.stderr.close()


def error_of(case, status, data, code=None):
    case.assertIn("error", data)
    e = data["error"]
    case.assertEqual(set(e), {"code", "message", "details"})
    case.assertTrue(e["message"])
    if code:
        case.assertEqual(e["code"], code)


class ServeApi(unittest.TestCase):
    """One server with the example study and a study that cannot start."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="mira-serve-results-")
        cls.results = os.path.join(cls.tmp, "results")
        cls.server = Server(cls.results, ["demo=" + STUDY, "broken=/bin/false"])

    @classmethod
    def tearDownClass(cls):
        cls.server.close()

    def test_health_version_openapi_studies(self):
        s = self.server
        status, _, data = s.json("GET", "/healthz")
        self.assertEqual((status, data["status"]), (200, "ok"))
        status, _, data = s.json("GET", "/v1/version")
        self.assertEqual(status, 200)
        self.assertEqual(set(data), {"host", "version", "protocol_version", "api_version"})
        status, _, doc = s.json("GET", "/v1/openapi.json")
        self.assertEqual(status, 200)
        for path in ["/healthz", "/v1/version", "/v1/openapi.json", "/v1/studies",
                     "/v1/studies/{name}/catalog", "/v1/runs", "/v1/runs/{id}",
                     "/v1/runs/{id}/cases", "/v1/runs/{id}/report", "/v1/runs/{id}/cancel",
                     "/v1/runs/{id}/resume", "/v1/runs/{id}/events", "/v1/runs/{id}/cases/{key}",
                     "/runs/{id}/cases/{key}", "/"]:
            self.assertIn(path, doc["paths"])
        status, _, data = s.json("GET", "/v1/studies")
        self.assertEqual([x["name"] for x in data["studies"]], ["demo", "broken"])
        self.assertNotIn(STUDY, json.dumps(data))  # commands stay on the server

    def test_catalog(self):
        status, _, data = self.server.json("GET", "/v1/studies/demo/catalog")
        self.assertEqual(status, 200)
        self.assertIn("arithmetic", [e["name"] for e in data["listing"]["evals"]])
        status, _, data = self.server.json("GET", "/v1/studies/nope/catalog")
        self.assertEqual(status, 404)
        error_of(self, status, data, "study_not_found")
        status, h, data = self.server.json("GET", "/v1/studies/broken/catalog")
        self.assertEqual(status, 503)
        error_of(self, status, data, "study_unavailable")
        self.assertIn("retry-after", h)

    def test_a_refused_selection_names_its_field(self):
        # The plan's words, not the command line's, and the member as data.
        s = self.server
        for selection, field, says in [
                ({"evals": ["nomatch*"]}, "evals", 'evals: "nomatch*" matches no eval'),
                ({"targets": ["nobody"]}, "targets", 'targets: "nobody" matches no target'),
                ({"tags": ["never"]}, "tags", "tags: no sample"),
                ({"axes": {"no_such_axis": ["x"]}}, "axes", 'axes: unknown axis "no_such_axis"')]:
            status, _, data = s.json("POST", "/v1/runs", {"study": "demo", "selection": selection})
            self.assertEqual(status, 422, data)
            error_of(self, status, data, "invalid_selection")
            e = data["error"]
            self.assertEqual(e["details"], {"member": "selection", "field": field})
            self.assertTrue(e["message"].startswith(says), e["message"])
            self.assertNotIn("--", e["message"])

    def test_bad_requests_have_their_statuses_and_one_error_shape(self):
        s = self.server
        cases = [
            ("POST", "/v1/runs", '{"study":"demo"}', {"Content-Type": "text/plain"}, 415),
            ("POST", "/v1/runs", '{"study":', {"Content-Type": "application/json"}, 400),
            ("POST", "/v1/runs", {"study": "demo", "command": "sh"}, None, 422),
            ("POST", "/v1/runs", {"study": "not-listed"}, None, 422),
            ("POST", "/v1/runs", {"study": "demo", "selection": {"evals": ["nomatch*"]}}, None,
             422),
            ("POST", "/v1/runs", {"study": "broken"}, None, 503),
            ("DELETE", "/v1/runs", None, None, 405),
            ("GET", "/v1/nothing", None, None, 404),
            ("GET", "/v1/runs/20990101T000000Z-0000", None, None, 404),
            ("GET", "/v1/runs/x..y", None, None, 400),
            ("GET", "/v1/runs/%2e%2e", None, None, 400),
            ("GET", "/v1/runs?limit=0", None, None, 400),
            ("GET", "/v1/runs?cursor=../x", None, None, 400),
            ("POST", "/v1/runs/20990101T000000Z-0000/cancel", None, None, 404),
            ("POST", "/v1/runs/20990101T000000Z-0000/resume", None, None, 404),
        ]
        for method, path, body, headers, want in cases:
            status, h, data = s.json(method, path, body, headers)
            self.assertEqual(status, want, (method, path, data))
            error_of(self, status, data)
            if want == 503:
                self.assertIn("retry-after", h)
        # The refused runs (a selection matching nothing, a study that cannot start) hold no
        # place: none counts as active.
        status, _, data = s.json("GET", "/healthz")
        self.assertEqual((status, data["runs_active"]), (200, 0))
        # 413: one byte over 1 MiB, refused from its Content-Length before it is read.
        big = '{"study":"demo","selection":{"filter":"' + "x" * (1 << 20) + '"}}'
        status, h, data = s.json("POST", "/v1/runs", big, {"Content-Type": "application/json"})
        self.assertEqual(status, 413)
        error_of(self, status, data, "body_too_large")

    def test_a_run_end_to_end(self):
        s = self.server
        run = s.start_run({"study": "demo", "selection": {"evals": ["arithmetic", "outage"]},
                           "options": {"concurrency": 4}})
        ev = s.wait_end(run)
        self.assertEqual([e["id"] for e in ev], list(range(1, len(ev) + 1)))
        self.assertEqual(ev[0]["event"], "start")
        cases = [e for e in ev if e["event"] == "case"]
        self.assertEqual(len(cases), 26)
        self.assertEqual(ev[-1]["data"]["state"], "done")

        status, _, data = s.json("GET", "/v1/runs/" + run)
        self.assertEqual(status, 200)
        self.assertEqual((data["state"], data["total"], data["done"]), ("done", 26, 26))
        self.assertEqual(data["counts"]["passed"], 25)
        self.assertEqual(data["counts"]["na"], 1)
        self.assertIn("summary", data)

        status, h, body = s.request("GET", "/v1/runs/%s/cases?format=ndjson" % run)
        self.assertEqual((status, h["content-type"]), (200, "application/x-ndjson"))
        lines = [json.loads(l) for l in body.decode().splitlines()]
        self.assertEqual(len(lines), 26)
        status, _, body = s.request("GET", "/v1/runs/%s/cases?state=na,failed" % run,
                                    headers={"Accept": "application/x-ndjson"})
        self.assertEqual([json.loads(l)["status"] for l in body.decode().splitlines()], ["na"])
        status, _, data = s.json("GET", "/v1/runs/%s/cases?format=ndjson&state=bogus" % run)
        self.assertEqual(status, 400)
        error_of(self, status, data, "invalid_parameter")

        # Pages: every case once, in key order, 7 at a time, each cursor leading on.
        keys, cursor, pages = [], None, 0
        while True:
            q = "limit=7" + ("&cursor=" + urllib.parse.quote(cursor, safe="") if cursor else "")
            status, _, page = s.json("GET", "/v1/runs/%s/cases?%s" % (run, q))
            self.assertEqual(status, 200, page)
            self.assertEqual(page["matched"], 26)
            keys += [c["key"] for c in page["cases"]]
            pages += 1
            cursor = page["next_cursor"]
            if not cursor:
                break
        self.assertEqual((pages, len(keys), len(set(keys))), (4, 26, 26))
        self.assertEqual(sorted(keys), sorted(l["key"] for l in lines))
        status, _, page = s.json("GET", "/v1/runs/%s/cases?status=na&sort=-latency" % run)
        self.assertEqual([c["status"] for c in page["cases"]], ["na"])
        self.assertEqual((page["matched"], page["next_cursor"]), (1, None))
        for bad in ["status=bogus", "limit=0", "limit=501", "sort=size", "trial=x", "state=na",
                    "cursor=key", "cursor=latency%3A1%3Ax", "nosuch=1"]:
            status, _, data = s.json("GET", "/v1/runs/%s/cases?%s" % (run, bad))
            self.assertEqual(status, 400, bad)
            error_of(self, status, data, "invalid_parameter")

        # One case whole, its key URL-encoded (slash and all) or with its slash as is.
        key = page["cases"][0]["key"]
        for path in [urllib.parse.quote(key, safe=""), urllib.parse.quote(key, safe="/")]:
            status, _, one = s.json("GET", "/v1/runs/%s/cases/%s" % (run, path))
            self.assertEqual(status, 200, one)
            self.assertEqual((one["key"], one["record"]["key"]), (key, key))
            self.assertTrue(all(e["key"] == key for e in one["events"]))
        status, _, data = s.json("GET", "/v1/runs/%s/cases/no%%2Fsuch%%40case" % run)
        error_of(self, status, data, "case_not_found")
        self.assertEqual(status, 404)

        types = {"json": "application/json", "jsonl": "application/x-ndjson",
                 "csv": "text/csv", "junit": "application/xml", "md": "text/markdown",
                 "html": "text/html"}
        for fmt, ctype in types.items():
            status, h, body = s.request("GET", "/v1/runs/%s/report?format=%s" % (run, fmt))
            self.assertEqual(status, 200, fmt)
            self.assertTrue(h["content-type"].startswith(ctype), h["content-type"])
            self.assertTrue(body)
            if fmt == "html":  # its own policy is a <meta>, which cannot forbid framing
                self.assertIn("frame-ancestors 'none'", h["content-security-policy"])
                self.assertEqual(h["x-frame-options"], "DENY")
        self.assertEqual(json.loads(s.request("GET", "/v1/runs/%s/report" % run)[2])
                         ["summary"]["counts"]["passed"], 25)
        status, _, data = s.json("GET", "/v1/runs/%s/report?format=pdf" % run)
        self.assertEqual(status, 400)

        # Saved exactly as `mira run` saves: `mira report` reads it.
        rep = subprocess.run([MIRA, "report", run, "--results-dir", self.results,
                              "--format", "json"], capture_output=True, text=True, timeout=GUARD)
        self.assertEqual(rep.returncode, 0, rep.stderr)
        self.assertEqual(json.loads(rep.stdout)["summary"]["counts"]["passed"], 25)

        # A finished run cannot be cancelled.
        status, _, data = s.json("POST", "/v1/runs/%s/cancel" % run)
        self.assertEqual(status, 409)
        error_of(self, status, data, "run_not_active")

        # Last-Event-ID: the stream goes on after the id given, with nothing missed.
        first = ev[:5]
        rest = s.events(run, last=first[-1]["id"])
        self.assertEqual([e["id"] for e in first + rest], [e["id"] for e in ev])
        self.assertEqual(s.events(run, last=len(ev)), [])
        status, _, data = s.json("GET", "/v1/runs/%s/events" % run,
                                 headers={"Last-Event-ID": "x"})
        self.assertEqual(status, 400)

    def test_a_pool_of_study_processes(self):
        s = self.server
        run = s.start_run({"study": "demo", "selection": {"evals": ["arithmetic"]},
                           "options": {"procs": 2, "concurrency": 4}})
        ev = s.wait_end(run)
        self.assertEqual(ev[-1]["data"]["state"], "done")
        self.assertEqual(ev[-1]["data"]["counts"]["passed"], 25)

    def test_idempotency_key(self):
        s = self.server
        body = {"study": "demo", "selection": {"evals": ["greet"]}}
        key = {"Idempotency-Key": "client-7:req-1"}
        first = s.start_run(body, key)
        status, h, data = s.json("POST", "/v1/runs", body, key)
        self.assertEqual((status, data["run_id"]), (201, first))
        self.assertEqual(h.get("idempotent-replayed"), "true")
        other = {"study": "demo", "selection": {"evals": ["coin"]}}
        status, _, data = s.json("POST", "/v1/runs", other, key)
        self.assertEqual(status, 409)
        error_of(self, status, data, "idempotency_conflict")
        status, _, data = s.json("POST", "/v1/runs", body, {"Idempotency-Key": "bad key"})
        self.assertEqual(status, 400)
        s.wait_end(first)

    def test_runs_are_listed_newest_first_in_pages(self):
        s = self.server
        for evals in (["greet"], ["coin"]):
            s.wait_end(s.start_run({"study": "demo", "selection": {"evals": evals}}))
        status, _, everything = s.json("GET", "/v1/runs?limit=200")
        ids = [r["run_id"] for r in everything["runs"]]
        self.assertGreaterEqual(len(ids), 2)
        self.assertEqual(ids, sorted(ids, reverse=True))
        seen, cursor = [], None
        while True:
            path = "/v1/runs?limit=1" + ("&cursor=" + cursor if cursor else "")
            status, _, page = s.json("GET", path)
            self.assertEqual(status, 200)
            seen += [r["run_id"] for r in page["runs"]]
            cursor = page["next_cursor"]
            if not cursor:
                break
        self.assertEqual(seen, ids)

    def test_dashboard_pages_carry_the_policy(self):
        s = self.server
        status, h, body = s.request("GET", "/")
        self.assertEqual(status, 200)
        self.assertIn("script-src 'self'", h["content-security-policy"])
        self.assertNotIn(b"<script>", body)
        status, h, body = s.request("GET", "/runs/x..y")
        self.assertEqual(status, 400)
        status, h, body = s.request("GET", "/dashboard.js")
        self.assertEqual((status, h["content-type"]), (200, "text/javascript; charset=utf-8"))


class ServeAuth(unittest.TestCase):
    def test_a_token_guards_the_api(self):
        tmp = tempfile.mkdtemp(prefix="mira-serve-auth-")
        s = Server(os.path.join(tmp, "results"), ["demo=" + STUDY], token=TOKEN)
        try:
            self.assertEqual(s.request("GET", "/healthz", auth=False)[0], 200)
            status, h, data = s.json("GET", "/v1/version", auth=False)
            self.assertEqual(status, 401)
            self.assertEqual(h["www-authenticate"], "Bearer")
            error_of(self, status, data, "unauthorized")
            status, _, _ = s.json("GET", "/v1/runs", headers={"Authorization": "Bearer nope"})
            self.assertEqual(status, 401)
            status, _, _ = s.json("GET", "/v1/runs",
                                  headers={"Authorization": "Bearer " + TOKEN + "x"})
            self.assertEqual(status, 401)
            self.assertEqual(s.json("GET", "/v1/runs")[0], 200)
        finally:
            s.close()

    def test_a_non_loopback_address_needs_a_token(self):
        r = subprocess.run([MIRA, "serve", "--listen", "0.0.0.0:0", "--study", "demo=" + STUDY],
                           capture_output=True, text=True, timeout=GUARD)
        self.assertEqual(r.returncode, 2)
        self.assertIn("needs a token", r.stderr)


class ServeHostileClients(unittest.TestCase):
    def test_allow_host_names_a_host_and_others_are_misdirected(self):
        tmp = tempfile.mkdtemp(prefix="mira-serve-host-")
        s = Server(os.path.join(tmp, "results"), ["demo=" + STUDY],
                   extra=["--allow-host", "mira.test"])
        try:
            for host, status in (("mira.test:%d" % s.port, 200), ("localhost", 200),
                                 ("rebound.example:%d" % s.port, 421)):
                got, _, data = s.json("GET", "/v1/version", headers={"Host": host})
                self.assertEqual(got, status, host)
            error_of(self, 421, data, "misdirected_request")
            self.assertEqual(data["error"]["details"]["host"], "rebound.example:%d" % s.port)
        finally:
            s.close()

    def test_sigterm_with_a_client_in_the_middle_of_a_body_exits_at_once(self):
        tmp = tempfile.mkdtemp(prefix="mira-serve-slow-")
        s = Server(os.path.join(tmp, "results"), ["demo=" + STUDY])
        try:
            slow = socket.create_connection(("127.0.0.1", s.port), timeout=GUARD)
            slow.sendall(b"POST /v1/runs HTTP/1.1\r\nHost: localhost\r\n"
                         b"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n"
                         + b" " * 50)
            # A round trip on another connection: the server has read the slow one's bytes.
            self.assertEqual(s.request("GET", "/healthz")[0], 200)
            t0 = time.monotonic()
            self.assertEqual(s.stop(), 0)
            self.assertLess(time.monotonic() - t0, 10)  # the idle timeout (60 s) before
            slow.close()
        finally:
            s.close()


class ServeMiraToml(unittest.TestCase):
    def test_mira_toml_launchers_are_on_the_allow_list(self):
        tmp = tempfile.mkdtemp(prefix="mira-serve-toml-")
        with open(os.path.join(tmp, "mira.toml"), "w") as f:
            f.write('[results]\ndir = "saved"\n[launchers.example]\ncmd = "%s"\n' % STUDY)
        cwd = os.getcwd()
        os.chdir(tmp)  # mira serve reads the nearest mira.toml from its working directory
        try:
            s = Server(None, [])
        finally:
            os.chdir(cwd)
        try:
            status, _, data = s.json("GET", "/v1/studies")
            self.assertEqual([x["name"] for x in data["studies"]], ["example"])
            run = s.start_run({"study": "example", "selection": {"evals": ["greet"]}})
            self.assertEqual(s.wait_end(run)[-1]["data"]["state"], "done")
            self.assertTrue(os.path.exists(os.path.join(tmp, "saved", run, "meta.json")))
        finally:
            s.close()


@unittest.skipUnless(FAULT_FS, "MIRA_FAULT_FS (test/faults/fault_fs.c) is not set")
class ServeStoreFaults(unittest.TestCase):
    """A run whose files cannot be written ends stopped, saying which file, as `mira run` does."""

    def run_under(self, path, op, after=0):
        results = os.path.join(tempfile.mkdtemp(prefix="mira-serve-faults-"), "results")
        s = Server(results, ["demo=" + STUDY],
                   env={"LD_PRELOAD": FAULT_FS, "MIRA_FAULT_PATH": path, "MIRA_FAULT_OP": op,
                        "MIRA_FAULT_AFTER": str(after), "MIRA_FAULT_ERRNO": "ENOSPC",
                        # Under AddressSanitizer the shim comes before its runtime: allowed, as
                        # nothing of it is instrumented.
                        "ASAN_OPTIONS": ":".join(filter(None, [os.environ.get("ASAN_OPTIONS"),
                                                                "verify_asan_link_order=0"]))})
        self.addCleanup(s.close)
        run = s.start_run({"study": "demo"})
        end = s.wait_end(run)[-1]["data"]
        status, _, data = s.json("GET", "/v1/runs/" + run)
        self.assertEqual(status, 200)
        return end, data

    def test_a_finish_that_cannot_write_its_report_is_a_stopped_run_naming_the_file(self):
        end, data = self.run_under("report.json", "create")
        self.assertEqual((end["state"], data["state"]), ("stopped", "stopped"))
        self.assertEqual(data["done"], EXAMPLE_CASES)  # every case was saved
        self.assertIn("report.json", data["stop_message"])
        self.assertIn("No space left on device", data["stop_message"])

    def test_a_slow_disk_slows_the_run_not_the_server(self):
        # Every flush to the results folder takes a second: a write on the server's thread would
        # hold the /healthz asked meanwhile that long. Sessions save from their own thread.
        results = os.path.join(tempfile.mkdtemp(prefix="mira-serve-slow-"), "results")
        s = Server(results, ["demo=" + STUDY],
                   env={"LD_PRELOAD": FAULT_FS, "MIRA_FAULT_PATH": results,
                        "MIRA_FAULT_OP": "fsync,fdatasync,syncfs", "MIRA_FAULT_DELAY_MS": "1000",
                        "ASAN_OPTIONS": ":".join(filter(None, [os.environ.get("ASAN_OPTIONS"),
                                                                "verify_asan_link_order=0"]))})
        self.addCleanup(s.close)
        run = s.start_run({"study": "demo"})
        slowest, asked = 0.0, 0
        while True:
            t0 = time.monotonic()
            status, _, data = s.json("GET", "/v1/runs/" + run)
            slowest = max(slowest, time.monotonic() - t0)
            asked += 1
            self.assertEqual(status, 200)
            if data["state"] != "running":
                break
            t0 = time.monotonic()
            status, _, _ = s.request("GET", "/healthz")
            slowest = max(slowest, time.monotonic() - t0)
            self.assertEqual(status, 200)
        self.assertEqual(data["state"], "done", data)
        self.assertGreater(asked, 3)  # the run was slow: the server was asked while it saved
        self.assertLess(slowest, 0.5)

    def test_a_result_that_cannot_be_saved_stops_the_run_naming_the_file(self):
        end, data = self.run_under("/cases/", "create", after=2)
        self.assertEqual(data["state"], "stopped")
        self.assertIn("result.json", data["stop_message"])
        self.assertIn("No space left on device", data["stop_message"])


class ServeLifecycle(unittest.TestCase):
    """Runs that are cancelled, refused for lack of room, interrupted by SIGTERM and resumed
    after a restart. The first server's `slow` case sleeps until cancelled; the restarted one
    (the same study name) is quick, so the resumed runs end."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="mira-serve-life-")
        self.results = os.path.join(self.tmp, "results")
        self.servers = []

    def tearDown(self):
        for s in self.servers:
            s.close()

    def serve(self, slow_ms, **kw):
        s = Server(self.results, ["demo=%s --slow-ms %d" % (STUDY, slow_ms)], **kw)
        self.servers.append(s)
        return s

    def going(self, s):
        """A run whose slow case is in flight, and its events up to the last other case."""
        run = s.start_run({"study": "demo"})
        ev = s.events(run, stop=lambda e: e["event"] == "case" and e["data"]["done"] == 40)
        return run, ev

    def test_cancel_then_resume_after_a_restart(self):
        s = self.serve(600000, max_runs=1)
        run, ev = self.going(s)
        # The run limit: one more is 429 with Retry-After; resuming a live run is 409.
        status, h, data = s.json("POST", "/v1/runs", {"study": "demo"})
        self.assertEqual(status, 429)
        error_of(self, status, data, "too_many_runs")
        self.assertIn("retry-after", h)
        status, _, data = s.json("POST", "/v1/runs/%s/resume" % run)
        self.assertEqual(status, 409)
        error_of(self, status, data, "run_active")
        status, _, data = s.json("POST", "/v1/runs/%s/cancel" % run)
        self.assertEqual((status, data["state"]), (202, "cancelling"))
        rest = s.events(run, last=ev[-1]["id"])  # resumed mid-run: nothing missed
        self.assertEqual([e["id"] for e in ev + rest], list(range(1, len(ev) + len(rest) + 1)))
        self.assertEqual(rest[-1]["data"]["state"], "cancelled")
        status, _, data = s.json("GET", "/v1/runs/" + run)
        self.assertEqual((data["state"], data["resumable"]), ("cancelled", True))
        self.assertEqual(data["counts"]["cancelled"], 1)
        self.assertEqual(s.stop(), 0)

        s2 = self.serve(10)
        status, _, data = s2.json("GET", "/v1/runs/" + run)
        self.assertEqual((data["live"], data["state"], data["resumable"]),
                         (False, "cancelled", True))
        status, _, data = s2.json("POST", "/v1/runs/%s/resume" % run, "",
                                  {"Content-Type": "application/json"})
        self.assertEqual((status, data["run_id"]), (202, run))
        ev2 = s2.wait_end(run)
        self.assertEqual(ev2[0]["data"]["reused"], 40)
        self.assertEqual(ev2[-1]["data"]["state"], "done")
        self.assertEqual(ev2[-1]["data"]["counts"]["cancelled"], 0)
        rep = subprocess.run([MIRA, "report", run, "--results-dir", self.results, "--format",
                              "json"], capture_output=True, text=True, timeout=GUARD)
        self.assertEqual(json.loads(rep.stdout)["summary"]["counts"]["passed"], 37)

    def test_sigterm_saves_and_marks_runs_interrupted_and_a_restart_resumes_them(self):
        s = self.serve(600000)
        run, _ = self.going(s)
        self.assertEqual(s.stop(), 0)
        with open(os.path.join(self.results, run, "meta.json")) as f:
            meta = json.load(f)
        self.assertEqual(meta["sessions"][-1]["stopped"], "interrupted")
        self.assertTrue(meta["sessions"][-1]["finished"])

        s2 = self.serve(10)
        status, _, page = s2.json("GET", "/v1/runs")
        listed = {r["run_id"]: r for r in page["runs"]}
        self.assertEqual((listed[run]["state"], listed[run]["resumable"]), ("interrupted", True))
        status, _, data = s2.json("POST", "/v1/runs/%s/resume" % run)
        self.assertEqual(status, 202)
        ev = s2.wait_end(run)
        self.assertEqual(ev[0]["data"]["reused"], 40)
        self.assertEqual(ev[-1]["data"]["state"], "done")
        status, _, data = s2.json("GET", "/v1/runs/" + run)
        self.assertEqual(data["counts"]["passed"], 37)


# Resolves with the page's DOM once `cond` holds: the page is watched, not the clock.
WAIT_FOR = """new Promise((resolve) => {
  const ready = () => document.body && document.getElementById("count-passed");
  const check = () => ready() && (%s) ? resolve(document.documentElement.outerHTML) : setTimeout(check, 20);
  check();
})"""


class ServeDashboard(unittest.TestCase):
    """Headless Chromium opens a run's page while the run goes; the same page, fed by the event
    stream, shows the final counts when the run has ended; --dump-dom of the page after the
    end shows them too."""

    def test_the_live_page_shows_the_final_counts(self):
        tmp = tempfile.mkdtemp(prefix="mira-serve-dash-")
        s = Server(os.path.join(tmp, "results"), ["demo=%s --slow-ms 600000" % STUDY])
        browser = None
        try:
            run = s.start_run({"study": "demo"})
            s.events(run, stop=lambda e: e["event"] == "case" and e["data"]["done"] == 40)
            url = "http://127.0.0.1:%d/runs/%s" % (s.port, run)
            browser, pages = open_chromium(CHROMIUM, os.path.join(tmp, "profile"), url,
                                           timeout=GUARD)
            pages = [t for t in pages if t["url"] == url]
            page = Cdp(pages[0]["webSocketDebuggerUrl"])

            live = page.evaluate(WAIT_FOR % "document.body.dataset.state === 'running' && "
                                 "document.getElementById('count-passed').textContent === '36'")
            self.assertIn('id="count-na">1<', live)
            self.assertIn('id="count-cancelled">0<', live)
            s.json("POST", "/v1/runs/%s/cancel" % run)
            final = page.evaluate(WAIT_FOR % "document.body.dataset.state && "
                                  "document.body.dataset.state !== 'running'")
            # A fresh page replays the run's events; --dump-dom may catch it partway through
            # the replay (its virtual time runs ahead of the stream), so it is loaded again
            # until the replay has reached the end, a bounded number of times.
            for _ in range(5):
                fresh = self.dump_dom(url)
                if 'data-state="cancelled"' in fresh:
                    break
            for html in (final, fresh):
                self.assertIn('data-state="cancelled"', html)
                self.assertIn('id="count-passed">36<', html)
                self.assertIn('id="count-na">1<', html)
                self.assertIn('id="count-skipped">3<', html)
                self.assertIn('id="count-cancelled">1<', html)
                # Its own, from /dashboard.js and /viewer.js: none inline.
                self.assertEqual(html.count("<script"), 2)
                self.assertEqual(html.count("<script src="), 2)
            runs_dom = self.dump_dom("http://127.0.0.1:%d/" % s.port)
            self.assertIn(">%s</a>" % run, runs_dom)
        finally:
            if browser:
                browser.kill()
                browser.wait(GUARD)
                browser.stderr.close()
            s.close()

    def dump_dom(self, url):
        return subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
                               "--virtual-time-budget=10000", "--dump-dom", url],
                              capture_output=True, text=True, timeout=GUARD).stdout


if __name__ == "__main__":
    unittest.main(verbosity=2)
