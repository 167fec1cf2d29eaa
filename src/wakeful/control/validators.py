"""Validators the plane runs (issue 20; docs/decisions-control.md "Validators").

A criterion may name a ``validator``: a wakeful script (harness.md §18, the ``script.run`` sandbox) with a time
budget. ``validate()`` runs it for the criterion's subject at its current revision and the criterion's workload,
and records its verdict as ``validator`` evidence bound to that revision, the workload digest and the acceptance
revision. A criterion with ``evidence_from: validator`` counts only such evidence.

Each run is an effect with a stable request key — ``validator:<criterion>:a<acceptance>:<digest of subject
revision, workload and script>`` — intended before the script starts and settled in the same commit that records
the evidence (``validator.record``). A run that crashed in between is read back, not re-run blindly: the evidence
whose ``details_url`` names the request key either exists (present: nothing runs again) or not (absent: the next
attempt runs).
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from wakeful.control.actor import Actor
from wakeful.control.canonical import digest
from wakeful.control.errors import ControlRefused

__all__ = ["RUN_KIND", "Runner", "evidence_ref", "request_key_of", "script_runner", "validate"]

RUN_KIND = "validator.run"
VERDICTS = ("pass", "fail", "inconclusive")
SUMMARY_CHARS = 2000

# (source, env, group_id, budget_s) → the script outcome of harness/scripts.py ({state, result, error, …})
Runner = Callable[[str, dict[str, str], str, float], Awaitable[Mapping[str, Any]]]


def script_runner(scripts: Any) -> Runner:
    """A ``Runner`` on a node's ``ScriptRunner`` (harness/scripts.py): the run is the plane's, as ``validator``."""
    async def run(source: str, env: dict[str, str], group_id: str, budget_s: float) -> Mapping[str, Any]:
        outcome = scripts.run(agent_id="validator", group_id=group_id, request=source, env=env)
        return dict(await asyncio.wait_for(outcome, timeout=budget_s))

    return run


def request_key_of(criterion: Mapping[str, Any], acceptance_revision: int, subject_revision: str) -> str:
    """Stable for one criterion version, subject revision, workload and script: a rerun of the same is the same."""
    basis = {"revision": subject_revision, "workload": criterion.get("workload"),
             "script": criterion["validator"]["source"]}
    return f"validator:{criterion['id']}:a{acceptance_revision}:{digest(basis)[:24]}"


def evidence_ref(request_key: str) -> str:
    """The ``details_url`` of a run's evidence: how a readback finds it."""
    return f"wakeful:{request_key}"


def verdict_of(outcome: Mapping[str, Any]) -> tuple[str, str]:
    """The script's ``{verdict, summary}`` result, or ``inconclusive`` with why the run gave none."""
    if outcome.get("state") != "succeeded":
        error = outcome.get("error") or {}
        return "inconclusive", f"the validator did not finish: {error.get('kind', 'failed')}: " \
                               f"{error.get('message', '')}"[:SUMMARY_CHARS]
    result = outcome.get("result")
    value = result.get("value", result) if isinstance(result, Mapping) else None
    if not isinstance(value, Mapping) or value.get("verdict") not in VERDICTS:
        return "inconclusive", "the validator's result has no verdict (pass, fail or inconclusive)"
    summary = value.get("summary")
    return str(value["verdict"]), (summary if isinstance(summary, str) else "")[:SUMMARY_CHARS]


class _Plan:
    """What one validation reads before it runs: the criterion, the subject revision, the request key."""

    def __init__(self, goal: Mapping[str, Any], contract: Mapping[str, Any], criterion_id: str) -> None:
        criteria = {c["id"]: c for c in contract["criteria"]}
        if criterion_id not in criteria:
            raise ControlRefused("not_found", f"criterion {criterion_id} is not in the current contract",
                                 resource="criterion", criterion=criterion_id)
        c = criteria[criterion_id]
        if not c.get("validator"):
            raise ControlRefused("invalid_command", f"criterion {criterion_id} names no validator",
                                 field="criterion_id")
        subject = c.get("subject")
        if subject is None or subject not in (goal.get("subjects") or {}):
            raise ControlRefused("invalid_command", f"criterion {criterion_id} names no subject of the goal",
                                 field="criterion_id")
        self.criterion, self.subject, self.revision = c, str(subject), str(goal["subjects"][subject])
        self.acceptance_revision = int(contract["revision"])
        self.key = request_key_of(c, self.acceptance_revision, self.revision)

    def env(self, goal_id: str) -> dict[str, str]:
        workload = self.criterion.get("workload") or {}
        return {"GOAL": goal_id, "CRITERION": str(self.criterion["id"]), "SUBJECT": self.subject,
                "REVISION": self.revision, "WORKLOAD_KIND": str(workload.get("kind", "")),
                "WORKLOAD_REF": str(workload.get("ref", "")), "REQUEST_KEY": self.key}


