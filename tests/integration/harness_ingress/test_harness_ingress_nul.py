"""U+0000 in text that would reach a text column (harness.md §10.1; PostgreSQL text cannot hold it) is refused
by the harness itself with a typed ``invalid_request`` / ``invalid_event`` naming the field, on every path that
does not pass the HTTP face (embedding, MCP, CLI): never a raw driver error, nothing written, the node keeps
running. JSON values (payloads, config, metadata) keep ``\\u0000`` as an escape and are accepted."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from support.ingress_harness import counter_loop, event_rows
from support.loops_harness import started

from wakeful.harness.errors import HarnessError, InvalidEvent, InvalidRequest, NotFound

NUL = "a\x00b"


async def test_nul_in_text_is_a_typed_refusal_and_writes_nothing(
    harness_runner: Any, store_url: str, store_clock: Any, tmp_path: Path, compile_c: Any,
) -> None:
    h = await started(store_url, store_clock, tmp_path / "data")
    try:
        group_id, agent_id, session_id, loop_id = await counter_loop(h, compile_c)
        art = (await h.get_loop(loop_id))["artifact_sha256"]
        cases: list[tuple[str, type[HarnessError], str | None, Callable[[], Awaitable[Any]]]] = [
            ("group name", InvalidRequest, "name", lambda: h.create_group(NUL)),
            ("agent name", InvalidRequest, "name", lambda: h.create_agent(group_id, NUL)),
            ("session title", InvalidRequest, "title", lambda: h.create_session(agent_id, NUL)),
            ("key label", InvalidRequest, "label", lambda: h.create_key("group", group_id=group_id, label=NUL)),
            ("loop name", InvalidRequest, "name", lambda: h.create_loop(
                agent_id=agent_id, session_id=session_id, artifact=f"sha256:{art}", name=NUL)),
            ("loop artifact path", InvalidRequest, "path", lambda: h.create_loop(
                agent_id=agent_id, session_id=session_id, artifact=NUL)),
            ("event topic", InvalidEvent, "topic", lambda: h.send_event(loop_id, NUL, {})),
            ("event id", InvalidEvent, "event_id", lambda: h.send_event(loop_id, "t", {}, NUL)),
            ("list filter", InvalidRequest, "agent_id", lambda: h.list_loops(agent_id=NUL)),
            ("list state", InvalidRequest, "state", lambda: h.list_loops(state=NUL)),
            ("event ids", InvalidRequest, "event_ids", lambda: h.events(loop_id, "discard", event_ids=[NUL])),
            # ids name no row: "not found" before any query, as the HTTP face answers a path holding U+0000
            ("loop id", NotFound, None, lambda: h.get_loop("lp_" + NUL)),
            ("agent id", NotFound, None, lambda: h.create_session(NUL, "t")),
            ("session id", HarnessError, None, lambda: h.create_loop(  # typed: not this agent's session
                agent_id=agent_id, session_id=NUL, artifact=f"sha256:{art}")),
        ]
        for what, kind, field, call in cases:
            with pytest.raises(kind) as refused:
                await call()
                pytest.fail(f"{what}: accepted")
            if field is not None:
                assert refused.value.details.get("field") == field, (what, refused.value.details)
        assert [g.name for g in await _groups(h)] == ["g-a1"]
        assert await event_rows(h, loop_id) == []
        assert len(await h.list_loops()) == 1
        # a JSON value keeps U+0000 as an escape: accepted, stored, read back equal
        answer = await h.send_event(loop_id, "t", {"s": NUL}, "e1")
        assert answer["status"] == "accepted"
        assert [r.event_id for r in await event_rows(h, loop_id)] == ["e1"]
        with pytest.raises(InvalidEvent):
            await h.send_event(loop_id, NUL, {})
        assert (await h.get_loop(loop_id))["state"] == "active"  # the node keeps running
    finally:
        await h.stop()


async def _groups(h: Any) -> list[Any]:
    from wakeful.harness.store import groups

    async with h.store.tx(readonly=True) as tx:
        return list(await groups.list_groups(tx))


async def test_guest_text_with_nul_never_breaks_the_store(
    harness_runner: Any, store_url: str, store_clock: Any, tmp_path: Path, compile_c: Any,
) -> None:
    """A guest's raw log bytes may hold U+0000: the line is kept (as U+FFFD) with the rest of its flush batch;
    ``agent.notify`` content and ``loop.log`` text holding it are refused as the guest's invalid arguments."""
    from support.loops_harness import guest_lines

    from wakeful.harness import wake_args
    from wakeful.harness.errors import HostCallRefused

    h = await started(store_url, store_clock, tmp_path / "data")
    try:
        _, _, _, loop_id = await counter_loop(h, compile_c)
        await h.node.flush_logs()
        res = h.node.resident(loop_id)
        h.node._logs.add(loop_id, res.incarnation, "before", 0)
        h.node._logs.add(loop_id, res.incarnation, NUL, 0)
        h.node._logs.add(loop_id, res.incarnation, "after", 0)
        await h.node.flush_logs()
        assert (await guest_lines(h, loop_id))[-3:] == ["before", "a\ufffdb", "after"]
    finally:
        await h.stop()
    for call in (lambda: wake_args.notify_args({"content": NUL, "dedup_key": "k"}),
                 lambda: wake_args.log_text({"message": NUL})):
        with pytest.raises(HostCallRefused) as refused:
            call()
        assert refused.value.code == "invalid_arguments"
