"""Self-scoped host calls as a guest makes them (harness.md §6, §9.4, §9.6): ack (once, duplicate,
unknown), checkpoints and their limits, loop.log, and late reports from retired objects."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from support.loops_harness import call, driver, loop_row, send, started, tenant

from wakeful.harness.errors import HostCallRefused
from wakeful.harness.store import loops, schema
from wakeful.runtime import ObjectStatus


async def _setup(h: Any, compile_c: Any, **create: Any) -> tuple[str, str]:
    _, agent, session = await tenant(h)
    art = await driver(h, agent, compile_c)
    loop_id = (await h.create_loop(agent_id=agent, session_id=session, artifact=art, **create))["id"]
    return loop_id, session


async def test_ack_settles_once_and_refuses_unknown_ids(
    harness_runner: Any, store_url: str, store_clock: Any, tmp_path: Path, compile_c: Any,
) -> None:
    h = await started(store_url, store_clock, tmp_path / "data")
    try:
        loop_id, _ = await _setup(h, compile_c)
        await send(h, loop_id, "job-1", "noop", {})
        assert await call(h, loop_id, "a1", "loop.ack", {"event_id": "job-1"}) == "call loop.ack -> 1"
        assert await call(h, loop_id, "a2", "loop.ack", {"event_id": "job-1"}) == "call loop.ack -> 1"  # duplicate
        assert await call(h, loop_id, "a3", "loop.ack", {"event_id": "nope"}) == "call loop.ack -> -5"
        assert await call(h, loop_id, "a4", "loop.ack", {"event_id": ""}) == "call loop.ack -> -5"
        E = schema.loop_event
        async with h.store.tx(readonly=True) as tx:
            row = (await tx.execute(sa.select(E).where(E.c.event_id == "job-1"))).one()
            logs = [ln.text for ln in await loops.list_logs(tx, loop_id) if ln.source == "harness"]
        assert (row.status, row.acked_incarnation) == ("acked", 1)
        assert any(t.startswith("unknown_event:") for t in logs)
        assert any(t.startswith("invalid_arguments:") for t in logs)
        assert (await h.get_loop(loop_id))["pending_count"] == 4  # the a1..a4 call events themselves
    finally:
        await h.stop()


async def test_checkpoint_limits_and_state_get(
    harness_runner: Any, store_url: str, store_clock: Any, tmp_path: Path, compile_c: Any,
) -> None:
    h = await started(store_url, store_clock, tmp_path / "data")
    try:
        loop_id, _ = await _setup(h, compile_c, config={"pad": "p" * 8000})
        assert await call(h, loop_id, "c1", "loop.state.put", {"n": 1}) == "call loop.state.put -> 1"  # Salix form
        assert (await loop_row(h, loop_id)).checkpoint == {"n": 1}
        too_big = {"state": "x" * 9000}  # fits alone, not with the 8 KB config
        assert await call(h, loop_id, "c2", "loop.state.put", too_big) == "call loop.state.put -> -5"
        row = await loop_row(h, loop_id)
        assert row.checkpoint == {"n": 1} and row.checkpoint_bytes == len('{"n":1}')
        assert await call(h, loop_id, "c3", "loop.state.get", {}) == "call loop.state.get -> 1"
        async with h.store.tx(readonly=True) as tx:
            logs = [ln.text for ln in await loops.list_logs(tx, loop_id) if ln.source == "harness"]
        assert any(t.startswith("checkpoint_too_large:") for t in logs)
    finally:
        await h.stop()


async def test_loop_log_is_stored_and_rate_limited(
    harness_runner: Any, store_url: str, store_clock: Any, tmp_path: Path, compile_c: Any,
) -> None:
    h = await started(store_url, store_clock, tmp_path / "data")
    try:
        loop_id, _ = await _setup(h, compile_c)
        assert await call(h, loop_id, "l1", "loop.log", {"message": "m" * 1500}) == "call loop.log -> 1"
        async with h.store.tx(readonly=True) as tx:
            (line,) = [ln for ln in await loops.list_logs(tx, loop_id) if ln.source == "loop.log"]
        assert len(line.text) == 1024 and line.text.endswith("…")
        store_clock.advance(s=1)
        for _ in range(10):  # the dispatcher's bound: 10 per second of the node's monotonic clock
            h.node.dispatch._log_rate(loop_id)
        try:
            h.node.dispatch._log_rate(loop_id)
        except HostCallRefused as refusal:
            assert refusal.code == "rate_limited"
        else:
            raise AssertionError("the 11th loop.log within a second was admitted")
    finally:
        await h.stop()


async def test_a_late_exit_report_from_a_retired_object_is_ignored(
    harness_runner: Any, store_url: str, store_clock: Any, tmp_path: Path, compile_c: Any,
) -> None:
    h = await started(store_url, store_clock, tmp_path / "data")
    try:
        loop_id, session = await _setup(h, compile_c)
        old = h.node.resident(loop_id)
        await h.pause_loop(loop_id)
        await h.resume_loop(loop_id)
        # the runtime reports an exit for the incarnation-1 object after the resume
        h.node._objects[old.object_id] = old
        h.node._on_state(ObjectStatus(old.object_id, "", "exited", "none", 0, {"exit_code": 3}))
        await h.settle()
        row = await loop_row(h, loop_id)
        assert (row.state, row.incarnation) == ("active", 2) and h.node.resident(loop_id) is not None
        assert await h.messages(session) == []
    finally:
        await h.stop()


async def test_at_most_four_host_calls_in_flight_per_loop_and_deadlines(
    harness_runner: Any, store_url: str, store_clock: Any, tmp_path: Path, compile_c: Any,
) -> None:
    import asyncio

    from wakeful.errors import HostCallError
    from wakeful.harness.config import Config
    from wakeful.harness.embed import Harness
    from wakeful.runtime import HostCall

    gate = asyncio.Event()

    async def slow(args: Any, ctx: Any) -> dict[str, Any]:
        await gate.wait()
        return {"ok": True, "big": "x" * args.get("size", 0)}

    h = Harness(Config(data_dir=tmp_path / "data", store_url=store_url), clock=store_clock, sweeps=False)
    h.register_tool("slow.read", slow, description="waits for the test")
    await h.start()
    try:
        loop_id, _ = await _setup(h, compile_c)
        obj = h.node.resident(loop_id).object_id

        def hc(n: int, size: int = 0, timeout_ms: int = 5000) -> HostCall:
            return HostCall(id=f"sf:t:{n}", object_id=obj, label=loop_id, capability="slow.read",
                            arguments={"size": size}, timeout_ms=timeout_ms,
                            deadline_unix_ms=store_clock.unix_ms() + timeout_ms)

        running = [h.node.dispatch.handle(hc(i, size=20_000 if i == 0 else 0)) for i in range(4)]
        try:
            h.node.dispatch.handle(hc(9))
        except HostCallError as busy:
            assert busy.kind == "busy"
        else:
            raise AssertionError("a fifth call in flight was admitted")
        gate.set()
        results = await asyncio.gather(*running)
        assert results[0] == {"error": {"code": "result_too_large", "bytes": len('{"ok":true,"big":""}') + 20_000}}
        assert results[1:] == [{"ok": True, "big": ""}] * 3
        assert h.node.dispatch.in_flight(loop_id) == 0
        gate.clear()
        late = h.node.dispatch.handle(hc(10, timeout_ms=50))  # clamped up to 100 ms
        try:
            await late
        except HostCallError as exc:
            assert exc.kind == "deadline_exceeded"
        else:
            raise AssertionError("a call past its deadline answered")
        assert h.node.dispatch.in_flight(loop_id) == 0
    finally:
        gate.set()
        await h.stop()


async def test_an_unavailable_store_is_a_host_error_and_the_object_keeps_running(
    harness_runner: Any, store_url: str, store_clock: Any, tmp_path: Path, compile_c: Any,
) -> None:
    """harness.md §3: a lock timeout is StoreUnavailable; the guest sees SF_HOST_ERROR and keeps running."""
    from support.loops_harness import guest_lines, until

    from wakeful.harness.store import Store

    h = await started(store_url, store_clock, tmp_path / "data")
    blocker = await Store.open(store_url, migrate=False)
    try:
        loop_id, _ = await _setup(h, compile_c)
        obj = h.node.resident(loop_id).object_id
        async with blocker.tx() as tx:  # SQLite: the write lock; PostgreSQL: the Loop's row lock
            await loops.get_loop(tx, loop_id, for_update=True)
            await h.node.runtime.deliver(obj, "held", "call", {"cap": "loop.state.put", "args": {"state": 1}})
            await asyncio.sleep(6)  # past busy_timeout / lock_timeout (5 s)
        async def logged() -> bool:
            await h.node.flush_logs()
            return bool(await guest_lines(h, loop_id, "call loop.state.put"))

        await until(logged)
        assert await guest_lines(h, loop_id, "call loop.state.put") == ["call loop.state.put -> -5"]
        assert await call(h, loop_id, "after", "loop.state.put", {"state": 2}) == "call loop.state.put -> 1"
        row = await loop_row(h, loop_id)
        assert (row.state, row.incarnation, row.checkpoint) == ("active", 1, 2)
        assert h.node.resident(loop_id).object_id == obj
    finally:
        await blocker.close()
        await h.stop()


async def test_a_host_call_is_one_task_and_its_answer_a_plain_future(
    harness_runner: Any, store_url: str, store_clock: Any, tmp_path: Path, compile_c: Any,
) -> None:
    """Issue 16: a call's store work is its only task; the answer the runtime waits on is a plain future of the
    loop (used as is by the runtime), settled by the work's end — the previous code ran ``wait_for(shield(work))``
    in a task of its own, two tasks per call. The deadline and the detached work are kept (the test above)."""
    from wakeful.harness.config import Config
    from wakeful.harness.embed import Harness
    from wakeful.runtime import HostCall

    h = Harness(Config(data_dir=tmp_path / "data", store_url=store_url), clock=store_clock, sweeps=False)
    h.register_tool("quick.read", lambda args, ctx: {"ok": True}, description="answers at once")
    await h.start()
    loop = asyncio.get_running_loop()
    tasks: list[Any] = []

    def counting(lp: asyncio.AbstractEventLoop, coro: Any, **kw: Any) -> asyncio.Task[Any]:
        task = asyncio.Task(coro, loop=lp, **kw)
        tasks.append(coro)
        return task

    try:
        loop_id, _ = await _setup(h, compile_c)
        obj = h.node.resident(loop_id).object_id
        answers = []
        for n in range(3):
            hc = HostCall(id=f"sf:t:{n}", object_id=obj, label=loop_id, capability="quick.read", arguments={},
                          timeout_ms=5000, deadline_unix_ms=store_clock.unix_ms() + 5000)
            loop.set_task_factory(counting)
            try:
                answer = h.node.dispatch.handle(hc)
                answers.append(await answer)
            finally:
                loop.set_task_factory(None)
            assert type(answer) is asyncio.Future
        assert answers == [{"ok": True}] * 3
        ours = [c.__qualname__ for c in tasks if c.__qualname__.startswith("Dispatch.")]  # (not the store's)
        assert ours == ["Dispatch._answer"] * 3  # previous code: Dispatch.run and Dispatch._answer per call
        assert h.node.dispatch.in_flight(loop_id) == 0 and not h.node.dispatch.tasks
    finally:
        await h.stop()
