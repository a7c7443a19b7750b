#!/usr/bin/env python3
"""Figures for `mira serve` against hostile and heavy clients (issue #36): prints, for the
`mira` binary given, whether 33 non-reading clients lock a newcomer out, the slowest /healthz
while a run starts `procs` study processes, the server's resident memory with N non-reading
clients, and how long SIGTERM takes with them, and how long GET /v1/runs takes while 16 abandoned
report requests of a saved run of --saved cases (run first with `STUDY --samples N`, as
benchmarks/echo_study takes it) are read, then the server's memory with --clients readers of
that report that read nothing. No pass/fail: numbers to compare.

usage: serve_hostile.py MIRA STUDY [--procs 64] [--clients 40] [--saved 200000]
"""
import argparse, os, signal, socket, subprocess, sys, tempfile, time, http.client, json


def start(mira, study, results, extra=()):
    p = subprocess.Popen([mira, "serve", "--study", "demo=" + study, "--listen", "127.0.0.1:0",
                          "--results-dir", results, *extra],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = p.stdout.readline()
    port = int(line.strip().rstrip("/").rsplit(":", 1)[1])
    return p, port


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for l in f:
            if l.startswith("VmRSS:"):
                return int(l.split()[1]) / 1024


def unread(port, n):
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.setblocking(False)
    req = b"GET /dashboard.js HTTP/1.1\r\nHost: localhost\r\n\r\n" * n
    try:
        s.send(req)
    except BlockingIOError:
        pass
    return s


def healthz(port, timeout=60):
    t0 = time.monotonic()
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request("GET", "/healthz")
        status = c.getresponse().status
    except Exception as e:  # refused or reset
        status = type(e).__name__
    return status, time.monotonic() - t0


def main():
    a = argparse.ArgumentParser()
    a.add_argument("mira"); a.add_argument("study")
    a.add_argument("--procs", type=int, default=64)
    a.add_argument("--clients", type=int, default=40)
    a.add_argument("--saved", type=int, default=0)
    o = a.parse_args()
    with tempfile.TemporaryDirectory() as results:
        p, port = start(o.mira, o.study, results)
        base = rss_mib(p.pid)
        held = [unread(port, 3000) for _ in range(33)]
        time.sleep(1)
        status, took = healthz(port)
        print(f"lock-out: 33 non-reading clients, then /healthz: {status} in {took:.3f} s")
        held += [unread(port, 3000) for _ in range(o.clients)]
        time.sleep(2)
        print(f"rss: {base:.1f} MiB idle, {rss_mib(p.pid):.1f} MiB with {len(held)} non-reading clients")
        t0 = time.monotonic()
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=120)
        print(f"SIGTERM with them: exited in {time.monotonic() - t0:.2f} s")
        for s in held:
            s.close()
        extra = ["--max-procs", str(o.procs)] if "--max-procs" in subprocess.run(
            [o.mira, "serve", "--help"], capture_output=True, text=True).stdout else []
        p, port = start(o.mira, o.study, results, extra)
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        body = json.dumps({"study": "demo", "options": {"procs": o.procs}})
        c.request("POST", "/v1/runs", body, {"Content-Type": "application/json"})
        sock = c.sock
        worst = 0.0
        asked = 0
        while True:
            _, took = healthz(port)
            worst = max(worst, took); asked += 1
            import select
            if select.select([sock], [], [], 0)[0]:
                break
        r = c.getresponse()
        print(f"POST with procs {o.procs}: {r.status}; slowest of {asked} /healthz: {worst:.3f} s")
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=120)
        if o.saved:
            abandoned_reports(o, results)


def abandoned_reports(o, results):
    subprocess.run([o.mira, "run", "--store", "compact", "--results-dir", results, "--format",
                    "json", "--", o.study, "--samples", str(o.saved)],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    run_id = sorted(d for d in os.listdir(results) if not d.startswith("."))[-1]
    p, port = start(o.mira, o.study, results)
    for _ in range(16):
        s = socket.create_connection(("127.0.0.1", port))
        s.send(f"GET /v1/runs/{run_id}/report?format=html HTTP/1.1\r\nHost: localhost\r\n\r\n"
               .encode())
        s.close()
    time.sleep(0.5)  # they are taken in before the list is asked for
    t0 = time.monotonic()
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    c.request("GET", "/v1/runs?limit=200")
    r = c.getresponse()
    r.read()
    status = r.status
    print(f"GET /v1/runs behind 16 abandoned reports of a {o.saved}-case run: {status} in "
          f"{time.monotonic() - t0:.3f} s")
    t0 = time.monotonic()
    c.request("GET", f"/v1/runs/{run_id}/report?format=html")
    r = c.getresponse()
    size = len(r.read())
    print(f"then one report (html, {size} bytes): {r.status} in {time.monotonic() - t0:.3f} s")
    # Readers that ask for the report and read nothing: each answer waits in the server for
    # write_timeout (10 s); what they cost is the server's memory meanwhile.
    base = rss_mib(p.pid)
    readers = []
    for _ in range(o.clients):
        s = socket.create_connection(("127.0.0.1", port))
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.send(f"GET /v1/runs/{run_id}/report?format=html HTTP/1.1\r\nHost: localhost\r\n\r\n"
               .encode())
        readers.append(s)
    time.sleep(8)  # every report rendered (one at a time per worker), none fully written
    print(f"rss: {base:.1f} MiB, {rss_mib(p.pid):.1f} MiB with {o.clients} clients not reading "
          f"the {size}-byte report")
    for s in readers:
        s.close()
    p.send_signal(signal.SIGTERM)
    p.wait(timeout=120)


if __name__ == "__main__":
    main()
