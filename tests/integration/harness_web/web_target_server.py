"""A loopback HTTP server for ``web.http_request`` tests: echo, sizes, binary, slow, redirects.

Bound to 127.0.0.2 (tests allow exactly 127.0.0.2/32 through ``web.allow_networks``); ``hits`` counts
every request by path, so a test can show that a refused target was never contacted.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

HOST = "127.0.0.2"


class TargetServer:
    def __init__(self, host: str = HOST) -> None:
        self.hits: Counter[str] = Counter()
        self.lock = threading.Lock()
        self.server = ThreadingHTTPServer((host, 0), self._handler())
        self.server.daemon_threads = True
        self.server.block_on_close = False  # closing does not wait out a /slow answer its client gave up on

    @property
    def base(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _send(self, status: int, body: bytes, kind: str = "text/plain; charset=utf-8",
                      extra: dict[str, str] | None = None) -> None:
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Set-Cookie", "session=secret")
                self.send_header("X-Custom", "v" * 600)
                for k, v in (extra or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                if self.command != "HEAD":
                    with suppress(BrokenPipeError, ConnectionResetError):
                        self.wfile.write(body)

            def _any(self) -> None:
                parts = urlsplit(self.path)
                query = {k: v[0] for k, v in parse_qs(parts.query).items()}
                with owner.lock:
                    owner.hits[parts.path] += 1
                length = int(self.headers.get("Content-Length", "0") or 0)
                body = self.rfile.read(length) if length else b""
                path = parts.path
                if path == "/echo":
                    out = {"method": self.command, "headers": {k.lower(): v for k, v in self.headers.items()},
                           "body": body.decode("utf-8", "replace"), "path": self.path}
                    self._send(200, json.dumps(out).encode(), "application/json")
                elif path == "/big":
                    self._send(200, b"0123456789" * int(query.get("n", "2000")))
                elif path == "/bin":
                    self._send(200, bytes(range(256)) * 60, "application/octet-stream")
                elif path == "/utf8":
                    self._send(200, "héllo wörld ✓".encode() + b"\xff", "text/html")
                elif path == "/slow":
                    time.sleep(float(query.get("s", "2")))
                    self._send(200, b"late")
                elif path == "/redirect":
                    time.sleep(float(query.get("delay", "0")))
                    self._send(int(query.get("status", "302")), b"", extra={"Location": query["to"]})
                elif path == "/headers":  # n distinct headers, then one name twice
                    many = {f"X-H{i:02d}": str(i) for i in range(int(query.get("n", "40")))}
                    self._send(200, b"h", extra=many)
                elif path.startswith("/chain/"):
                    left = int(path.rsplit("/", 1)[1])
                    if left == 0:
                        self._send(200, b"end of chain")
                    else:
                        self._send(302, b"", extra={"Location": f"/chain/{left - 1}"})
                else:
                    self._send(200, b"hello")

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_OPTIONS = do_HEAD = _any

            def log_message(self, *args: Any) -> None:
                pass

        return Handler


@contextmanager
def serving(host: str = HOST) -> Iterator[TargetServer]:
    target = TargetServer(host)
    thread = threading.Thread(target=target.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield target
    finally:
        target.server.shutdown()
        target.server.server_close()
