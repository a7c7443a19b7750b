"""The Chrome DevTools Protocol over a minimal WebSocket client (the standard library has none):
enough to evaluate an expression in a page, awaiting a promise. Shared by the serve and viewer
tests and benchmarks/read_back.py, with open_chromium, which starts the browser they drive."""
import base64
import json
import os
import re
import socket
import struct
import subprocess
import urllib.parse
import urllib.request


class Cdp:
    """A page's DevTools connection; `timeout` (seconds) bounds each socket operation: a deadlock
    guard, never a synchronisation."""

    def __init__(self, ws_url, timeout=120):
        u = urllib.parse.urlparse(ws_url)
        self.sock = socket.create_connection((u.hostname, u.port), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall(("GET %s HTTP/1.1\r\nHost: %s:%d\r\nUpgrade: websocket\r\n"
                           "Connection: Upgrade\r\nSec-WebSocket-Key: %s\r\n"
                           "Sec-WebSocket-Version: 13\r\n\r\n"
                           % (u.path, u.hostname, u.port, key)).encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(4096)
            assert chunk, "the DevTools socket closed during the handshake"
            head += chunk
        assert b" 101 " in head.split(b"\r\n")[0], head
        self.buf = head.split(b"\r\n\r\n", 1)[1]
        self.last_id = 0

    def _exact(self, n):
        while len(self.buf) < n:
            chunk = self.sock.recv(65536)
            assert chunk, "the DevTools socket closed"
            self.buf += chunk
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def _send(self, text):
        data, mask = text.encode(), os.urandom(4)
        n = len(data)
        head = bytes([0x81]) + (bytes([0x80 | n]) if n < 126 else
                                bytes([0x80 | 126]) + struct.pack(">H", n) if n < 65536 else
                                bytes([0x80 | 127]) + struct.pack(">Q", n))
        self.sock.sendall(head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(data)))

    def _message(self):
        text = b""
        while True:
            b0, b1 = self._exact(2)
            n = b1 & 0x7F
            if n == 126:
                n = struct.unpack(">H", self._exact(2))[0]
            elif n == 127:
                n = struct.unpack(">Q", self._exact(8))[0]
            payload = self._exact(n)
            if b0 & 0x0F in (0, 1, 2):
                text += payload
                if b0 & 0x80:
                    return json.loads(text.decode())

    def evaluate(self, expression):
        # The page may still be replacing about:blank when we attach, or be navigating: that
        # context's end fails the call, and it is asked again in the page that replaced it.
        for _ in range(100):
            self.last_id += 1
            self._send(json.dumps({"id": self.last_id, "method": "Runtime.evaluate",
                                   "params": {"expression": expression, "awaitPromise": True,
                                              "returnByValue": True}}))
            while True:
                m = self._message()
                if m.get("id") == self.last_id:
                    break
            if "result" in m and "exceptionDetails" not in m["result"]:
                return m["result"]["result"].get("value")
            said = json.dumps(m)
            assert "context" in said or "navigated" in said, m
        raise AssertionError("the page never settled")


def open_chromium(chromium, profile, url, extra=(), timeout=120):
    """Headless Chromium on `url` with a DevTools port: its process (the caller kills it and
    closes its stderr) and the DevTools entries of its pages."""
    browser = subprocess.Popen(
        [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--remote-debugging-port=0",
         *extra, "--user-data-dir=" + profile, url],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    port = None
    for line in browser.stderr:
        m = re.search(r"DevTools listening on ws://127\.0\.0\.1:(\d+)/", line)
        if m:
            port = int(m.group(1))
            break
    if not port:
        browser.kill()
        browser.wait(timeout)
        browser.stderr.close()
        raise AssertionError("chromium printed no DevTools address")
    with urllib.request.urlopen("http://127.0.0.1:%d/json/list" % port, timeout=timeout) as r:
        return browser, [t for t in json.load(r) if t["type"] == "page"]
