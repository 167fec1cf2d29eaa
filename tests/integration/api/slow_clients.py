"""Raw-socket slow clients for the connection-limit tests: half-sent requests, trickled bytes, and the server
closing the connection as the observable event (a generous cap, never a timing assertion)."""

from __future__ import annotations

import selectors
import socket
import time

HALF_HEADERS = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: slow\r\n"  # no blank line: never ends


def connect(port: int, data: bytes = b"") -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    if data:
        sock.sendall(data)
    return sock


def until_closed(sock: socket.socket, *, trickle: bytes = b"", every: float = 0.1, cap: float = 30.0) -> bytes:
    """What the server sent until it closed the connection, sending ``trickle`` every ``every`` s meanwhile;
    AssertionError when it is still open after ``cap`` s."""
    deadline = time.monotonic() + cap
    got = b""
    while time.monotonic() < deadline:
        if _readable(sock, every):
            try:
                chunk = sock.recv(65536)
            except (ConnectionResetError, TimeoutError):
                return got
            if not chunk:
                return got
            got += chunk
            continue
        if trickle:
            try:
                sock.send(trickle)
            except (BrokenPipeError, ConnectionResetError):
                return got
    raise AssertionError(f"the server kept the connection open for {cap} s (received {got[:80]!r})")


def all_closed(socks: list[socket.socket], *, cap: float = 60.0) -> list[bytes]:
    """Wait until the server closed every socket (their answers, in order); AssertionError after ``cap`` s."""
    got = {s: b"" for s in socks}
    with selectors.DefaultSelector() as selector:  # epoll: descriptors above 1,023 too
        for sock in socks:
            selector.register(sock, selectors.EVENT_READ)
        deadline = time.monotonic() + cap
        while selector.get_map() and time.monotonic() < deadline:
            for ready, _ in selector.select(0.2):
                sock = ready.fileobj
                assert isinstance(sock, socket.socket)
                try:
                    chunk = sock.recv(65536)
                except (ConnectionResetError, TimeoutError):
                    chunk = b""
                if chunk:
                    got[sock] += chunk
                else:
                    selector.unregister(sock)
        still = len(selector.get_map())
    if still:
        raise AssertionError(f"{still} of {len(socks)} connections still open after {cap} s")
    return [got[s] for s in socks]


def _readable(sock: socket.socket, timeout: float) -> bool:
    with selectors.DefaultSelector() as selector:
        selector.register(sock, selectors.EVENT_READ)
        return bool(selector.select(timeout))


def status_of(answer: bytes) -> int | None:
    """The status code of a raw HTTP answer, or None when nothing was answered."""
    if not answer.startswith(b"HTTP/1."):
        return None
    return int(answer.split(b" ", 2)[1])
