"""Pagination of interfaces.md §1: ``limit`` 1..200 (default 50), an opaque ``cursor`` → ``{items, next_cursor}``.

The cursor is the URL-safe base64 of the last returned item's sort key; a cursor that does not decode is
``invalid_request`` (``field: cursor``).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from wakeful.harness.errors import InvalidRequest

__all__ = ["decode_cursor", "encode_cursor", "page"]

T = TypeVar("T")


def encode_cursor(key: str) -> str:
    return base64.urlsafe_b64encode(key.encode()).decode().rstrip("=")


def decode_cursor(cursor: str | None) -> str | None:
    if cursor is None or cursor == "":
        return None
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        text = raw.decode()
    except (binascii.Error, ValueError, UnicodeDecodeError):
        raise InvalidRequest("the cursor is not one this server issued", field="cursor") from None
    if not text or not text.isprintable():
        raise InvalidRequest("the cursor is not one this server issued", field="cursor")
    return text


def page(items: Sequence[T], *, limit: int, cursor: str | None, key: Callable[[T], str],
         render: Callable[[T], Any]) -> dict[str, Any]:
    """One page of ``items`` (already in ``key`` order) after the cursor's key."""
    after = decode_cursor(cursor)
    chosen = [item for item in items if after is None or key(item) > after]
    out = chosen[:limit]
    more = len(chosen) > limit
    return {"items": [render(item) for item in out],
            "next_cursor": encode_cursor(key(out[-1])) if more and out else None}
