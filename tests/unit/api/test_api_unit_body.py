"""``read_bounded`` (the intake routes' bounded body read): the same answers whether it reads the ASGI messages
itself (a fresh request, issue 16) or through ``Request.stream`` (a body already read)."""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import pytest
from starlette.requests import Request

from wakeful.api.body import read_bounded
from wakeful.harness.errors import PayloadTooLarge

_SCOPE: dict[str, Any] = {"type": "http", "method": "POST", "path": "/", "headers": [], "query_string": b""}


def _request(messages: list[dict[str, Any]]) -> tuple[Request, list[dict[str, Any]]]:
    queue = list(messages)

    async def receive() -> dict[str, Any]:
        return queue.pop(0)

    return Request(dict(_SCOPE), receive), queue


def _chunks(*parts: bytes) -> list[dict[str, Any]]:
    return [{"type": "http.request", "body": p, "more_body": n < len(parts) - 1} for n, p in enumerate(parts)]


@pytest.mark.parametrize("parts", [(b"",), (b'{"topic":"t"}',), (b'{"to', b"", b'pic":"t"}'), (b"", b"x")])
def test_the_body_is_every_chunk_and_the_stream_is_consumed(parts: tuple[bytes, ...]) -> None:
    request, left = _request(_chunks(*parts))
    assert asyncio.run(read_bounded(request, 64)) == b"".join(parts)
    assert left == [] and request._stream_consumed

    async def again() -> None:
        with pytest.raises(RuntimeError, match="Stream consumed"):
            async for _ in request.stream():
                pass

    asyncio.run(again())


@pytest.mark.parametrize("parts", [(b"x" * 65,), (b"x" * 40, b"y" * 25)])
def test_a_body_over_the_limit_is_refused_as_soon_as_it_is_over(parts: tuple[bytes, ...]) -> None:
    request, _ = _request(_chunks(*parts, b"never read"))
    with pytest.raises(PayloadTooLarge):
        asyncio.run(read_bounded(request, 64))


def test_a_disconnect_before_the_end_is_payload_too_large_and_marks_the_request() -> None:
    request, _ = _request([{"type": "http.request", "body": b"{", "more_body": True}, {"type": "http.disconnect"}])
    with pytest.raises(PayloadTooLarge):
        asyncio.run(read_bounded(request, 64))
    assert request._is_disconnected


def test_a_body_read_before_is_read_again_from_the_request() -> None:
    request, _ = _request(_chunks(b'{"a":', b"1}"))

    async def twice() -> tuple[bytes, bytes]:
        return await request.body(), await read_bounded(request, 64)

    assert asyncio.run(twice()) == (b'{"a":1}', b'{"a":1}')


def test_a_fresh_request_is_read_without_an_async_generator() -> None:
    """issue 16: ``Request.stream`` is an async generator — made, hooked by the event loop, closed — per request."""
    started: list[Any] = []

    async def read() -> bytes:
        hooks = sys.get_asyncgen_hooks()

        def firstiter(agen: Any) -> None:
            started.append(agen)
            if hooks.firstiter is not None:
                hooks.firstiter(agen)

        sys.set_asyncgen_hooks(firstiter=firstiter, finalizer=hooks.finalizer)
        try:
            request, _ = _request(_chunks(b'{"topic":', b'"t"}'))
            return await read_bounded(request, 64)
        finally:
            sys.set_asyncgen_hooks(*hooks)

    assert asyncio.run(read()) == b'{"topic":"t"}'
    assert started == []
