"""API key verification with a short row cache that keeps writes off the authentication path (harness.md §2.1;
issue 14, docs/decisions-api.md "No writes on the authentication path").

- Rows are reused for at most 5 s, so a revocation takes effect within 5 s (at once on the revoking node, which
  calls ``forget``); a miss is one **read** transaction, shared by concurrent requests for the same key id.
- Unknown key ids are remembered in a bounded negative cache (same 5 s window): repeated probes cost nothing.
- Both caches evict the least recently used entry when full (never a wholesale clear).
- A successful verification only records the use; ``flush`` (the node's sweep every ``FLUSH_EVERY_S``, and at
  stop) writes ``last_used_ms`` for the batch in one write transaction, at most once a minute per key.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from wakeful.harness.errors import StoreUnavailable
from wakeful.harness.store import groups
from wakeful.harness.store.core import Store

__all__ = ["FLUSH_EVERY_S", "KeyCache"]

log = logging.getLogger("wakeful.harness")
V = TypeVar("V")

TTL_NS = 5_000_000_000  # §2.1: at most 5 s
MAX_ENTRIES = 10_000  # known keys
MAX_UNKNOWN = 10_000  # unknown key ids (the negative cache)
TOUCH_EVERY_NS = groups.LAST_USED_EVERY_MS * 1_000_000  # §2.1: last_used_ms at most once a minute
FLUSH_EVERY_S = 5.0  # the batch of uses is written this often (and when the node stops)


@dataclass(slots=True)
class _Entry:
    expires_ns: int
    digest: str
    key: groups.ApiKey
    touched_ns: int | None = None  # when this node last queued a last_used_ms write for the key


class KeyCache:
    """``await cache.verify(text)`` → the live ``ApiKey`` or None; ``await cache.flush()`` writes the uses."""

    def __init__(self, store: Store, *, monotonic_ns: Callable[[], int] = time.monotonic_ns,
                 max_entries: int = MAX_ENTRIES, max_unknown: int = MAX_UNKNOWN) -> None:
        self.store = store
        self._now = monotonic_ns
        self._max_entries, self._max_unknown = max_entries, max_unknown
        self._known: OrderedDict[str, _Entry] = OrderedDict()
        self._unknown: OrderedDict[str, int] = OrderedDict()  # key id → expiry
        self._loading: dict[str, asyncio.Future[_Entry | None]] = {}
        self._used: dict[str, None] = {}  # key ids whose use is not written yet (an ordered set)
        self._forgets = 0  # bumped by forget: a read begun before a revocation is not cached after it
        self.lookups = 0  # store round trips, for tests and metrics

    async def verify(self, key_text: object) -> groups.ApiKey | None:
        parts = groups.split_key_text(key_text)
        if parts is None:
            return None
        key_id, secret = parts
        entry = await self._entry(key_id)
        digest = hashlib.sha256(secret.encode()).hexdigest()
        # the digest is compared even for an unknown id, so timing does not tell unknown from wrong
        if not hmac.compare_digest(digest, entry.digest if entry is not None else _NO_DIGEST) or entry is None:
            return None
        if entry.key.revoked_ms is not None:
            return None
        self._note_use(key_id, entry)
        return entry.key

    def forget(self, key_id: str) -> None:
        """Drop one key (this node revoked it: no need to wait for the window)."""
        self._known.pop(key_id, None)
        self._unknown.pop(key_id, None)
        self._forgets += 1

    def sizes(self) -> dict[str, int]:
        """Entries held: known keys, unknown ids, uses waiting for ``flush``."""
        return {"known": len(self._known), "unknown": len(self._unknown), "pending": len(self._used)}

    async def flush(self) -> int:
        """Write ``last_used_ms`` for the uses recorded since the last flush; the rows written. A store that is
        unavailable keeps the batch for the next flush (logged, never raised: this runs from a sweep)."""
        if not self._used:
            return 0
        batch = list(self._used)
        self._used.clear()
        try:
            async with self.store.tx() as tx:
                return await groups.touch_keys(tx, batch)
        except StoreUnavailable as exc:
            for key_id in batch[: self._max_entries - len(self._used)]:
                self._used[key_id] = None
            log.warning("last_used_ms not written for %d keys (kept for the next flush): %s", len(batch), exc)
            return 0

    async def _entry(self, key_id: str) -> _Entry | None:
        now = self._now()
        entry = self._known.get(key_id)
        if entry is not None and entry.expires_ns > now:
            self._known.move_to_end(key_id)
            return entry
        expires = self._unknown.get(key_id)
        if expires is not None and expires > now:
            self._unknown.move_to_end(key_id)
            return None
        pending = self._loading.get(key_id)
        if pending is None:  # one read per key id however many requests wait for it
            pending = asyncio.ensure_future(self._load(key_id, entry))
            self._loading[key_id] = pending
            pending.add_done_callback(lambda done: self._loaded(key_id, done))
        return await asyncio.shield(pending)

    def _loaded(self, key_id: str, done: asyncio.Future[_Entry | None]) -> None:
        if self._loading.get(key_id) is done:
            del self._loading[key_id]
        if not done.cancelled():
            done.exception()  # retrieved here: every waiter may have gone

    async def _load(self, key_id: str, stale: _Entry | None) -> _Entry | None:
        self.lookups += 1
        forgets = self._forgets
        async with self.store.tx(readonly=True) as tx:
            found = await groups.load_key(tx, key_id)
        if forgets != self._forgets:  # a key was revoked meanwhile: this read may predate it; read once more
            async with self.store.tx(readonly=True) as tx:
                found = await groups.load_key(tx, key_id)
        expires = self._now() + TTL_NS
        if found is None:
            self._known.pop(key_id, None)
            _put(self._unknown, key_id, expires, self._max_unknown)
            return None
        key, digest = found
        self._unknown.pop(key_id, None)
        entry = _Entry(expires, digest, key, stale.touched_ns if stale is not None else None)
        _put(self._known, key_id, entry, self._max_entries)
        return entry

    def _note_use(self, key_id: str, entry: _Entry) -> None:
        now = self._now()
        if entry.touched_ns is not None and 0 <= now - entry.touched_ns < TOUCH_EVERY_NS:
            return
        if len(self._used) < self._max_entries:
            entry.touched_ns = now
            self._used[key_id] = None


_NO_DIGEST = hashlib.sha256(b"wakeful-unknown-key").hexdigest()


def _put(cache: OrderedDict[str, V], key: str, value: V, limit: int) -> None:
    cache[key] = value
    cache.move_to_end(key)
    while len(cache) > limit:
        cache.popitem(last=False)
