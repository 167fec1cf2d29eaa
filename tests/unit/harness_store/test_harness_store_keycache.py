"""The key cache keeps writes off the authentication path (issue 14, reproduction 8): verifying a known or an
unknown key opens no write transaction (observed on the real store's statement stream), unknown ids are answered
from a bounded negative cache, the cache evicts by LRU (hot keys stay), ``last_used_ms`` is written by a batched
``flush`` at most once a minute, and a revoked key still stops working within the 5 s window (harness.md §2.1).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event

from wakeful.harness.store import groups, schema
from wakeful.harness.store.keycache import KeyCache

WRITES = ("BEGIN IMMEDIATE", "INSERT", "UPDATE", "DELETE")


@contextlib.contextmanager
def statements(store: Any) -> Iterator[list[str]]:
    """Every SQL statement the store's engine sends while the block runs (BEGIN included on SQLite)."""
    seen: list[str] = []

    def record(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        seen.append(" ".join(statement.split()).upper())

    event.listen(store.engine.sync_engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        event.remove(store.engine.sync_engine, "before_cursor_execute", record)


def writes(seen: list[str]) -> list[str]:
    return [s for s in seen if s.startswith(WRITES)]


async def _keys(store: Any, n: int) -> list[str]:
    texts = []
    async with store.tx() as tx:
        for _ in range(n):
            texts.append((await groups.create_key(tx, role="admin"))[1])
    return texts


def _unknown(i: int) -> str:
    return f"wk_key_{i:012d}_" + "A" * 43


async def _last_used(store: Any) -> dict[str, int | None]:
    K = schema.api_key
    async with store.tx(readonly=True) as tx:
        return {r.id: r.last_used_ms for r in await tx.execute(sa.select(K.c.id, K.c.last_used_ms))}


async def test_verifying_known_and_unknown_keys_opens_no_write_transaction(store: Any, store_clock: Any) -> None:
    [text] = await _keys(store, 1)
    cache = KeyCache(store, monotonic_ns=store_clock.monotonic_ns)
    with statements(store) as seen:
        assert await cache.verify(text) is not None  # cold: one read
        assert await cache.verify(_unknown(1)) is None  # unknown id: one read, then cached
        assert await cache.verify(text[:-1] + ("A" if text[-1] != "A" else "B")) is None  # wrong secret
        before = len(seen)
        for _ in range(5):
            assert await cache.verify(_unknown(1)) is None  # the negative cache: no statement at all
            assert await cache.verify(text) is not None
        assert len(seen) == before
    assert seen and writes(seen) == []
    assert cache.lookups == 2


async def test_the_negative_cache_is_bounded_and_expires(store: Any, store_clock: Any) -> None:
    cache = KeyCache(store, monotonic_ns=store_clock.monotonic_ns, max_unknown=4)
    for i in range(10):
        assert await cache.verify(_unknown(i)) is None
    assert cache.lookups == 10 and cache.sizes()["unknown"] == 4
    assert await cache.verify(_unknown(9)) is None and cache.lookups == 10  # the newest stayed
    assert await cache.verify(_unknown(0)) is None and cache.lookups == 11  # the oldest was evicted
    store_clock.advance(ms=5000)
    assert await cache.verify(_unknown(9)) is None and cache.lookups == 12  # at most 5 s, like rows


async def test_lru_eviction_keeps_hot_keys(store: Any, store_clock: Any) -> None:
    texts = await _keys(store, 6)
    hot = texts[0]
    cache = KeyCache(store, monotonic_ns=store_clock.monotonic_ns, max_entries=3)
    assert await cache.verify(hot) is not None
    for cold in texts[1:]:
        assert await cache.verify(cold) is not None
        assert await cache.verify(hot) is not None  # used between every cold key: stays the most recent
    assert cache.lookups == 6 and cache.sizes()["known"] == 3  # the hot key was never loaded again
    assert await cache.verify(texts[1]) is not None and cache.lookups == 7  # a cold one was evicted


async def test_concurrent_verifications_of_one_cold_key_share_one_lookup(store: Any, store_clock: Any) -> None:
    [text] = await _keys(store, 1)
    cache = KeyCache(store, monotonic_ns=store_clock.monotonic_ns)
    found = await asyncio.gather(*(cache.verify(text) for _ in range(50)), *(cache.verify(_unknown(7))
                                                                             for _ in range(50)))
    assert all(k is not None for k in found[:50]) and all(k is None for k in found[50:])
    assert cache.lookups == 2


async def test_flush_writes_last_used_in_batches_at_most_once_a_minute(store: Any, store_clock: Any) -> None:
    texts = await _keys(store, 3)
    cache = KeyCache(store, monotonic_ns=store_clock.monotonic_ns)
    for text in texts[:2]:
        assert await cache.verify(text) is not None
    assert set((await _last_used(store)).values()) == {None}  # nothing written on the request path
    with statements(store) as seen:
        assert await cache.flush() == 2
    assert len([s for s in seen if s.startswith("UPDATE")]) == 1  # one statement for the batch
    stamped = await _last_used(store)
    now = await store.now_ms()
    ids = [groups.split_key_text(t)[0] for t in texts]  # type: ignore[index]
    assert [stamped[i] for i in ids] == [now, now, None]
    store_clock.advance(s=30)
    assert await cache.verify(texts[0]) is not None
    with statements(store) as seen:
        assert await cache.flush() == 0
    assert writes(seen) == []  # used again within the minute: nothing to write, no transaction
    store_clock.advance(s=31)
    assert await cache.verify(texts[0]) is not None
    assert await cache.flush() == 1
    first = groups.split_key_text(texts[0])[0]  # type: ignore[index]
    assert (await _last_used(store))[first] == now + 61_000


async def test_a_failed_flush_keeps_its_batch_for_the_next_one(store: Any, store_clock: Any) -> None:
    [text] = await _keys(store, 1)
    cache = KeyCache(store, monotonic_ns=store_clock.monotonic_ns)
    assert await cache.verify(text) is not None
    real_tx = store.tx

    @contextlib.asynccontextmanager
    async def broken(**kw: Any) -> Any:
        from wakeful.harness.errors import StoreUnavailable

        raise StoreUnavailable("the store is down")
        yield  # pragma: no cover

    store.tx = broken
    try:
        assert await cache.flush() == 0
    finally:
        store.tx = real_tx
    assert await cache.flush() == 1
    assert list((await _last_used(store)).values()) == [await store.now_ms()]


async def test_revocation_still_takes_effect_within_the_window(store: Any, store_clock: Any) -> None:
    texts = await _keys(store, 2)
    cache = KeyCache(store, monotonic_ns=store_clock.monotonic_ns, max_entries=2)
    key_id = groups.split_key_text(texts[0])[0]  # type: ignore[index]
    assert await cache.verify(texts[0]) is not None
    async with store.tx() as tx:
        await groups.revoke_key(tx, key_id)
    store_clock.advance(ms=4999)
    assert await cache.verify(texts[0]) is not None  # still inside the 5 s window (harness.md §2.1)
    store_clock.advance(ms=1)
    assert await cache.verify(texts[0]) is None
    cache.forget(groups.split_key_text(texts[1])[0])  # type: ignore[index]
    assert await cache.verify(texts[1]) is not None
    async with store.tx() as tx:
        await groups.revoke_key(tx, groups.split_key_text(texts[1])[0])  # type: ignore[index]
    cache.forget(groups.split_key_text(texts[1])[0])  # type: ignore[index]
    assert await cache.verify(texts[1]) is None  # this node revoked it: at once


async def test_the_node_flushes_key_uses_when_it_stops(store_url: str, tmp_path: Any) -> None:
    from wakeful.harness.config import Config
    from wakeful.harness.embed import Harness
    from wakeful.harness.store import Store

    async with Harness(Config(data_dir=tmp_path / "data", store_url=store_url), sweeps=False) as h:
        _, text = await h.create_key("admin")
        assert await h.keys.verify(text) is not None
        assert set((await _last_used(h.store)).values()) == {None}  # nothing on the request path
    reopened = await Store.open(store_url)
    try:
        assert None not in (await _last_used(reopened)).values()  # the stop wrote the batch
    finally:
        await reopened.close()


async def test_a_read_begun_before_a_revocation_is_not_cached_after_it(store: Any, store_clock: Any,
                                                                       monkeypatch: Any) -> None:
    [text] = await _keys(store, 1)
    key_id = groups.split_key_text(text)[0]  # type: ignore[index]
    cache = KeyCache(store, monotonic_ns=store_clock.monotonic_ns)
    real_load, read, go_on = groups.load_key, asyncio.Event(), asyncio.Event()

    async def held_load(tx: Any, wanted: str) -> Any:  # the real read, then held until the revocation is done
        found = await real_load(tx, wanted)
        if not read.is_set():
            read.set()
            await go_on.wait()
        return found

    monkeypatch.setattr(groups, "load_key", held_load)
    first = asyncio.ensure_future(cache.verify(text))
    await read.wait()  # the row was read while the key was live
    async with store.tx() as tx:
        await groups.revoke_key(tx, key_id)
    cache.forget(key_id)  # what DELETE …/keys/{id} does after its commit
    go_on.set()
    await first  # in flight during the revocation: either answer is allowed for it
    assert await cache.verify(text) is None  # but nothing live was cached after the revocation
