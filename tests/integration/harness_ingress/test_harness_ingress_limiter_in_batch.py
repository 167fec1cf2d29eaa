"""PostgreSQL intake buckets inside the admission's group-commit transaction (issue 16, benchmarks.md §2.2
"commits per ingested event <= 1"): a batch of admissions with their ``ingress:global`` and ``ingress:loop:<id>``
checks is one transaction — before, every request's checks were limiter transactions of their own ahead of the
admission (2.36 commits per event in the bench). The limiter's answers are unchanged: a refused event is
``RateLimited`` and not stored, a stored event took its tokens (duplicates too), and a request answered before its
admission (an invalid event) still takes its tokens in §10.3 order (``Intake.settle``). In store terms, on the
injected store clock (no refill while the test runs)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from support.commit_gate import Gate
from support.harness_fixtures import pg_url_with_schema
from support.ingress_harness import counter_loop, counting_statements, event_rows, executed_statements
from support.loops_harness import started

from wakeful.harness.config import Limits
from wakeful.harness.errors import InvalidEvent, RateLimited
from wakeful.harness.intake import Intake
from wakeful.harness.node import Node
from wakeful.harness.placement import PgLimiter
from wakeful.harness.ratelimit import global_bucket, loop_bucket
from wakeful.harness.store import Store, schema


async def _detached(
    url: str, clock: Any, data: Path, compile_c: Any, limits: Limits
) -> tuple[Store, Intake, str, str]:
    """A counter Loop, then a node over the same store that runs none of it: only admissions write."""
    h = await started(url, clock, data, limits=limits)
    try:
        group, _, _, loop_id = await counter_loop(h, compile_c, name="a1")
    finally:
        await h.stop()
    store = await Store.open(url, clock=clock)
    node = Node(store, h.config)
    return store, Intake(node, limiter=PgLimiter(store)), group, loop_id


async def _tokens(store: Store, bucket: str) -> float | None:
    async with store.tx(readonly=True) as tx:
        R = schema.rate_bucket
        value = (await tx.execute(sa.select(R.c.tokens).where(R.c.key == bucket))).scalar_one_or_none()
    return None if value is None else float(value)


async def _request(
    intake: Intake, loop_id: str, group: str, event_id: str, topic: str = "t"
) -> dict[str, Any]:
    """Route 1's bucket steps (3, 8) and admission (10) as the route runs them, with the buckets deferred."""
    deferred = intake.deferred()
    assert deferred is not None  # a shared limiter: the admission takes the buckets
    try:
        await intake.take_global(deferred)
        await intake.take_loop(loop_id, deferred)
        return await intake.admit(
            loop_id=loop_id,
            topic=topic,
            payload={},
            event_id=event_id,
            source="api",
            group_id=group,
            deferred=deferred,
        )
    except InvalidEvent:
        await intake.settle(deferred)
        raise


@pytest.mark.integration
async def test_a_batch_of_admissions_and_their_buckets_is_one_transaction(
    harness_runner: Any,
    pg_schema: str,
    store_clock: Any,
    tmp_path: Path,
    compile_c: Any,
) -> None:
    limits = Limits(pending_events=32, ingress_per_loop_per_min=600, ingress_global_per_min=6000)
    store, intake, group, loop_id = await _detached(
        pg_url_with_schema(pg_schema), store_clock, tmp_path / "d", compile_c, limits
    )
    try:
        gate = Gate()
        store.before_commit.append(gate)
        first = asyncio.create_task(_request(intake, loop_id, group, "e0"))
        await gate.entered.wait()
        batch = [asyncio.create_task(_request(intake, loop_id, group, f"e{n}")) for n in range(1, 11)]
        while intake.waiting < len(batch):
            await asyncio.sleep(0.005)  # polling for a scheduler state, not a timing assertion
        commits = store.commits
        store.before_commit.remove(gate)
        gate.release.set()
        await first
        answers = await asyncio.gather(*batch)
        assert [a["duplicate"] for a in answers] == [False] * 10
        # the held batch (e0) and one for the ten admissions with their 20 bucket checks
        assert store.commits - commits == 2
        assert len(await event_rows(store, loop_id)) == 11
        assert await _tokens(store, loop_bucket(loop_id)) == 600 - 11
        assert await _tokens(store, global_bucket()) == 6000 - 11
    finally:
        await store.close()


