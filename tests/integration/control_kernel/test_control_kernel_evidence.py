"""Evidence applicability and acceptance (control-plane.md §5, §3.3, §10 "evidence") on SQLite and PostgreSQL:
subject revisions, per-criterion digests, workloads, independence, stale bindings and re-assessment."""

from __future__ import annotations

from typing import Any

import pytest
from support.control_kernel import Kit, make_kit

from wakeful.control import ControlRefused

MICRO = {"kind": "suite", "ref": "bench/micro"}
MIXED = {"kind": "suite", "ref": "bench/mixed"}


async def _contract(kit: Kit, criteria: list[dict[str, Any]], bindings: dict[str, list[str]], rev: int) -> None:
    await kit.run(kit.person, {"type": "acceptance.set", "document": {"criteria": criteria}, "bindings": bindings},
                  expected={"acceptance_revision": rev})


async def _evidence(kit: Kit, actor: Any, cids: list[str], *, verdict: str = "pass", rev: str = "git:r1",
                    workload: dict[str, str] | None = None, subject: str = "code") -> str:
    body: dict[str, Any] = {"type": "evidence.add", "criterion_ids": cids, "kind": "test", "subject": subject,
                            "artifact_revision": rev, "verdict": verdict}
    if workload is not None:
        body["workload"] = workload
    return str((await kit.run(actor, body))["evidence"])


async def _statuses(kit: Kit) -> tuple[str, dict[str, str]]:
    acc = await kit.control.acceptance(kit.goal_id)
    return acc["status"], {c["id"]: c["status"] for c in acc["criteria"]}


async def test_subject_revision_and_reassessment(store) -> None:
    kit = await make_kit(store)
    a = kit.agents[0]
    item = await kit.add(title="speed")
    await _contract(kit, [{"id": "fast", "text": "fast", "workload": MICRO}], {item: ["fast"]}, 0)
    assert await _statuses(kit) == ("unverified", {"fast": "missing"})
    await _evidence(kit, a, ["fast"], workload=MICRO)
    assert await _statuses(kit) == ("accepted", {"fast": "pass"})
    receipt = await kit.run(a, {"type": "subject.set", "name": "code", "revision": "git:r2"})
    assert await _statuses(kit) == ("stale", {"fast": "stale"})
    commit = (await kit.control.commits(kit.goal_id, after_seq=receipt["seq"] - 1, limit=1))[0]
    assert {"entity": "acceptance", "id": kit.goal_id, "op": "reassessed",
            "criteria": {"fast": ["pass", "stale"]}} in commit["events"]
    ev = await kit.control.evidence(kit.goal_id, criterion="fast")
    assert [e["applicability"] for e in ev] == [{"fast": "stale_revision"}]
    err = await _refuse(kit.run(a, {"type": "work.complete", "item": item}, expected={"item_revision": 1}))
    assert (err.code, err.details["criteria"]) == ("acceptance_unmet", {"fast": "stale_revision"})
    await _evidence(kit, a, ["fast"], rev="git:r2", workload=MICRO, verdict="fail")
    assert await _statuses(kit) == ("failed", {"fast": "fail"})
    await _evidence(kit, a, ["fast"], rev="git:r2", workload=MIXED)  # wrong workload: does not decide
    assert (await kit.control.evidence(kit.goal_id))[-1]["applicability"] == {"fast": "workload_mismatch"}
    assert await _statuses(kit) == ("failed", {"fast": "fail"})
    err = await _refuse(kit.run(a, {"type": "work.complete", "item": item}, expected={"item_revision": 1}))
    assert (err.code, err.details["criteria"]) == ("acceptance_unmet", {"fast": "fail"})
    await _evidence(kit, a, ["fast"], rev="git:r2", workload=MICRO)
    done = await kit.run(a, {"type": "work.complete", "item": item}, expected={"item_revision": 1})
    assert done["acceptance"]["revision"] == 1


async def _refuse(coro: Any) -> ControlRefused:
    with pytest.raises(ControlRefused) as caught:
        await coro
    return caught.value


async def test_revising_one_criterion_stales_only_it_and_history_stays(store) -> None:
    """The seed scenario's acceptance half: rA passes an isolated microbenchmark under v1; v2 says mixed-load
    latency is what matters; rA's evidence stays as history but cannot satisfy v2."""
    kit = await make_kit(store)
    a, b = kit.agents[0], kit.agents[1]
    bench = await kit.add(title="latency")
    docs = await kit.add(title="docs")
    v1 = [{"id": "latency", "text": "p99 < 5 ms", "workload": MICRO}, {"id": "docs", "text": "documented"}]
    await _contract(kit, v1, {bench: ["latency"], docs: ["docs"]}, 0)
    e_lat = await _evidence(kit, a, ["latency"], workload=MICRO)
    e_doc = await _evidence(kit, b, ["docs"])
    assert await _statuses(kit) == ("accepted", {"latency": "pass", "docs": "pass"})
    v2 = [{"id": "latency", "text": "mixed-load p99 < 5 ms", "workload": MIXED}, v1[1]]
    await _contract(kit, v2, {bench: ["latency"], docs: ["docs"]}, 1)
    status, per = await _statuses(kit)
    assert (status, per) == ("stale", {"latency": "stale", "docs": "pass"})  # only the edited criterion
    history = {e["id"]: e for e in await kit.control.evidence(kit.goal_id)}
    assert set(history) == {e_lat, e_doc}  # nothing deleted
    assert history[e_lat]["acceptance_revision"] == 1
    assert history[e_lat]["applicability"] == {"latency": "stale_acceptance"}
    assert history[e_doc]["applicability"] == {"docs": None}  # same digest: still counts under v2
    old = await kit.control.acceptance(kit.goal_id, revision=1)
    assert old["current_revision"] == 2 and [c["id"] for c in old["criteria"]] == ["latency", "docs"]
    await _evidence(kit, a, ["latency"], workload=MICRO)  # re-run of the isolated benchmark under v2
    err = await _refuse(kit.run(a, {"type": "work.complete", "item": bench}, expected={"item_revision": 1}))
    assert (err.code, err.details["criteria"]) == ("acceptance_unmet", {"latency": "workload_mismatch"})
    await _evidence(kit, a, ["latency"], workload=MIXED)
    assert await _statuses(kit) == ("accepted", {"latency": "pass", "docs": "pass"})
    # removing a criterion: its old evidence reads criterion_removed
    await _contract(kit, [v1[1]], {docs: ["docs"]}, 2)
    assert (await kit.control.evidence(kit.goal_id, criterion="latency"))[0]["applicability"] == {
        "latency": "criterion_removed"}


