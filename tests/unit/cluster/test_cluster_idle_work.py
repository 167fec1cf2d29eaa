"""issue 16 / benchmarks.md §2.2: an idle node's periodic work does not grow with its Loops. Driven through one
minute of renew intervals on the test clock, a node with 5 Loops and the same node with 200 run the same
transactions in each interval — reads included, as PostgreSQL's ``xact_commit`` counts them — and the writes are
the heartbeats alone, the lease renewal riding in one of them (harness.md §19.1, §19.2, §19.3).

Nor does the node's own Python work grow (§2.1 step 4, idle CPU at N = 10,000): the lines of wakeful code the
minute executes (``sys.settrace`` on the node's thread; the libraries below it are not counted) are nearly the same
for 5 and 200 Loops — the fence, the reconcile, the pending-event scan, the renewal and the tick's reads look at
what changed, not at every Loop or agent.

The renewer thread and the LISTEN connection keep real time; here they are stopped and the renewer's rounds run
on the test's schedule, so every transaction of the node goes through the one store the test counts."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from support.harness_fixtures import TestClock
from support.loops_harness import driver, tenant

import wakeful
from wakeful.harness.config import Config, Limits, Placement
from wakeful.harness.embed import Harness
from wakeful.harness.store import loops, schema
from wakeful.harness.store.core import Store
from wakeful.harness.store.ids import new_id

PLACEMENT = Placement()  # the defaults: renew every 10 s, heartbeat every 5 s, tick every 10 s, reconcile 60 s
LIMITS = Limits(loops_per_group=1000)
PER_AGENT = 5
INTERVALS = PLACEMENT.reconcile_s // PLACEMENT.renew_s  # one minute: … and the next reconcile ends it
WAKEFUL = str(Path(wakeful.__file__).parent)


class _Lines:
    """A ``sys.settrace`` hook counting the lines executed in wakeful's own modules on this thread."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, frame: Any, event: str, arg: Any) -> Any:
        return self._line if frame.f_code.co_filename.startswith(WAKEFUL) else None

    def _line(self, frame: Any, event: str, arg: Any) -> Any:
        if event == "line":
            self.count += 1
        return self._line


