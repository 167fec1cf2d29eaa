"""issue 16 / benchmarks.md §2.2: a node killed with SIGKILL and started again on its data directory comes back
under its own node id and runs all its Loops again on its first placement pass — it takes over the leases still
held under that id at a new epoch instead of waiting for them to expire (the TTL here is 120 s, so waiting would
show). The restart is an embedded node without background sweeps: ``start`` runs exactly one placement tick."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from cluster_nodes import LIMITS, Probe, ServeNode, set_up, until
from support.harness_fixtures import pg_url_with_schema

from wakeful.harness.config import Config, Placement
from wakeful.harness.embed import Harness

pytestmark = pytest.mark.integration

LONG_LEASE = Placement(lease_ttl_s=120, renew_s=1, heartbeat_s=1, dead_after_s=3, tick_s=1, reconcile_s=600)
ENV = {f"WAKEFUL_PLACEMENT__{k.upper()}": str(getattr(LONG_LEASE, k)) for k in LONG_LEASE.__dataclass_fields__}
A, N = Probe.__init__.__globals__["A"], Probe.__init__.__globals__["N"]


async def _lease_rows(probe: Probe) -> dict[str, Any]:
    async with probe.store.tx(readonly=True) as tx:
        return {r.agent_id: r for r in await tx.execute(sa.select(A))}


async def _kill_and_restart(url: str, tmp_path: Path, compile_c: Any) -> None:
    tenant = await set_up(url, tmp_path / "setup", compile_c, agents=2, loops_per_agent=2)
    first = ServeNode("first", url, tmp_path / "n", env=ENV)
    probe = await Probe.open(url)
    h: Harness | None = None
    try:
        await probe.start(first)
        await until(lambda: probe.placed_on(first, tenant.loops), timeout=120)
        before = await probe.placement()
        held = await _lease_rows(probe)
        first.signal(signal.SIGKILL)
        assert await first.wait() == -signal.SIGKILL

        config = Config(data_dir=first.home, store_url=url, placement=LONG_LEASE, limits=LIMITS, node_name="first")
        h = Harness(config, sweeps=False)
        await h.start()  # the first placement pass (PostgreSQL) / the adoption at open (SQLite), nothing more
        assert {res.loop_id for res in h.node.residents()} == set(tenant.loops)
        assert h.node.node_id == first.node_id  # the data directory's id
        after = await probe.placement()
        for loop_id in tenant.loops:
            node_id, object_id, incarnation = after[loop_id]
            assert (node_id, object_id) == (first.node_id, h.node.resident(loop_id).object_id)
            assert incarnation == before[loop_id][2] + 1
        if held:  # PostgreSQL: the same holder at epoch + 1, taken before the old lease expired
            leases = await _lease_rows(probe)
            assert set(leases) == set(held) == set(tenant.agent_of.values())
            for agent_id, old in held.items():
                new = leases[agent_id]
                assert (new.node_id, new.epoch) == (first.node_id, old.epoch + 1)
                assert new.acquired_ms < old.expires_ms  # reclaimed, not claimed after expiry
        async with probe.store.tx(readonly=True) as tx:
            rows = list(await tx.execute(sa.select(N.c.id, N.c.state).where(N.c.name == "first")))
        assert [(r.id, r.state) for r in rows] == [(first.node_id, "alive")]  # one row, taken over
    finally:
        if h is not None:
            await h.stop()
        await first.close()
        await probe.close()


async def test_a_restarted_node_reclaims_its_leases_at_once_postgresql(
    harness_runner: Any, pg_schema: str, tmp_path: Path, compile_c: Any,
) -> None:
    await _kill_and_restart(pg_url_with_schema(pg_schema), tmp_path, compile_c)


async def test_a_restarted_node_runs_its_loops_at_once_sqlite(
    harness_runner: Any, tmp_path: Path, compile_c: Any,
) -> None:
    await _kill_and_restart(f"sqlite:///{tmp_path / 'store' / 'wakeful.db'}", tmp_path, compile_c)
