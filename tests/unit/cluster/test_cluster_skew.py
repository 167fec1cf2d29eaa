"""harness.md §19.2, §21 "node clock skewed +1 min on a two-node PostgreSQL cluster": leases are judged by the
database clock, so a node whose wall clock runs a minute ahead takes nothing over early."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from support.harness_fixtures import pg_url_with_schema
from support.loops_harness import driver_loop

from wakeful.harness.config import Config
from wakeful.harness.embed import Harness


async def test_a_node_clock_a_minute_ahead_does_not_expire_anyone_elses_lease(
    harness_runner: Any, pg_schema: str, tmp_path: Path, compile_c: Any, monkeypatch: pytest.MonkeyPatch,
) -> None:
    url = pg_url_with_schema(pg_schema)
    a = Harness(Config(data_dir=tmp_path / "a", store_url=url), sweeps=False)  # no injected clock: the DB's
    b = Harness(Config(data_dir=tmp_path / "b", store_url=url), sweeps=False)
    await a.start()
    await b.start()
    try:
        agent, _, loop_id = await driver_loop(a, compile_c)
        real = time.time
        monkeypatch.setattr(time, "time", lambda: real() + 60.0)  # both nodes' wall clocks a minute ahead (> TTL)
        await b.tick()
        assert b.node.resident(loop_id) is None and a.node.resident(loop_id) is not None
        assert b.node.placement is not None and not b.node.placement.holds(agent)
        assert a.node.placement is not None and a.node.placement.holds(agent)
    finally:
        monkeypatch.undo()
        await b.stop()
        await a.stop()