@pytest.mark.integration
async def test_the_buckets_refuse_in_the_batch_as_they_did_alone(
    harness_runner: Any,
    pg_schema: str,
    store_clock: Any,
    tmp_path: Path,
    compile_c: Any,
) -> None:
    limits = Limits(pending_events=32, ingress_per_loop_per_min=4, ingress_global_per_min=6000)
    store, intake, group, loop_id = await _detached(
        pg_url_with_schema(pg_schema), store_clock, tmp_path / "d", compile_c, limits
    )
    try:
        with pytest.raises(InvalidEvent):  # answered before its admission: its tokens are taken all the same
            await _request(intake, loop_id, group, "bad", topic="")
        assert await _tokens(store, loop_bucket(loop_id)) == 3
        gate = Gate()
        store.before_commit.append(gate)
        first = asyncio.create_task(_request(intake, loop_id, group, "e0"))
        await gate.entered.wait()
        ids = ["e0", "e1", "e2", "e3", "e4"]  # e0 again: a duplicate counts; 4 tokens in all
        batch = [asyncio.create_task(_request(intake, loop_id, group, i)) for i in ids]
        while intake.waiting < len(batch):
            await asyncio.sleep(0.005)
        store.before_commit.remove(gate)
        gate.release.set()
        assert (await first)["duplicate"] is False
        results = await asyncio.gather(*batch, return_exceptions=True)
        assert results[0]["duplicate"] is True and results[1]["duplicate"] is False
        limited = results[2:]
        assert all(isinstance(r, RateLimited) for r in limited), results
        assert all(r.retry_after_s >= 1 for r in limited if isinstance(r, RateLimited))
        assert sorted(r.event_id for r in await event_rows(store, loop_id)) == [
            "e0",
            "e1",
        ]  # refused: not stored
        assert await _tokens(store, loop_bucket(loop_id)) == 0
        assert await _tokens(store, global_bucket()) == 6000 - 7  # every request reached the global bucket
    finally:
        await store.close()


async def _held_batch(store: Store, intake: Intake, loop_id: str, group: str, ids: list[str]) -> list[Any]:
    """``e0`` admitted alone and held before its commit while the requests ``ids`` gather, then both released:
    ``ids`` are one batch. Returns their answers (exceptions as values)."""
    gate = Gate()
    store.before_commit.append(gate)
    first = asyncio.create_task(_request(intake, loop_id, group, "e0"))
    await gate.entered.wait()
    batch = [asyncio.create_task(_request(intake, loop_id, group, i)) for i in ids]
    while intake.waiting < len(batch):
        await asyncio.sleep(0.005)  # polling for a scheduler state, not a timing assertion
    store.before_commit.remove(gate)
    gate.release.set()
    await first
    return list(await asyncio.gather(*batch, return_exceptions=True))


@pytest.mark.integration
@pytest.mark.parametrize("clock", ["injected", "store"])
async def test_an_admission_batch_is_three_statements_of_one_text_whatever_its_size(
    harness_runner: Any,
    pg_schema: str,
    store_clock: Any,
    tmp_path: Path,
    compile_c: Any,
    clock: str,
) -> None:
    """Issue 16: the batch's Loop rows (with the store clock); its reads (dedup, pending, backlog, newest) with its
    bucket checks (global and per-Loop: an ``UPDATE … RETURNING`` as a CTE) in one statement; its insert — each
    with array parameters, so a batch of 3 and a batch of 10 send the same statement texts (PostgreSQL reuses the
    prepared statements). The previous code sent 8 statements (9 on the store's own clock: the clock was a
    statement of its own), with IN lists whose text changed with every batch size. And the statements are the same
    objects in every batch, run with the batch's values as bind parameters: built anew for each batch (as before
    ingest-pg), they and the cache keys SQLAlchemy derived from each new object were ~8 % of the node's CPU in the
    bench's ingest step."""
    limits = Limits(pending_events=64, ingress_per_loop_per_min=600, ingress_global_per_min=6000)
    url = pg_url_with_schema(pg_schema)
    store, intake, group, loop_id = await _detached(url, store_clock, tmp_path / "d", compile_c, limits)
    if clock == "store":  # the same store, read on PostgreSQL's own clock (clock_timestamp())
        await store.close()
        store = await Store.open(url)
        intake = Intake(Node(store, intake.node.config), limiter=PgLimiter(store))
    try:
        await _held_batch(store, intake, loop_id, group, ["w0"])  # (buckets created, connections warm)
        texts: list[list[str]] = []
        built: list[list[Any]] = []
        for n, size in enumerate((3, 10)):
            with counting_statements(store) as sql, executed_statements(store) as statements:
                answers = await _held_batch(store, intake, loop_id, group, [f"b{n}-{i}" for i in range(size)])
            assert all(a["duplicate"] is False for a in answers)
            # two batches ran: the held one (e0, a duplicate by now: nothing to insert) and ours
            assert len(sql) == 2 + 3, sql
            assert sql[2].startswith("SELECT loop.id") and sql[4].startswith("INSERT INTO loop_event")
            assert sql[3].startswith("WITH buckets AS \n(UPDATE rate_bucket")
            texts.append(sql[2:])
            built.append(statements)
        assert texts[0] == texts[1]
        assert len(built[1]) == len(built[0]) and all(a is b for a, b in zip(*built)), built
        assert not any(s.startswith("SELECT (extract(epoch") for s in texts[0])
        assert len(await event_rows(store, loop_id)) == 1 + 1 + 3 + 10
    finally:
        await store.close()


