#!/usr/bin/env python3
"""`/healthz` of `mira serve` on a machine whose cores are all busy (issue #37): starts the
server (`--max-cases 200000`) with the example study twice on its allow-list (`demo`, and `slow`
started with `--slow-ms 3000`), keeps every core busy with CPU-bound processes, and asks
`/healthz` every 0.2 s on a new connection while, in turn:

  post     a POST /v1/runs of `arithmetic` x 4000 trials (100 000 cases), concurrency 16,
           until its 201
  run      that run, until it has ended
  report   GET /v1/runs/{id}/report?format=json of it, read slowly (--read-kib every
           --read-ms) to the end
  greet    a POST of `greet` x 10000 trials to `slow`, until its 201
  cancel   POST /v1/runs/{id}/cancel of that run, until it has ended

and prints, per phase: how many probes, the slowest, p99 and median answer, and how long the
phase took. No pass/fail: numbers to compare (the issue's bound is 0.25 s).

usage: serve_busy.py MIRA EXAMPLE_STUDY [--burners N] [--read-kib 64] [--read-ms 20]
"""
import argparse, json, os, socket, subprocess, sys, tempfile, threading, time, http.client


def start(mira, study, results):
    p = subprocess.Popen([mira, "serve", "--study", "demo=" + study,
                          "--study", "slow=" + study + " --slow-ms 3000",
                          "--listen", "127.0.0.1:0", "--results-dir", results,
                          "--max-cases", "200000"],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = p.stdout.readline()
    port = int(line.strip().rstrip("/").rsplit(":", 1)[1])
    return p, port


class Prober(threading.Thread):
    """Asks /healthz 0.2 s after the previous probe began (at once if it took longer) and
    files each answer's time under the phase going when it was asked."""

    def __init__(self, port):
        super().__init__(daemon=True)
        self.port, self.phase, self.times, self.failed = port, None, {}, {}
        self.done = threading.Event()

    def run(self):
        while not self.done.is_set():
            phase, t0 = self.phase, time.monotonic()
            try:
                c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
                c.request("GET", "/healthz")
                ok = c.getresponse().status == 200
                c.close()
            except OSError:
                ok = False
            took = time.monotonic() - t0
            if phase is not None:
                self.times.setdefault(phase, []).append(took)
                if not ok:
                    self.failed[phase] = self.failed.get(phase, 0) + 1
            self.done.wait(max(0.0, 0.2 - took))


def request(port, method, target, body=None, timeout=600):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    headers = {"Content-Type": "application/json"} if body is not None else {}
    c.request(method, target, None if body is None else json.dumps(body), headers)
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, json.loads(data) if data else None


def post_run(port, study, eval_name, trials, concurrency=None):
    body = {"study": study, "selection": {"evals": [eval_name], "trials": trials}}
    if concurrency:
        body["options"] = {"concurrency": concurrency}
    status, answer = request(port, "POST", "/v1/runs", body)
    if status != 201:
        sys.exit(f"POST /v1/runs ({study}, {eval_name}): {status} {answer}")
    return answer["run_id"]


def wait_ended(port, run_id):
    while True:
        _, st = request(port, "GET", f"/v1/runs/{run_id}")
        if st["state"] not in ("running", "cancelling"):
            return st
        time.sleep(0.5)


def cancel(port, run_id):
    request(port, "POST", f"/v1/runs/{run_id}/cancel", {})
    return wait_ended(port, run_id)


def slow_read(port, run_id, kib, ms):
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, kib * 1024)
    s.sendall(f"GET /v1/runs/{run_id}/report?format=json HTTP/1.1\r\nHost: localhost\r\n"
              "Connection: close\r\n\r\n".encode())
    total = 0
    while True:
        chunk = s.recv(kib * 1024)
        if not chunk:
            break
        total += len(chunk)
        time.sleep(ms / 1000)
    s.close()
    return total


def quantile(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def main():
    a = argparse.ArgumentParser()
    a.add_argument("mira"); a.add_argument("study")
    a.add_argument("--burners", type=int, default=os.cpu_count())
    a.add_argument("--read-kib", type=int, default=64)
    a.add_argument("--read-ms", type=int, default=20)
    o = a.parse_args()
    burners = [subprocess.Popen([sys.executable, "-c", "while 1: pass"])
               for _ in range(o.burners)]
    took, notes = {}, {}
    try:
        with tempfile.TemporaryDirectory() as results:
            p, port = start(o.mira, o.study, results)
            prober = Prober(port)
            prober.start()

            def phase(name, f):
                prober.phase, t0 = name, time.monotonic()
                out = f()
                took[name], prober.phase = time.monotonic() - t0, None
                return out

            run_id = phase("post", lambda: post_run(port, "demo", "arithmetic", 4000, 16))
            st = phase("run", lambda: wait_ended(port, run_id))
            notes["run"] = f"{st['state']}, {st.get('done')} cases"
            size = phase("report", lambda: slow_read(port, run_id, o.read_kib, o.read_ms))
            notes["report"] = f"{size} bytes"
            greet = phase("greet", lambda: post_run(port, "slow", "greet", 10000))
            st = phase("cancel", lambda: cancel(port, greet))
            notes["cancel"] = f"{st['state']}, {st.get('done')} of {st.get('total')} cases"
            prober.done.set()
            prober.join()
            p.terminate()
            p.wait(timeout=120)
    finally:
        for b in burners:
            b.kill()
            b.wait()
    print(f"/healthz every 0.2 s, {o.burners} CPU burners; seconds")
    print(f"{'phase':8} {'probes':>6} {'failed':>6} {'max':>7} {'p99':>7} {'median':>7} "
          f"{'phase s':>8}")
    for name in ("post", "run", "report", "greet", "cancel"):
        xs = prober.times.get(name, [])
        if not xs:
            print(f"{name:8} {0:6} {'-':>6} {'-':>7} {'-':>7} {'-':>7} {took[name]:8.2f}")
            continue
        print(f"{name:8} {len(xs):6} {prober.failed.get(name, 0):6} {max(xs):7.3f} "
              f"{quantile(xs, 0.99):7.3f} {quantile(xs, 0.5):7.3f} {took[name]:8.2f}"
              + (f"  ({notes[name]})" if name in notes else ""))


if __name__ == "__main__":
    main()
