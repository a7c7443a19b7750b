#!/usr/bin/env python3
"""Compares the cases of two saved runs by key and verdict (their case records): exit 0 when
they hold exactly the same keys with the same statuses, 1 (listing the differences) otherwise.
Used by the Kubernetes manifest test and the Slurm test: a merged run against a single-process
run of the same plan."""
import glob
import json
import os
import sys


def cases(run_folder):
    """key -> status of every saved record: cases/*/result.json (layout per_case) or the lines
    of segments/*.ndjson (layout compact, a later line of a key replacing an earlier one)."""
    out = {}
    for path in sorted(glob.glob(os.path.join(run_folder, "cases", "*", "result.json"))):
        with open(path, encoding="utf-8") as f:
            record = json.load(f)
        out[record["key"]] = record["status"]
    for path in sorted(glob.glob(os.path.join(run_folder, "segments", "*.ndjson"))):
        with open(path, encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    entry = json.loads(line)
                    out[entry["key"]] = entry["record"]["status"]
    return out


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: same_cases.py MERGED_RUN_FOLDER SINGLE_RUN_FOLDER")
    merged, single = cases(sys.argv[1]), cases(sys.argv[2])
    diffs = [f"only in {sys.argv[1]}: {k}" for k in sorted(merged.keys() - single.keys())]
    diffs += [f"only in {sys.argv[2]}: {k}" for k in sorted(single.keys() - merged.keys())]
    diffs += [f"{k}: {merged[k]} vs {single[k]}" for k in sorted(merged.keys() & single.keys())
              if merged[k] != single[k]]
    if not merged:
        diffs.append("no cases at all")
    for d in diffs:
        print(d)
    if diffs:
        return 1
    print(f"same {len(merged)} case(s), same verdicts")
    return 0


if __name__ == "__main__":
    sys.exit(main())