@pytest.mark.integration
async def test_a_request_refused_by_the_global_bucket_takes_no_token_of_its_loop(
    harness_runner: Any,
    pg_schema: str,
    store_clock: Any,
    tmp_path: Path,
    compile_c: Any,
) -> None:
    """The batch's checks are one statement that takes every token; when the global bucket refuses some requests
    their per-Loop tokens are put back in the same transaction (one more statement), so the buckets end as the
    stage-by-stage checks (global, then per Loop for those the global bucket admitted) leave them."""
    limits = Limits(pending_events=64, ingress_per_loop_per_min=600, ingress_global_per_min=4)
    store, intake, group, loop_id = await _detached(
        pg_url_with_schema(pg_schema), store_clock, tmp_path / "d", compile_c, limits
    )
    try:
        with counting_statements(store) as sql:
            results = await _held_batch(store, intake, loop_id, group, ["e1", "e2", "e3", "e4", "e5"])
        assert [type(r).__name__ if isinstance(r, Exception) else r["event_id"] for r in results] == [
            "e1", "e2", "e3", "RateLimited", "RateLimited"]
        assert all(r.retry_after_s >= 1 for r in results if isinstance(r, RateLimited))
        assert await _tokens(store, global_bucket()) == 0
        assert await _tokens(store, loop_bucket(loop_id)) == 600 - 4  # e0 and e1–e3; not e4, e5
        assert sum(s.startswith("UPDATE rate_bucket SET tokens=(rate_bucket.tokens + w.n)") for s in sql) == 1
    finally:
        await store.close()


@pytest.mark.integration
async def test_buckets_used_for_the_first_time_are_made_by_the_batchs_own_statement(
    harness_runner: Any,
    pg_schema: str,
    store_clock: Any,
    tmp_path: Path,
    compile_c: Any,
) -> None:
    """Issue 16: a Loop's first event made its batch two statements longer (insert the bucket full, take again);
    the batch's bucket statement now creates a missing bucket with its tokens already taken, answering as before —
    here six requests on a fresh per-Loop bucket of 4 in one batch: four admitted, two refused, none left."""
    limits = Limits(pending_events=64, ingress_per_loop_per_min=4, ingress_global_per_min=6000)
    store, intake, group, loop_id = await _detached(
        pg_url_with_schema(pg_schema), store_clock, tmp_path / "d", compile_c, limits
    )
    try:
        gate = Gate()
        store.before_commit.append(gate)
        held = asyncio.create_task(intake.admit(loop_id=loop_id, topic="t", payload={}, event_id="op",
                                                source="operator"))  # (no buckets: none exists yet)
        await gate.entered.wait()
        batch = [asyncio.create_task(_request(intake, loop_id, group, f"e{n}")) for n in range(6)]
        while intake.waiting < len(batch):
            await asyncio.sleep(0.005)  # polling for a scheduler state, not a timing assertion
        with counting_statements(store) as sql:
            store.before_commit.remove(gate)
            gate.release.set()
            await held
            results = await asyncio.gather(*batch, return_exceptions=True)
        assert [type(r).__name__ if isinstance(r, Exception) else r["event_id"] for r in results] == [
            "e0", "e1", "e2", "e3", "RateLimited", "RateLimited"]
        assert len(sql) == 3, sql  # the Loop rows, the reads with the buckets (made here), the insert
        assert await _tokens(store, loop_bucket(loop_id)) == 0
        assert await _tokens(store, global_bucket()) == 6000 - 6
    finally:
        await store.close()
