"""Hostile envelopes are normal input (house rules; control-plane.md §4.1 step 0): random shapes, types and sizes
in every member of every command type end as a typed ``ControlRefused`` (or a legitimate receipt), never as
another exception, on SQLite and PostgreSQL; the goal stays usable and its log gapless afterwards."""

from __future__ import annotations

import asyncio
from typing import Any

import hypothesis.strategies as st
from hypothesis import HealthCheck, given, settings
from support.control_kernel import make_kit

from wakeful.control import ControlRefused
from wakeful.control.catalogue import CATALOGUE
from wakeful.control.errors import CODES

scalars = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(allow_nan=True),
                    st.text(max_size=30), st.just("x" * 5000), st.just("w_" + "0" * 26), st.just("\x00\ud7ff"))
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                       st.dictionaries(st.text(max_size=10), inner, max_size=4)),
                      max_leaves=12)


def _command(type_: str) -> st.SearchStrategy[dict[str, Any]]:
    fields = list(CATALOGUE[type_].fields)
    return st.fixed_dictionaries({"type": st.just(type_)}, optional={f: values for f in fields})


envelopes = st.fixed_dictionaries(
    {"operation_id": st.one_of(st.text(min_size=1, max_size=12, alphabet="abc123-"), values),
     "command": st.one_of(st.sampled_from(sorted(CATALOGUE)).flatmap(_command), values)},
    optional={"goal_id": values, "expected": st.one_of(values, st.fixed_dictionaries({}, optional={
        "item_revision": values, "goal_revision": values, "acceptance_revision": values,
        "claim": st.one_of(values, st.fixed_dictionaries({"epoch": values, "key": values}))}))})


def test_hostile_envelopes_are_refused_cleanly(store, harness_runner: asyncio.Runner) -> None:
    kit = harness_runner.run(make_kit(store, n_agents=1))
    item = harness_runner.run(kit.add(title="target"))
    actors = [kit.agents[0], kit.person]

    @settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(envelope=envelopes, who=st.integers(0, 1), aim=st.booleans())
    def attempt(envelope: dict[str, Any], who: int, aim: bool) -> None:
        if aim and isinstance(envelope.get("command"), dict):  # point half of them at the real goal and item
            envelope = {**envelope, "goal_id": kit.goal_id}
            if "item" in envelope["command"]:
                envelope["command"] = {**envelope["command"], "item": item}
        try:
            receipt = harness_runner.run(kit.control.submit(actors[who], envelope))
        except ControlRefused as exc:
            assert exc.code in CODES, exc.to_dict()
            assert isinstance(exc.to_dict()["message"], str)
        else:
            assert receipt["result"] == "applied"

    attempt()
    commits = harness_runner.run(kit.control.commits(kit.goal_id, limit=200))
    assert [c["seq"] for c in commits] == list(range(1, len(commits) + 1))
    # the goal still works (random valid commands may have paused it, or even closed it)
    status = harness_runner.run(kit.control.goal(kit.goal_id))["status"]
    if status == "paused":
        harness_runner.run(kit.run(kit.person, {"type": "goal.resume"}))
    if status != "closed":
        fresh = harness_runner.run(kit.add(title="after the storm"))
        harness_runner.run(kit.run(kit.person, {"type": "work.update", "item": fresh, "detail": "still fine"},
                                   expected={"item_revision": 1}))


async def test_hostile_read_arguments(store) -> None:
    """Reads take ids and filters from faces: other types and sizes are refused or not found before any query."""
    import pytest

    kit = await make_kit(store, n_agents=1)
    c = kit.control
    calls = [
        (c.goal({"x": 1}), "not_found"), (c.item(kit.goal_id, ["w_"]), "not_found"),
        (c.items(kit.goal_id, status={"$ne": 1}), "invalid_command"),  # type: ignore[arg-type]
        (c.evidence(kit.goal_id, item=7), "invalid_command"),  # type: ignore[arg-type]
        (c.effects(kit.goal_id, state="x" * 5000), "invalid_command"),
        (c.commits(kit.goal_id, limit=0), "invalid_command"), (c.commits(kit.goal_id, after_seq="1"), "invalid_command"),
        (c.receipt(kit.goal_id, None), "not_found"),  # type: ignore[arg-type]
        (c.acceptance(kit.goal_id, revision="1"), "not_found"),  # type: ignore[arg-type]
        (c.goals(kit.group_id, agent_id=3), "invalid_command"),  # type: ignore[arg-type]
        (c.snapshot("goal_" + "0" * 26), "not_found"),
    ]
    for call, code in calls:
        with pytest.raises(ControlRefused) as refused:
            await call
        assert refused.value.code == code
    assert await c.items(kit.goal_id, status="no-such-status") == []
