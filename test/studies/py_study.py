#!/usr/bin/env python3
"""A Mira Eval Protocol test study in plain Python (stdlib only), with switches that make it
misbehave the ways real studies do. Each `run` is served on its own thread.

  --record PATH        append every line received and sent, in order, to PATH ("{pid}" in
                       PATH is replaced by the process id: one file per process of a pool)
  --sequential         serve one request at a time, as the official SDKs do: read a line, run
                       the case, answer, read the next (so a `cancel` is read only after the
                       run it names was answered)
  --samples N          the echo eval's samples are s0 .. s{N-1} (default: a, b, fail)
  --odd-version-once PATH  the first process to create PATH reports study_version 9.9.9 (a
                       pool whose processes disagree)
  --caps a,b           capabilities to advertise (default: cancel); execute and score work
  --run-ms N           how long a run works (honours cancel), default 0
  --die-after N        exit with code 3 when the N-th run arrives (after an stderr line)
  --die-code C         the exit code --die-after uses (0: a clean exit mid-run)
  --sigkill-after N    kill itself with SIGKILL when the N-th run arrives
  --die-once PATH      with --die-after: die only if PATH does not exist yet (and create it),
                       so a restarted study works (and only one process of a pool dies)
  --kill-host-after N  send SIGKILL to the host when the N-th run arrives (a crash of the host at
                       a known point)
  --interrupt-host-after N  send SIGINT to the host when the N-th run arrives (a Ctrl-C at a
                       known point)
  --stderr-flood BYTES write BYTES of stderr lines from a thread while serving
  --garbage            write junk lines (non-JSON, invalid UTF-8, an array, a 2 MiB line)
                       before every response
  --capacity K         a provider that serves K runs at once: a run beyond K is answered at
                       once with a retryable 429 error
  --cost USD           the cost_usd each run reports
  --hang-after N       from the N-th run on, write nothing at all (with --die-once PATH: only
                       the first study hangs)
  --deaf               after answering initialize, never read stdin again (its pipe fills)
  --huge-answer MB     answer every run with a line of MB megabytes (a padding field)
  --chaos SEED         misbehave at random, seeded by SEED and the count of studies started
                       so far (kept in --chaos-dir): per run, crash the process, answer late,
                       write garbage first, never answer, or answer with a retryable error
  --chaos-dir DIR      where --chaos keeps that count
  --rename-on-restart  with --die-once: once PATH exists (a restarted study), call itself
                       "other-study" in initialize
  --mute-on-restart    with --die-once: once PATH exists (a restarted study), never answer
                       initialize
  --ignore-cancel      answer `cancel` with cancelled: false and finish the run anyway (its
                       answer then arrives late); every result's transcript metadata carries
                       max_active, the most runs this study ever served at once
  --study-version V    the study_version initialize reports (default 0.0.1)
  --scorer NAME        the echo eval's scorer name (default echo): changes its fingerprint
  --hostile            names, answers and outputs built to break paths, terminals, HTML, XML,
                       CSV and Markdown (script tags, ../, NUL, ANSI escapes, ]]>, 10 KB names)
"""
import argparse
import fcntl
import json
import os
import random
import signal
import sys
import threading
import time

args = argparse.ArgumentParser()
args.add_argument("--record")
args.add_argument("--caps", default="cancel")
args.add_argument("--run-ms", type=int, default=0)
args.add_argument("--die-after", type=int, default=0)
args.add_argument("--sigkill-after", type=int, default=0)
args.add_argument("--die-once")
args.add_argument("--die-code", type=int, default=3)
args.add_argument("--interrupt-host-after", type=int, default=0)
args.add_argument("--kill-host-after", type=int, default=0)
args.add_argument("--stderr-flood", type=int, default=0)
args.add_argument("--garbage", action="store_true")
args.add_argument("--capacity", type=int, default=0)
args.add_argument("--cost", type=float, default=0.0)
args.add_argument("--hostile", action="store_true")
args.add_argument("--ignore-cancel", action="store_true")
args.add_argument("--rename-on-restart", action="store_true")
args.add_argument("--mute-on-restart", action="store_true")
args.add_argument("--chaos", type=int, default=0)
args.add_argument("--chaos-dir")
args.add_argument("--hang-after", type=int, default=0)
args.add_argument("--deaf", action="store_true")
args.add_argument("--huge-answer", type=int, default=0)
args.add_argument("--study-version", default="0.0.1")
args.add_argument("--scorer", default="echo")
args.add_argument("--sequential", action="store_true")
args.add_argument("--samples", type=int, default=0)
args.add_argument("--odd-version-once")
opts = args.parse_args()

