"""The command catalogue (control-plane.md §3.2): each command's body shape, who may issue it and its handler,
plus the envelope check of §3.1 (step 0 of the kernel).
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from wakeful.control import cmd_claim, cmd_effect, cmd_evidence, cmd_gate, cmd_goal, cmd_proposal, cmd_work
from wakeful.control.errors import ControlRefused
from wakeful.control.fields import (
    KEY_RE,
    Check,
    bool_,
    choice,
    int_,
    json_obj,
    list_,
    obj,
    parse,
    refuse,
    text,
)
from wakeful.control.rules import check_condition, check_scope

if TYPE_CHECKING:
    from wakeful.control.kernel import Ctx

__all__ = ["CATALOGUE", "CommandSpec", "parse_envelope"]

GOAL_RE = re.compile(r"^goal_[0-9a-z]{1,35}$")
ITEM_RE = re.compile(r"^w_[0-9a-z]{1,38}$")
ID_RE = re.compile(r"^[A-Za-z0-9_]{1,40}$")
SUBJECT_RE = re.compile(r"^[a-z0-9_.-]{1,64}$")
CRITERION_RE = re.compile(r"^[a-z0-9_-]{1,64}$")

item_id = text(40, pattern=ITEM_RE)
agent_id = text(40, pattern=ID_RE)
key = text(160, pattern=KEY_RE)
criterion_ids = list_(text(64, pattern=CRITERION_RE), hi=32)
conditions = list_(check_condition, hi=8)


def _subjects(value: Any, field: str) -> Any:
    if not isinstance(value, dict) or len(value) > 16:
        raise refuse(field, "must be an object of at most 16 subjects")
    for name, rev in value.items():
        text(64, pattern=SUBJECT_RE)(name, f"{field}.{name}")
        text(200, empty=False)(rev, f"{field}.{name}")
    return dict(value)


workload = obj({"kind": choice("command", "suite", "loop", "manual"), "ref": text(500, empty=False)},
               required=("kind", "ref"))
budget = obj({"units_per_day": int_(1, 1_000_000_000)}, required=("units_per_day",))

ITEM_FIELDS: dict[str, Check] = {
    "title": text(200, empty=False), "detail": text(8000), "priority": int_(0, 4), "bound_agent": agent_id,
    "excluded_agents": list_(agent_id, hi=16), "depends_on": list_(item_id, hi=32),
    "write_scopes": list_(text(160, empty=False), hi=16), "required_scopes": list_(check_scope, hi=8),
    # class fields
    "scope": check_scope, "targets": list_(item_id, lo=1, hi=16), "question": text(2000, empty=False),
    "options": list_(text(200), hi=8), "recovery": text(2000, empty=False), "blocks": list_(item_id, hi=16),
    "loop_id": text(40, pattern=ID_RE), "target": text(500),
}
ADD_FIELDS = {"class": choice("advancement", "user_gate", "user_action", "monitor", "blocker"), **ITEM_FIELDS}
UPDATE_FIELDS = {k: v for k, v in ITEM_FIELDS.items() if k not in ("scope", "targets", "loop_id")}
# issue 20: a validator the plane runs (a script, harness.md §18) and whether only its evidence counts
validator = obj({"source": text(16_384, empty=False), "budget_s": int_(1, 60)}, required=("source",))
criterion = obj({
    "id": text(64, pattern=CRITERION_RE), "text": text(1000, empty=False), "workload": workload,
    "independent": bool_, "subject": text(64, pattern=SUBJECT_RE), "validator": validator,
    "evidence_from": choice("any", "validator"),
}, required=("id", "text"))
document = obj({
    "objective": text(4000), "non_goals": list_(text(1000), hi=16), "criteria": list_(criterion, lo=1, hi=32),
}, required=("criteria",))


def _bindings(value: Any, field: str) -> Any:
    if not isinstance(value, dict) or len(value) > 500:
        raise refuse(field, "must be an object of item id -> criterion ids")
    return {item_id(k, f"{field}.{k}"): list_(text(64, pattern=CRITERION_RE), lo=1, hi=32)(v, f"{field}.{k}")
            for k, v in value.items()}


# issue 20: what the written-back work cost, recorded in the same commit as the write-back
spend_member = obj({"units": int_(1, 1_000_000_000), "note": text(500)}, required=("units",))
evidence_member = obj({
    "verdict": choice("pass", "fail", "inconclusive", "observed"), "criterion_ids": criterion_ids,
    "subject": text(64, pattern=SUBJECT_RE), "artifact_revision": text(200, empty=False), "summary": text(2000),
}, required=("verdict",))


@dataclass(frozen=True)
class CommandSpec:
    type: str
    fields: Mapping[str, Check]
    required: tuple[str, ...]
    who: frozenset[str]
    handler: Callable[[Ctx], Awaitable[None]]

    def parse(self, command: Mapping[str, Any]) -> dict[str, Any]:
        body = {k: v for k, v in command.items() if k != "type"}
        return parse(body, self.fields, required=self.required, prefix="command")


def _spec(type_: str, who: str, handler: Callable[[Ctx], Awaitable[None]], fields: Mapping[str, Check] | None = None,
          required: tuple[str, ...] = ()) -> CommandSpec:
    return CommandSpec(type_, fields or {}, required, frozenset(who.split()), handler)


_SPECS = [
    _spec("goal.create", "person agent", cmd_goal.create, {
        "title": text(200, empty=False), "objective": text(4000), "claim_mode": choice("soft", "hard"),
        "subjects": _subjects, "budget": budget}, ("title", "objective")),
    _spec("goal.update", "person", cmd_goal.update, {
        "title": text(200, empty=False), "objective": text(4000), "claim_mode": choice("soft", "hard"),
        "budget": budget}),
    _spec("goal.pause", "person", cmd_goal.pause, {"reason": text(2000)}),
    _spec("goal.resume", "person", cmd_goal.resume, {"reason": text(2000)}),
    _spec("goal.close", "person agent", cmd_goal.close, {"reason": text(2000)}),
    _spec("agent.register", "person agent", cmd_goal.register, {"agent_id": agent_id}, ("agent_id",)),
    _spec("agent.exclude", "person", cmd_goal.exclude, {"agent_id": agent_id, "reason": text(2000)},
          ("agent_id",)),
    _spec("subject.set", "person agent", cmd_goal.subject_set, {
        "name": text(64, pattern=SUBJECT_RE), "revision": text(200, empty=False)}, ("name", "revision")),
    _spec("budget.spend", "agent", cmd_goal.budget_spend, {"units": int_(1, 1_000_000_000), "note": text(500),
                                                           "item": item_id}, ("units",)),
    _spec("acceptance.set", "person", cmd_evidence.acceptance_set, {"document": document, "bindings": _bindings},
          ("document",)),
    _spec("work.add", "person agent", cmd_work.add, ADD_FIELDS, ("class", "title")),
    _spec("work.update", "person agent", cmd_work.update, {"item": item_id, **UPDATE_FIELDS}, ("item",)),
    _spec("work.block", "person agent", cmd_work.block, {"item": item_id, "reason": text(500, empty=False),
                                                         "resume_when": conditions}, ("item", "reason")),
    _spec("work.defer", "person agent", cmd_work.defer, {
        "item": item_id, "resume_when": list_(check_condition, lo=1, hi=8), "reason": text(500)},
          ("item", "resume_when")),
    _spec("work.reopen", "person agent", cmd_work.reopen, {"item": item_id, "reason": text(500)}, ("item",)),
    _spec("work.resume", "system", cmd_work.resume, {"item": item_id, "condition": text(200)}, ("item",)),
    _spec("work.complete", "person agent", cmd_work.complete, {
        "item": item_id, "continuation": choice("successor", "no_followup", "goal"),
        "successors": list_(item_id, hi=16), "summary": text(2000), "spend": spend_member}, ("item",)),
    _spec("work.supersede", "person agent", cmd_work.supersede, {
        "item": item_id, "replacement": obj(ADD_FIELDS, required=("class", "title")), "replacement_id": item_id,
        "reason": text(500)}, ("item",)),
    _spec("work.cancel", "person", cmd_work.cancel, {"item": item_id, "reason": text(500)}, ("item",)),
    _spec("claim.acquire", "agent", cmd_claim.acquire, {"item": item_id, "key": key, "ttl_s": int_(60, 86_400)},
          ("item", "key")),
    _spec("claim.renew", "agent", cmd_claim.renew, {"item": item_id}, ("item",)),
    _spec("claim.transfer", "agent person", cmd_claim.transfer, {"item": item_id, "to": agent_id, "key": key},
          ("item", "to", "key")),
    _spec("claim.release", "agent person", cmd_claim.release, {"item": item_id}, ("item",)),
    _spec("gate.ask", "agent", cmd_gate.ask, {"item": item_id}, ("item",)),
    _spec("gate.resolve", "person", cmd_gate.resolve, {
        "item": item_id, "outcome": choice("approve", "reject", "cancel", "defer"), "resume_when": conditions,
        "note": text(2000), "digest": text(64)}, ("item", "outcome")),
    _spec("acceptance.propose", "agent", cmd_proposal.propose_acceptance, {
        "document": document, "bindings": _bindings, "note": text(2000)}, ("document",)),
    _spec("goal.propose", "agent", cmd_proposal.propose_goal, {
        "title": text(200, empty=False), "objective": text(4000), "claim_mode": choice("soft", "hard"),
        "budget": budget, "note": text(2000)}),
    _spec("evidence.add", "person agent loop", cmd_evidence.add, {
        "item": item_id, "criterion_ids": criterion_ids, "spend": spend_member,
        "kind": choice("test", "check", "review", "observation", "loop_wake", "manual"),
        "subject": text(64, pattern=SUBJECT_RE), "artifact_revision": text(200, empty=False), "workload": workload,
        "verdict": choice("pass", "fail", "inconclusive", "observed"), "summary": text(2000),
        "details_url": text(500), "observed_ms": int_(0, 2**53)}, ("kind", "verdict")),
    _spec("monitor.observe", "loop system", cmd_evidence.observe, {
        "item": item_id, "message_id": text(400, empty=False), "content_digest": text(64),
        "summary": text(2000), "evidence": json_obj(4000)}, ("item",)),
    _spec("monitor.watch", "system", cmd_evidence.watch, {
        "item": item_id, "loop_state": text(16, empty=False), "reason": text(200), "incarnation": int_(0, 2**53)},
          ("item", "loop_state")),
    _spec("effect.intend", "agent person system", cmd_effect.intend, {
        "request_key": key, "kind": text(64, empty=False), "target": text(500), "payload_digest": text(200,
        empty=False), "item": item_id}, ("request_key", "kind", "target", "payload_digest")),
    _spec("effect.settle", "agent person system", cmd_effect.settle, {
        "request_key": key, "attempt": int_(1, 1_000_000), "outcome": choice("succeeded", "failed", "unknown"),
        "state": choice("succeeded", "failed", "unknown"),  # the faces' older name for outcome
        "detail": text(2000), "external_ref": text(500)}, ("request_key", "attempt")),
    _spec("validator.record", "system", cmd_effect.record_validation, {
        "request_key": key, "attempt": int_(1, 1_000_000), "criterion_id": text(64, pattern=CRITERION_RE),
        "verdict": choice("pass", "fail", "inconclusive"), "summary": text(2000),
        "subject": text(64, pattern=SUBJECT_RE), "artifact_revision": text(200, empty=False)},
          ("request_key", "attempt", "criterion_id", "verdict", "subject", "artifact_revision")),
    _spec("effect.watch", "agent person", cmd_effect.watch, {"request_key": key, "loop_id": text(40, empty=False)},
          ("request_key", "loop_id")),
    _spec("effect.readback", "agent person loop system", cmd_effect.readback, {
        "request_key": key, "attempt": int_(1, 1_000_000), "observed": choice("present", "absent", "unreadable"),
        "detail": text(2000), "external_ref": text(500)}, ("request_key", "attempt", "observed")),
]
CATALOGUE: dict[str, CommandSpec] = {s.type: s for s in _SPECS}

_EXPECTED = {
    "item_revision": int_(0, 2**53), "goal_revision": int_(0, 2**53), "acceptance_revision": int_(0, 2**31),
    "claim": obj({"epoch": int_(0, 2**53), "key": key}, required=("epoch", "key")),
}


def parse_envelope(envelope: Any) -> dict[str, Any]:
    """§3.1 envelope shape; the command's own body is checked by its ``CommandSpec``."""
    env = parse(envelope, {"operation_id": key, "goal_id": text(40), "command": lambda v, f: v,
                           "expected": obj(_EXPECTED)}, required=("operation_id", "command"), prefix="")
    command = env["command"]
    if not isinstance(command, Mapping) or not isinstance(command.get("type"), str):
        raise ControlRefused("invalid_command", "command.type is required", field="command.type")
    if command["type"] not in CATALOGUE:
        raise ControlRefused("invalid_command", f"unknown command type {command['type'][:64]!r}",
                             field="command.type")
    env["command"] = dict(command)
    if command["type"] == "goal.create":
        if "goal_id" in env:
            raise refuse("goal_id", "goal.create makes a new goal: omit goal_id")
    elif "goal_id" not in env:
        raise refuse("goal_id", "is required")
    elif not GOAL_RE.fullmatch(env["goal_id"]):
        raise ControlRefused("not_found", "goal not found", resource="goal")
    return env
