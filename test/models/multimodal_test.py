#!/usr/bin/env python3
"""Runs examples/study/multimodal under `mira run` against the local provider-shaped HTTPS server
(fake_provider.py, whose image rule names the colour of a PNG's first pixel) and checks that each
square's image reached each API intact: with both keys, the four cases (red and blue, OpenAI Chat
Completions and Anthropic Messages) pass, two requests on each path; without a key, no request
is sent and no case passes.

    multimodal_test.py MIRA MULTIMODAL FAKE_PROVIDER

Exit 77 (skipped) without the openssl command line.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from llm_judge_test import KEY, Server, environment, fail, make_pki  # noqa: E402


def main():
    mira, study, fake = sys.argv[1:4]
    if shutil.which("openssl") is None:
        print("skipped: the openssl command line is not installed")
        sys.exit(77)
    with tempfile.TemporaryDirectory() as d:
        ca, cert, key = make_pki(d)
        server = Server(fake, cert, key, ca)
        try:
            env = environment(server, ca, OPENAI_API_KEY=KEY, ANTHROPIC_API_KEY=KEY,
                              MIRA_OPENAI_MODEL="vision-1", MIRA_ANTHROPIC_MODEL="vision-2")
            cases = run_all(mira, study, env)
            got = sorted((c["target"], c["sample"], c["status"]) for c in cases)
            want = [("anthropic/vision-2", "blue", "passed"), ("anthropic/vision-2", "red", "passed"),
                    ("openai/vision-1", "blue", "passed"), ("openai/vision-1", "red", "passed")]
            if got != want:
                fail("cases %s, expected %s" % (got, want))
            if server.stats() != {"/v1/chat/completions": 2, "/v1/messages": 2}:
                fail("requests %s, expected 2 on each API's path" % server.stats())
            cases = run_all(mira, study, environment(server, ca))
            if any(c["status"] == "passed" for c in cases):
                fail("a case passed without a key: %s" % cases)
            if server.stats() != {"/v1/chat/completions": 2, "/v1/messages": 2}:
                fail("requests were sent without a key: %s" % server.stats())
        finally:
            server.close()
    print("ok")


def run_all(mira, study, env):
    """Every case of a `mira run --format jsonl`, whatever its sample."""
    r = subprocess.run([mira, "run", "--format", "jsonl", "--dry-run", "--", study], env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120)
    if r.returncode not in (0, 1):
        fail("mira run exited %d:\n%s" % (r.returncode, r.stderr))
    return [o for o in map(json.loads, r.stdout.splitlines()) if "summary" not in o]


if __name__ == "__main__":
    main()
