"""Validators the plane runs (issue 20) on SQLite and PostgreSQL with a real compiled script: a criterion that
counts only validator evidence ignores the agent's own pass; the plane's run records evidence bound to the
revision, workload and acceptance version; a second ask reuses the run; a run that crashed before recording is
read back (absent) and runs again as attempt 2, while one still in progress is not run twice."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from support.control_next_support import Ctl

from wakeful.control import ControlRefused
from wakeful.control.canonical import digest
from wakeful.control.embed import Harness
from wakeful.control.validators import RUN_KIND, request_key_of
from wakeful.harness.config import Config
from wakeful.harness.store import agents, groups

SCRIPT = (Path(__file__).parents[2] / "support" / "guests" / "validator_mixed.c").read_text()
MIXED = {"kind": "suite", "ref": "bench/mixed"}
ISOLATED = {"kind": "suite", "ref": "bench/isolated"}


def _criterion(workload: dict[str, str]) -> dict[str, Any]:
    return {"id": "latency", "text": "p99 < 5 ms", "subject": "repo", "workload": workload,
            "validator": {"source": SCRIPT, "budget_s": 30}, "evidence_from": "validator"}


async def _refuse(coro: Any) -> ControlRefused:
    with pytest.raises(ControlRefused) as caught:
        await coro
    return caught.value


async def test_the_plane_runs_the_validator(store_url: str, store_clock: Any, tmp_path: Path) -> None:
    h = Harness(Config(data_dir=tmp_path, store_url=store_url), clock=store_clock, sweeps=False)
    await h.start()
    try:
        await scenario(h, store_clock)
    finally:
        await h.stop()


async def scenario(h: Harness, clock: Any) -> None:
    async with h.store.tx() as tx:
        group = await groups.create_group(tx, name="g")
        agent = (await agents.create_agent(tx, group_id=group.id, name="a")).id
    ctl = Ctl(h.store, group.id, agent, submitter=h.control)
    person, me = ctl.person, ctl.agent_actor
    goal = (await ctl.submit(person, {"operation_id": "g", "command": {
        "type": "goal.create", "title": "fast", "objective": "p99", "subjects": {"repo": "git:rA"}}}))["goal_id"]
    g = ctl.on(goal)
    await g.cmd(person, "agent.register", agent_id=agent)
    item = await g.add(me, "advancement", "measure")
    await g.cmd(person, "acceptance.set", expected={"acceptance_revision": 0},
                document={"criteria": [_criterion(MIXED)]}, bindings={item: ["latency"]})

    # the agent's own pass does not count for a validator-only criterion
    await g.cmd(me, "evidence.add", item=item, criterion_ids=["latency"], kind="test", subject="repo",
                artifact_revision="git:rA", workload=MIXED, verdict="pass", summary="trust me")
    err = await _refuse(g.cmd(me, "work.complete", item=item, expected={"item_revision": 1}))
    assert (err.code, err.details["criteria"]) == ("acceptance_unmet", {"latency": "not_validator"})

    # the plane runs the validator: validator evidence bound to the revision, workload and acceptance version
    ran = await h.validate(me, goal, "latency")
    assert (ran["verdict"], ran["attempt"], ran["reused"]) == ("pass", 1, False)
    (ev,) = [e for e in await h.control.evidence(goal) if e["id"] == ran["evidence"]]
    assert (ev["kind"], ev["source"], ev["recorded_by"]) == ("validator", "validator", "system")
    assert (ev["artifact_revision"], ev["acceptance_revision"], ev["summary"]) == ("git:rA", 1,
                                                                                  "ran bench/mixed on git:rA")
    assert ev["workload"]["ref"] == "bench/mixed" and ev["applicability"] == {"latency": None}
    (effect,) = await h.control.effects(goal)
    assert (effect["kind"], effect["state"], effect["outcome"]["external_ref"]) == (RUN_KIND, "succeeded", ev["id"])
    await g.cmd(me, "work.complete", item=item, expected={"item_revision": 1})

    # asking again for the same criterion version and revision reuses the run: no second script
    again = await h.validate(person, goal, "latency")
    assert (again["reused"], again["evidence"], len(await h.control.effects(goal))) == (True, ev["id"], 1)

    # a new revision: a new run; the isolated workload under a v2 contract fails
    await g.cmd(me, "subject.set", name="repo", revision="git:rB")
    await g.cmd(person, "acceptance.set", expected={"acceptance_revision": 1},
                document={"criteria": [_criterion(ISOLATED)]})
    failed = await h.validate(me, goal, "latency")
    assert (failed["verdict"], failed["reused"]) == ("fail", False)
    assert (await h.control.acceptance(goal))["status"] == "failed"

    # a run that crashed after its intent: in progress within the grace, read back (absent) after it, run again
    await g.cmd(person, "acceptance.set", expected={"acceptance_revision": 2},
                document={"criteria": [_criterion(MIXED)]})
    key = request_key_of(_criterion(MIXED), 3, "git:rB")
    system = ctl.person.__class__("system", "validator", group.id)
    await ctl.submit(system, {"operation_id": "crashed-run", "goal_id": goal, "command": {
        "type": "effect.intend", "request_key": key, "kind": RUN_KIND, "target": "latency",
        "payload_digest": digest(_criterion(MIXED)["validator"])}})
    busy = await _refuse(h.validate(me, goal, "latency"))
    assert (busy.code, busy.details["reason"]) == ("illegal_transition", "running")
    clock.advance(s=61)
    second = await h.validate(me, goal, "latency")
    assert (second["verdict"], second["attempt"], second["reused"]) == ("pass", 2, False)
    crashed = next(e for e in await h.control.effects(goal) if e["request_key"] == key)
    assert (crashed["state"], crashed["readback"]["observed"]) == ("succeeded", "absent")
    assert (await h.control.acceptance(goal))["status"] == "accepted"

    # refusals: an unknown criterion, a criterion without a validator, a goal of another group
    assert (await _refuse(h.validate(me, goal, "nope"))).code == "not_found"
    await g.cmd(person, "acceptance.set", expected={"acceptance_revision": 3},
                document={"criteria": [{"id": "docs", "text": "documented"}]})
    assert (await _refuse(h.validate(me, goal, "docs"))).code == "invalid_command"
    stranger = ctl.person.__class__("person", "key_x", "grp_other")
    assert (await _refuse(h.validate(stranger, goal, "docs"))).code == "not_found"
