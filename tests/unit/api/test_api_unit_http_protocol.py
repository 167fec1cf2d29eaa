"""The node's HTTP protocol is uvicorn's httptools one with the slow-client guards of issue 14 ported to it
(issue 16; docs/decisions-api.md "Slow clients"): the deadline follows the reading of each request — ``head`` until
its headers are in, ``body`` until its message is (also while the app reads or after it answered), none while the
app answers — and a request line and headers over ``MAX_HEAD_BYTES`` are answered ``400`` and closed.

The protocol is driven here byte by byte on a real event loop with a transport that records what is written;
the deadlines' expiry over real sockets is tests/integration/api/test_api_slow_clients.py."""

from __future__ import annotations

import asyncio
from typing import Any

import uvicorn
from uvicorn.server import ServerState

from wakeful.api.connections import MAX_HEAD_BYTES, GuardedHttpToolsProtocol, guarded_protocol
from wakeful.harness.config import HttpLimits

LIMITS = HttpLimits(header_timeout_s=11, body_timeout_s=22, keep_alive_s=5, max_connections=10)


class _Socket(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.written = b""
        self.closing = False

    def write(self, data: Any) -> None:
        self.written += bytes(data)

    def close(self) -> None:
        self.closing = True

    def is_closing(self) -> bool:
        return self.closing

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 5000), "sockname": ("127.0.0.1", 80)}.get(name, default)

    def get_write_buffer_size(self) -> int:
        return 0

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


class _App:
    """Reads the whole body, then answers once ``go`` is set."""

    def __init__(self) -> None:
        self.go = asyncio.Event()
        self.bodies: list[bytes] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        body, more = b"", True
        while more:
            message = await receive()
            body, more = body + message.get("body", b""), message.get("more_body", False)
        self.bodies.append(body)
        await self.go.wait()
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
        await send({"type": "http.response.body", "body": b"ok"})


def _open(app: _App) -> tuple[GuardedHttpToolsProtocol, _Socket]:
    cls = guarded_protocol(LIMITS, 10)
    config = uvicorn.Config(app, http=cls, lifespan="off", log_config=None, access_log=False)
    config.load()
    proto = cls(config=config, server_state=ServerState(), app_state={})
    sock = _Socket()
    proto.connection_made(sock)
    return proto, sock


def _deadline(proto: GuardedHttpToolsProtocol) -> tuple[str, float | None]:
    """The phase the connection's deadline is armed for and the seconds it was armed with (roughly)."""
    handle = proto._deadline
    if handle is None:
        return proto._phase, None
    return proto._phase, round(handle.when() - asyncio.get_running_loop().time())


async def _turns(n: int = 5) -> None:
    for _ in range(n):
        await asyncio.sleep(0)


def test_the_server_protocol_is_the_guarded_httptools_one() -> None:
    assert issubclass(guarded_protocol(LIMITS, 10), GuardedHttpToolsProtocol)


def test_the_deadline_follows_each_request_through_head_body_app_and_the_next_head() -> None:
    async def run() -> None:
        app = _App()
        proto, sock = _open(app)
        assert _deadline(proto) == ("head", 11)  # a fresh connection: the headers' deadline
        proto.data_received(b"POST /x HTTP/1.1\r\nHost: a\r\n")
        assert _deadline(proto) == ("head", 11)  # part of the head: the same deadline stands
        proto.data_received(b"Content-Length: 6\r\n\r\nabc")
        assert _deadline(proto) == ("body", 22)  # headers in: the body's deadline, while the app reads
        await _turns()
        proto.data_received(b"def")
        assert _deadline(proto) == ("", None)  # the whole request in: the app's time, no client deadline
        await _turns()
        assert app.bodies == [b"abcdef"]
        app.go.set()
        await _turns()
        assert sock.written.startswith(b"HTTP/1.1 200") and sock.written.endswith(b"ok")
        assert _deadline(proto) == ("head", 11)  # answered: the next request's headers
        proto.connection_lost(None)
        assert proto._deadline is None

    asyncio.run(run())


def test_a_body_still_arriving_after_an_early_answer_keeps_its_deadline() -> None:
    async def run() -> None:
        app = _App()
        app.go.set()
        proto, sock = _open(app)

        async def early(scope: Any, receive: Any, send: Any) -> None:  # answers without reading the body
            await send({"type": "http.response.start", "status": 404, "headers": [(b"content-length", b"0")]})
            await send({"type": "http.response.body", "body": b""})

        proto.app = early
        proto.data_received(b"POST /nowhere HTTP/1.1\r\nContent-Length: 100\r\n\r\nab")
        await _turns()
        assert sock.written.startswith(b"HTTP/1.1 404")
        assert _deadline(proto) == ("body", 22)

    asyncio.run(run())


def test_a_head_over_the_bound_is_answered_400_and_closed() -> None:
    async def run() -> None:
        proto, sock = _open(_App())
        proto.data_received(b"GET / HTTP/1.1\r\n" + b"X-Big: " + b"a" * MAX_HEAD_BYTES + b"\r\n")
        assert sock.written.startswith(b"HTTP/1.1 400") and sock.closing

    asyncio.run(run())


def test_a_head_trickled_past_the_bound_is_refused_and_a_big_body_with_its_head_is_not() -> None:
    async def run() -> None:
        proto, sock = _open(_App())
        sent = b"GET / HTTP/1.1\r\nX-Big: "
        proto.data_received(sent)
        while not sock.closing:
            proto.data_received(b"a" * 1024)
            sent += b"a" * 1024
        assert MAX_HEAD_BYTES < len(sent) <= MAX_HEAD_BYTES + 1024
        assert sock.written.startswith(b"HTTP/1.1 400")

        app = _App()
        proto, sock = _open(app)
        body = b"x" * (4 * MAX_HEAD_BYTES)
        proto.data_received(b"POST / HTTP/1.1\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
        await _turns()
        assert not sock.closing and app.bodies == [body]

    asyncio.run(run())