async def test_independence_and_stale_binding(store) -> None:
    kit = await make_kit(store)
    a, b = kit.agents[0], kit.agents[1]
    item = await kit.add(title="review me")
    await _contract(kit, [{"id": "reviewed", "text": "reviewed by another", "independent": True}],
                    {item: ["reviewed"]}, 0)
    await _evidence(kit, a, ["reviewed"])
    err = await _refuse(kit.run(a, {"type": "work.complete", "item": item}, expected={"item_revision": 1}))
    assert (err.code, err.details["criteria"]) == ("acceptance_unmet", {"reviewed": "not_independent"})
    assert "reviewed (not_independent)" in str(err)  # the real reason, not "stale" (issue 20 bug 4)
    await kit.run(b, {"type": "work.complete", "item": item}, op="b-completes", expected={"item_revision": 1})
    # the completer is b: a's evidence counts, b's own would not
    assert await _statuses(kit) == ("accepted", {"reviewed": "pass"})

    item2 = await kit.add(title="bound")
    await _contract(kit, [{"id": "c2", "text": "t"}], {item2: ["c2"]}, 1)
    await _evidence(kit, a, ["c2"])
    assert await _statuses(kit) == ("accepted", {"c2": "pass"})
    await kit.run(a, {"type": "work.update", "item": item2, "title": "bound, but reworded"},
                  expected={"item_revision": 1})
    assert await _statuses(kit) == ("stale", {"c2": "stale"})  # binding stale until a person sets it again
    err = await _refuse(kit.run(a, {"type": "work.complete", "item": item2}, expected={"item_revision": 2}))
    assert (err.code, err.details["criteria"]) == ("acceptance_unmet", {"c2": "binding_stale"})
    await _contract(kit, [{"id": "c2", "text": "t"}], {item2: ["c2"]}, 2)
    await kit.run(a, {"type": "work.complete", "item": item2}, expected={"item_revision": 2})


async def test_acceptance_and_evidence_rules(store) -> None:
    kit = await make_kit(store)
    a = kit.agents[0]
    item = await kit.add(title="x")
    err = await _refuse(kit.run(a, {"type": "acceptance.set", "document": {"criteria": [{"id": "c", "text": "t"}]}},
                                expected={"acceptance_revision": 0}))
    assert err.code == "forbidden"
    err = await _refuse(kit.run(kit.person, {"type": "acceptance.set",
                                             "document": {"criteria": [{"id": "c", "text": "t"}]}},
                                expected={"acceptance_revision": 3}))
    assert (err.code, err.details["current"]) == ("revision_conflict", 0)
    await _contract(kit, [{"id": "c", "text": "t"}], {}, 0)
    err = await _refuse(kit.run(a, {"type": "evidence.add", "criterion_ids": ["c"], "kind": "test",
                                    "verdict": "pass"}))
    assert err.code == "invalid_command"  # criteria need subject and artifact_revision
    err = await _refuse(_evidence(kit, a, ["nope"]))
    assert err.code == "not_found"
    # evidence never changes an item's status
    await kit.run(a, {"type": "evidence.add", "item": item, "kind": "observation", "verdict": "observed"})
    assert (await kit.control.item(kit.goal_id, item))["status"] == "open"
    # inconclusive evidence does not decide
    await _evidence(kit, a, ["c"], verdict="inconclusive")
    assert await _statuses(kit) == ("unverified", {"c": "missing"})
    # goal.close: refused until accepted; an agent only when accepted
    await kit.run(kit.person, {"type": "work.cancel", "item": item}, expected={"item_revision": 1})
    err = await _refuse(kit.run(kit.person, {"type": "goal.close"}))
    assert err.code == "acceptance_unmet"
    err = await _refuse(kit.run(a, {"type": "goal.close"}))
    assert err.code == "forbidden"
    await _evidence(kit, a, ["c"])
    await kit.run(a, {"type": "goal.close"})
    assert (await kit.control.goal(kit.goal_id))["status"] == "closed"
    err = await _refuse(kit.run(kit.person, {"type": "goal.resume"}))
    assert err.code == "goal_not_active"
