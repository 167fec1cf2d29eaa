"""Group-commit batches in flight at once on PostgreSQL (issue 16, pg-ingest2): the main lane runs up to
``IN_FLIGHT_PG`` batch transactions together, each on a pooled session of its own, so a batch waiting for its round
trips and its WAL flush no longer holds back the units queued behind it. Each caller is still answered only after
its own batch committed."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import sqlalchemy as sa
from support.harness_fixtures import pg_url_with_schema

from wakeful.harness.store import Store
from wakeful.harness.store.core import Tx

pytestmark = pytest.mark.integration

_HANG_GUARD_S = 20  # (not a timing assertion: on a tree with one batch in flight the units below wait forever)


async def test_three_batches_run_their_transactions_at_once_on_three_sessions(
    harness_runner: Any, pg_schema: str,
) -> None:
    store = await Store.open(pg_url_with_schema(pg_schema))
    try:
        lane = store.grouping
        inside: list[int] = []
        all_in = asyncio.Event()
        commits = store.commits

        async def unit(tx: Tx) -> int:
            pid = int((await tx.execute(sa.text("SELECT pg_backend_pid()"))).scalar_one())
            inside.append(pid)
            if len(inside) == 3:
                all_in.set()
            await all_in.wait()  # each holds its transaction open until all three are inside theirs
            return pid

        tasks: list[asyncio.Task[int]] = []

        async def submit_three() -> list[int]:
            for _ in range(3):  # one unit per batch: each is submitted once the one before is inside its own
                tasks.append(asyncio.create_task(store.grouped(unit)))
                while len(inside) < len(tasks):
                    await asyncio.sleep(0.005)
            return list(await asyncio.gather(*tasks))

        try:
            pids = await asyncio.wait_for(submit_three(), _HANG_GUARD_S)
        finally:
            all_in.set()
        assert len(set(pids)) == 3, pids  # three sessions, three transactions open together
        assert store.commits - commits == 3  # each its own batch, each committed before its answer
        assert lane.most_in_flight == lane.in_flight == 3
    finally:
        await store.close()


async def test_units_queued_behind_a_held_batch_commit_before_it(harness_runner: Any, pg_schema: str) -> None:
    store = await Store.open(pg_url_with_schema(pg_schema))
    try:
        release = asyncio.Event()
        order: list[str] = []

        async def held(tx: Tx) -> str:
            await tx.execute(sa.text("SELECT 1"))
            await release.wait()
            order.append("held")
            return "held"

        async def quick(tx: Tx) -> str:
            await tx.execute(sa.text("SELECT 1"))
            return "quick"

        first = asyncio.create_task(store.grouped(held))
        while not store.grouping.batching:
            await asyncio.sleep(0.005)
        try:
            assert await asyncio.wait_for(store.grouped(quick), _HANG_GUARD_S) == "quick"  # base: waits for `held`
            order.append("quick answered")
        finally:
            release.set()
        assert await first == "held"
        assert order == ["quick answered", "held"]
    finally:
        await store.close()
