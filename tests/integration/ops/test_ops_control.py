"""The control-plane operations (``wakeful.control.ops``) through both backends: ``LocalBackend`` in process with
a principal and ``HttpBackend`` over the routes of interfaces.md §2.2 answer the same JSON — a goal created, a
command submitted (and replayed across backends), status, board, work, ``next`` — and refuse alike outside the
principal's scope."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from live_api import LiveApi, tenant
from ops_support import Caller, agent_of, person_of

import wakeful.control  # noqa: F401 - registers the control-plane operations
from wakeful.errors import WakefulError
from wakeful.harness.ops import OPERATOR, HttpBackend, LocalBackend, Principal, Refused

pytestmark = pytest.mark.integration




@pytest.fixture
def live(store_url: str, tmp_path: Path) -> Iterator[LiveApi]:
    with LiveApi(store_url, tmp_path / "data") as api:
        assert api.harness is not None and api.harness.control_if_running is not None
        yield api






async def _local(live: LiveApi, principal: Principal, name: str, **args: Any) -> Any:
    assert live.harness is not None
    return await LocalBackend(live.harness, principal).call(name, **args)


async def _http(live: LiveApi, key: str, name: str, **args: Any) -> Any:
    caller = Caller(live.url, key)
    try:
        return await HttpBackend(caller).call(name, **args)
    finally:
        await caller.http.aclose()


def _refusal(live: LiveApi, coro: Any) -> tuple[str, int]:
    try:
        live.run(coro)
    except Refused as exc:
        return exc.code, exc.status
    except WakefulError as exc:
        return str(getattr(exc, "code", "")), 0
    raise AssertionError("not refused")


def test_both_backends_answer_the_control_operations_alike(live: LiveApi) -> None:
    t = live.call(tenant)
    g = t["group"]
    fields = {"title": "ship it", "objective": "a release", "claim_mode": "soft"}
    made_here = live.run(_local(live, agent_of(t), "goals.create", group_id=g, operation_id="op:local", **fields))
    made_there = live.run(_http(live, t["akey"], "goals.create", group_id=g, operation_id="op:http", **fields))
    for made in (made_here, made_there):
        assert set(made) == {"goal", "receipt"} and made["goal"]["title"] == "ship it"
        assert made["receipt"]["command_type"] == "goal.create"
    assert set(made_here["goal"]) == set(made_there["goal"])
    goal = made_here["goal"]["id"]

    command = {"type": "work.add", "class": "advancement", "title": "build"}
    receipt = live.run(_local(live, agent_of(t), "goals.submit", group_id=g, goal_id=goal, operation_id="op:add",
                              command=command))
    replayed = live.run(_http(live, t["akey"], "goals.submit", group_id=g, goal_id=goal, operation_id="op:add",
                              command=command))
    assert replayed.pop("replayed") is True  # the same envelope from the same actor, whichever backend sent it
    assert replayed == {k: v for k, v in receipt.items() if k != "replayed"}

    for name, args in [("goals.get", {}), ("goals.status", {}), ("goals.board", {}), ("work.list", {}),
                       ("goals.commits", {"after_seq": 0}), ("goals.receipt", {"operation_id": "op:add"})]:
        live.run(_local(live, agent_of(t), name, group_id=g, goal_id=goal, **args))  # projections now cached
        here = live.run(_local(live, agent_of(t), name, group_id=g, goal_id=goal, **args))
        there = live.run(_http(live, t["akey"], name, group_id=g, goal_id=goal, **args))
        assert here == there, name
    listed = live.run(_http(live, t["akey"], "goals.list", group_id=g))
    assert listed == live.run(_local(live, agent_of(t), "goals.list", group_id=g))
    assert {x["id"] for x in listed["items"]} == {goal, made_there["goal"]["id"]}

    decided = live.run(_local(live, agent_of(t), "next.get", group_id=g, goal_id=goal))
    assert decided == live.run(_http(live, t["akey"], "next.get", group_id=g, goal_id=goal))
    assert decided["decision"] == "deliver" and decided["item"]["title"] == "build"
    asked = live.run(_http(live, t["gkey"], "next.get", group_id=g, agent_id=t["agent"], goal_id=goal))
    assert asked == live.run(_local(live, person_of(t), "next.get", group_id=g, agent_id=t["agent"], goal_id=goal))


def test_both_backends_refuse_alike_outside_the_scope(live: LiveApi) -> None:
    t, other = live.call(tenant), live.call(tenant)
    made = live.run(_local(live, agent_of(other), "goals.create", group_id=other["group"], title="theirs",
                           objective="x"))
    theirs = made["goal"]["id"]
    g = t["group"]
    for name, args in [("goals.get", {}), ("goals.status", {}), ("goals.board", {}),
                       ("goals.submit", {"command": {"type": "agent.register", "agent_id": t["agent"]}})]:
        here = _refusal(live, _local(live, agent_of(t), name, group_id=g, goal_id=theirs, **args))
        there = _refusal(live, _http(live, t["akey"], name, group_id=g, goal_id=theirs, **args))
        assert here[0] == there[0] == "not_found" and there[1] == 404, name
    here = _refusal(live, _local(live, agent_of(t), "goals.list", group_id=other["group"]))
    there = _refusal(live, _http(live, t["akey"], "goals.list", group_id=other["group"]))
    assert here[0] == there[0] == "not_found" and there[1] == 404
    here = _refusal(live, _local(live, person_of(t), "next.claim", group_id=g, agent_id=t["agent"]))
    there = _refusal(live, _http(live, t["gkey"], "next.claim", group_id=g, agent_id=t["agent"]))
    assert here[0] == there[0] == "forbidden" and there[1] == 403
    here = _refusal(live, _local(live, agent_of(t), "next.get", group_id=g, agent_id=other["agent"]))
    there = _refusal(live, _http(live, t["akey"], "next.get", group_id=g, agent_id=other["agent"]))
    assert here[0] == there[0] == "not_found" and there[1] == 404


def test_a_goal_named_by_id_alone_is_for_the_unscoped_operator_only(live: LiveApi) -> None:
    """``group_id=None`` (the local command line): the operator finds the goal in its own group; any principal
    scoped to a group is refused, so a goal's existence is never revealed across groups."""
    t, other = live.call(tenant), live.call(tenant)
    theirs = live.run(_local(live, agent_of(other), "goals.create", group_id=other["group"], title="theirs",
                             objective="x"))["goal"]["id"]
    found = live.run(_local(live, OPERATOR, "goals.get", group_id=None, goal_id=theirs))
    assert found["goal"]["group_id"] == other["group"]
    for principal in (agent_of(t), person_of(t), OPERATOR.acting_as(t["agent"], t["group"])):
        code, _ = _refusal(live, _local(live, principal, "goals.get", group_id=None, goal_id=theirs))
        assert code in ("forbidden", "not_found"), principal
