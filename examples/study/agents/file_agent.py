#!/usr/bin/env python3
"""A small file agent for examples/study/cli_agent.cpp: a stand-in for a real coding agent.

Usage: file_agent.py --workdir DIR --task TEXT

It lists the files in DIR (its working directory, which holds the sample's seeded files), reads
each one the task names, counts its words, writes report.txt, and answers. It records what it
did as an ATIF trajectory in the file $MIRA_TRAJECTORY_PATH names: one agent step per tool call
(list_files, read_file, write_file) with its arguments and result, then the answer. Deterministic:
no model, no network.
"""
import argparse
import json
import os
import sys


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--workdir", required=True)
    parser.add_argument("--task", required=True)
    args = parser.parse_args()

    steps = [{"step_id": 1, "source": "user", "message": args.task}]

    def tool_step(message, name, arguments, result):
        call_id = f"call-{len(steps)}"
        steps.append({
            "step_id": len(steps) + 1,
            "source": "agent",
            "message": message,
            "tool_calls": [{"tool_call_id": call_id, "function_name": name,
                            "arguments": arguments}],
            "observation": {"results": [{"source_call_id": call_id, "content": result}]},
            "metrics": {"prompt_tokens": 40, "completion_tokens": 8},
        })

    files = sorted(os.path.relpath(os.path.join(root, name), args.workdir)
                   for root, _, names in os.walk(args.workdir) for name in names)
    tool_step("Listing the work folder.", "list_files", {}, "\n".join(files))

    lines = []
    for path in files:
        if path not in args.task.split():
            continue
        with open(os.path.join(args.workdir, path), encoding="utf-8") as f:
            text = f.read()
        tool_step(f"Reading {path}.", "read_file", {"path": path}, text)
        lines.append(f"{path}: {len(text.split())} words")

    report = "\n".join(lines) + "\n"
    with open(os.path.join(args.workdir, "report.txt"), "w", encoding="utf-8") as f:
        f.write(report)
    tool_step("Writing the report.", "write_file", {"path": "report.txt"}, "ok")

    answer = "; ".join(lines) if lines else "The task names no file I have."
    steps.append({"step_id": len(steps) + 1, "source": "agent", "message": answer,
                  "metrics": {"prompt_tokens": 60, "completion_tokens": len(answer.split())}})
    trajectory = {"schema_version": "ATIF-v1.7",
                  "agent": {"name": "file_agent", "version": "1.0"},
                  "steps": steps}
    with open(os.environ["MIRA_TRAJECTORY_PATH"], "w", encoding="utf-8") as f:
        json.dump(trajectory, f)
    print("done", file=sys.stderr)


if __name__ == "__main__":
    main()
