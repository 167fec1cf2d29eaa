"""Canonical JSON and SHA-256 digests (control-plane.md §2.3, §3.1): keys sorted, compact, UTF-8.

Receipts and events are stored in this form, so a replayed receipt is byte-identical to the original.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

__all__ = ["canonical", "decode", "digest"]


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def digest(value: Any) -> str:
    """SHA-256 (hex) of the canonical JSON of ``value``."""
    return hashlib.sha256(canonical(value).encode("utf-8")).hexdigest()


def decode(text: str | None) -> Any:
    return None if text is None else json.loads(text)
