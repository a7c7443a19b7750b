#!/usr/bin/env python3
"""A dataset of 1 000 000 JSONL lines through the command line: `mira plan` lists every page of
it, and `mira run` lists it again and runs its last sample, found by id. Each time the dataset
study's peak resident memory (VmHWM, which it writes at exit) stays under the bound.

Usage: dataset_rss_test.py MIRA DATASET_STUDY WORK_DIR MAX_RSS_MB"""
import os
import subprocess
import sys

mira, study, work, max_mb = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
lines = 1_000_000
os.makedirs(work, exist_ok=True)
data = os.path.join(work, "million.jsonl")
rss = os.path.join(work, "peak-rss-kb.txt")
# Written here, at test time, once per build folder: about 60 MB.
if not os.path.exists(data):
    with open(data + ".part", "w") as f:
        for i in range(lines):
            f.write('{"id": "q%d", "input": "What is %d + 1?", "expected": "%d"}\n' % (i, i, i + 1))
    os.replace(data + ".part", data)


def study_peak(args, want):
    """Runs `mira ARGS -- dataset_study ...`, checks that its output holds `want`, and gives the
    study's peak resident memory in kB."""
    if os.path.exists(rss):
        os.remove(rss)
    cmd = [mira, *args, "--", study, "--dataset", data, "--peak-rss-file", rss]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=540)
    if r.returncode != 0 or want not in r.stdout:
        sys.exit(f"{' '.join(cmd)}: exit {r.returncode}, no {want!r} in:\n{r.stdout}\n{r.stderr}")
    with open(rss) as f:
        return int(f.read())


plan_kb = study_peak(["plan"], "qa: 1000000 sample(s)")
run_kb = study_peak(["run", "--dry-run", "--max-retries", "0", "--format", "json",
                     "--samples", "q999999"], '"passed":1,"failed":0')
print(f"dataset study over {lines} lines: peak RSS {plan_kb} kB listing (plan), {run_kb} kB "
      f"listing and running the last sample (run); bound {max_mb} MB")
if max(plan_kb, run_kb) >= max_mb * 1024:
    sys.exit(f"the study's peak RSS is over {max_mb} MB")
