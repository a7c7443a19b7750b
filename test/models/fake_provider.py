#!/usr/bin/env python3
"""A local, provider-shaped HTTPS server for the model layer's tests (python3 stdlib only).

    fake_provider.py --cert server.pem --key server.key [--api-key KEY]
    fake_provider.py --plain [--api-key KEY]        (plain HTTP, for http:// URLs)
    fake_provider.py --proxy [--proxy-auth USER:PASSWORD]

It prints its port on the first line of stdout, then serves until killed or until its stdin
closes (the test that started it holds the other end, so it never outlives that test). It makes no
certificate: the tests make a throwaway CA and a server certificate for 127.0.0.1/localhost
with the openssl command line and pass them in.

Routes (each answers in its provider's shape, with usage tokens):
    POST /v1/chat/completions   OpenAI Chat Completions      key: Authorization: Bearer KEY
    POST /v1/responses          OpenAI Responses             key: Authorization: Bearer KEY
    POST /v1/messages           Anthropic Messages           key: x-api-key: KEY
    GET  /__stats               {"paths": {path: n}, "connections": n, "aborted": n,
                                 "dropped": n}: requests per provider path, connections that
                                 carried one, stalled answers ended by the client closing, and
                                 requests dropped unanswered (fault drop-next)
With --api-key, a request without that key gets 401 in the provider's error shape.

The answer (rules tried in order; add one to RULES):
    judge   the prompt asks for a JSON object with a "score": {"score": 1.0, "reason": ...} when
            the text after a line "Response:" contains the text of a line "Expected:" (or no
            line "Expected:" is there), else {"score": 0.0, ...}; the Markdown sections
            "# Expected answer" and "# Final response" of mira::study's judge prompt say the
            same (each section's text runs to the next "# " heading)
    image   the request carries a base64 image (a data: URI, or Anthropic's base64 source):
            "It is <colour>.", the colour named nearest its first pixel (an 8-bit RGB or RGBA
            PNG; "unknown" for any other image): a stand-in for a model that sees
    echo    "echo: " + the last user text
Usage: input tokens = words of every input text, output tokens = words of the answer.

Faults, chosen per request by the header X-Fake-Fault: NAME or the model "fault-NAME":
    429          429 with Retry-After: 1
    429-once     429 with Retry-After: 1 the first time per key (X-Fake-Key, else path + model),
                 then the answer
    500          500 in the provider's error shape
    stall        a 200 header (Content-Length 100), then nothing until the client closes
    malformed    a 200 whose body is not JSON
    huge         a 200 with a 50 MB body (Content-Length); huge-chunked: the same, chunked
    slow         the answer after X-Fake-Delay-Ms (default 2000) milliseconds
    gzip         the answer gzipped (Content-Encoding: gzip); gzip-bomb: 50 MB of zeros gzipped
    drop-next    the answer, then the next request on the same connection is dropped: the
                 connection closes without an answer (a keep-alive connection the server closed)
    close        the connection closes without an answer

--proxy runs a forward proxy instead: CONNECT host:port tunnels (counted in its /__stats as
"connect", with "targets"), and an absolute-form http:// request is forwarded ("forward").
"""
import argparse
import base64
import gzip
import json
import os
import select
import socket
import socketserver
import ssl
import struct
import sys
import threading
import time
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HUGE = 50 * 1024 * 1024
lock = threading.Lock()
stats = {"paths": {}, "connections": 0, "aborted": 0, "dropped": 0}
seen_once = set()


def count(key, path=None):
    with lock:
        if path is None:
            stats[key] += 1
        else:
            stats[key][path] = stats[key].get(path, 0) + 1


# ---- what a request says, per provider ----

