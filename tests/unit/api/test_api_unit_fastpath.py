"""The protocol's fast path (api/fastpath.py, issue 16) against h11 as the oracle: the same requests served by the
node's protocol with and without the fast path, over real loopback, give the same ASGI scopes and the same bytes;
heads the fast path takes are parsed as h11 parses them (hypothesis); hostile heads are h11's alone; keep-alive,
pipelining, the body deadline, a client's disconnect and a graceful shutdown behave as on h11."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import h11
import pytest
import uvicorn
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from uvicorn.server import ServerState

from wakeful.api.connections import GuardedH11Protocol, guarded_protocol
from wakeful.harness.config import HttpLimits

DATE = (b"date", b"Mon, 07 Dec 2026 21:00:00 GMT")
EVENTS = "/v1/agent-groups/g1/loops/lp_1/events"


class _App:
    """Records each request's scope and body; answers as the query asks."""

    def __init__(self) -> None:
        self.scopes: list[dict[str, Any]] = []
        self.bodies: list[bytes] = []
        self.after: list[dict[str, Any]] = []  # what receive() gave after the body (mode=wait)
        self.release = asyncio.Event()
        self.started = asyncio.Event()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        mode = scope["query_string"].decode()
        self.scopes.append(dict(scope))
        body = b""
        if mode != "early":
            while True:
                message = await receive()
                if message["type"] != "http.request":
                    break
                body += message["body"]
                if not message["more_body"]:
                    break
        self.bodies.append(body)
        if mode == "wait":
            self.started.set()
            waiter = asyncio.ensure_future(receive())
            await asyncio.wait([waiter, asyncio.ensure_future(self.release.wait())],
                               return_when=asyncio.FIRST_COMPLETED)
            if waiter.done():
                self.after.append(waiter.result())
                return
            waiter.cancel()
        answer = json.dumps({"status": "accepted", "n": len(body)}).encode()
        if mode == "chunked":
            await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
            await send({"type": "http.response.body", "body": b"one", "more_body": True})
            await send({"type": "http.response.body", "body": b"two"})
            return
        headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(answer)),
                   (b"x-request-id", b"req_1")]
        if mode == "close":
            headers.append((b"connection", b"close"))
        if mode == "short":
            headers[1] = (b"content-length", b"%d" % (len(answer) + 5))
        if mode == "bad":
            headers.append((b"x-bad", b"a\x00b"))
        await send({"type": "http.response.start", "status": 202, "headers": headers})
        if mode == "split":
            await send({"type": "http.response.body", "body": answer[:5], "more_body": True})
            await send({"type": "http.response.body", "body": answer[5:]})
        else:
            await send({"type": "http.response.body", "body": answer})


@asynccontextmanager
async def _serve(app: _App, *, fast: bool, body_s: int = 30, head_s: int = 10
                 ) -> AsyncIterator[tuple[int, list[Any], ServerState]]:
    base = guarded_protocol(HttpLimits(header_timeout_s=head_s, body_timeout_s=body_s), 100)
    protocol: type[GuardedH11Protocol] = type("P", (base,), {"fast_path": fast})
    config = uvicorn.Config(app, http=protocol, access_log=False, log_config=None, lifespan="off",
                            server_header=False, timeout_keep_alive=30)
    config.load()
    state = ServerState()
    state.default_headers = [DATE]
    made: list[Any] = []

    def factory() -> Any:
        made.append(protocol(config=config, server_state=state, app_state={}))
        return made[-1]

    server = await asyncio.get_running_loop().create_server(factory, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1], made, state
    finally:
        server.close()
        for p in made:
            p.transport.close()
        await asyncio.sleep(0.05)  # (a running app sees the disconnect before the comparison)


def _fast_count(made: list[Any]) -> int:
    return sum(getattr(p, "fast_served", 0) for p in made)