out = sys.stdout.buffer
lock = threading.Lock()
record = open(opts.record.replace("{pid}", str(os.getpid())), "ab") if opts.record else None
if record:
    # Held while this process lives, shared (a restarted study may append to the same record):
    # a reader that takes it exclusively waits until no study is still writing.
    fcntl.flock(record.fileno(), fcntl.LOCK_SH)
runs = {}  # request id -> threading.Event (set = cancelled)
run_count = 0
workers = []
active = 0  # runs being served, for --capacity
max_active = 0


def log_line(raw: bytes):
    if record:
        record.write(raw.rstrip(b"\n") + b"\n")
        record.flush()


hung = False


def send_raw(raw: bytes, recorded=True):
    if hung:
        return
    with lock:
        out.write(raw + b"\n")
        out.flush()
        if recorded:
            log_line(raw)


def send(obj):
    send_raw(json.dumps(obj, separators=(",", ":")).encode())


def garbage():
    for junk in (b"this is not json", b"\xff\xfe{\"id\":1}", b"[1,2,3]", b"x" * (2 << 20)):
        send_raw(junk, recorded=False)


PWN = "document.title='pwned'"
HOSTILE_EVAL = '"><script>' + PWN + '</script>'
HOSTILE_SAMPLES = ["../../escape", "a/b", "\x1b[31mred\x1b[0m\x1b]0;title\x07", "]]><x>", "nul\x00byte",
                   "line\nbreak", "L" * 10240, '<img src=x onerror="' + PWN + '">',
                   "ctl\x01\x9b\ufffe", 'comma,"quote"', "|pipe|*md*", "fail"]
HOSTILE_TARGET = "t'\"<>&"


def result_for(params, passed=True):
    r = {k: params[k] for k in ("eval", "sample", "target", "params", "trial", "trials", "seed") if k in params}
    r.update({
        "passed": passed,
        "aggregate": 1.0 if passed else 0.0,
        "scores": [{"scorer": "echo", "value": 1.0 if passed else 0.0, "pass": passed, "reason": "echo"}],
        "transcript": {"final_response": params.get("sample", ""), "iterations": 1,
                       "tool_calls_count": 0,
                       "usage": {"input_tokens": 1, "output_tokens": 1, "cost_usd": opts.cost}},
        "skipped": False,
    })
    r["transcript"]["metadata"] = {"max_active": max_active}
    if opts.hostile:
        r["transcript"]["final_response"] = "<script>" + PWN + "</script>" + params.get("sample", "")
        r["transcript"]["output"] = [{"kind": "file", "uri": "javascript:" + PWN},
                                     {"kind": "file", "uri": "https://example.com/a?b=1&c=\"2\""}]
        r["scores"][0]["reason"] = "</pre><script>" + PWN + "</script>"
    return r


def claim(path):
    """Creates path; True for the one process that created it (atomic among a pool's)."""
    try:
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        return True
    except FileExistsError:
        return False


odd_version = bool(opts.odd_version_once) and claim(opts.odd_version_once)


def chaos_rng():
    generation = 0
    if opts.chaos_dir:
        path = os.path.join(opts.chaos_dir, "generation")
        if os.path.exists(path):
            generation = int(open(path).read() or 0)
        with open(path, "w") as f:
            f.write(str(generation + 1))
    return random.Random(opts.chaos * 1000 + generation)


chaos = chaos_rng() if opts.chaos else None


def serve_run(rid, params, cancelled):
    global active
    # "fail" answers at once, so it can be the first failure of a group.
    work_ms = 0 if params.get("sample") == "fail" else opts.run_ms
    work_ms += int(params.pop("_delay", 0) * 1000)
    deadline = time.monotonic() + work_ms / 1000.0
    while time.monotonic() < deadline:
        if cancelled.wait(0.005):
            break
    with lock:
        active -= 1  # before answering: the host may send the next run at once
    if opts.garbage:
        garbage()
    if opts.huge_answer and not cancelled.is_set():
        huge(rid, params)
    elif cancelled.is_set():
        send({"id": rid, "error": {"code": -32800, "message": "cancelled"}})
    else:
        send({"id": rid, "result": result_for(params, params.get("sample") != "fail")})
    with lock:
        runs.pop(rid, None)


def huge(rid, params):
    # Written in pieces, so this study never holds the whole line either.
    head = json.dumps({"id": rid, "result": result_for(params)})[:-2].encode() + b',"pad":"'
    chunk = b"x" * (1 << 20)
    with lock:
        out.write(head)
        for _ in range(opts.huge_answer):
            out.write(chunk)
        out.write(b'"}}\n')
        out.flush()


def flood():
    line = b"E" * 1023 + b"\n"
    remaining = opts.stderr_flood
    err = sys.stderr.buffer
    while remaining > 0:
        err.write(line)
        remaining -= len(line)
    err.flush()


