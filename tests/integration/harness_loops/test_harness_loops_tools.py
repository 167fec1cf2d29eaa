"""The agent's Loop tools (harness.md §4.2, §9, §15): quota races, refusals that write nothing, the
capability list enforced by the runtime (SF_DENIED without reaching the harness), archive and unarchive."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from support.loops_harness import call, driver, driver_loop, loop_row, snapshot, started, tenant, until

from wakeful.harness.errors import (
    AgentArchived,
    AlreadyActive,
    ArtifactNotFound,
    CapabilityNotAllowed,
    ConfigTooLarge,
    HarnessError,
    InvalidArtifact,
    InvalidRequest,
    NotFound,
    QuotaExceeded,
    StoreUnavailable,
)


async def test_fifty_concurrent_creates_admit_exactly_twenty(
    harness_runner: Any, store_url: str, store_clock: Any, tmp_path: Path, compile_c: Any,
) -> None:
    """SQLite: one node; PostgreSQL: two nodes on one database, 25 creates through each (§21).

    All 50 wait on the group's quota lock at once, while the same event loop loads the admitted Loops; on a loaded
    machine the last waiters can pass PostgreSQL's 5 s lock timeout and are refused ``unavailable`` (503, harness.md
    §3: nothing written). A client retries those, so the test does too: every create ends admitted or
    ``quota_exceeded``, and the rows are exactly the admitted creates (a 503 that wrote a row would show here)."""
    h = await started(store_url, store_clock, tmp_path / "data")
    nodes = [h]
    try:
        _, agent, session = await tenant(h)
        art = await driver(h, agent, compile_c)
        if store_url.startswith("postgresql"):
            nodes.append(await started(store_url, store_clock, tmp_path / "data2"))
        results: list[Any] = [None] * 50
        for _ in range(10):  # bounded: each round some creates get the lock in time
            todo = [i for i, r in enumerate(results) if r is None or isinstance(r, StoreUnavailable)]
            if not todo:
                break
            done = await asyncio.gather(
                *(nodes[i % len(nodes)].create_loop(agent_id=agent, session_id=session, artifact=art) for i in todo),
                return_exceptions=True,
            )
            for i, r in zip(todo, done, strict=True):
                results[i] = r
        admitted = [r for r in results if isinstance(r, dict)]
        refused = [r for r in results if isinstance(r, QuotaExceeded)]
        assert len(admitted) == 20 and len(refused) == 30, [r for r in results if isinstance(r, Exception)][:3]
        assert all(e.details == {"scope": "agent", "limit": 20} for e in refused)
        assert len(await h.list_loops(agent_id=agent, state="active")) == 20
        assert sorted(r["id"] for r in await h.list_loops()) == sorted(r["id"] for r in admitted)  # refused: no row

        async def all_resident() -> bool:  # §19: on the lease holder; creates through the other node signal it
            return sum(len(n.node.residents()) for n in nodes) == 20 and sum(bool(n.node.residents()) for n in nodes) == 1

        await until(all_resident)
    finally:
        for n in reversed(nodes):
            await n.stop()


async def test_resume_at_the_limit_is_refused(
    harness_runner: Any, store_url: str, store_clock: Any, tmp_path: Path, compile_c: Any,
) -> None:
    h = await started(store_url, store_clock, tmp_path / "data")
    try:
        group, agent, session = await tenant(h)
        async with h.store.tx() as tx:
            from wakeful.harness.store import groups

            await groups.set_group_limits(tx, group, {"loops_per_agent": 2})
        art = await driver(h, agent, compile_c)
        one, two = [await h.create_loop(agent_id=agent, session_id=session, artifact=art) for _ in range(2)]
        await h.pause_loop(one["id"])
        await h.create_loop(agent_id=agent, session_id=session, artifact=art)
        with pytest.raises(QuotaExceeded):
            await h.resume_loop(one["id"])
        row = await loop_row(h, one["id"])
        assert (row.state, row.pause_reason, row.incarnation) == ("paused", "manual", 1)
        with pytest.raises(AlreadyActive):
            await h.resume_loop(two["id"])
    finally:
        await h.stop()


async def test_bad_input_is_a_typed_error_and_writes_nothing(
    harness_runner: Any, store_url: str, store_clock: Any, tmp_path: Path, compile_c: Any,
) -> None:
    h = await started(store_url, store_clock, tmp_path / "data")
    try:
        _, agent, session = await tenant(h)
        _, other_agent, other_session = await tenant(h, "a2")
        art = await driver(h, agent, compile_c)
        before = await snapshot(h)
        cases: list[tuple[dict[str, Any], type[HarnessError]]] = [
            ({"config": {"blob": "x" * 17_000}}, ConfigTooLarge),
            ({"config": {"state": 1}}, InvalidRequest),
            ({"config": [1, 2]}, InvalidRequest),
            ({"capabilities": [{"name": "loop.create"}]}, CapabilityNotAllowed),
            ({"capabilities": [{"name": "script.run"}]}, CapabilityNotAllowed),
            ({"capabilities": [{"name": "no.such.tool"}]}, CapabilityNotAllowed),
            ({"capabilities": [{"name": "decide", "arguments": "x"}]}, InvalidRequest),
            ({"capabilities": [{"name": "decide", "argument": {}}]}, InvalidRequest),
            ({"capabilities": [{"name": "decide"}] * 33}, InvalidRequest),
            ({"name": "n" * 81}, InvalidRequest),
            ({"artifact": "sha256:" + "0" * 64}, ArtifactNotFound),
            ({"artifact": "/loops/../x.elf"}, InvalidRequest),
            ({"session_id": other_session}, InvalidRequest),
            ({"session_id": 7}, InvalidRequest),  # hostile types never reach a query
            ({"agent_id": None}, InvalidRequest),
            ({"artifact": 9}, InvalidRequest),
            ({"config": {1: 2}}, InvalidRequest),
            ({"capabilities": [{"name": "decide", "arguments": {"a": {1, 2}}}]}, InvalidRequest),
        ]
        for overrides, error in cases:
            args = {"agent_id": agent, "session_id": session, "artifact": art, **overrides}
            with pytest.raises(error) as info:
                await h.create_loop(**args)
            assert info.value.code == error.code, overrides
        with pytest.raises(InvalidArtifact):
            await h.upload(agent, b"\x7fELF" + b"\0" * 60)
        with pytest.raises(InvalidArtifact):
            await h.upload(agent, b"not an elf")
        assert await snapshot(h) == before
        loop_id = (await h.create_loop(agent_id=agent, session_id=session, artifact=art))["id"]
        await h.delete_loop(loop_id)
        with pytest.raises(NotFound):
            await h.resume_loop(loop_id)
        with pytest.raises(NotFound):
            await h.pause_loop(loop_id)
        assert (await h.delete_loop(loop_id))["deleted"] is False  # deleting a deleted Loop succeeds
        with pytest.raises(NotFound):
            await h.loops.get(loop_id, agent_id=other_agent)
        for op in (h.get_loop, h.pause_loop, h.resume_loop, h.delete_loop):
            with pytest.raises(InvalidRequest):
                await op(12345)  # type: ignore[arg-type]
    finally:
        await h.stop()


async def test_capability_list_is_enforced_by_the_runtime(
    harness_runner: Any, store_url: str, store_clock: Any, tmp_path: Path, compile_c: Any,
) -> None:
    from wakeful.harness.config import Config
    from wakeful.harness.embed import Harness

    h = Harness(Config(data_dir=tmp_path / "data", store_url=store_url), clock=store_clock, sweeps=False)
    calls: list[tuple[Any, Any]] = []
    h.register_tool("weather.get", lambda args, ctx: calls.append((args, ctx)) or {"temp": 21},
                    description="read the weather")
    h.register_tool("tickets.close", lambda args, ctx: {"closed": True}, description="write", safety="write")
    await h.start()
    try:
        _, agent, session = await tenant(h)
        art = await driver(h, agent, compile_c)
        with pytest.raises(CapabilityNotAllowed):
            await h.create_loop(agent_id=agent, session_id=session, artifact=art,
                                capabilities=[{"name": "tickets.close"}])
        caps = [{"name": "weather.get", "arguments": {"city": "Oslo"}}]
        loop_id = (await h.create_loop(agent_id=agent, session_id=session, artifact=art,
                                       capabilities=caps))["id"]
        counted = h.node.dispatch.dispatched
        assert await call(h, loop_id, "e1", "agent.notify", {"text": "x", "dedup_key": "k"}) == \
            "call agent.notify -> -4"  # SF_DENIED: not in the list
        assert await call(h, loop_id, "e2", "weather.get", {"city": "Bergen"}) == "call weather.get -> -4"
        assert await call(h, loop_id, "e3", "loop.create", {}) == "call loop.create -> -4"
        assert await call(h, loop_id, "e4", "tickets.close", {}) == "call tickets.close -> -4"
        assert h.node.dispatch.dispatched == counted and calls == []
        assert await call(h, loop_id, "e5", "weather.get", {"city": "Oslo", "unit": "C"}) == \
            "call weather.get -> 1"
        assert await call(h, loop_id, "e6", "loop.state.put", {"state": 1}) == "call loop.state.put -> 1"
        (args, ctx), = calls
        assert args == {"city": "Oslo", "unit": "C"}
        assert ctx.principal == f"schedule|loop:{loop_id}|agent:{agent}"
        assert (ctx.loop_id, ctx.agent_id, ctx.session_id, ctx.incarnation) == (loop_id, agent, session, 1)
    finally:
        await h.stop()


async def test_archive_pauses_and_unarchive_readmits_within_quota(
    harness_runner: Any, store_url: str, store_clock: Any, tmp_path: Path, compile_c: Any,
) -> None:
    h = await started(store_url, store_clock, tmp_path / "data")
    try:
        group, agent, session = await tenant(h)
        art = await driver(h, agent, compile_c)
        seen: list[str] = []
        h.node.add_instrument(SimpleNamespace(transition=seen.append))  # §2.7: called after each commit
        ids = [(await h.create_loop(agent_id=agent, session_id=session, artifact=art))["id"] for _ in range(3)]
        assert seen == ids
        out = await h.archive_agent(agent)
        assert seen == ids * 2
        assert out["paused"] == ids and not h.node.residents()
        for loop_id in ids:
            row = await loop_row(h, loop_id)
            assert (row.state, row.pause_reason) == ("paused", "archive")
        with pytest.raises(AgentArchived):
            await h.create_loop(agent_id=agent, session_id=session, artifact=art)
        with pytest.raises(AgentArchived):
            await h.loops.resume(ids[0])
        async with h.store.tx() as tx:
            from wakeful.harness.store import groups

            await groups.set_group_limits(tx, group, {"loops_per_agent": 2})
        back = await h.unarchive_agent(agent)
        assert back["resumed"] == ids[:2] and back["quota"] == ids[2:]
        assert [(await loop_row(h, i)).incarnation for i in ids] == [2, 2, 1]
        assert seen == ids * 3
        held = await loop_row(h, ids[2])
        assert (held.state, held.pause_reason) == ("paused", "quota")
        notices = await h.messages(session)
        assert [m.id for m in notices] == [f"loop:{ids[2]}:lifecycle:quota:1"]
        assert "limit of 2 active Loops" in notices[0].content
    finally:
        await h.stop()


async def test_unarchive_does_not_reload_a_loop_adopted_meanwhile(
    harness_runner: Any, store_url: str, store_clock: Any, tmp_path: Path, compile_c: Any,
) -> None:
    """After unarchive commits, something else may load one of its Loops before unarchive reaches it — on
    PostgreSQL the placement adopts the agent it just claimed, concurrently. That Loop is then resident at an
    incarnation begun after the commit and must stay so: before, unarchive ended and reloaded it (incarnation 3,
    seen in a full CI run). Here the concurrent adopter is a task started by the transition instrument."""
    h = await started(store_url, store_clock, tmp_path / "data")
    try:
        _, agent, session = await tenant(h)
        art = await driver(h, agent, compile_c)
        ids = [(await h.create_loop(agent_id=agent, session_id=session, artifact=art))["id"] for _ in range(2)]
        await h.archive_agent(agent)
        adopters: list[asyncio.Task[Any]] = []

        def adopt(loop_id: str) -> None:  # runs at unarchive's first wait, while it loads ids[0]
            if loop_id == ids[1]:
                adopters.append(asyncio.get_running_loop().create_task(h.node.try_load(loop_id, if_absent=True)))

        h.node.add_instrument(SimpleNamespace(transition=adopt))
        back = await h.unarchive_agent(agent)
        await asyncio.gather(*adopters)
        assert back["resumed"] == ids and len(adopters) == 1
        assert [(await loop_row(h, i)).incarnation for i in ids] == [2, 2]
        assert sorted(r.loop_id for r in h.node.residents()) == sorted(ids)
    finally:
        await h.stop()


async def test_tool_input_model_and_failures_are_host_errors(
    harness_runner: Any, store_url: str, store_clock: Any, tmp_path: Path, compile_c: Any,
) -> None:
    from pydantic import BaseModel

    from wakeful.harness.config import Config
    from wakeful.harness.embed import Harness
    from wakeful.harness.store import loops

    class Query(BaseModel):
        city: str

    def broken(args: Any, ctx: Any) -> Any:
        raise RuntimeError("backend down")

    h = Harness(Config(data_dir=tmp_path / "data", store_url=store_url), clock=store_clock, sweeps=False)
    h.register_tool("weather.get", lambda args, ctx: {"temp": 21}, description="weather", input_model=Query)
    h.register_tool("broken.read", broken, description="always fails")
    await h.start()
    try:
        agent, session, loop_id = await driver_loop(h, compile_c)
        assert await call(h, loop_id, "e1", "weather.get", {"city": "Oslo"}) == "call weather.get -> 1"
        assert await call(h, loop_id, "e2", "weather.get", {"town": "Oslo"}) == "call weather.get -> -5"
        assert await call(h, loop_id, "e3", "broken.read", {}) == "call broken.read -> -5"
        assert await call(h, loop_id, "e4", "decide", {}) == "call decide -> 1"  # {error: not_configured}
        async with h.store.tx(readonly=True) as tx:
            logs = [ln.text for ln in await loops.list_logs(tx, loop_id) if ln.source == "harness"]
        assert any(t.startswith("invalid_arguments: weather.get") for t in logs)
        assert any(t.startswith("tool_failed: broken.read: RuntimeError: backend down") for t in logs)
        assert (await h.get_loop(loop_id))["state"] == "active"
    finally:
        await h.stop()


async def test_a_raising_instrument_does_not_break_the_node(
    harness_runner: Any, store_url: str, store_clock: Any, tmp_path: Path, compile_c: Any,
) -> None:
    """Issue 15: observers subscribe with ``node.add_instrument``; one that raises is logged, the commit stands,
    the later instruments still see the transition, and a removed one sees nothing more."""
    h = await started(store_url, store_clock, tmp_path / "data")
    try:
        group, agent, session = await tenant(h)
        art = await driver(h, agent, compile_c)
        seen: list[str] = []

        def broken(loop_id: str) -> None:
            raise RuntimeError(f"observer of {loop_id} broke")

        h.node.add_instrument(SimpleNamespace(transition=broken))
        recorder = SimpleNamespace(transition=seen.append)
        h.node.add_instrument(recorder)
        loop_id = (await h.create_loop(agent_id=agent, session_id=session, artifact=art))["id"]
        assert seen == [loop_id] and h.node.resident(loop_id) is not None
        h.node.remove_instrument(recorder)
        assert (await h.pause_loop(loop_id))["state"] == "paused"
        assert seen == [loop_id] and h.node.resident(loop_id) is None
    finally:
        await h.stop()
