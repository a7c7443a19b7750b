#!/usr/bin/env python3
"""Reading a big saved run back, beside the goals of issue #38 (item 4).

For each size N: two compact runs of the echo study (N samples, -j 64), then, measured on the
first: `mira report ID` (the table), `mira report ID --format json --out F`, `mira compare A B`
(the first read of a compact run makes case-index.bin from the journal its writer kept, so
`report` and `compare` are measured at that first read and again), and through `mira view`'s
API one case by key (the first request, which opens the run, then the median of the other
--cases - 1, keys spread over the run) and the first page of `?status=failed`; then, in a
`mira view` started for
it, the run page in headless Chromium: the time from the navigation's start (the printed URL,
its redirect included) until the page shows its first page of cases and its matrix (the page's
own clock, performance.now()). Prints each figure, its ratio to the run's own wall time where
the goal is a ratio, the goal, and the peak memory (max RSS) of each process. With --per-case N,
the same figures for two runs of N cases in the per-case layout (no goal: how slow the layout
without an index is).

  read_back.py MIRA ECHO_STUDY [--sizes 100000,1000000] [--per-case N] [--cases 6]
               [--chromium PATH] [--dir DIR]

DIR (default: a temporary folder under /tmp) must be on the disk to measure; it is removed.
Without Chromium (`chromium` on PATH, or --chromium) the page figure is left out, said so.
"""
import argparse
import http.client
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "test",
                                "integration"))
from cdp import Cdp, open_chromium  # noqa: E402 (the tests' DevTools client)

# Resolves with the page's clock once its first page of cases and its matrix are shown.
READY = """new Promise((resolve) => {
  const check = () => {
    const d = document.body && document.body.dataset;
    if (d && d.cases === "ready" && d.matrix === "ready") return resolve(performance.now());
    setTimeout(check, 5);
  };
  check();
})"""


