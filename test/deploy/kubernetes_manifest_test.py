#!/usr/bin/env python3
"""The Kubernetes manifests in deploy/kubernetes/, run locally: reads the Indexed Job's and the
merge Job's command lines and environment from the files (a small parser of their own layout:
`command` on one line as a flow sequence of double-quoted strings, which is JSON, and `env` as
`- name:` / `value: "..."` pairs; no YAML library needed), runs the shard command once per
completion index with JOB_COMPLETION_INDEX set (and index 0 a second time, which must resume its
run, not start another), runs the merge command, and checks that the merged run has exactly the
keys and verdicts of a single-process run of the same plan.
  kubernetes_manifest_test.py MIRA_BINARY EXAMPLE_STUDY"""
import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))


def read_manifest(name):
    with open(os.path.join(REPO, "deploy", "kubernetes", name), encoding="utf-8") as f:
        text = f.read()
    commands = [json.loads(m.group(1)) for m in re.finditer(r"^\s*command: (\[.*\])\s*$", text, re.M)]
    assert len(commands) == 1, f"{name}: expected one command line, found {len(commands)}"
    env = dict(re.findall(r'^\s*- name: (\w+).*\n\s*value: "([^"]*)"', text, re.M))
    completions = re.search(r"^\s*completions: (\d+)", text, re.M)
    indexed = re.search(r"^\s*completionMode: Indexed\s*$", text, re.M) is not None
    return {"command": commands[0], "env": env, "indexed": indexed,
            "completions": int(completions.group(1)) if completions else None}


def run(manifest, overrides, extra=None):
    env = dict(os.environ)
    env.update(manifest["env"])
    for k, v in overrides.items():
        assert k in manifest["env"], f"the manifest has no {k} to replace"
        env[k] = v
    env.update(extra or {})
    return subprocess.run(manifest["command"], env=env, capture_output=True, text=True, check=False)


def main():
    mira, study = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    shards = read_manifest("mira-shards.yaml")
    merge = read_manifest("mira-merge.yaml")
    assert shards["indexed"], "mira-shards.yaml is not an Indexed Job"
    count = shards["completions"]
    assert shards["env"]["MIRA_SHARD_COUNT"] == str(count), "MIRA_SHARD_COUNT != completions"
    with tempfile.TemporaryDirectory() as tmp:
        results = os.path.join(tmp, "results")
        image = {"MIRA": mira, "MIRA_RESULTS": results}
        for index in list(range(count)) + [0]:  # index 0 again: a pod started twice resumes
            r = run(shards, dict(image, MIRA_STUDY=study), {"JOB_COMPLETION_INDEX": str(index)})
            assert r.returncode == 0, f"shard {index}: exit {r.returncode}\n{r.stderr}"
            assert f"shard {index}/{count}:" in r.stderr, r.stderr
        folders = os.listdir(os.path.join(results, "shards", "0"))
        assert len(folders) == 1, f"shard 0 started a second run: {folders}"
        r = run(merge, image)
        assert r.returncode == 0, f"merge: exit {r.returncode}\n{r.stderr}"
        print(r.stderr.strip())
        merged = os.path.join(results, merge["env"]["MIRA_RUN_ID"])
        with open(os.path.join(merged, "meta.json"), encoding="utf-8") as f:
            meta = json.load(f)
        assert [s["index"] for s in meta["merged"]["shards"]] == list(range(count)), meta["merged"]
        single = os.path.join(tmp, "single")
        subprocess.run([mira, "run", "--results-dir", single, "--color", "never", "--", study],
                       capture_output=True, check=False)
        (single_run,) = os.listdir(single)
        same = subprocess.run([sys.executable, os.path.join(HERE, "same_cases.py"), merged,
                               os.path.join(single, single_run)], check=False)
        return same.returncode


if __name__ == "__main__":
    sys.exit(main())
