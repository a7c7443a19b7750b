#!/usr/bin/env python3
"""Runs examples/study/llm_judge under `mira run` against the local provider-shaped HTTPS server
(fake_provider.py, with a throwaway CA made by the openssl command line) and checks the verdicts.

    llm_judge_test.py MIRA LLM_JUDGE FAKE_PROVIDER SCENARIO

Scenarios:
    openai-chat, openai-responses, anthropic
                 the judge of that API (MIRA_JUDGE): capital and element pass, arithmetic (the
                 stand-in's wrong answer) fails, one request each on the API's path
    no-key       no key set: every case N/A, saying OPENAI_API_KEY is not set; no request
    429-once     the judge's first request is answered 429 with Retry-After: 1: that case ends
                 as an infra error, the host retries it after the wait and it passes; its saved
                 record says 2 attempts
    cache        two runs with MIRA_CACHE_DIR: the second sends no request and has the same
                 verdicts

Exit 77 (skipped) without the openssl command line.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
import ssl

KEY = "sk-test"


def fail(message):
    print("FAIL: " + message, file=sys.stderr)
    sys.exit(1)


def make_pki(d):
    ext = os.path.join(d, "ext.cnf")
    with open(ext, "w") as f:
        f.write("subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\n"
                "extendedKeyUsage=serverAuth\n")
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    p = lambda name: os.path.join(d, name)
    steps = [
        ["openssl", "req", "-x509", *ec, "-keyout", p("ca.key"), "-out", p("ca.pem"), "-days",
         "2", "-subj", "/CN=mira test CA", "-addext", "basicConstraints=critical,CA:TRUE",
         "-addext", "keyUsage=critical,keyCertSign,cRLSign"],
        ["openssl", "req", *ec, "-keyout", p("server.key"), "-out", p("server.csr"), "-subj",
         "/CN=localhost"],
        ["openssl", "x509", "-req", "-in", p("server.csr"), "-CA", p("ca.pem"), "-CAkey",
         p("ca.key"), "-set_serial", "2", "-days", "2", "-extfile", ext, "-out",
         p("server.pem")],
    ]
    for step in steps:
        subprocess.run(step, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return p("ca.pem"), p("server.pem"), p("server.key")


class Server:
    def __init__(self, fake, cert, key, ca):
        # Its stdin stays open: the server exits when it ends (with this script, however it
        # ends).
        self.proc = subprocess.Popen([sys.executable, fake, "--cert", cert, "--key", key,
                                      "--api-key", KEY], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
        self.port = int(self.proc.stdout.readline())
        self.tls = ssl.create_default_context(cafile=ca)

    def stats(self):
        url = "https://127.0.0.1:%d/__stats" % self.port
        with urllib.request.urlopen(url, context=self.tls, timeout=10) as r:
            return json.load(r)["paths"]

    def close(self):
        self.proc.kill()
        self.proc.wait()


def environment(server, ca, **extra):
    env = {k: v for k, v in os.environ.items()
           if k not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "MIRA_JUDGE", "MIRA_JUDGE_MODEL",
                        "MIRA_CACHE_DIR", "MIRA_CACHE_MODE", "MIRA_SUBJECT_MODEL", "SSL_CERT_DIR")
           and not k.lower().endswith("_proxy")}
    env.update({"OPENAI_BASE_URL": "https://127.0.0.1:%d/v1" % server.port,
                "ANTHROPIC_BASE_URL": "https://127.0.0.1:%d" % server.port,
                "SSL_CERT_FILE": ca, "MIRA_JUDGE_MODEL": "judge-1"})
    env.update(extra)
    return env


def run_all(mira, study, env, *args):
    """Every case of a `mira run --format jsonl` (the summary line left out)."""
    r = subprocess.run([mira, "run", "--format", "jsonl", *args, "--", study], env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120)
    if r.returncode not in (0, 1):
        fail("mira run exited %d:\n%s" % (r.returncode, r.stderr))
    return [o for o in map(json.loads, r.stdout.splitlines()) if "summary" not in o]


def run(mira, study, env, *args):
    """The cases of a `mira run --format jsonl`, by sample."""
    return {o["sample"]: o for o in run_all(mira, study, env, *args)}


def verdicts(cases):
    return {k: (c["status"], [s.get("value") for s in c.get("scores", [])])
            for k, c in cases.items()}


def expect_graded(cases):
    statuses = {k: c["status"] for k, c in cases.items()}
    want = {"capital": "passed", "element": "passed", "arithmetic": "failed"}
    if statuses != want:
        fail("verdicts %s, expected %s" % (statuses, want))


def with_server(fake, check):
    """check(server, ca, folder) against a fake provider with a throwaway CA in a temporary
    folder; exit 77 (skipped) without the openssl command line."""
    if shutil.which("openssl") is None:
        print("skipped: the openssl command line is not installed")
        sys.exit(77)
    with tempfile.TemporaryDirectory() as d:
        ca, cert, key = make_pki(d)
        server = Server(fake, cert, key, ca)
        try:
            check(server, ca, d)
        finally:
            server.close()


def main():
    mira, study, fake, scenario = sys.argv[1:5]
    with_server(fake, lambda server, ca, d: check(scenario, mira, study, server, ca, d))
    print("ok: " + scenario)


def check(scenario, mira, study, server, ca, d):
    paths = {"openai-chat": "/v1/chat/completions", "openai-responses": "/v1/responses",
             "anthropic": "/v1/messages"}
    if scenario in paths:
        key_var = "ANTHROPIC_API_KEY" if scenario == "anthropic" else "OPENAI_API_KEY"
        env = environment(server, ca, MIRA_JUDGE=scenario, **{key_var: KEY})
        expect_graded(run(mira, study, env, "--dry-run"))
        if server.stats() != {paths[scenario]: 3}:
            fail("requests %s, expected 3 on %s" % (server.stats(), paths[scenario]))
    elif scenario == "no-key":
        cases = run(mira, study, environment(server, ca), "--dry-run")
        for k, c in cases.items():
            reason = c["scores"][0]["reason"]
            if c["status"] != "na" or "OPENAI_API_KEY is not set" not in reason:
                fail("%s: %s, %r; expected N/A saying the key is not set" % (k, c["status"], reason))
        if len(cases) != 3 or server.stats():
            fail("%d cases, requests %s" % (len(cases), server.stats()))
    elif scenario == "429-once":
        env = environment(server, ca, OPENAI_API_KEY=KEY, MIRA_JUDGE_MODEL="fault-429-once")
        results = os.path.join(d, "results")
        started = time.monotonic()
        expect_graded(run(mira, study, env, "--results-dir", results, "--run-id", "r429"))
        if time.monotonic() - started < 1.0:
            fail("the retry came before the 1 s Retry-After")
        r = subprocess.run([mira, "report", "r429", "--results-dir", results, "--format", "jsonl"],
                           stdout=subprocess.PIPE, text=True, check=False)
        attempts = sorted(json.loads(l)["attempts"] for l in r.stdout.splitlines()
                          if "summary" not in json.loads(l))
        if attempts != [1, 1, 2]:
            fail("attempts %s, expected one case retried once" % attempts)
    elif scenario == "cache":
        env = environment(server, ca, OPENAI_API_KEY=KEY, MIRA_CACHE_DIR=os.path.join(d, "cache"))
        first = run(mira, study, env, "--dry-run")
        expect_graded(first)
        before = server.stats()
        second = run(mira, study, env, "--dry-run")
        if server.stats() != before:
            fail("the second run sent requests: %s, then %s" % (before, server.stats()))
        if verdicts(second) != verdicts(first):
            fail("verdicts changed: %s, then %s" % (verdicts(first), verdicts(second)))
    else:
        fail("no such scenario: " + scenario)


if __name__ == "__main__":
    main()
