#!/usr/bin/env python3
"""Runs examples/study/interactive under `mira run` with MIRA_AGENT_MODEL against the local
provider-shaped HTTPS server (fake_provider.py, whose echo rule repeats the last user text): the
rule-bot's cases pass as offline, and the model's dialogues go through the provider, one request
per agent turn (7 for the three dialogues), each case a whole dialogue that the echo fails
(not an error). Without the key the model's target is listed unavailable and nothing is sent.

    interactive_test.py MIRA INTERACTIVE FAKE_PROVIDER

Exit 77 (skipped) without the openssl command line.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from llm_judge_test import KEY, environment, fail, run_all, with_server  # noqa: E402


def main():
    mira, study, fake = sys.argv[1:4]

    def check(server, ca, d):
        env = environment(server, ca, OPENAI_API_KEY=KEY, MIRA_AGENT_MODEL="talk-1")
        cases = run_all(mira, study, env, "--dry-run")
        got = sorted((c["target"], c["sample"], c["status"]) for c in cases)
        want = [("openai/talk-1", s, "failed") for s in ("name", "not-told", "place")] + \
               [("rule-bot", s, "passed") for s in ("name", "not-told", "place")]
        if got != want:
            fail("cases %s, expected %s" % (got, want))
        if server.stats() != {"/v1/chat/completions": 7}:
            fail("requests %s, expected one per agent turn (7)" % server.stats())
        env = environment(server, ca, MIRA_AGENT_MODEL="talk-1")
        cases = run_all(mira, study, env, "--dry-run")
        if any(c["target"] == "openai/talk-1" and c["status"] != "skipped" for c in cases):
            fail("the model's cases ran without a key: %s" % cases)
        if server.stats() != {"/v1/chat/completions": 7}:
            fail("requests were sent without a key: %s" % server.stats())

    with_server(fake, check)
    print("ok")


if __name__ == "__main__":
    main()
