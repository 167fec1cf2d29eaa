"""A real HTTP server on loopback standing in for an operator's internal service (a CI API): the endpoint of
configured capabilities in tests. It records every request it gets.

Paths: ``/runs/<id>`` answers JSON naming what arrived; ``/big`` answers 20,000 bytes; ``/slow`` answers only
when ``release`` is set (the test sets it at the end); ``/text`` answers plain text.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class CiServer:
    port: int
    seen: list[Seen] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def _handler(server: CiServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # quiet
            return

        def _any(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            server.seen.append(Seen(self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body))
            if self.path.startswith("/slow"):
                server.release.wait(30)
                self._send(200, b'{"late": true}')
            elif self.path.startswith("/big"):
                self._send(200, json.dumps({"blob": "x" * 20_000}).encode())
            elif self.path.startswith("/text"):
                self._send(200, b"plain words", "text/plain")
            else:
                self._send(200, json.dumps({"path": self.path, "method": self.command}).encode())

        def _send(self, status: int, data: bytes, kind: str = "application/json") -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_PUT = _any

    return Handler


@contextmanager
def ci_server() -> Iterator[CiServer]:
    """Serve on an ephemeral loopback port in a thread until the block ends."""
    state = CiServer(port=0)
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    httpd.daemon_threads = True
    state.port = httpd.server_address[1]
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        state.release.set()
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
