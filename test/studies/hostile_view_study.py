#!/usr/bin/env python3
"""A study built to break a viewer (stdlib only): markup and script in its eval, sample and
target names, in the input, every step field, the scores, the `log` and `event` notifications it
sends and its stderr; a 10 MB response; a trajectory of 100 000 steps, one of them not an object;
an SVG image part (which a page must not show); and before its answer a line of bytes that are
not UTF-8. Its one case fails, or passes with --pass (a second run to compare with).

  hostile_view_study.py [--pass]
"""
import json
import sys

HOSTILE = '<img src=x onerror="window.pwned=1"><script>window.pwned=2</script>"\'><b>'
EVAL = "hostile<style>body{display:none}</style>"
SAMPLE = HOSTILE
TARGET = 'sim" onmouseover="window.pwned=3'
PASSED = "--pass" in sys.argv[1:]

out = sys.stdout.buffer


def send(obj):
    out.write(json.dumps(obj, separators=(",", ":")).encode() + b"\n")
    out.flush()


def result(params):
    step = {"source": "agent", "message": HOSTILE, "reasoning_content": HOSTILE,
            "tool_calls": [{"tool_call_id": HOSTILE, "function_name": HOSTILE,
                            "arguments": {"x": HOSTILE}}],
            "observation": {"results": [{"source_call_id": HOSTILE, "content": HOSTILE}]}}
    # Hostile in every field for the first pages; short after, so the answer stays under the
    # host's line limit.
    steps = [dict(step, step_id=i + 1) if i < 500 else {"step_id": i + 1, "source": "agent",
                                                        "message": "m"}
             for i in range(100000)]
    steps[1] = "not a step " + HOSTILE
    return {"eval": params["eval"], "sample": params["sample"], "target": params["target"],
            "input": [HOSTILE, {"kind": "image", "media_type": "image/svg+xml",
                                "source": {"data": "PHN2Zz4="}}],
            "passed": PASSED, "aggregate": 1.0 if PASSED else 0.0,
            "scores": [{"scorer": HOSTILE, "value": 1.0 if PASSED else 0.0, "pass": PASSED,
                        "reason": HOSTILE, "metadata": {HOSTILE: HOSTILE}}],
            "transcript": {"final_response": HOSTILE + "y" * (10 << 20), "iterations": 1,
                           "tool_calls_count": 1,
                           "trajectory": {"schema_version": "ATIF-v1.7", "steps": steps}},
            "skipped": False}


for line in sys.stdin.buffer:
    msg = json.loads(line)
    rid, method = msg.get("id"), msg.get("method")
    if method == "initialize":
        send({"id": rid, "result": {"protocol_version": "1.1", "study": "hostile" + HOSTILE,
                                    "study_version": "0.0.1", "evals": 1,
                                    "capabilities": ["trajectory"]}})
    elif method == "list":
        send({"id": rid, "result": {"evals": [{
            "name": EVAL, "description": HOSTILE, "samples": [{"id": SAMPLE}],
            "scorers": [HOSTILE],
            "targets": [{"label": TARGET, "provider": "sim", "available": True}]}]}})
    elif method == "run":
        p = msg["params"]
        send({"method": "event", "params": {"request_id": rid, "eval": p["eval"],
                                            "sample": p["sample"], "target": p["target"],
                                            "kind": HOSTILE, "text": HOSTILE}})
        send({"method": "log", "params": {"request_id": rid, "message": HOSTILE}})
        sys.stderr.write("stderr " + HOSTILE + "\n")
        sys.stderr.flush()
        out.write(b"\xff\xfe<b>not UTF-8</b>\n")
        send({"id": rid, "result": result(p)})
    elif method == "cancel":
        send({"id": rid, "result": {"cancelled": False}})
    elif rid is not None:
        send({"id": rid, "error": {"code": -32601, "message": "no method " + str(method)}})