async def _add_loops(url: str, clock: TestClock, home: Path, compile_c: Any, first: int, count: int,
                     per_agent: int = PER_AGENT) -> None:
    """``count`` more active Loops (agents ``first`` on), ``per_agent`` to an agent, made by a node that is then
    stopped (its leases released): the first of each agent through the real path, the rest as rows."""
    h = Harness(Config(data_dir=home, store_url=url, limits=LIMITS, max_objects=1), clock=clock, sweeps=False)
    await h.start()
    try:
        for i in range(first, first + count // per_agent):
            group_id, agent_id, session_id = await tenant(h, f"a{i}")
            art = await driver(h, agent_id, compile_c)
            await h.create_loop(agent_id=agent_id, session_id=session_id, artifact=art)
            async with h.store.tx() as tx:
                for _ in range(per_agent - 1):
                    await loops.insert_loop(
                        tx, group_id=group_id, agent_id=agent_id, session_id=session_id,
                        artifact_sha256=art.removeprefix("sha256:"), config={}, creator=f"agent:{agent_id}",
                        loop_id=new_id("lp", int(time.time() * 1000)),
                    )
    finally:
        await h.stop()


async def _idle_minute(url: str, clock: TestClock, home: Path, loops_expected: int,
                       lines: _Lines | None = None) -> list[tuple[int, int]]:
    """(write commits, transactions) of each renew interval of one idle minute of a node on ``url``; with
    ``lines``, the wakeful lines the minute executed are counted there."""
    h = Harness(Config(data_dir=home, store_url=url, limits=LIMITS, placement=PLACEMENT), clock=clock, sweeps=False)
    await h.start()
    try:
        assert h.node.resident_count == loops_expected
        placement = h.node.placement
        if placement is not None:  # their own schedules run on real time: stopped, the rounds run below
            await asyncio.to_thread(placement.renewer.stop)
            await placement.listener.stop()
        await h._sweep_tick()  # the first sweep tick reconciles (and prunes settled events, once an hour) …
        if placement is not None:
            await placement.fence()  # … and the first fence after the loads looks at every object, once
        await h.settle()
        transactions = 0

        def counted(conn: Any) -> None:
            nonlocal transactions
            transactions += 1

        engine = h.store.engine.sync_engine
        sa.event.listen(engine, "commit", counted)
        if lines is not None:
            sys.settrace(lines)
        try:
            out = []
            for _ in range(INTERVALS):
                writes0, transactions0 = h.store.commits, transactions
                for beat in range(PLACEMENT.renew_s // PLACEMENT.heartbeat_s):
                    clock.advance(s=PLACEMENT.heartbeat_s)
                    if placement is None:
                        assert h._solo is not None
                        await h._solo.heartbeat()
                    else:  # the renewer's round: the heartbeat, with the renewal once per renew interval
                        assert await placement.renewer.round(h.store, renew=beat == 0) == (True, beat == 0)
                if placement is not None:
                    await placement.tick()
                await h._sweep_tick()
                await h.settle()
                out.append((h.store.commits - writes0, transactions - transactions0))
        finally:
            sys.settrace(None)
            sa.event.remove(engine, "commit", counted)
        assert h.node.resident_count == loops_expected  # nothing was lost on the way
        return out
    finally:
        await h.stop()


async def test_idle_transactions_per_renew_interval_do_not_grow_with_the_loops(
    harness_runner: Any, store_url: str, store_clock: TestClock, tmp_path: Path, compile_c: Any,
) -> None:
    await _add_loops(store_url, store_clock, tmp_path / "setup", compile_c, 0, 5)
    few = await _idle_minute(store_url, store_clock, tmp_path / "node", 5)
    await _add_loops(store_url, store_clock, tmp_path / "setup", compile_c, 1, 195)
    many = await _idle_minute(store_url, store_clock, tmp_path / "node", 200)
    assert many == few, f"5 Loops: {few}; 200 Loops: {many}"
    heartbeats = PLACEMENT.renew_s // PLACEMENT.heartbeat_s
    assert [writes for writes, _ in few] == [heartbeats] * INTERVALS  # the heartbeats, the renewal in one of them
    assert sum(total for _, total in few) <= 30  # per minute (benchmarks.md §2.2: at most 60)


async def _more_loops(url: str, clock: TestClock, per_agent: int) -> None:
    """``per_agent`` more active Loops as rows beside each Loop there is (same agent, session and artifact)."""
    store = await Store.open(url, clock=clock)
    try:
        async with store.tx() as tx:
            rows = loops.loops_from_rows(await tx.execute(sa.select(schema.loop)))
            for first in rows:
                for _ in range(per_agent):
                    await loops.insert_loop(
                        tx, group_id=first.group_id, agent_id=first.agent_id, session_id=first.session_id,
                        artifact_sha256=first.artifact_sha256, config={}, creator=f"agent:{first.agent_id}",
                        loop_id=new_id("lp", int(time.time() * 1000)),
                    )
    finally:
        await store.close()


async def test_idle_python_work_per_minute_does_not_grow_with_the_loops(
    harness_runner: Any, store_url: str, store_clock: TestClock, tmp_path: Path, compile_c: Any,
) -> None:
    """5 → 200 Loops of the same 5 agents adds less than one executed line of wakeful code per added Loop to the
    whole idle minute: a walk over the residents or their rows in a periodic step adds several per Loop each time
    it runs (the fence alone runs six times a minute here, every 2.5 s in a node), a parameter list built in C
    (``map``, ``zip``, ``json.dumps``) adds none. (Per-agent work — the renewal's array of the held agents — is
    the same on both sides: the agents do not change.)"""
    await _add_loops(store_url, store_clock, tmp_path / "setup", compile_c, 0, 5, per_agent=1)
    few = _Lines()
    await _idle_minute(store_url, store_clock, tmp_path / "node", 5, few)
    await _more_loops(store_url, store_clock, 39)
    many = _Lines()
    await _idle_minute(store_url, store_clock, tmp_path / "node", 200, many)
    assert many.count - few.count < 195, f"5 Loops: {few.count} lines; 200 Loops: {many.count} lines"