async def validate(control: Any, actor: Actor, goal_id: str, criterion_id: str, runner: Runner) -> dict[str, Any]:
    """Run (or reuse) the criterion's validator; returns ``{request_key, attempt, evidence, verdict, reused}``.

    ``actor`` (a person or a registered agent of the goal) asks; the plane itself intends, runs and records.
    """
    goal = await control.goal(goal_id)
    if goal["group_id"] != actor.group_id:
        raise ControlRefused("not_found", f"goal {goal_id} not found", resource="goal")
    if actor.kind == "agent":  # a registered, not excluded agent of the goal may ask, as for any command
        snapshot = await control.snapshot(goal_id)
        if not any(r.agent_id == actor.id and r.status == "active" for r in snapshot.agents):
            raise ControlRefused("not_registered", f"agent {actor.id} is not registered on this goal")
    contract = await control.acceptance(goal_id)
    if not contract.get("criteria"):
        raise ControlRefused("not_found", "the goal has no acceptance contract", resource="criterion")
    plan = _Plan(goal, contract, criterion_id)
    system = Actor("system", "validator", actor.group_id)
    found = await _existing(control, goal_id, plan.key)
    if found is not None and found["state"] == "succeeded":
        return await _reused(control, goal_id, plan, found)
    if found is not None and found["state"] == "intended" and not await _overdue(control, found):
        raise ControlRefused("illegal_transition", f"a run of this validator is in progress ({plan.key})",
                             reason="running", request_key=plan.key)
    if found is not None:  # unknown, or intended past the grace: a run crashed mid-way: read it back first
        found = await _read_back(control, system, goal_id, plan, found)
        if found["state"] == "succeeded":
            return await _reused(control, goal_id, plan, found)
    receipt = await _submit(control, system, goal_id, {
        "type": "effect.intend", "request_key": plan.key, "kind": RUN_KIND, "target": str(criterion_id),
        "payload_digest": digest(plan.criterion["validator"])})
    attempt = int(receipt["effect"]["attempt"])
    budget = float(plan.criterion["validator"].get("budget_s", 30))
    try:
        outcome = await asyncio.wait_for(runner(plan.criterion["validator"]["source"], plan.env(goal_id),
                                                actor.group_id, budget), timeout=budget + 5)
    except TimeoutError:
        outcome = {"state": "failed", "error": {"kind": "budget_exceeded",
                                                "message": f"ran past its {budget:g} s budget"}}
    verdict, summary = verdict_of(outcome)
    done = await _submit(control, system, goal_id, {
        "type": "validator.record", "request_key": plan.key, "attempt": attempt, "criterion_id": criterion_id,
        "verdict": verdict, "summary": summary, "subject": plan.subject, "artifact_revision": plan.revision})
    return {"request_key": plan.key, "attempt": attempt, "evidence": done["evidence"], "verdict": verdict,
            "reused": False}


async def _overdue(control: Any, effect: Mapping[str, Any]) -> bool:
    """Past the intent grace on the control plane's clock (the store's, unless ``Control`` was given one)."""
    if control.clock is not None:
        now = int(control.clock.unix_ms())
    else:
        async with control.store.tx(readonly=True) as tx:
            now = int(await tx.now_ms())
    return bool(now - int(effect["updated_ms"]) >= int(control.intent_grace_s) * 1000)


async def _submit(control: Any, actor: Actor, goal_id: str, command: dict[str, Any]) -> dict[str, Any]:
    envelope = {"operation_id": f"validator:{secrets.token_hex(10)}", "goal_id": goal_id, "command": command}
    return dict(await control.submit(actor, envelope))


async def _existing(control: Any, goal_id: str, key: str) -> dict[str, Any] | None:
    return next((e for e in await control.effects(goal_id) if e["request_key"] == key), None)


async def _evidence_of_run(control: Any, goal_id: str, plan: _Plan) -> dict[str, Any] | None:
    ref = evidence_ref(plan.key)
    rows = await control.evidence(goal_id, criterion=str(plan.criterion["id"]))
    return next((e for e in rows if e.get("details_url") == ref), None)


async def _read_back(control: Any, system: Actor, goal_id: str, plan: _Plan, effect: dict[str, Any]) -> dict[str, Any]:
    """§6: what the (crashed) run left: its evidence present → succeeded; absent → the next attempt may run."""
    present = await _evidence_of_run(control, goal_id, plan) is not None
    if effect["state"] == "intended":  # settle first: a readback reads an unknown outcome
        await _submit(control, system, goal_id, {"type": "effect.settle", "request_key": plan.key,
                                                 "attempt": effect["attempt"], "outcome": "unknown",
                                                 "detail": "the validator run did not record its outcome"})
    receipt = await _submit(control, system, goal_id, {
        "type": "effect.readback", "request_key": plan.key, "attempt": effect["attempt"],
        "observed": "present" if present else "absent"})
    return dict(receipt["effect"])


async def _reused(control: Any, goal_id: str, plan: _Plan, effect: Mapping[str, Any]) -> dict[str, Any]:
    ev = await _evidence_of_run(control, goal_id, plan)
    return {"request_key": plan.key, "attempt": int(effect["attempt"]), "evidence": None if ev is None else ev["id"],
            "verdict": None if ev is None else ev["verdict"], "reused": True}
