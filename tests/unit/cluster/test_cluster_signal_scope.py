"""Signals stay inside their store: two deployments in different schemas of one PostgreSQL database do not hear
each other's ``NOTIFY`` (channels are per database in PostgreSQL, so the names carry the schema). Before, a node
of one schema acted on the other's signals — a stray placement tick for every ``*``, found while testing idle work."""

from __future__ import annotations

import asyncio
from typing import Any

from support.harness_fixtures import pg_url_with_schema

from wakeful.harness.placement import signals
from wakeful.harness.store.core import Store


async def _heard(listener_store: Store, sender: Store, payload: str, got: list[tuple[str, str]]) -> bool:
    """Send ``payload`` on LOOPS from ``sender``, then a marker from the listener's own store; True when the payload
    arrived before the marker (a notification of one session arrives in commit order, so the marker bounds it)."""
    await signals.notify(sender, signals.LOOPS, payload)
    await signals.notify(listener_store, signals.EVENTS, "marker " + payload)
    for _ in range(1000):
        if (signals.EVENTS, "marker " + payload) in got:
            break
        await asyncio.sleep(0.01)
    assert (signals.EVENTS, "marker " + payload) in got, got
    return (signals.LOOPS, payload) in got


async def test_a_schema_hears_its_own_signals_only(harness_runner: Any, pg_schema: str) -> None:
    import secrets

    from support.harness_fixtures import _pg_schema  # the fixture's own create/drop

    other = "wk_" + secrets.token_hex(6)
    await _pg_schema("create", other)
    mine = await Store.open(pg_url_with_schema(pg_schema))
    theirs = await Store.open(pg_url_with_schema(other))
    got: list[tuple[str, str]] = []
    listener = signals.Listener(mine, lambda channel, message: got.append((channel, message)))
    try:
        listener.start()
        await asyncio.wait_for(listener.connected.wait(), 30)
        assert not await _heard(mine, theirs, "* node_of_another_schema", got)
        assert await _heard(mine, mine, "* node_of_this_schema", got)
        assert all(channel in (signals.EVENTS, signals.LOOPS) for channel, _ in got)  # handlers see the names
    finally:
        await listener.stop()
        await mine.close()
        await theirs.close()
        await _pg_schema("drop", other)
