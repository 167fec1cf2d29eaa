"""SQLite runs one node (harness.md §19): it registers its row and heartbeat with no leases, so the faces show
it; its stop marks it gone."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from support.harness_fixtures import TestClock

from wakeful.harness.config import Config
from wakeful.harness.embed import Harness
from wakeful.harness.placement import overview


async def test_the_sqlite_node_has_a_row_but_no_leases(
    harness_runner: Any, store_clock: TestClock, tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'wakeful.db'}"
    h = Harness(Config(data_dir=tmp_path, store_url=url, node_name="solo-1"), clock=store_clock, sweeps=False)
    await h.start()
    try:
        assert h.node.placement is None
        (view,) = await overview.node_views(h.store, 20_000)
        assert (view["name"], view["state"], view["alive"], view["leases_held"]) == ("solo-1", "alive", True, 0)
        store_clock.advance(s=25)
        (view,) = await overview.node_views(h.store, 20_000)
        assert not view["alive"] and view["heartbeat_age_ms"] == 25_000
        assert h._solo is not None
        await h._solo.heartbeat()
        (view,) = await overview.node_views(h.store, 20_000)
        assert view["alive"] and view["heartbeat_age_ms"] == 0
        status = await overview.status(h.store, 20_000)
        assert status["leases"] == {"held": 0, "expired": 0, "by_node": {}, "agents_without_lease": 0}
        node_id = h.node.node_id
    finally:
        await h.stop()
    h2 = Harness(Config(data_dir=tmp_path, store_url=url, node_name="solo-2"), clock=store_clock, sweeps=False)
    await h2.start()
    try:
        views = await overview.node_views(h2.store, 20_000, include_gone=True)
        assert {v["id"]: v["state"] for v in views} == {node_id: "gone", h2.node.node_id: "alive"}
        assert [v["name"] for v in await overview.node_views(h2.store, 20_000)] == ["solo-2"]
    finally:
        await h2.stop()
