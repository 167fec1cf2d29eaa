"""``PgLimiter`` (harness.md §14, §2.9): token buckets shared through ``rate_bucket`` rows on PostgreSQL, refilled
by store-clock time (negative elapsed = 0), atomic across nodes, failing closed."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from support.commit_gate import Gate
from support.harness_fixtures import PgProxy, TestClock, pg_url_with_schema

from wakeful.harness.errors import StoreUnavailable
from wakeful.harness.placement import PgLimiter
from wakeful.harness.store import Store


@pytest.fixture
def pg_store(harness_runner: asyncio.Runner, pg_schema: str, store_clock: TestClock) -> Any:
    store = harness_runner.run(Store.open(pg_url_with_schema(pg_schema), clock=store_clock))
    yield store
    harness_runner.run(store.close())


async def test_a_bucket_starts_full_and_refills_by_store_clock_time(pg_store: Any, store_clock: TestClock) -> None:
    limiter = PgLimiter(pg_store)
    assert [await limiter.take("b", 3, 1.0) for _ in range(3)] == [None, None, None]
    wait = await limiter.take("b", 3, 1.0)
    assert wait == pytest.approx(1.0)
    store_clock.advance(ms=500)
    assert await limiter.take("b", 3, 1.0) == pytest.approx(0.5)  # a refused take takes nothing
    store_clock.advance(ms=500)
    assert await limiter.take("b", 3, 1.0) is None
    store_clock.advance(s=3600)
    assert [await limiter.take("b", 3, 1.0) for _ in range(4)][-1] is not None  # capped at capacity


async def test_a_clock_stepping_back_refills_nothing_and_never_twice(pg_store: Any, store_clock: TestClock) -> None:
    limiter = PgLimiter(pg_store)
    for _ in range(2):
        assert await limiter.take("b", 2, 1.0) is None
    store_clock.jump_wall(s=-60)  # negative elapsed counts as zero
    assert await limiter.take("b", 2, 1.0) == pytest.approx(1.0)
    store_clock.jump_wall(s=60)  # back to where it was: the minute already counted is not refilled again
    assert await limiter.take("b", 2, 1.0) == pytest.approx(1.0)
    store_clock.advance(s=1)
    assert await limiter.take("b", 2, 1.0) is None


async def test_two_nodes_sharing_a_bucket_never_overshoot(pg_store: Any, pg_schema: str, store_clock: TestClock) -> None:
    other = await Store.open(pg_url_with_schema(pg_schema), clock=store_clock, migrate=False)
    try:
        nodes = [PgLimiter(pg_store), PgLimiter(other)]
        # every take ends before the stores close (return_exceptions): no transaction is left open behind
        answers = await asyncio.gather(*(nodes[i % 2].take("ingress:global", 10, 0.001) for i in range(24)),
                                       return_exceptions=True)
        assert not [a for a in answers if isinstance(a, BaseException)], answers
        assert sum(a is None for a in answers) == 10
        assert all(a is None or (isinstance(a, float) and a > 0) for a in answers)
    finally:
        await other.close()


async def test_takes_arriving_while_a_check_is_in_flight_share_the_next_check(pg_store: Any) -> None:
    """Every take was a transaction of its own on the bucket's row, and ``ingress:global`` is one row every event
    passes: under load the requests of two nodes queued on its lock past ``statement_timeout`` and ingest answered
    503 (bench harness --nodes 2). The takes that arrive while a check of their bucket is in flight are one check of
    the next round, answered in arrival order exactly as that many checks one after the other would be."""
    limiter = PgLimiter(pg_store)
    gate = Gate()
    pg_store.before_commit.append(gate)
    first = asyncio.create_task(limiter.take("ingress:global", 10, 1.0))
    await gate.entered.wait()  # the first check holds the row at its COMMIT
    rest = [asyncio.create_task(limiter.take("ingress:global", 10, 1.0)) for _ in range(19)]
    await asyncio.sleep(0)  # each of them has asked
    gate.release.set()
    answers = [await first] + [await t for t in rest]
    assert gate.seen == 2 and limiter.rounds == 2  # one transaction for the 19, not 19
    assert answers[:10] == [None] * 10  # the store clock stands still: 10 tokens, taken in arrival order
    assert answers[10:] == [pytest.approx(1.0)] * 10


async def test_an_unreachable_store_fails_closed(harness_runner: Any, pg_schema: str, store_clock: TestClock) -> None:
    async with PgProxy() as proxy:
        store = await Store.open(proxy.url(pg_schema), clock=store_clock)
        try:
            limiter = PgLimiter(store)
            assert await limiter.take("b", 5, 1.0) is None
            proxy.cut()
            with pytest.raises(StoreUnavailable):
                await limiter.take("b", 5, 1.0)
            proxy.restore()
            assert await limiter.take("b", 5, 1.0) is None
        finally:
            await store.close()


async def test_bad_bucket_shapes_are_programming_errors(pg_store: Any) -> None:
    with pytest.raises(ValueError):
        await PgLimiter(pg_store).take("b", 0, 1.0)
    with pytest.raises(ValueError):
        await PgLimiter(pg_store).take("b", 5, 0)


async def test_the_in_transaction_take_is_compiled_once_whatever_its_buckets(pg_store: Any) -> None:
    """issue 16: ``take_in``'s statement (every admission batch on PostgreSQL) is compiled once and then found in
    SQLAlchemy's compiled cache, whatever buckets and how many — built with the buckets as a VALUES list it was
    compiled anew for every batch."""
    from sqlalchemy import event

    hits: list[Any] = []

    def seen(conn: Any, cursor: Any, statement: str, params: Any, context: Any, many: bool) -> None:
        if statement.lstrip().upper().startswith("UPDATE RATE_BUCKET"):
            hits.append(context.cache_hit)

    limiter = PgLimiter(pg_store)
    event.listen(pg_store.engine.sync_engine, "before_cursor_execute", seen)
    try:
        for checks in ([("a", 5.0, 1.0)], [("a", 5.0, 1.0), ("b", 5.0, 1.0), ("c", 9.0, 2.0)], [("c", 9.0, 2.0)]):
            async with pg_store.tx() as tx:
                assert await limiter.take_in(tx, checks) == [None] * len(checks)
    finally:
        event.remove(pg_store.engine.sync_engine, "before_cursor_execute", seen)
    from sqlalchemy.engine.interfaces import CacheStats

    assert len(hits) >= 3 and all(h is CacheStats.CACHE_HIT for h in hits[-2:]), hits