def timed(argv, stdout=subprocess.DEVNULL):
    """Wall seconds and max RSS (MB) of one process."""
    t0 = time.monotonic()
    p = subprocess.Popen(argv, stdout=stdout, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(p.pid, 0)
    wall = time.monotonic() - t0
    err = p.stderr.read().decode(errors="replace")
    p.stderr.close()
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        sys.exit("%s: exit %d: %s" % (" ".join(argv[:3]), code, err[-500:]))
    return wall, usage.ru_maxrss / 1024


def get(port, token, path):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    t0 = time.monotonic()
    c.request("GET", path, headers={"Authorization": "Bearer " + token})
    r = c.getresponse()
    body = r.read()
    wall = time.monotonic() - t0
    c.close()
    if r.status != 200:
        sys.exit("GET %s: %d %s" % (path, r.status, body[:300]))
    return wall, json.loads(body)


def vm_hwm_mb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return 0.0


def start_view(mira, results):
    """A `mira view` of `results`: the process and the URL it printed."""
    view = subprocess.Popen([mira, "view", "--results-dir", results], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    return view, view.stdout.readline().strip()


def stop(proc):
    proc.terminate()
    proc.wait(60)
    proc.stdout.close()


def page_ready(mira, chromium, results, run_id, where):
    """Seconds from the navigation's start until a fresh `mira view`'s run page is ready, and
    that view's peak memory."""
    view, url = start_view(mira, results)
    browser, pages = open_chromium(chromium, os.path.join(where, "profile"), "about:blank")
    try:
        page = Cdp(pages[0]["webSocketDebuggerUrl"], timeout=600)
        page.evaluate("location.href = %s" % json.dumps(
            url.replace("/?token=", "/runs/%s?token=" % run_id)))
        # Until the evaluation runs in the run page (the first may run in the page it leaves).
        for _ in range(100):
            ms = page.evaluate(READY)
            if page.evaluate("location.pathname") == "/runs/" + run_id:
                return ms / 1000, vm_hwm_mb(view.pid)
        sys.exit("the run page never loaded")
    finally:
        browser.kill()
        browser.wait(60)
        browser.stderr.close()
        stop(view)
        shutil.rmtree(os.path.join(where, "profile"), ignore_errors=True)


def measure(mira, study, n, cases, where, chromium, layout="compact"):
    results = os.path.join(where, "results-%s-%d" % (layout, n))
    ids = ["20261207T000000Z-aaaa", "20261207T000001Z-bbbb"]
    run_s, run_mb = [], []
    for rid in ids:
        w, mb = timed([mira, "run", "--store", layout, "-j", "64", "--results-dir", results,
                       "--run-id", rid, "--", study, "--samples", str(n)])
        run_s.append(w)
        run_mb.append(mb)
    a = ids[0]
    # The goals are the compact layout's; the per-case layout is measured, not held to them.
    goal = (lambda g: g) if layout == "compact" else (lambda g: "-")
    rows = [("run (%s, -j 64)" % layout, run_s[0], None, None, run_mb[0])]
    # The first reader of a compact run makes its index (case-index.bin) from its writer's journal;
    # the readers after it take the index.
    w, mb = timed([mira, "report", a, "--results-dir", results])
    rows.append(("mira report ID (table), first read", w, w / run_s[0], goal("<= 0.2x"), mb))
    w, mb = timed([mira, "report", a, "--results-dir", results])
    rows.append(("mira report ID (table), again", w, w / run_s[0], goal("<= 0.2x"), mb))
    out = os.path.join(where, "report-%d.json" % n)
    w, mb = timed([mira, "report", a, "--results-dir", results, "--format", "json", "--out", out])
    os.remove(out)
    rows.append(("report --format json --out F", w, w / run_s[0], goal("<= 0.5x"), mb))
    w, mb = timed([mira, "compare", a, ids[1], "--results-dir", results])
    rows.append(("compare A B, B's first read", w, w / run_s[0], goal("<= 0.5x"), mb))
    w, mb = timed([mira, "compare", a, ids[1], "--results-dir", results])
    rows.append(("compare A B, again", w, w / run_s[0], goal("<= 0.5x"), mb))

    view, printed = start_view(mira, results)
    try:
        url = urllib.parse.urlparse(printed)
        port, token = url.port, urllib.parse.parse_qs(url.query)["token"][0]
        keys = ["bench/s%d@sim" % (i * (n - 1) // max(1, cases - 1)) for i in range(cases)]
        times = [get(port, token, "/v1/runs/%s/cases/%s" % (a, urllib.parse.quote(k, safe="")))[0]
                 for k in keys]
        # The first request opens the run (its index); the server keeps it open for the rest.
        rows.append(("one case by key, API, first", times[0], None, "-", None))
        rows.append(("one case by key, API (median of %d more)" % (cases - 1),
                     statistics.median(times[1:]), None, goal("<= 0.050 s"), None))
        w, page = get(port, token, "/v1/runs/%s/cases?status=failed&limit=50" % a)
        rows.append(("first page of ?status=failed", w, None, goal("<= 1 s"), None))
        rows.append(("mira view, peak over the requests", None, None, goal("<= 300 MB"),
                     vm_hwm_mb(view.pid)))
    finally:
        stop(view)
    if chromium:
        w, mb = page_ready(mira, chromium, results, a, where)
        rows.append(("run page ready, Chromium, fresh view", w, None, goal("<= 2 s"), mb))
    else:
        rows.append(("run page: no chromium, not measured", None, None, None, None))
    shutil.rmtree(results)
    print("\n%d cases, %s layout (run %s; second run %.2f s)" % (n, layout, a, run_s[1]))
    print("%-42s %10s %8s %12s %9s" % ("figure", "seconds", "x run", "goal", "max MB"))
    for name, s, ratio, g, mb in rows:
        print("%-42s %10s %8s %12s %9s" % (
            name, "-" if s is None else "%.3f" % s, "-" if ratio is None else "%.2f" % ratio,
            g or "-", "-" if mb is None else "%.0f" % mb))
    sys.stdout.flush()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("mira")
    p.add_argument("study")
    p.add_argument("--sizes", default="100000,1000000")
    p.add_argument("--per-case", type=int, default=0)
    p.add_argument("--cases", type=int, default=6)
    p.add_argument("--chromium", default=shutil.which("chromium"))
    p.add_argument("--dir")
    a = p.parse_args()
    where = tempfile.mkdtemp(prefix="mira-read-back-", dir=a.dir)
    mira, study = os.path.abspath(a.mira), os.path.abspath(a.study)
    try:
        for n in [int(x) for x in a.sizes.split(",")]:
            measure(mira, study, n, a.cases, where, a.chromium)
        if a.per_case:
            measure(mira, study, a.per_case, a.cases, where, a.chromium, "per-case")
    finally:
        shutil.rmtree(where)


if __name__ == "__main__":
    main()