def texts(value):
    """Every text in a message content: a string, or a list of parts with "text"."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        out = []
        for part in value:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                out.append(part["text"])
            elif isinstance(part, str):
                out.append(part)
        return out
    return []


def prompt_of(path, body):
    """(every input text joined, the last user text)."""
    every, last_user = [], ""
    for key in ("system", "instructions"):
        every += texts(body.get(key))
    items = body.get("messages") if path != "/v1/responses" else body.get("input")
    if isinstance(items, str):
        items = [{"role": "user", "content": items}]
    for item in items or []:
        if not isinstance(item, dict):
            continue
        t = texts(item.get("content"))
        every += t
        if item.get("role") == "user" and t:
            last_user = t[-1]
    return "\n".join(every), last_user


def markdown_section(lines, heading):
    """The text under a line `heading`, to the next "# " heading; None without the heading."""
    for i, line in enumerate(lines):
        if line.strip() == heading:
            body = []
            for rest in lines[i + 1:]:
                if rest.startswith("# "):
                    break
                body.append(rest)
            return "\n".join(body).strip()
    return None


def judge_rule(prompt, last_user, images):
    if '"score"' not in prompt:
        return None
    expected, response = None, ""
    lines = prompt.splitlines()
    for i, line in enumerate(lines):
        if line.lower().startswith("expected:"):
            expected = line.split(":", 1)[1].strip()
        if line.lower().startswith("response:"):
            response = "\n".join([line.split(":", 1)[1]] + lines[i + 1:])
    if markdown_section(lines, "# Final response") is not None:
        expected = markdown_section(lines, "# Expected answer")
        response = markdown_section(lines, "# Final response")
    ok = expected is None or expected in response
    reason = "the response contains the expected text" if ok else "the expected text is missing"
    return json.dumps({"score": 1.0 if ok else 0.0, "reason": reason})


def echo_rule(prompt, last_user, images):
    return "echo: " + last_user


def images_of(value):
    """The bytes of every base64 image a request holds, in any of the three APIs' shapes."""
    if isinstance(value, list):
        return [b for v in value for b in images_of(v)]
    if isinstance(value, str):
        if value.startswith("data:image/") and ";base64," in value:
            return [base64.b64decode(value.split(",", 1)[1])]
        return []
    if not isinstance(value, dict):
        return []
    src = value.get("source")
    if value.get("type") == "image" and isinstance(src, dict) and src.get("type") == "base64":
        return [base64.b64decode(src.get("data", ""))]
    return [b for v in value.values() for b in images_of(v)]


COLOURS = {"red": (255, 0, 0), "green": (0, 128, 0), "blue": (0, 0, 255), "yellow": (255, 255, 0),
           "white": (255, 255, 255), "black": (0, 0, 0)}


def first_pixel_colour(png):
    """The colour nearest an 8-bit RGB(A) PNG's first pixel: whatever a row's filter, the first
    pixel of the first row is stored as it is."""
    if png[:8] != b"\x89PNG\r\n\x1a\n":
        return "unknown"
    pos, ihdr, idat = 8, None, b""
    while pos + 8 <= len(png):
        n, kind = struct.unpack(">I4s", png[pos:pos + 8])
        data = png[pos + 8:pos + 8 + n]
        pos += 12 + n
        if kind == b"IHDR":
            ihdr = data
        elif kind == b"IDAT":
            idat += data
    if ihdr is None or ihdr[8] != 8 or ihdr[9] not in (2, 6):
        return "unknown"
    rgb = zlib.decompress(idat)[1:4]
    return min(COLOURS, key=lambda c: sum((a - b) ** 2 for a, b in zip(COLOURS[c], rgb)))


def image_rule(prompt, last_user, images):
    if not images:
        return None
    return "It is %s." % first_pixel_colour(images[0])


RULES = [judge_rule, image_rule, echo_rule]


def answer_text(prompt, last_user, images=()):
    for rule in RULES:
        text = rule(prompt, last_user, images)
        if text is not None:
            return text
    return ""


def words(s):
    return len(s.split())


def provider_body(path, model, text, n_in, n):
    if path == "/v1/chat/completions":
        return {"id": f"chatcmpl-fake-{n}", "object": "chat.completion", "created": 1700000000,
                "model": model,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                             "finish_reason": "stop"}],
                "usage": {"prompt_tokens": n_in, "completion_tokens": words(text),
                          "total_tokens": n_in + words(text)}}
    if path == "/v1/responses":
        return {"id": f"resp_fake_{n}", "object": "response", "created_at": 1700000000,
                "status": "completed", "model": model,
                "output": [{"type": "message", "id": f"msg_fake_{n}", "status": "completed",
                            "role": "assistant",
                            "content": [{"type": "output_text", "text": text,
                                         "annotations": []}]}],
                "usage": {"input_tokens": n_in, "output_tokens": words(text),
                          "total_tokens": n_in + words(text)}}
    return {"id": f"msg_fake_{n}", "type": "message", "role": "assistant", "model": model,
            "content": [{"type": "text", "text": text}], "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": n_in, "output_tokens": words(text)}}


