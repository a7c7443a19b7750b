#!/usr/bin/env python3
"""Reading a big saved run back, beside the goals of issue #38 (item 4).

For each size N: two compact runs of the echo study (N samples, -j 64), then, measured on the
first: `mira report ID` (the table), `mira report ID --format json --out F`, `mira compare A B`,
and through `mira view`'s API one case by key (the first request, which opens the run, then the
median of the other --cases - 1, keys spread over the run) and the first page of
`?status=failed`. Prints each figure, its ratio to the run's own wall
time where the goal is a ratio, the goal, and the peak memory (max RSS) of each process.

  read_back.py MIRA ECHO_STUDY [--sizes 100000,1000000] [--cases 6] [--dir DIR]

DIR (default: a temporary folder under /tmp) must be on the disk to measure; it is removed.
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


def measure(mira, study, n, cases, where):
    results = os.path.join(where, "results-%d" % n)
    ids = ["20261207T000000Z-aaaa", "20261207T000001Z-bbbb"]
    run_s, run_mb = [], []
    for rid in ids:
        w, mb = timed([mira, "run", "--store", "compact", "-j", "64", "--results-dir", results,
                       "--run-id", rid, "--", study, "--samples", str(n)])
        run_s.append(w)
        run_mb.append(mb)
    a = ids[0]
    rows = [("run (compact, -j 64)", run_s[0], None, None, run_mb[0])]
    w, mb = timed([mira, "report", a, "--results-dir", results])
    rows.append(("mira report ID (table)", w, w / run_s[0], "<= 0.2x", mb))
    out = os.path.join(where, "report-%d.json" % n)
    w, mb = timed([mira, "report", a, "--results-dir", results, "--format", "json", "--out", out])
    rows.append(("report --format json --out F", w, w / run_s[0], "<= 0.5x", mb))
    w, mb = timed([mira, "compare", a, ids[1], "--results-dir", results])
    rows.append(("compare A B", w, w / run_s[0], "<= 0.5x", mb))

    view = subprocess.Popen([mira, "view", "--results-dir", results], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    try:
        url = urllib.parse.urlparse(view.stdout.readline().strip())
        port, token = url.port, urllib.parse.parse_qs(url.query)["token"][0]
        keys = ["bench/s%d@sim" % (i * (n - 1) // max(1, cases - 1)) for i in range(cases)]
        times = [get(port, token, "/v1/runs/%s/cases/%s" % (a, urllib.parse.quote(k, safe="")))[0]
                 for k in keys]
        # The first request opens the run (its index); the server keeps it open for the rest.
        rows.append(("one case by key, API, first", times[0], None, "-", None))
        rows.append(("one case by key, API (median of %d more)" % (cases - 1),
                     statistics.median(times[1:]), None, "<= 0.050 s", None))
        w, page = get(port, token, "/v1/runs/%s/cases?status=failed&limit=50" % a)
        rows.append(("first page of ?status=failed", w, None, "<= 1 s", None))
        rows.append(("mira view, peak over the requests", None, None, "<= 300 MB",
                     vm_hwm_mb(view.pid)))
    finally:
        view.terminate()
        view.wait(60)
        view.stdout.close()
    print("\n%d cases (run %s; second run %.2f s)" % (n, a, run_s[1]))
    print("%-40s %10s %8s %12s %9s" % ("figure", "seconds", "x run", "goal", "max MB"))
    for name, s, ratio, goal, mb in rows:
        print("%-40s %10s %8s %12s %9s" % (
            name, "-" if s is None else "%.3f" % s, "-" if ratio is None else "%.2f" % ratio,
            goal or "-", "-" if mb is None else "%.0f" % mb))
    sys.stdout.flush()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("mira")
    p.add_argument("study")
    p.add_argument("--sizes", default="100000,1000000")
    p.add_argument("--cases", type=int, default=6)
    p.add_argument("--dir")
    a = p.parse_args()
    where = tempfile.mkdtemp(prefix="mira-read-back-", dir=a.dir)
    try:
        for n in [int(x) for x in a.sizes.split(",")]:
            measure(os.path.abspath(a.mira), os.path.abspath(a.study), n, a.cases, where)
    finally:
        shutil.rmtree(where)


if __name__ == "__main__":
    main()