async def _exchange(port: int, chunks: list[bytes], pause: float = 0.05) -> bytes:
    """Send the chunks (pausing between them), then read until the server closes or goes quiet."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    for i, chunk in enumerate(chunks):
        if i:
            await asyncio.sleep(pause)
        writer.write(chunk)
        await writer.drain()
    out = b""
    while True:
        try:
            data = await asyncio.wait_for(reader.read(65536), 0.5)
        except TimeoutError:
            break
        if not data:
            out += b"<EOF>"
            break
        out += data
    writer.close()
    return out


def _post(target: str = EVENTS, body: bytes = b'{"kind":"x"}', extra: bytes = b"") -> bytes:
    return (b"POST " + target.encode() + b" HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer k\r\n" + extra
            + b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body) + body)


async def _both(chunks: list[bytes]) -> tuple[tuple[bytes, list[dict[str, Any]], list[bytes], int], ...]:
    out = []
    for fast in (True, False):
        app = _App()
        async with _serve(app, fast=fast) as (port, made, _):
            raw = await _exchange(port, chunks)
            for scope in app.scopes:
                scope["client"] = scope["server"] = None
            out.append((raw, app.scopes, app.bodies, _fast_count(made)))
    return tuple(out)


CASES = {
    "plain": [_post()],
    "query and escapes": [_post(EVENTS.replace("lp_1", "lp%5F1") + "?a=1&b=%20")],
    "keep-alive header, odd spacing": [_post(extra=b"Connection: keep-alive\r\nX-A:\t v  v \t\r\nX-Empty:\r\n")],
    "an empty body": [_post(body=b"")],
    "split answer": [_post(EVENTS + "?split")],
    "chunked answer": [_post(EVENTS + "?chunked")],
    "close answer": [_post(EVENTS + "?close"), _post()],
    "an answer shorter than its length": [_post(EVENTS + "?short")],
    "an answer with a bad header": [_post(EVENTS + "?bad")],
    "the body in a later write": [_post()[:-4], _post()[-4:]],
    "the body in three writes": [_post()[:-6], _post()[-6:-3], _post()[-3:]],
    "an early answer, the body after it": [_post(EVENTS + "?early")[:-4], _post(EVENTS + "?early")[-4:], _post()],
    "keep-alive": [_post(), _post(body=b'{"n":2}'), _post(body=b'{"n":3}')],
    "pipelined, h11 in the middle": [_post() + b"GET /v1/x HTTP/1.1\r\nHost: h\r\n\r\n" + _post(body=b"[2]")
                                     + _post(body=b"[3]")],
    "pipelined, cut in a head": [(_post() + _post(body=b"[2]"))[:-30], (_post() + _post(body=b"[2]"))[-30:]],
    "a create of a Loop": [_post("/v1/agent-groups/g1/loops")],
}


@pytest.mark.parametrize("case", list(CASES))
def test_the_fast_path_gives_h11s_scope_and_bytes(case: str) -> None:
    (raw, scopes, bodies, served), (h11_raw, h11_scopes, h11_bodies, h11_served) = asyncio.run(_both(CASES[case]))
    assert raw == h11_raw and raw
    assert scopes == h11_scopes and bodies == h11_bodies
    assert served >= 1 and h11_served == 0  # (the base tree has no fast path: nothing counted)


HOSTILE = {
    "bad length": _post().replace(b"Content-Length: 12", b"Content-Length: 1x"),
    "a negative length": _post().replace(b"Content-Length: 12", b"Content-Length: -12"),
    "two lengths": _post(extra=b"Content-Length: 12\r\n"),
    "two different lengths": _post(extra=b"Content-Length: 13\r\n"),
    "length list": _post().replace(b"Content-Length: 12", b"Content-Length: 12, 12"),
    "chunked": _post(extra=b"Transfer-Encoding: chunked\r\n"),
    "chunked alone": (b"POST " + EVENTS.encode() + b" HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
                      b"2\r\n{}\r\n0\r\n\r\n"),
    "obs-fold": _post(extra=b"X-A: one\r\n two\r\n"),
    "bare LF": _post().replace(b"\r\nAuthorization", b"\nAuthorization"),
    "LF only": _post().replace(b"\r\n", b"\n"),
    "NUL in a value": _post(extra=b"X-A: a\x00b\r\n"),
    "obs-text in a value": _post(extra=b"X-A: caf\xe9\r\n"),
    "space before colon": _post(extra=b"X-A : b\r\n"),
    "no host": _post().replace(b"Host: 127.0.0.1\r\n", b""),
    "two hosts": _post(extra=b"Host: other\r\n"),
    "HTTP/1.0": _post().replace(b"HTTP/1.1", b"HTTP/1.0"),
    "expect": _post(extra=b"Expect: 100-continue\r\n"),
    "connection close": _post(extra=b"Connection: close\r\n") + _post(),
    "upgrade": _post(extra=b"Connection: upgrade\r\nUpgrade: websocket\r\n"),
    "a big head": _post(extra=b"X-Big: " + b"a" * 9000 + b"\r\n"),
    "a huge head": _post(extra=b"X-Big: " + b"a" * 20000 + b"\r\n"),
    "absolute target": _post("http://h" + EVENTS),
    "an over-long body": _post(body=b"[" + b"1," * 40000 + b"1]"),
    "lower-case method": _post().replace(b"POST", b"post", 1),
    "another route": _post("/v1/agent-groups/g1/decide"),
}


@pytest.mark.parametrize("case", list(HOSTILE))
def test_hostile_and_unusual_heads_get_exactly_h11s_answer(case: str) -> None:
    (raw, scopes, bodies, served), (h11_raw, h11_scopes, h11_bodies, _) = asyncio.run(_both([HOSTILE[case]]))
    assert raw == h11_raw and scopes == h11_scopes and bodies == h11_bodies
    if case == "connection close":  # the request after the first one's close was not read
        assert raw.endswith(b"<EOF>")
    assert served == 0


def test_keep_alive_and_pipelined_requests_are_served_in_order_on_the_fast_path() -> None:
    async def main() -> None:
        app = _App()
        async with _serve(app, fast=True) as (port, made, state):
            raw = await _exchange(port, [_post(body=b"[1]") + _post(body=b"[22]") + _post(body=b"[333]"),
                                         _post(body=b"[4444]")])
            assert [b.decode() for b in app.bodies] == ["[1]", "[22]", "[333]", "[4444]"]
            assert raw.count(b"HTTP/1.1 202 Accepted") == 4 and b'"n": 3' in raw.split(b"HTTP/1.1")[1]
            assert _fast_count(made) == 4 and len(made) == 1 and state.total_requests == 4

    asyncio.run(main())


def test_a_body_that_stops_coming_on_the_fast_path_is_answered_408_and_the_app_sees_a_disconnect() -> None:
    async def run() -> None:
        app = _App()
        async with _serve(app, fast=True, body_s=1) as (port, made, _):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(_post()[:-5])
            answer = await asyncio.wait_for(reader.read(), 10)  # until the node closes
            writer.close()
            assert answer.startswith(b"HTTP/1.1 408 Request Timeout\r\n")
            assert _fast_count(made) == 1
            assert app.bodies == [b'{"kind"']  # what came, then the disconnect the deadline gave

    asyncio.run(run())


def test_a_client_gone_while_the_app_runs_is_a_disconnect_to_the_app() -> None:
    async def main() -> None:
        app = _App()
        async with _serve(app, fast=True) as (port, made, _):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(_post(EVENTS + "?wait"))
            await asyncio.wait_for(app.started.wait(), 5)
            writer.close()
            for _ in range(100):
                if app.after:
                    break
                await asyncio.sleep(0.05)
            assert app.after == [{"type": "http.disconnect"}]
            assert _fast_count(made) == 1

    asyncio.run(main())


def test_a_graceful_shutdown_lets_a_running_fast_request_answer_then_closes() -> None:
    async def main() -> None:
        app = _App()
        async with _serve(app, fast=True) as (port, made, state):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(_post(EVENTS + "?wait"))
            await asyncio.wait_for(app.started.wait(), 5)
            for p in list(state.connections):
                p.shutdown()  # as uvicorn's Server.shutdown does
            assert state.tasks  # the request is still running: the server waits for it
            app.release.set()
            answer = await asyncio.wait_for(reader.read(), 5)  # the answer, then the close
            writer.close()
            assert answer.startswith(b"HTTP/1.1 202 Accepted\r\n") and answer.endswith(b'"n": 12}')
            assert _fast_count(made) == 1

    asyncio.run(main())


def test_after_a_fast_request_a_trickled_head_is_answered_408() -> None:
    async def main() -> None:
        app = _App()
        async with _serve(app, fast=True, head_s=1) as (port, made, _):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(_post())
            first = await asyncio.wait_for(reader.readuntil(b'"n": 12}'), 5)
            writer.write(b"POST /v1/agent")
            rest = await asyncio.wait_for(reader.read(), 10)
            writer.close()
            assert first.startswith(b"HTTP/1.1 202 ") and rest.startswith(b"HTTP/1.1 408 Request Timeout\r\n")
            assert _fast_count(made) == 1

    asyncio.run(main())


# ---------------------------------------------------------------------------- the parser against h11


def _h11_parse(head: bytes) -> tuple[bytes, list[tuple[bytes, bytes]], int] | None:
    conn = h11.Connection(h11.SERVER)
    conn.receive_data(head)
    try:
        event = conn.next_event()
    except h11.RemoteProtocolError:
        return None
    if not isinstance(event, h11.Request) or event.method != b"POST" or event.http_version != b"1.1":
        return None
    headers = list(event.headers)
    lengths = [int(v) for k, v in headers if k == b"content-length"]
    return event.target, headers, lengths[0] if lengths else -1


_NAMES = st.sampled_from([b"Host", b"host", b"Content-Length", b"content-length", b"Connection", b"Transfer-Encoding",
                          b"Expect", b"Upgrade", b"X-A", b"Authorization", b"Content-Type", b"X A", b"", b"X:A"])
_VALUES = st.one_of(
    st.sampled_from([b"12", b"0", b"012", b"1,1", b" 12 ", b"chunked", b"keep-alive", b"close", b"Keep-Alive",
                     b"h", b"", b"\t", b"a b", b"a\x00b", b"a\rb", b"a\nb", b"\xff", b"\x7f", b"a\x01"]),
    st.binary(max_size=8))
_TARGETS = st.one_of(st.sampled_from([EVENTS.encode(), b"/", b"/a?b", b"*", b"http://h/a", b"/a b", b"/\x80"]),
                     st.binary(max_size=6).map(lambda b: b"/" + b))


@st.composite
def _heads(draw: Any) -> bytes:
    """Mostly heads the fast path could take (a POST line, Host and Content-Length usually there), with random
    extra fields, odd separators and, now and then, a random byte put somewhere."""
    line = draw(st.sampled_from([b"POST %s HTTP/1.1"] * 30 + [
        b"POST %s HTTP/1.0", b"GET %s HTTP/1.1", b"POST  %s HTTP/1.1", b"POST %s HTTP/1.1 ", b"POST %s http/1.1"]))
    good = st.sampled_from([EVENTS.encode(), b"/v1/agent-groups/g/loops?x=%41", b"/a/%2f?"])
    line %= draw(st.one_of(good, good, good, good, _TARGETS))
    separator = st.sampled_from([b": "] * 12 + [b":", b":\t", b" :", b":  "])
    ending = st.sampled_from([b"\r\n"] * 24 + [b"\n", b"\r\n ", b"\r"])
    fields = []
    if draw(st.integers(0, 9)) != 9:
        fields.append((b"Host", draw(separator), draw(st.sampled_from([b"h", b"127.0.0.1:8470", b"", b"a b"]))))
    if draw(st.integers(0, 9)) != 9:
        fields.append((b"Content-Length", draw(separator), draw(st.sampled_from([b"12", b"0", b"012", b"1,1", b"x"]))))
    plain = st.tuples(st.sampled_from([b"X-A", b"Authorization", b"Content-Type", b"Accept"]),
                      separator, st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126), max_size=12)
                      .map(lambda v: v.encode().strip()))
    fields += draw(st.lists(st.one_of(plain, plain, plain, st.tuples(_NAMES, separator, _VALUES)), max_size=4))
    fields = draw(st.permutations(fields))
    head = line + b"\r\n" + b"".join(n + c + v + draw(st.sampled_from([b"", b"", b" ", b"\t"])) + draw(ending)
                                    for n, c, v in fields) + b"\r\n"
    if draw(st.integers(0, 3)) == 3:  # a random byte put somewhere
        at = draw(st.integers(0, len(head)))
        head = head[:at] + draw(st.binary(min_size=1, max_size=2)) + head[at:]
    return head


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_heads())
def test_a_head_the_fast_path_takes_is_one_h11_parses_the_same(head: bytes) -> None:
    from wakeful.api.fastpath import parse_head

    end = head.find(b"\r\n\r\n") + 4
    if end < 4:
        return
    ours = parse_head(head, end)
    if ours is not None:
        assert _h11_parse(head[:end]) == ours, head


def test_the_parser_takes_the_benchmark_clients_head() -> None:
    from wakeful.api.fastpath import parse_head

    head = _post(body=b"")
    assert parse_head(head, len(head)) == _h11_parse(head) != None  # noqa: E711
