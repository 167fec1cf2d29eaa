"""The seed's scenario end to end on SQLite and PostgreSQL (issue 8): rA passes an isolated microbenchmark under
acceptance v1; a person revises the acceptance to v2 ("mixed-load latency is what matters"); rA's evidence stays
as history but cannot satisfy v2; ``next`` offers the mixed-load measurement; release stays gated on a person.
Then projections: the cached bodies equal a recomputation and a rebuild from the commit log alone.
"""

from __future__ import annotations

from typing import Any

import pytest
from support.control_next_support import Ctl, changed_id

from wakeful.control import projections, reads
from wakeful.control.canonical import canonical
from wakeful.control.errors import ControlRefused

ISOLATED = {"kind": "suite", "ref": "bench/isolated-p99"}
MIXED = {"kind": "suite", "ref": "bench/mixed-load-p99"}


def contract(text: str, workload: dict[str, str]) -> dict[str, Any]:
    return {"objective": "p99 latency under 5 ms", "criteria": [
        {"id": "latency", "text": text, "workload": workload, "subject": "repo"}]}


async def test_seed_scenario(store: Any) -> None:
    ctl = await Ctl.open(store)
    person, agent = ctl.person, ctl.agent_actor
    goal = (await ctl.submit(person, {"operation_id": "seed-goal", "command": {
        "type": "goal.create", "title": "fast p99", "objective": "p99 under 5 ms",
        "subjects": {"repo": "git:rA"}}}))["goal_id"]
    g = ctl.on(goal)
    await g.cmd(person, "agent.register", agent_id=ctl.agent)
    bench = await g.add(person, "advancement", "isolated microbenchmark", priority=1)
    release = await g.add(person, "advancement", "release rA", priority=0,
                          required_scopes=["production:action:release"])
    gate = await g.add(person, "user_gate", "release decision", scope="production:goal:release",
                       targets=[release], question="Ship rA to production?", options=["ship", "hold"])
    await g.cmd(person, "acceptance.set", expected={"acceptance_revision": 0},
                document=contract("p99 < 5 ms in the isolated microbenchmark", ISOLATED), bindings={bench: ["latency"]})

    # v1: the agent is offered the benchmark (the release is gated), runs it on rA and completes it
    first = await ctl.next(goal, claim=True)
    assert (first["decision"], first["action"], first["item"]["id"]) == ("deliver", "start", bench)
    assert first["ask"]["gate_id"] == gate  # the unasked gate that holds the release rides along
    held = first["claim"]["claim"]
    rA_evidence = await g.cmd(agent, "evidence.add", item=bench, criterion_ids=["latency"], kind="test",
                              subject="repo", artifact_revision="git:rA", workload=ISOLATED, verdict="pass",
                              summary="isolated p99 3.1 ms")
    await g.cmd(agent, "work.complete", item=bench, continuation="no_followup",
                expected={"item_revision": await g.revision(bench), "claim": {"epoch": held["epoch"],
                                                                              "key": held["key"]}})
    status = await projections.read(store, goal, "status")
    assert status["acceptance"]["status"] == "accepted"
    assert status["acceptance"]["criteria"][0]["deciding_evidence"]["verdict"] == "pass"

    # the release is still a person's decision: next asks for it, the kernel refuses a claim
    asked = await ctl.next(goal)
    assert (asked["decision"], asked["wait_kind"], asked["ask"]["gate_id"]) == ("ask_person", "needs_person", gate)
    with pytest.raises(ControlRefused) as refused:
        await g.cmd(agent, "claim.acquire", item=release, key="try-release")
    assert refused.value.code == "gate_required"

    # v2: a person says mixed-load latency is what matters, and adds the measurement
    mixed = await g.add(person, "advancement", "measure p99 under mixed load", priority=1)
    await g.cmd(person, "acceptance.set", expected={"acceptance_revision": 1},
                document=contract("p99 < 5 ms under mixed load", MIXED), bindings={mixed: ["latency"]})
    evidence = await ctl.ctl_reads_evidence(goal)
    assert [e["id"] for e in evidence] == [changed_id(rA_evidence, "evidence")]  # history is kept, never edited
    status = await projections.read(store, goal, "status")
    assert status["acceptance"]["status"] == "stale"  # rA's evidence cannot satisfy v2
    assert status["acceptance"]["criteria"][0]["status"] == "stale"  # evidence exists, none applies
    assert status["acceptance"]["criteria"][0]["deciding_evidence"] is None
    async with store.tx(readonly=True) as tx:
        history = await reads.evidence(tx, goal)
    assert [(e["acceptance_revision"], e["verdict"], e["applicability"]) for e in history] == [
        (1, "pass", {"latency": "stale_acceptance"})]  # kept as recorded under v1; it no longer counts

    offered = await ctl.next(goal)
    assert (offered["decision"], offered["action"], offered["item"]["id"]) == ("deliver", "start", mixed)

    # completing the measurement with rA's old evidence is refused; with mixed-load evidence it passes
    claim = (await ctl.next(goal, claim=True))["claim"]["claim"]
    fence = {"claim": {"epoch": claim["epoch"], "key": claim["key"]}}
    with pytest.raises(ControlRefused) as unmet:
        await g.cmd(agent, "work.complete", item=mixed, expected={"item_revision": await g.revision(mixed), **fence})
    assert (unmet.value.code, unmet.value.details["criteria"]) == ("acceptance_unmet", {"latency": "stale_acceptance"})
    # re-running the isolated microbenchmark on rA under v2 does not count either: wrong workload
    rerun = changed_id(await g.cmd(agent, "evidence.add", item=mixed, criterion_ids=["latency"], kind="test",
                                   subject="repo", artifact_revision="git:rA", workload=ISOLATED, verdict="pass",
                                   summary="isolated p99 3.0 ms, again"), "evidence")
    async with store.tx(readonly=True) as tx:
        rerun_row = next(e for e in await reads.evidence(tx, goal) if e["id"] == rerun)
    assert rerun_row["applicability"] == {"latency": "workload_mismatch"}
    with pytest.raises(ControlRefused) as still_unmet:
        await g.cmd(agent, "work.complete", item=mixed, expected={"item_revision": await g.revision(mixed), **fence})
    assert (still_unmet.value.code, still_unmet.value.details["criteria"]) == (
        "acceptance_unmet", {"latency": "workload_mismatch"})
    await g.cmd(agent, "evidence.add", item=mixed, criterion_ids=["latency"], kind="test", subject="repo",
                artifact_revision="git:rA", workload=MIXED, verdict="pass", summary="mixed p99 4.2 ms")
    await g.cmd(agent, "work.complete", item=mixed, expected={"item_revision": await g.revision(mixed), **fence})

    # accepted again, but the release still waits for the person: ask once, then wait on the gate
    again = await ctl.next(goal)
    assert (again["decision"], again["ask"]["gate_id"]) == ("ask_person", gate)
    await g.cmd(agent, "gate.ask", item=gate, expected={"item_revision": await g.revision(gate)})
    waiting = await ctl.next(goal)
    assert (waiting["decision"], waiting["wait_kind"], waiting["wake_when"]) == (
        "wait", "needs_person", [f"gate_resolved:{gate}"])
    # the board agrees with next (§7.2): an open gate is a person's, never runnable (issue 20 bug 5)
    gated_board = await projections.read(store, goal, "board")
    assert [c["id"] for c in gated_board["columns"]["open"]["runnable"]] == []
    assert {c["id"] for c in gated_board["columns"]["open"]["gated"]} == {gate, release}
    with pytest.raises(ControlRefused) as agent_gate:
        await g.cmd(agent, "gate.resolve", item=gate, outcome="approve", expected={"item_revision": await g.revision(gate)})
    assert agent_gate.value.code == "forbidden"
    await g.cmd(person, "gate.resolve", item=gate, outcome="approve", expected={"item_revision": await g.revision(gate)})
    ship = await ctl.next(goal)
    assert (ship["decision"], ship["action"], ship["item"]["id"]) == ("deliver", "start", release)

    # projections: cache hit at the same revision; cache, recomputation and the commit log agree byte for byte
    for kind in projections.KINDS:
        served = await projections.read(store, goal, kind)
        again_served = await projections.read(store, goal, kind)
        assert again_served["cached"] is True
        strip = {k: v for k, v in served.items() if k not in ("generated_ms", "cached")}
        assert canonical(strip) == canonical({k: v for k, v in again_served.items()
                                              if k not in ("generated_ms", "cached")})
        from_log = await projections.from_log(store, goal, kind)
        assert canonical(from_log) == canonical(strip), kind
    board = await projections.read(store, goal, "board")
    assert [c["id"] for c in board["columns"]["open"]["runnable"]] == [release]
    assert {c["id"] for c in board["columns"]["done"]} == {bench, mixed, gate}
