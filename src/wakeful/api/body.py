"""Bounded body reading for routes that order their own checks (the intake routes, harness.md §10.3–§10.4):
``Content-Length`` over the bound is refused before a byte is read; a streamed body stops at bound + 1 bytes.
"""

from __future__ import annotations

from starlette.requests import ClientDisconnect, Request

from wakeful.api.middleware import is_json_type
from wakeful.harness.errors import InvalidRequest, JsonRequired, PayloadTooLarge

__all__ = ["read_bounded", "require_json"]


async def read_bounded(request: Request, limit: int, *, too_large: str | None = None) -> bytes:
    """The whole body, or ``PayloadTooLarge`` (message ``too_large``) as soon as it is known to exceed ``limit``."""
    message = too_large or f"the body is over this route's limit of {limit} bytes"
    length = request.headers.get("content-length")
    if length is not None:
        try:
            declared = int(length)
        except ValueError:
            raise InvalidRequest("Content-Length is not a number", field="content-length") from None
        if declared > limit:
            raise PayloadTooLarge(message, limit=limit)
    if not hasattr(request, "_body") and not request._stream_consumed:
        return await _receive_bounded(request, limit, message)
    chunks: list[bytes] = []
    size = 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise PayloadTooLarge(message, limit=limit)
            chunks.append(chunk)
    except ClientDisconnect:
        raise PayloadTooLarge(message, limit=limit) from None
    return b"".join(chunks)


async def _receive_bounded(request: Request, limit: int, message: str) -> bytes:
    """``read_bounded``'s loop over the ASGI messages themselves, as ``Request.stream`` reads them (the request's
    stream is consumed after the last chunk; a disconnect marks it disconnected) — issue 16: the async generator
    of ``stream`` (its creation, the event loop's first-iteration hook, its close) on every intake request."""
    receive = request.receive
    chunks: list[bytes] = []
    size = 0
    while True:
        received = await receive()
        kind = received["type"]
        if kind == "http.request":
            body = received.get("body", b"")
            more = received.get("more_body", False)
            if not more:
                request._stream_consumed = True
            if body:
                size += len(body)
                if size > limit:
                    raise PayloadTooLarge(message, limit=limit)
                chunks.append(body)
            if not more:
                return b"".join(chunks)
        elif kind == "http.disconnect":
            request._is_disconnected = True
            raise PayloadTooLarge(message, limit=limit)


def require_json(request: Request) -> None:
    """``415 json_required`` unless ``Content-Type`` is ``application/json`` (parameters ignored)."""
    if not is_json_type(request.headers.get("content-type")):
        raise JsonRequired("the body must be Content-Type: application/json")
