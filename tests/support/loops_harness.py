"""Helpers for harness lifecycle tests: a started ``Harness`` on a test store and clock, a tenant, the
``loop_driver.c`` test Loop, events written straight into the store, and waiting for conditions.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from wakeful.harness.config import Config
from wakeful.harness.embed import Harness
from wakeful.harness.store import loops, schema

DRIVER_C = (Path(__file__).parent / "guests" / "loop_driver.c").read_text()


async def started(store_url: str, clock: Any, data_dir: Path, **config: Any) -> Harness:
    """A started harness without background sweeps (tests call ``tick``)."""
    h = Harness(Config(data_dir=data_dir, store_url=store_url, **config), clock=clock, sweeps=False)
    await h.start()
    return h


async def tenant(h: Harness, name: str = "a1") -> tuple[str, str, str]:
    """(group_id, agent_id, session_id)."""
    group = await h.create_group(f"g-{name}")
    agent = await h.create_agent(group.id, name)
    session = await h.create_session(agent.id, "inbox")
    return group.id, agent.id, session.id


async def driver(h: Harness, agent_id: str, compile_c: Callable[..., bytes]) -> str:
    """Upload the driver Loop for the agent; returns its ``sha256:<hex>`` reference."""
    elf = compile_c(DRIVER_C, name="loop_driver.c")
    out = await h.upload(agent_id, elf, path="/loops/driver.elf")
    return str(out["artifact"])


async def driver_loop(h: Harness, compile_c: Callable[..., bytes]) -> tuple[str, str, str]:
    """A fresh tenant with the driver Loop created and active: (agent_id, session_id, loop_id)."""
    _, agent, session = await tenant(h)
    art = await driver(h, agent, compile_c)
    loop_id = (await h.create_loop(agent_id=agent, session_id=session, artifact=art))["id"]
    return agent, session, str(loop_id)


async def send(h: Harness, loop_id: str, event_id: str, topic: str, payload: Any) -> None:
    """Admit a pending event directly in the store (intake is issue 6) and let the node deliver it."""
    text = json.dumps(payload, separators=(",", ":"))
    async with h.store.tx() as tx:
        row = await loops.get_loop(tx, loop_id)
        await tx.execute(sa.insert(schema.loop_event).values(
            loop_id=loop_id, event_id=event_id, group_id=row.group_id, topic=topic, payload=text,
            payload_sha256=hashlib.sha256(text.encode()).hexdigest(), envelope_bytes=len(text) + 64,
            status="pending", source="operator", received_ms=await tx.now_ms(),
        ))
    await h.node.replay(loop_id)


async def call(h: Harness, loop_id: str, event_id: str, cap: str, args: Any) -> str:
    """Make the guest call ``cap`` with ``args``; returns the guest's log line for the call.

    The test clock moves 1 s first: guests may log 10 lines a second and the node persists about one a
    second (sdk.md §9.3, harness.md §2.7), and a frozen clock would drop the lines the tests read.
    """
    h.clock.advance(s=1)  # type: ignore[union-attr]
    before = len(await guest_lines(h, loop_id, "call "))
    await send(h, loop_id, event_id, "call", {"cap": cap, "args": args})
    lines: list[str] = []

    async def logged() -> bool:
        nonlocal lines
        await h.node.flush_logs()
        lines = await guest_lines(h, loop_id, "call ")
        return len(lines) > before

    await until(logged)
    return lines[-1]


async def until(predicate: Callable[[], Awaitable[bool]], timeout: float = 10.0) -> None:
    """Poll ``predicate`` (letting the runtime and post-commit work run) until it holds."""
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not await predicate():
        if loop.time() > end:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.005)


async def loop_row(h: Harness, loop_id: str) -> loops.Loop:
    async with h.store.tx(readonly=True) as tx:
        return await loops.get_loop(tx, loop_id)


async def guest_lines(h: Harness, loop_id: str, prefix: str = "") -> list[str]:
    async with h.store.tx(readonly=True) as tx:
        lines = await loops.list_logs(tx, loop_id)
    return [ln.text for ln in lines if ln.source == "guest" and ln.text.startswith(prefix)]


async def configs_seen(h: Harness, loop_id: str) -> list[dict[str, Any]]:
    """Every load config the guest logged at start, oldest first."""
    await h.node.flush_logs()
    return [json.loads(text[len("config "):]) for text in await guest_lines(h, loop_id, "config ")]


async def snapshot(h: Harness) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of the tables a host call may change (to prove that a refusal changed nothing)."""
    out = {}
    async with h.store.tx(readonly=True) as tx:
        for table in (schema.loop, schema.loop_event, schema.message, schema.loop_transition, schema.loop_log):
            rows = await tx.execute(sa.select(table).order_by(*table.primary_key.columns))
            out[table.name] = [tuple(r) for r in rows]
    return out
