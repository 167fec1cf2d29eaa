"""API key verification with a short row cache: rows are reused for at most 5 s, so a revocation takes
effect within 5 s while a busy key costs one lookup per window (harness.md §2.1).
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Callable
from dataclasses import dataclass

from wakeful.harness.store import groups
from wakeful.harness.store.core import Store

__all__ = ["KeyCache"]

TTL_NS = 5_000_000_000  # §2.1: at most 5 s
MAX_ENTRIES = 10_000


@dataclass(frozen=True)
class _Entry:
    expires_ns: int
    digest: str | None  # None: no such key
    key: groups.ApiKey | None


class KeyCache:
    """``await cache.verify(text)`` → the live ``ApiKey`` or None; unknown ids are cached too (negative)."""

    def __init__(self, store: Store, *, monotonic_ns: Callable[[], int] = time.monotonic_ns) -> None:
        self.store = store
        self._now = monotonic_ns
        self._entries: dict[str, _Entry] = {}
        self.lookups = 0  # store round trips, for tests and metrics

    async def verify(self, key_text: object) -> groups.ApiKey | None:
        parts = groups.split_key_text(key_text)
        if parts is None:
            return None
        key_id, secret = parts
        entry = self._entries.get(key_id)
        if entry is None or entry.expires_ns <= self._now():
            entry = await self._load(key_id)
        digest = hashlib.sha256(secret.encode()).hexdigest()
        if entry.digest is None or not hmac.compare_digest(digest, entry.digest) or entry.key is None:
            return None
        return None if entry.key.revoked_ms is not None else entry.key

    async def _load(self, key_id: str) -> _Entry:
        self.lookups += 1
        async with self.store.tx() as tx:
            found = await groups.load_key(tx, key_id)
        key, digest = found if found is not None else (None, None)
        entry = _Entry(self._now() + TTL_NS, digest, key)
        if len(self._entries) >= MAX_ENTRIES:
            self._entries.clear()
        self._entries[key_id] = entry
        return entry

    def forget(self, key_id: str) -> None:
        """Drop one key (this node revoked it: no need to wait for the window)."""
        self._entries.pop(key_id, None)
