"""Pagination of interfaces.md §1: ``?limit=1..200`` (default 50), ``?cursor=<opaque>`` → ``{items, next_cursor}``.

The cursor is the URL-safe base64 of the last returned item's sort key; a cursor that does not decode is
``400 invalid_request`` (``field: cursor``).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Query

from wakeful.harness.ops import decode_cursor, encode_cursor, page

__all__ = ["Cursor", "Limit", "decode_cursor", "encode_cursor", "page"]

Limit = Annotated[int, Query(ge=1, le=200, description="page size, 1..200")]
Cursor = Annotated[str | None, Query(max_length=512, description="opaque cursor from `next_cursor`")]
