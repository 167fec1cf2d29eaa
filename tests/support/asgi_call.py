"""One HTTP request straight through an ASGI app, without a server: the tests that check which path of the app
answered (the scope it leaves) use it."""

from __future__ import annotations

import asyncio
from typing import Any


async def asgi_call(app: Any, method: str, path: str, body: bytes = b"", *, key: str | None = None,
                    ) -> tuple[dict[str, Any], int, dict[bytes, bytes], bytes]:
    """One request through ``app``; returns the scope as the app left it, the status, the headers and the body."""
    headers = [(b"host", b"test"), (b"content-type", b"application/json"),
               (b"content-length", str(len(body)).encode())]
    if key is not None:
        headers.append((b"authorization", f"Bearer {key}".encode()))
    scope: dict[str, Any] = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method, "scheme": "http",
        "path": path, "raw_path": path.encode(), "root_path": "", "query_string": b"", "headers": headers,
        "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 80)}
    sent: list[dict[str, Any]] = []
    fed = False

    async def receive() -> dict[str, Any]:
        nonlocal fed
        if fed:
            await asyncio.sleep(3600)
        fed = True
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app(scope, receive, send)
    start = next(m for m in sent if m["type"] == "http.response.start")
    data = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return scope, start["status"], dict(start["headers"]), data
