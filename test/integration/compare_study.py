#!/usr/bin/env python3
"""A Mira Eval Protocol test study for `mira compare` and experiments (stdlib only). Two evals,
math and text, of six samples each, on one target, with an effort axis (low, high): 24 cases
that pass unless an environment knob says otherwise.

  COMPARE_FAIL  comma-separated eval/sample[@effort] that fail (e.g. "math/m1,text/t2@high")
  COMPARE_NA    the same, for cases whose every score is N/A
  COMPARE_ERROR the same, for cases answered with an error (not retryable)
  COMPARE_UNAVAILABLE  "1": the target is listed as unavailable (every case skipped)
  COMPARE_STUDY the name initialize reports (default compare-study)
"""
import json
import os
import sys


def listed(var):
    return {s for s in os.environ.get(var, "").split(",") if s}


FAIL, NA, ERROR = listed("COMPARE_FAIL"), listed("COMPARE_NA"), listed("COMPARE_ERROR")


def hit(names, params):
    base = params["eval"] + "/" + params["sample"]
    return base in names or base + "@" + params.get("params", {}).get("effort", "") in names


def send(obj):
    sys.stdout.write(json.dumps(obj, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def result(params):
    na, passed = hit(NA, params), not hit(FAIL, params)
    r = {k: params[k] for k in ("eval", "sample", "target", "params", "trial", "trials", "seed")
         if k in params}
    r.update({"passed": passed and not na, "aggregate": 1.0 if passed and not na else 0.0,
              "scores": [{"scorer": "check", "value": 1.0 if passed else 0.0, "pass": passed,
                          "na": na, "reason": "knob"}],
              "transcript": {"final_response": params["sample"], "iterations": 1,
                             "tool_calls_count": 0,
                             "usage": {"input_tokens": 1, "output_tokens": 1, "cost_usd": 0.0}},
              "skipped": False})
    return r


def main():
    for raw in sys.stdin:
        if not raw.strip():
            continue
        msg = json.loads(raw)
        rid, method, params = msg.get("id"), msg.get("method"), msg.get("params") or {}
        if method == "initialize":
            send({"id": rid, "result": {"protocol_version": "1.1",
                                        "study": os.environ.get("COMPARE_STUDY", "compare-study"),
                                        "study_version": "1.0.0", "evals": 2,
                                        "capabilities": []}})
        elif method == "list":
            evals = []
            for name, prefix in (("math", "m"), ("text", "t")):
                evals.append({"name": name, "samples": [{"id": prefix + str(i)} for i in range(6)],
                              "scorers": ["check"],
                              "targets": [{"label": "sim", "provider": "sim",
                                           "available": os.environ.get("COMPARE_UNAVAILABLE") != "1"}],
                              "axes": [{"name": "effort", "values": ["low", "high"]}]})
            send({"id": rid, "result": {"evals": evals}})
        elif method == "run" and hit(ERROR, params):
            send({"id": rid, "error": {"code": -32000, "message": "knob"}})
        elif method == "run":
            send({"id": rid, "result": result(params)})
        else:
            send({"id": rid, "error": {"code": -32601, "message": "unknown method: %s" % method}})


main()
