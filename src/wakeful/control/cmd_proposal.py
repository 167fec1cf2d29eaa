"""Proposals accepted by authority (issue 20; docs/decisions-control.md "Proposals").

An agent may not set acceptance or change the goal, but it may propose either: ``acceptance.propose`` and
``goal.propose`` record the proposed document (with its digest and what it was based on) on a new, already asked
``user_gate``. A person's ``gate.resolve approve`` applies exactly that proposal in the same commit — refused as
``proposal_stale`` when the goal moved on since (another acceptance revision, or a proposed goal field changed)
or when the approval names another digest; reject and cancel apply nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from wakeful.control.canonical import digest
from wakeful.control.cmd_evidence import apply_contract, check_contract
from wakeful.control.cmd_goal import apply_goal_changes
from wakeful.control.cmd_work import new_item
from wakeful.control.errors import ControlRefused

if TYPE_CHECKING:
    from wakeful.control.kernel import Ctx

__all__ = ["GOAL_FIELDS", "apply_proposal", "propose_acceptance", "propose_goal"]

GOAL_FIELDS = ("title", "objective", "claim_mode", "budget")


async def propose_acceptance(ctx: Ctx) -> None:
    """``acceptance.propose {document, bindings?, note?}`` with ``expected.acceptance_revision``: the revision
    the proposal revises."""
    based = ctx.expected.get("acceptance_revision")
    if based is None:
        raise ControlRefused("invalid_command", "acceptance.propose needs expected.acceptance_revision",
                             field="expected.acceptance_revision")
    current = int(ctx.goal["acceptance_revision"])
    if based != current:
        raise ControlRefused("revision_conflict", f"the acceptance is at revision {current}", entity="acceptance",
                             id=ctx.goal_id, current=current, expected=based)
    document, bindings = ctx.command["document"], ctx.command.get("bindings", {})
    await check_contract(ctx, document, bindings)
    proposal = {"kind": "acceptance", "document": document, "bindings": bindings,
                "digest": digest({"document": document, "bindings": bindings}),
                "based_on": {"acceptance_revision": based}}
    await _open_gate(ctx, proposal, f"proposed acceptance revision {based + 1}",
                     "Apply the proposed acceptance contract?")


async def propose_goal(ctx: Ctx) -> None:
    """``goal.propose {title?, objective?, claim_mode?, budget?, note?}``: based on the fields' current values."""
    changes = {k: ctx.command[k] for k in GOAL_FIELDS if k in ctx.command}
    if not changes:
        raise ControlRefused("invalid_command", "goal.propose needs at least one of " + ", ".join(GOAL_FIELDS),
                             field="command")
    proposal = {"kind": "goal_update", "changes": changes, "digest": digest(changes),
                "based_on": {"fields": {k: ctx.goal.get(k) for k in changes}}}
    await _open_gate(ctx, proposal, "proposed goal change: " + ", ".join(sorted(changes)),
                     "Apply the proposed change to the goal?")


async def _open_gate(ctx: Ctx, proposal: dict[str, Any], title: str, question: str) -> None:
    note = ctx.command.get("note")
    gate = await new_item(ctx, {"class": "user_gate", "title": title, "scope": f"direction:goal:{ctx.goal_id}",
                                "targets": [], "question": f"{question} {note}" if note else question,
                                "options": ["approve", "reject"], "priority": 0},
                          proposal={**proposal, "proposed_by": ctx.actor.ref}, asked_ms=ctx.now)
    ctx.receipt_extra["proposal"] = {"gate_id": gate["id"], "kind": proposal["kind"], "digest": proposal["digest"]}


async def apply_proposal(ctx: Ctx, gate: dict[str, Any]) -> None:
    """In the approving commit: exactly the proposed document, if nothing it was based on moved."""
    proposal = gate["proposal"]
    named = ctx.command.get("digest")
    if named is not None and named != proposal["digest"]:
        raise ControlRefused("proposal_stale", "the approval names another proposal digest", gate=gate["id"],
                             digest=proposal["digest"], reason="digest_mismatch")
    if proposal["kind"] == "acceptance":
        based = proposal["based_on"]["acceptance_revision"]
        if int(ctx.goal["acceptance_revision"]) != based:
            raise ControlRefused("proposal_stale", f"the acceptance moved on from revision {based}",
                                 gate=gate["id"], reason="acceptance_moved", current=ctx.goal["acceptance_revision"])
        bindings = await check_contract(ctx, proposal["document"], proposal["bindings"], prefix="proposal")
        await apply_contract(ctx, proposal["document"], bindings)
        return
    moved = sorted(k for k, v in proposal["based_on"]["fields"].items() if ctx.goal.get(k) != v)
    if moved:
        raise ControlRefused("proposal_stale", f"the goal's {', '.join(moved)} changed since the proposal",
                             gate=gate["id"], reason="goal_moved", fields=moved)
    await apply_goal_changes(ctx, proposal["changes"])