def main():
    global run_count, active, max_active, hung
    if opts.stderr_flood:
        t = threading.Thread(target=flood)
        t.start()
        workers.append(t)
    for raw in sys.stdin.buffer:
        if not raw.strip():
            continue
        with lock:
            log_line(raw)
        msg = json.loads(raw)
        rid, method, params = msg.get("id"), msg.get("method"), msg.get("params") or {}
        if method == "initialize":
            if opts.mute_on_restart and opts.die_once and os.path.exists(opts.die_once):
                continue  # a restarted study that never answers initialize
            caps = [c for c in opts.caps.split(",") if c]
            renamed = opts.rename_on_restart and opts.die_once and os.path.exists(opts.die_once)
            send({"id": rid, "result": {"protocol_version": "1.1",
                                        "study": "other-study" if renamed else "py-study",
                                        "study_version": "9.9.9" if odd_version else opts.study_version, "evals": 1, "capabilities": caps}})
            if opts.deaf:
                time.sleep(600)
        elif method == "list" and opts.hostile:
            send({"id": rid, "result": {"evals": [{
                "name": HOSTILE_EVAL, "description": "\x1b[2J" + HOSTILE_EVAL,
                "samples": [{"id": s} for s in HOSTILE_SAMPLES], "scorers": ["echo"],
                "targets": [{"label": HOSTILE_TARGET, "provider": "sim", "available": True}]}]}})
        elif method == "list":
            samples = ([{"id": "s%d" % i} for i in range(opts.samples)] if opts.samples
                       else [{"id": "a"}, {"id": "b"}, {"id": "fail"}])
            send({"id": rid, "result": {"evals": [{
                "name": "echo", "samples": samples,
                "scorers": [opts.scorer],
                "targets": [{"label": "sim", "provider": "sim", "available": True}]}]}})
        elif method == "run":
            run_count += 1
            if opts.die_after and run_count == opts.die_after and (
                    not opts.die_once or claim(opts.die_once)):
                sys.stderr.write("py-study: dying on purpose\n")
                sys.stderr.flush()
                os._exit(opts.die_code)
            if opts.hang_after and run_count >= opts.hang_after and not (
                    opts.die_once and os.path.exists(opts.die_once) and not hung):
                if opts.die_once and not hung:
                    open(opts.die_once, "w").close()
                hung = True
            if opts.kill_host_after and run_count == opts.kill_host_after:
                os.kill(os.getppid(), signal.SIGKILL)
            if opts.interrupt_host_after and run_count == opts.interrupt_host_after:
                os.kill(os.getppid(), signal.SIGINT)
            if opts.sigkill_after and run_count == opts.sigkill_after:
                os.kill(os.getpid(), signal.SIGKILL)
            with lock:
                busy = opts.capacity and active >= opts.capacity
                if not busy:
                    active += 1
                    max_active = max(max_active, active)
            if busy:
                send({"id": rid, "error": {"code": -32000, "message": "429 Too Many Requests",
                                           "retryable": True, "data": {"http_status": 429}}})
                continue
            if chaos:
                roll = chaos.random()
                if roll < 0.02:
                    sys.stderr.write("py-study: chaos: crashing\n")
                    sys.stderr.flush()
                    os._exit(5)
                if roll < 0.07:
                    with lock:
                        active -= 1
                    continue  # never answered: the host's timeout deals with it
                if roll < 0.12:
                    with lock:
                        active -= 1
                    send({"id": rid, "error": {"code": -32000, "message": "chaos: try again",
                                               "retryable": True}})
                    continue
                if roll < 0.22:
                    send_raw(b"chaos garbage \xff{\"id\":", recorded=False)
                if roll < 0.32:
                    params = dict(params, _delay=chaos.random() * 0.2)
            ev = threading.Event()
            with lock:
                runs[rid] = ev
            if opts.sequential:
                serve_run(rid, params, ev)
                continue
            t = threading.Thread(target=serve_run, args=(rid, params, ev))
            t.start()
            workers.append(t)
        elif method == "execute":
            r = {k: params[k] for k in ("eval", "sample", "target") if k in params}
            r["transcript"] = {"final_response": params.get("sample", ""), "events": [{"raw": 1}],
                               "files": {}}
            send({"id": rid, "result": r})
        elif method == "score":
            send({"id": rid, "result": result_for(params)})
        elif method == "cancel":
            with lock:
                ev = runs.get(params.get("id"))
            if opts.ignore_cancel:
                ev = None
            if ev:
                ev.set()
            send({"id": rid, "result": {"cancelled": ev is not None}})
        else:
            send({"id": rid, "error": {"code": -32601, "message": "unknown method: %s" % method}})
    for t in workers:
        t.join()


main()
