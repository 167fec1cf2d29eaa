"""A small keep-alive HTTP/1.1 client on asyncio streams for the load steps of ``wakeful bench harness``.

The load generator shares the node's two cores, so it must cost far less per request than the node: one
connection per request in flight, requests written as prepared bytes, answers read by ``Content-Length``.
Only what the bench sends and the node answers is supported (JSON bodies, no chunked answers).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

__all__ = ["Connection", "HttpAnswer"]


class HttpAnswer:
    """Status and body bytes of one answer, and its ``Retry-After`` in seconds (None: none or not a number)."""

    __slots__ = ("body", "retry_after", "status")

    def __init__(self, status: int, body: bytes, retry_after: float | None = None) -> None:
        self.status, self.body, self.retry_after = status, body, retry_after

    def json(self) -> Any:
        return json.loads(self.body)


class Connection:
    """One keep-alive connection to ``host:port``; reconnects when the node closed it."""

    def __init__(self, host: str, port: int, headers: dict[str, str]) -> None:
        self.host, self.port = host, port
        self._head = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None

    async def request(self, method: str, path: str, body: Any = None) -> HttpAnswer:
        data = b"" if body is None else json.dumps(body, separators=(",", ":")).encode()
        head = (f"{method} {path} HTTP/1.1\r\nHost: {self.host}\r\n{self._head}"
                f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n").encode()
        for attempt in (0, 1):
            if self._writer is None:
                self._reader, self._writer = await asyncio.open_connection(self.host, self.port)
            try:
                self._writer.write(head + data)
                return await self._read()
            except (ConnectionError, asyncio.IncompleteReadError):
                await self.close()
                if attempt:
                    raise
        raise AssertionError("unreachable")

    async def _read(self) -> HttpAnswer:
        assert self._reader is not None
        head = await self._reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        length, close, retry_after = 0, False, None
        for line in lines[1:]:
            name, _, value = line.partition(":")
            name = name.strip().lower()
            if name == "content-length":
                length = int(value)
            elif name == "connection" and value.strip().lower() == "close":
                close = True
            elif name == "retry-after":
                retry_after = _seconds(value)
        body = await self._reader.readexactly(length) if length else b""
        if close:
            await self.close()
        return HttpAnswer(status, body, retry_after)

    async def close(self) -> None:
        writer, self._writer, self._reader = self._writer, None, None
        if writer is not None:
            writer.close()
            with contextlib.suppress(ConnectionError, OSError):
                await writer.wait_closed()


def _seconds(value: str) -> float | None:
    """``Retry-After`` as delay-seconds (the node never sends the HTTP-date form)."""
    try:
        seconds = float(value.strip())
    except ValueError:
        return None
    return seconds if seconds >= 0 else None
