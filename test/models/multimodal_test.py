#!/usr/bin/env python3
"""Runs examples/study/multimodal under `mira run` against the local provider-shaped HTTPS server
(fake_provider.py, whose image rule names the colour of a PNG's first pixel) and checks that each
square's image reached each API intact: with both keys, the four cases (red and blue, OpenAI Chat
Completions and Anthropic Messages) pass, two requests on each path; without a key, no request
is sent and no case passes.

    multimodal_test.py MIRA MULTIMODAL FAKE_PROVIDER

Exit 77 (skipped) without the openssl command line.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from llm_judge_test import KEY, environment, fail, run_all, with_server  # noqa: E402


def main():
    mira, study, fake = sys.argv[1:4]

    def check(server, ca, d):
        env = environment(server, ca, OPENAI_API_KEY=KEY, ANTHROPIC_API_KEY=KEY,
                          MIRA_OPENAI_MODEL="vision-1", MIRA_ANTHROPIC_MODEL="vision-2")
        cases = run_all(mira, study, env, "--dry-run")
        got = sorted((c["target"], c["sample"], c["status"]) for c in cases)
        want = [("anthropic/vision-2", "blue", "passed"), ("anthropic/vision-2", "red", "passed"),
                ("openai/vision-1", "blue", "passed"), ("openai/vision-1", "red", "passed")]
        if got != want:
            fail("cases %s, expected %s" % (got, want))
        if server.stats() != {"/v1/chat/completions": 2, "/v1/messages": 2}:
            fail("requests %s, expected 2 on each API's path" % server.stats())
        cases = run_all(mira, study, environment(server, ca), "--dry-run")
        if any(c["status"] == "passed" for c in cases):
            fail("a case passed without a key: %s" % cases)
        if server.stats() != {"/v1/chat/completions": 2, "/v1/messages": 2}:
            fail("requests were sent without a key: %s" % server.stats())

    with_server(fake, check)
    print("ok")


if __name__ == "__main__":
    main()
