"""Wake handlers in a cluster (harness.md §19.2–19.3, interfaces.md §5): they run on the node holding the agent's
lease; a node with handlers claims an agent that has unhandled messages and offers them on the claim."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from support.harness_fixtures import TestClock, pg_url_with_schema
from support.loops_harness import call, driver_loop, until

from wakeful.harness.config import Config
from wakeful.harness.embed import Harness


async def _node(url: str, clock: TestClock, data: Path, handler: Any) -> Harness:
    h = Harness(Config(data_dir=data, store_url=url), clock=clock, sweeps=False)
    h.on_wake(handler)
    await h.start()
    return h


async def test_an_agent_with_unhandled_wakes_is_claimed_by_a_node_with_handlers(
    harness_runner: Any, pg_schema: str, store_clock: TestClock, tmp_path: Path, compile_c: Any,
) -> None:
    url = pg_url_with_schema(pg_schema)

    def failing(message: Any) -> None:
        raise RuntimeError("this agent host is broken")

    seen: list[str] = []
    a = await _node(url, store_clock, tmp_path / "a", failing)
    b = await _node(url, store_clock, tmp_path / "b", lambda m: seen.append(m.id))
    try:
        agent, session, loop_id = await driver_loop(a, compile_c)
        line = await call(a, loop_id, "n1", "agent.notify", {"content": "hello", "dedup_key": "k1"})
        assert line.endswith("-> 1")
        await a.pause_loop(loop_id)  # no active Loop left: only the unhandled wake keeps the agent interesting
        await b.tick()
        assert seen == []  # a still holds the lease: b's handler does not run
        await a.stop()  # drain releases the lease (the wake is still unhandled: a's handler kept failing)
        await b.tick()  # b has handlers: it claims the agent because of the wake and offers it
        await b.settle()

        async def handled() -> bool:
            await b.settle()
            return len(seen) == 1

        await until(handled)
        (message,) = await b.messages(session, kinds=("loop",))
        assert seen == [message.id] and message.handled_ms is not None
        assert message.handled_by == b.node.node_id  # handled on the node that claimed the agent
        await b.tick()  # handled now and no active Loop: the idle lease is released
        assert b.node.placement is not None and not b.node.placement.holds(agent)
    finally:
        await b.stop()
        if a._store is not None:
            await a.stop()
