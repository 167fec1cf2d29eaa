"""Slow clients cannot hold a node (issue 14, reproduction 7; docs/decisions-api.md "Slow clients"): half-sent
or trickled headers are answered ``408`` and closed after ``server.header_timeout_s``, a trickled body is dropped
after ``server.body_timeout_s``, connections beyond ``server.max_connections`` get a clear ``503`` at once, and a
``wakeful serve`` with 256 file descriptors facing 300 half-sent requests answers ``/healthz`` again.

Real sockets on loopback against the real uvicorn server; the observable event is the server closing the
connection, within generous caps (the configured bounds are 1 s)."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from live_api import LiveApi, ServeProcess, auth, tenant, wait_for
from slow_clients import HALF_HEADERS, all_closed, connect, status_of, until_closed

from wakeful.harness.config import HttpLimits

pytestmark = pytest.mark.integration

QUICK = HttpLimits(header_timeout_s=1, body_timeout_s=1, keep_alive_s=60, max_connections=1000)


@pytest.fixture
def quick(tmp_path: Path) -> Any:
    with LiveApi(f"sqlite:///{tmp_path / 'wakeful.db'}", tmp_path / "data", http=QUICK) as live:
        yield live


@pytest.fixture
def sockets() -> Iterator[list[socket.socket]]:
    """Sockets to close when the test ends (before the server stops, so a failing test does not hang it)."""
    opened: list[socket.socket] = []
    yield opened
    for sock in opened:
        sock.close()


def test_half_sent_and_trickled_headers_are_answered_408_and_closed(quick: LiveApi,
                                                                    sockets: list[socket.socket]) -> None:
    silent = connect(quick.port)
    half = connect(quick.port, HALF_HEADERS)
    trickled = connect(quick.port, b"GET /healthz HTTP/1.1\r\n")
    sockets += [silent, half, trickled]
    answers: dict[str, bytes] = {}

    def trickle() -> None:
        answers["trickled"] = until_closed(trickled, trickle=b"X-Slow: 1\r\n", every=0.2)

    thread = threading.Thread(target=trickle)
    thread.start()
    answers["half"] = until_closed(half)
    answers["silent"] = until_closed(silent)
    thread.join(60)
    assert status_of(answers["half"]) == 408 and status_of(answers["trickled"]) == 408
    body = json.loads(answers["half"].split(b"\r\n\r\n", 1)[1])
    assert body["error"] == "request_timeout" and "1 s" in body["message"]
    assert answers["silent"] == b""  # nothing was asked: closed without an answer
    assert quick.client.get(f"{quick.url}/healthz").status_code == 200


def test_a_trickled_body_is_dropped(quick: LiveApi, sockets: list[socket.socket]) -> None:
    t = quick.call(tenant)
    head = (f"POST /v1/groups HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {t['admin']}\r\n"
            "Content-Type: application/json\r\nContent-Length: 60000\r\n\r\n{").encode()
    reading = connect(quick.port, head)  # the route reads its body: it sees a disconnect
    early = connect(quick.port, head.replace(b"/v1/groups", b"/v1/no-such-route"))  # answered 404 before the body
    sockets += [reading, early]
    got = {}

    def trickle(name: str, sock: socket.socket) -> None:
        got[name] = until_closed(sock, trickle=b" ", every=0.1)

    threads = [threading.Thread(target=trickle, args=a) for a in (("reading", reading), ("early", early))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert set(got) == {"reading", "early"}  # both were closed while still trickling
    assert status_of(got["early"]) == 404 and status_of(got["reading"]) in (None, 408)
    listed = quick.client.get(f"{quick.url}/v1/groups", headers=auth(t["admin"])).json()["items"]
    assert [g["name"] for g in listed] == ["g"]  # the dropped request created nothing


def test_connections_beyond_the_limit_get_a_clear_503(tmp_path: Path) -> None:
    limits = HttpLimits(header_timeout_s=60, body_timeout_s=60, keep_alive_s=60, max_connections=20)
    with LiveApi(f"sqlite:///{tmp_path / 'wakeful.db'}", tmp_path / "data", http=limits) as live:
        held = [httpx.Client(timeout=30, limits=httpx.Limits(max_connections=1)) for _ in range(19)]
        try:  # 19 kept-alive connections, plus the LiveApi's own client: 20 open
            assert live.client.get(f"{live.url}/healthz").status_code == 200
            assert all(c.get(f"{live.url}/healthz").status_code == 200 for c in held)
            with httpx.Client(timeout=30) as extra:
                refused = extra.get(f"{live.url}/healthz")
            assert refused.status_code == 503, refused.text
            assert refused.json()["error"] == "unavailable" and "20" in refused.json()["message"]
            assert refused.headers["retry-after"] and refused.headers["x-request-id"]
            held.pop().close()

            def answered() -> bool:
                with httpx.Client(timeout=30) as again:
                    return again.get(f"{live.url}/healthz").status_code == 200

            wait_for(answered, timeout=30, every=0.2)  # a freed slot is usable again
            info = live.client.get(f"{live.url}/v1/info", headers=auth(live.call(tenant)["admin"])).json()
            assert info["recent_refusals"]["503"] >= 1  # counted with the app's own 503s
        finally:
            for client in held:
                client.close()


def test_a_node_with_256_descriptors_survives_300_half_sent_requests(tmp_path: Path) -> None:
    node = ServeProcess(tmp_path / "data", f"sqlite:///{tmp_path / 'wakeful.db'}")
    node.env = {"WAKEFUL_SERVER__HEADER_TIMEOUT_S": "1"}
    node.prefix = ["prlimit", "--nofile=256:256", "--"]
    node.start()
    slow: list[socket.socket] = []
    try:
        slow = [connect(node.port, HALF_HEADERS) for _ in range(300)]

        def healthy() -> bool:
            try:
                return httpx.get(f"{node.url}/healthz", timeout=5).status_code == 200
            except httpx.HTTPError:
                return False

        wait_for(healthy, timeout=90, every=0.5)
        answers = all_closed(slow, cap=60)  # every half-sent request was dropped by the node
        assert {status_of(a) for a in answers} <= {408, 503}
        assert node.proc is not None and node.proc.poll() is None
    finally:
        for sock in slow:
            sock.close()
        node.close()


def test_keep_alive_requests_do_not_re_arm_the_connection_deadline(quick: LiveApi,
                                                                    sockets: list[socket.socket]) -> None:
    """Issue 16: a connection's deadline timer moves its due time with the phase and is re-armed only when it
    must fire earlier; 20 requests on one kept-alive connection arm it once (the previous code cancelled and
    armed a timer per request). A half-sent request after them is still answered 408 within the bound."""
    from wakeful.api.connections import GuardedH11Protocol

    armed: list[str] = []
    call_at = quick.loop.call_at

    def counting(when: float, callback: Any, *args: Any, **kw: Any) -> Any:
        func = getattr(callback, "__func__", None)  # (uvicorn's own keep-alive timer is not the guard's)
        if func is not None and func.__qualname__.startswith(GuardedH11Protocol.__name__ + "."):
            armed.append(func.__name__)
        return call_at(when, callback, *args, **kw)

    quick.loop.call_at = counting  # type: ignore[method-assign]
    try:
        sock = connect(quick.port)
        sockets.append(sock)
        request = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
        for _ in range(20):
            sock.sendall(request)
            got = b""
            while b"\r\n\r\n" not in got or not got.rstrip().endswith(b"}"):
                got += sock.recv(65536)
            assert status_of(got) == 200
        assert len(armed) <= 2, armed  # previous code: 20 (a head deadline armed again for each request)
        sock.sendall(b"GET /healthz HTTP/1.1\r\n")  # half a request: the head deadline still ends it
        assert status_of(until_closed(sock)) == 408
    finally:
        del quick.loop.call_at
