"""The LISTEN connection checks itself soon after a burst of notifications ends (issue 16, benchmarks.md §2.1
step 4): PostgreSQL commits a transaction in the listening backend for every notification it takes in and
reports those commits only at that backend's next statement, so a check a whole ``ping_s`` after the burst put
the burst's commits (one per Loop created) into the idle window the bench measured next."""

from __future__ import annotations

import asyncio
from typing import Any

from support.harness_fixtures import pg_url_with_schema

from wakeful.harness.placement import signals
from wakeful.harness.store.core import Store


async def _until(check: Any, what: str) -> None:
    for _ in range(1000):
        if check():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(what)


async def test_the_listener_pings_once_settle_s_after_notifications_stop(
    harness_runner: Any, pg_schema: str
) -> None:
    store = await Store.open(pg_url_with_schema(pg_schema))
    got: list[tuple[str, str]] = []
    listener = signals.Listener(
        store, lambda channel, message: got.append((channel, message)), ping_s=3600.0, settle_s=0.2
    )
    try:
        listener.start()
        await asyncio.wait_for(listener.connected.wait(), 30)
        await asyncio.sleep(0.3)
        assert listener.pings == 0  # quiet: the next check is ping_s away
        for n in range(5):  # a burst: the connection proves itself alive, no check while it lasts
            await signals.notify(store, signals.LOOPS, f"lp_{n} node_x")
            await asyncio.sleep(0.05)
        await _until(lambda: len(got) == 5, f"notifications heard: {got}")
        await _until(
            lambda: listener.pings == 1, "no check after the burst ended (the next one was ping_s away)"
        )
        await asyncio.sleep(0.5)
        assert listener.pings == 1  # then quiet again: back to one check per ping_s
    finally:
        await listener.stop()
        await store.close()
