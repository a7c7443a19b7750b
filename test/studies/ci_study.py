#!/usr/bin/env python3
"""A study for the CI gates (stdlib only): what a suite wired into a pipeline meets. Each sample
says what it does by its first word:

  pass ...   passes              fail ...   fails its score
  error ...  the study answers with an error (the case errs)
  na ...     the provider is down: an infra error (N/A once retries run out)
  slow ...   works --slow-ms, honouring cancel, then passes

Eval "math" has pass 1..N, fail 1..F, one error and one na case (counts by the switches);
eval "names" has samples whose names are awkward in paths, XML, Markdown and shells. Every eval
has target "sim" and target "paid", which is unavailable (its cases are skipped).

  --pass N            pass samples of "math" (default 6)
  --fail N            fail samples (default 1)
  --errors N          error samples (default 1)
  --na N              na samples (default 1)
  --slow N            slow samples (default 0), each --slow-ms (default 20000)
  --all-unavailable   every target unavailable (a fork without the provider's secret)
  --all-na            every case is an infra error (a provider outage)
  --pass-only-names   the "names" eval passes every case (else as "math")
  --interrupt-host-after N  send SIGINT to the host when the N-th run arrives
"""
import argparse
import json
import os
import signal
import sys
import threading
import time

args = argparse.ArgumentParser()
args.add_argument("--pass", dest="passes", type=int, default=6)
args.add_argument("--fail", type=int, default=1)
args.add_argument("--errors", type=int, default=1)
args.add_argument("--na", type=int, default=1)
args.add_argument("--slow", type=int, default=0)
args.add_argument("--slow-ms", type=int, default=20000)
args.add_argument("--all-unavailable", action="store_true")
args.add_argument("--all-na", action="store_true")
args.add_argument("--interrupt-host-after", type=int, default=0)
opts = args.parse_args()

lock = threading.Lock()
runs = {}  # request id -> threading.Event (set: cancelled)
run_count = 0

NAMES = ["pass a b", "pass ü/é", "pass x<y>&z", "pass |pipe|", "pass 'quote\""]


def send(obj):
    with lock:
        sys.stdout.write(json.dumps(obj, separators=(",", ":")) + "\n")
        sys.stdout.flush()


def listing():
    math = (["pass %d" % i for i in range(1, opts.passes + 1)] +
            ["fail %d" % i for i in range(1, opts.fail + 1)] +
            ["error %d" % i for i in range(1, opts.errors + 1)] +
            ["na %d" % i for i in range(1, opts.na + 1)] +
            ["slow %d" % i for i in range(1, opts.slow + 1)])
    targets = [{"label": "sim", "provider": "sim", "available": not opts.all_unavailable},
               {"label": "paid", "provider": "paid", "available": False}]
    return {"evals": [{"name": name, "samples": [{"id": s} for s in samples],
                       "scorers": ["verdict"], "targets": targets}
                      for name, samples in (("math", math), ("names", NAMES))]}


def result(params, passed, error=None):
    r = {k: params[k] for k in ("eval", "sample", "target", "params", "trial", "trials", "seed")
         if k in params}
    transcript = {"final_response": params.get("sample", ""), "iterations": 1}
    if error:
        transcript.update({"error": error, "error_kind": "infra"})
    r.update({"passed": passed, "aggregate": 1.0 if passed else 0.0,
              "scores": [] if error else [{"scorer": "verdict", "value": 1.0 if passed else 0.0,
                                           "pass": passed,
                                           "reason": "as expected" if passed else "wrong answer"}],
              "transcript": transcript, "skipped": False})
    return r


def serve(rid, params, cancelled):
    kind = params.get("sample", "").split(" ")[0]
    if opts.all_na:
        kind = "na"
    if kind == "slow":
        cancelled.wait(opts.slow_ms / 1000.0)
    if cancelled.is_set():
        send({"id": rid, "error": {"code": -32800, "message": "cancelled"}})
    elif kind == "error":
        send({"id": rid, "error": {"code": -32000, "message": "the subject raised ValueError"}})
    elif kind == "na":
        send({"id": rid, "result": result(params, False, "provider returned 503")})
    else:
        send({"id": rid, "result": result(params, kind != "fail")})
    with lock:
        runs.pop(rid, None)


def main():
    global run_count
    workers = []
    for raw in sys.stdin:
        if not raw.strip():
            continue
        msg = json.loads(raw)
        rid, method, params = msg.get("id"), msg.get("method"), msg.get("params") or {}
        if method == "initialize":
            send({"id": rid, "result": {"protocol_version": "1.1", "study": "ci-study",
                                        "study_version": "1.0.0", "evals": 2,
                                        "capabilities": ["cancel"]}})
        elif method == "list":
            send({"id": rid, "result": listing()})
        elif method == "run":
            run_count += 1
            if opts.interrupt_host_after and run_count == opts.interrupt_host_after:
                os.kill(os.getppid(), signal.SIGINT)
            ev = threading.Event()
            with lock:
                runs[rid] = ev
            t = threading.Thread(target=serve, args=(rid, params, ev))
            t.start()
            workers.append(t)
        elif method == "cancel":
            with lock:
                ev = runs.get(params.get("id"))
            if ev:
                ev.set()
            send({"id": rid, "result": {"cancelled": ev is not None}})
        else:
            send({"id": rid, "error": {"code": -32601, "message": "unknown method: %s" % method}})
    for t in workers:
        t.join()


main()
