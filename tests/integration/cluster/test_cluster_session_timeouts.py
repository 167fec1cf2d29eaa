"""issue 16: a node's PostgreSQL sessions cannot hold locks forever. Every session of the node's pool carries a
statement timeout and an idle-in-transaction timeout derived from its lease settings (each half of TTL − renew),
and a transaction left idle past it loses its session, so its row locks go with it."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from support.harness_fixtures import pg_url_with_schema

from wakeful.errors import WakefulError
from wakeful.harness.config import Config, Placement
from wakeful.harness.embed import Harness
from wakeful.harness.store import schema
from wakeful.harness.store.core import Store
from wakeful.harness.store.engine import session_timeouts

pytestmark = pytest.mark.integration


def test_the_rule_keeps_both_timeouts_inside_the_self_fence_window() -> None:
    for ttl, renew in ((30, 10), (3, 1), (60, 5), (11, 10)):
        t = session_timeouts(ttl, renew)
        window_ms = (ttl - renew) * 1000
        assert 0 < t.idle_in_transaction_ms < window_ms and 0 < t.statement_ms < window_ms
        assert t.statement_ms + t.idle_in_transaction_ms <= window_ms  # a frozen session's locks end in time
    assert session_timeouts(30, 10).idle_in_transaction_ms == 10_000  # the defaults: 10 s each


async def _shown(store: Store) -> tuple[str, str, str]:
    async with store.tx() as tx:
        idle, statement, lock = [
            str((await tx.execute(sa.text(f"SHOW {name}"))).scalar())
            for name in ("idle_in_transaction_session_timeout", "statement_timeout", "lock_timeout")
        ]
    return idle, statement, lock


async def test_the_node_pool_sessions_carry_both_timeouts(harness_runner: Any, pg_schema: str, tmp_path: Path) -> None:
    url = pg_url_with_schema(pg_schema)
    config = Config(data_dir=tmp_path / "n", store_url=url, placement=Placement(lease_ttl_s=30, renew_s=10))
    h = Harness(config, sweeps=False)
    await h.start()
    try:
        sessions = [await _shown(h.store) for _ in range(3)]
        # several sessions at once: a fresh pool connection carries them too, not only the first
        async with h.store.tx() as a, h.store.tx() as b:
            both = [(await tx.execute(sa.text("SHOW idle_in_transaction_session_timeout"))).scalar() for tx in (a, b)]
    finally:
        await h.stop()
    assert set(sessions) == {("10s", "10s", "5s")}
    assert both == ["10s", "10s"]

    tool = await Store.open(url, migrate=False)  # a CLI's store (no lease settings): only the lock timeout
    try:
        assert await _shown(tool) == ("0", "0", "5s")
    finally:
        await tool.close()


async def test_an_idle_transaction_loses_its_session_and_its_row_lock(
    harness_runner: Any, pg_schema: str, tmp_path: Path,
) -> None:
    url = pg_url_with_schema(pg_schema)
    placement = Placement(lease_ttl_s=3, renew_s=1)  # window 2 s → idle timeout 1 s
    h = Harness(Config(data_dir=tmp_path / "n", store_url=url, placement=placement), sweeps=False)
    await h.start()
    other = await Store.open(url, migrate=False)
    try:
        group = await h.create_group("g-idle")
        G = schema.agent_group
        with pytest.raises(WakefulError):  # StoreUnavailable: the server ended the idle session
            async with h.store.tx() as tx:
                await tx.execute(sa.select(G.c.id).where(G.c.id == group.id).with_for_update())
                # idle in the transaction until the server ends the session (generous bound, not a timing)
                for _ in range(600):
                    await asyncio.sleep(0.1)
                    async with other.tx() as probe:
                        held = (await probe.execute(sa.text(
                            "SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation "
                            "WHERE c.relname = 'agent_group' AND l.mode = 'RowShareLock' AND l.pid <> pg_backend_pid()"
                        ))).scalar_one()
                    if not held:
                        break
                await tx.execute(sa.text("SELECT 1"))
        async with other.tx() as tx:  # the row is free: another session locks it at once
            await tx.execute(sa.text("SET LOCAL lock_timeout = '100ms'"))
            await tx.execute(sa.select(G.c.id).where(G.c.id == group.id).with_for_update())
    finally:
        await other.close()
        await h.stop()