def provider_error(path, status, message):
    if path == "/v1/messages":
        kind = {401: "authentication_error", 429: "rate_limit_error"}.get(status, "api_error")
        return {"type": "error", "error": {"type": kind, "message": message}}
    code = {401: "invalid_api_key", 429: "rate_limit_exceeded"}.get(status, "server_error")
    return {"error": {"message": message, "type": "invalid_request_error" if status < 500
                      else "server_error", "param": None, "code": code}}


class Provider(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive
    api_key = None
    requests_served = 0

    def setup(self):
        super().setup()
        self.counted = False
        self.drop_next = False

    def log_message(self, *args):
        pass

    def send(self, status, body, headers=(), content_type="application/json"):
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path == "/__stats":
            with lock:
                self.send(200, stats)
        else:
            self.send(404, {"error": {"message": "no such route"}})

    def authorized(self):
        if not self.api_key:
            return True
        if self.path == "/v1/messages":
            return self.headers.get("x-api-key") == self.api_key
        return self.headers.get("Authorization") == "Bearer " + self.api_key

    def do_POST(self):
        if self.drop_next:
            count("dropped")
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if not self.counted:
            self.counted = True
            count("connections")
        count("paths", self.path)
        if self.path not in ("/v1/chat/completions", "/v1/responses", "/v1/messages"):
            return self.send(404, {"error": {"message": "no such route"}})
        try:
            req = json.loads(body or b"{}")
        except ValueError:
            return self.send(400, provider_error(self.path, 400, "the body is not JSON"))
        if not self.authorized():
            return self.send(401, provider_error(self.path, 401, "invalid API key"))
        model = str(req.get("model", ""))
        fault = self.headers.get("X-Fake-Fault") or (
            model[len("fault-"):] if model.startswith("fault-") else "")
        self.answer(req, model, fault)

    def answer(self, req, model, fault):
        path = self.path
        if fault == "429-once":
            key = self.headers.get("X-Fake-Key") or path + " " + model
            with lock:
                first = key not in seen_once
                seen_once.add(key)
            fault = "429" if first else ""
        if fault == "429":
            return self.send(429, provider_error(path, 429, "rate limit reached"),
                             [("Retry-After", "1")])
        if fault == "500":
            return self.send(500, provider_error(path, 500, "the fake server failed"))
        if fault == "close":
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        if fault == "stall":
            return self.stall()
        if fault == "malformed":
            return self.send(200, b'{"id": "broken", "choices": [', content_type="application/json")
        if fault in ("huge", "huge-chunked"):
            return self.huge(chunked=fault == "huge-chunked")
        if fault == "gzip-bomb":
            return self.send(200, gzip.compress(bytes(HUGE), 1), [("Content-Encoding", "gzip")])
        if fault == "slow":
            time.sleep(int(self.headers.get("X-Fake-Delay-Ms") or 2000) / 1000)
        with lock:
            Provider.requests_served += 1
            n = Provider.requests_served
        prompt, last_user = prompt_of(path, req)
        text = answer_text(prompt, last_user, images_of(req))
        body = json.dumps(provider_body(path, model, text, words(prompt), n)).encode()
        if fault == "gzip":
            return self.send(200, gzip.compress(body), [("Content-Encoding", "gzip")])
        self.send(200, body)
        if fault == "drop-next":
            self.drop_next = True

    def stall(self):
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", "100")
        self.end_headers()
        self.wfile.flush()
        sock = self.connection
        while True:  # until the client closes (or sends anything, which it should not)
            readable, _, _ = select.select([sock], [], [], 0.05)
            if not readable and not (isinstance(sock, ssl.SSLSocket) and sock.pending()):
                continue
            try:
                data = sock.recv(1)
            except (OSError, ssl.SSLError):
                data = b""
            if not data:
                count("aborted")
                self.close_connection = True
                return

    def huge(self, chunked):
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        if chunked:
            self.send_header("Transfer-Encoding", "chunked")
        else:
            self.send_header("Content-Length", str(HUGE))
        self.end_headers()
        block = b" " * 65536
        try:
            for _ in range(HUGE // len(block)):
                if chunked:
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(block), block))
                else:
                    self.wfile.write(block)
            if chunked:
                self.wfile.write(b"0\r\n\r\n")
        except (OSError, ssl.SSLError):
            self.close_connection = True


class TLSServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address, handler, tls):  # tls: an SSLContext, or None for plain HTTP
        super().__init__(address, handler)
        self.tls = tls

    def finish_request(self, request, client_address):
        # The handshake in the connection's own thread: a client that never completes one (or
        # refuses the certificate) holds up no other.
        try:
            if self.tls:
                request.settimeout(30)
                request = self.tls.wrap_socket(request, server_side=True)
                request.settimeout(None)
        except (OSError, ssl.SSLError):
            return
        try:
            self.RequestHandlerClass(request, client_address, self)
        except (OSError, ssl.SSLError):
            pass

    def handle_error(self, request, client_address):
        pass


# ---- the proxy ----

proxy_stats = {"connect": 0, "forward": 0, "targets": []}


def pipe(a, b):
    socks = [a, b]
    while True:
        readable, _, _ = select.select(socks, [], [], 60)
        if not readable:
            return
        for s in readable:
            try:
                data = s.recv(65536)
            except OSError:
                return
            if not data:
                return
            (b if s is a else a).sendall(data)


class Proxy(socketserver.StreamRequestHandler):
    auth = None

    def handle(self):
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.connection.recv(4096)
            if not chunk:
                return
            head += chunk
        head, rest = head.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        method, target, _ = lines[0].split(" ", 2)
        headers = {}
        for line in lines[1:]:
            k, _, v = line.partition(":")
            headers[k.strip().lower()] = v.strip()
        if target == "/__stats":
            with lock:
                data = json.dumps(proxy_stats).encode()
            self.connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                                    b"Connection: close\r\nContent-Length: %d\r\n\r\n%s"
                                    % (len(data), data))
            return
        if self.auth and headers.get("proxy-authorization") != self.auth:
            self.connection.sendall(b"HTTP/1.1 407 Proxy Authentication Required\r\n"
                                    b"Proxy-Authenticate: Basic\r\nContent-Length: 0\r\n\r\n")
            return
        if method == "CONNECT":
            host, _, port = target.rpartition(":")
            with lock:
                proxy_stats["connect"] += 1
                proxy_stats["targets"].append(target)
            try:
                upstream = socket.create_connection((host.strip("[]"), int(port)), timeout=10)
            except OSError:
                self.connection.sendall(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
                return
            upstream.settimeout(None)
            self.connection.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            pipe(self.connection, upstream)
            upstream.close()
            return
        self.forward(method, target, lines, rest, headers)

    def forward(self, method, target, lines, rest, headers):
        # http://host:port/path: sent on with Connection: close, the answer relayed until it ends.
        with lock:
            proxy_stats["forward"] += 1
            proxy_stats["targets"].append(target)
        hostport, _, path = target[len("http://"):].partition("/")
        host, _, port = hostport.rpartition(":")
        upstream = socket.create_connection((host.strip("[]"), int(port or 80)), timeout=30)
        out = [f"{method} /{path} HTTP/1.1"]
        out += [l for l in lines[1:] if not l.lower().startswith(("connection:",
                                                                   "proxy-authorization:"))]
        out.append("Connection: close")
        length = int(headers.get("content-length") or 0)
        while len(rest) < length:
            rest += self.connection.recv(65536)
        upstream.sendall(("\r\n".join(out) + "\r\n\r\n").encode("latin-1") + rest)
        while True:
            data = upstream.recv(65536)
            if not data:
                break
            self.connection.sendall(data)
        upstream.close()


class ProxyServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cert")
    ap.add_argument("--key")
    ap.add_argument("--api-key")
    ap.add_argument("--plain", action="store_true")
    ap.add_argument("--proxy", action="store_true")
    ap.add_argument("--proxy-auth", help="USER:PASSWORD the proxy asks for")
    args = ap.parse_args()
    if args.proxy:
        if args.proxy_auth:
            import base64
            Proxy.auth = "Basic " + base64.b64encode(args.proxy_auth.encode()).decode()
        server = ProxyServer(("127.0.0.1", 0), Proxy)
    else:
        tls = None
        if not args.plain:
            tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            tls.load_cert_chain(args.cert, args.key)
        Provider.api_key = args.api_key
        server = TLSServer(("127.0.0.1", 0), Provider, tls)
    print(server.server_address[1], flush=True)
    threading.Thread(target=exit_on_eof, daemon=True).start()
    server.serve_forever()


def exit_on_eof():
    while sys.stdin.buffer.read(4096):
        pass
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
