"""``wakeful.Harness`` carries the control plane (interfaces.md §5 ``h.control``): started on the node's store,
usable for commands and reads, gone after stop."""

from __future__ import annotations

from pathlib import Path

import pytest

import wakeful
from wakeful.control import Actor, Control
from wakeful.control.embed import Harness


async def test_h_control_on_an_embedded_node(harness_runner, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    assert issubclass(wakeful.Harness, Harness)  # wakeful.embed.Harness adds h.serve_http above the faces
    h = wakeful.Harness(db_url=f"sqlite:///{tmp_path / 'h.db'}", data_dir=tmp_path, sweeps=False)
    with pytest.raises(RuntimeError):
        _ = h.control
    async with h:
        assert isinstance(h.control, Control) and h.control.store is h.store
        group = await h.create_group("g")
        agent = await h.create_agent(group.id, "a")
        me = Actor("agent", agent.id, group.id)
        made = await h.control.submit(me, {"operation_id": "g1", "command": {
            "type": "goal.create", "title": "embedded", "objective": "o"}})
        item = await h.control.submit(me, {"operation_id": "w1", "goal_id": made["goal_id"], "command": {
            "type": "work.add", "class": "advancement", "title": "t"}})
        snap = await h.control.snapshot(made["goal_id"])
        assert snap.goal.revision == 2 and [i.id for i in snap.items] == [item["changed"][0]["id"]]
        assert [a.agent_id for a in snap.agents] == [agent.id]
        assert await h.control.tick() == 0
    with pytest.raises(RuntimeError):
        _ = h.control
