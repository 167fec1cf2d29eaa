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


def require_json(request: Request) -> None:
    """``415 json_required`` unless ``Content-Type`` is ``application/json`` (parameters ignored)."""
    if not is_json_type(request.headers.get("content-type")):
        raise JsonRequired("the body must be Content-Type: application/json")
