"""The protocol's fast path (api/fastpath.py, issue 16) on a real node: the intake route's and the Loop create's
answers — accepted, duplicate, refused — are byte for byte those of the same requests read by h11 (the date and
the request id masked), and the requests were served on the fast path."""

from __future__ import annotations

import re
import socket
from pathlib import Path
from typing import Any

import pytest
from live_api import LiveApi, make_loop, tenant

from wakeful.api.connections import GuardedH11Protocol

pytestmark = pytest.mark.integration


def _exchange(port: int, requests: list[bytes]) -> list[bytes]:
    """Each request on one kept-alive connection, its whole answer read."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    answers = []
    try:
        for request in requests:
            sock.sendall(request)
            got = b""
            while True:
                head, sep, body = got.partition(b"\r\n\r\n")
                if sep:
                    length = re.search(rb"(?im)^content-length: *(\d+)", head)
                    if length and len(body) >= int(length[1]):
                        break
                chunk = sock.recv(65536)
                assert chunk, got
                got += chunk
            answers.append(got)
        return answers
    finally:
        sock.close()


def _masked(answer: bytes) -> bytes:
    answer = re.sub(rb"(?im)^(date|x-request-id): [^\r]*", rb"\1: *", answer)
    return re.sub(rb"req_[0-9a-f]{16}", b"req_*", answer)


def _requests(t: dict[str, str], loop_id: str, tag: bytes) -> list[bytes]:
    def post(path: str, body: bytes, key: str, content_type: bytes = b"application/json") -> bytes:
        return (b"POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\nContent-Type: %s\r\n"
                b"Content-Length: %d\r\n\r\n%s" % (path.encode(), key.encode(), content_type, len(body), body))

    events = f"/v1/agent-groups/{t['group']}/loops/{loop_id}/events"
    loops = f"/v1/agent-groups/{t['group']}/loops"
    return [
        post(events, b'{"event_id":"%s","topic":"t","payload":{"a":1}}' % tag, t["gkey"]),  # 202
        post(events, b'{"event_id":"%s","topic":"t","payload":{"a":2}}' % tag, t["gkey"]),  # 202, a duplicate
        post(events, b'{"topic":"t"}', "wk_nope"),  # 401
        post(events.replace(loop_id, "lp_nope"), b'{"topic":"t"}', t["gkey"]),  # 404
        post(events, b'{"topic":"t"}', t["gkey"], b"text/plain"),  # 415
        post(events, b'{"topic":', t["gkey"]),  # 400, not JSON
        post(loops, b'{"name":"x"}', t["akey"]),  # the create of a Loop, refused (400)
    ]


def test_a_node_answers_the_same_bytes_on_the_fast_path_as_through_h11(tmp_path: Path, compile_c: Any,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    with LiveApi(f"sqlite:///{tmp_path / 'wakeful.db'}", tmp_path / "data") as live:
        t = live.call(tenant)
        loop_id = make_loop(live, t, compile_c)
        protocols: list[Any] = []
        made = GuardedH11Protocol.connection_made

        def counting(self: Any, transport: Any) -> None:
            made(self, transport)
            protocols.append(self)

        monkeypatch.setattr(GuardedH11Protocol, "connection_made", counting)
        fast = _exchange(live.port, _requests(t, loop_id, b"e1"))
        fast_count = sum(getattr(p, "fast_served", 0) for p in protocols)
        monkeypatch.setattr(GuardedH11Protocol, "fast_path", False, raising=False)
        protocols.clear()
        slow = _exchange(live.port, _requests(t, loop_id, b"e2"))
        slow_count = sum(getattr(p, "fast_served", 0) for p in protocols)
    assert [a.split(b"\r\n", 1)[0] for a in fast] == [
        b"HTTP/1.1 202 Accepted", b"HTTP/1.1 202 Accepted", b"HTTP/1.1 401 Unauthorized", b"HTTP/1.1 404 Not Found",
        b"HTTP/1.1 415 Unsupported Media Type", b"HTTP/1.1 400 Bad Request",
        b"HTTP/1.1 400 Bad Request"], fast
    assert [_masked(a) for a in fast] == [_masked(a).replace(b'"e2"', b'"e1"') for a in slow]
    assert fast_count == len(fast) and slow_count == 0
