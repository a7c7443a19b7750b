#!/usr/bin/env python3
"""Runs a study and records every protocol line both ways, in order, for schema validation.

Usage: record_proxy.py OUT.ndjson -- STUDY_CMD [ARGS...]

Each host line is written to OUT before the study gets it, so an answer is always recorded after
its request (validate_ndjson.py --deep matches answers to requests by id). The study's stderr
passes through; the proxy exits with the study's status when the host closes its stdin.
"""
import subprocess
import sys
import threading

out_path, sep, *cmd = sys.argv[1:]
if sep != "--" or not cmd:
    sys.exit("usage: record_proxy.py OUT.ndjson -- STUDY_CMD [ARGS...]")
lock = threading.Lock()
out = open(out_path, "ab", buffering=0)
study = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE)


def record(line):
    with lock:
        out.write(line if line.endswith(b"\n") else line + b"\n")


def to_host():
    for line in study.stdout:
        record(line)
        sys.stdout.buffer.write(line)
        sys.stdout.buffer.flush()


reader = threading.Thread(target=to_host)
reader.start()
for line in sys.stdin.buffer:
    record(line)
    try:
        study.stdin.write(line)
        study.stdin.flush()
    except BrokenPipeError:
        break
study.stdin.close()
reader.join()
sys.exit(study.wait())
