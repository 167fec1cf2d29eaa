"""Compact JSON text for the store's JSON columns (the same bytes on both dialects).

``encode`` is the compact UTF-8 form harness.md sizes are measured in; ``decode`` reads it back.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["decode", "encode", "encoded_bytes"]


def encode(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def encoded_bytes(value: Any) -> int:
    return len(encode(value).encode("utf-8"))


def decode(text: str | None) -> Any:
    return None if text is None else json.loads(text)
