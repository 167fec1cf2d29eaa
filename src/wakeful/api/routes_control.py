"""Control-plane routes (interfaces.md §2.2 "Control plane"): goals, command envelopes, projections, work items,
acceptance, evidence, effects, the commit log, receipts and ``next``.

The actor comes from authentication, never from the body: an agent principal acts as its agent, a person
principal as ``person:<key id>``. Kernel refusals map as §2.2 says: ``invalid_command`` 400; ``forbidden``,
``not_registered``, ``excluded`` 403; ``not_found`` 404; ``unavailable`` 503; every other code 409 with details.
Goals of another group are ``404`` (never revealed).
"""

from __future__ import annotations

import secrets
from typing import Annotated, Any

from fastapi import APIRouter, Body, Query, Request
from pydantic import BaseModel, ConfigDict, Field

from wakeful.api.auth import MemberPrincipal, Principal
from wakeful.api.context import harness_of
from wakeful.api.pages import Cursor, Limit, page
from wakeful.control import Actor, Control, ControlRefused, script_runner, validate
from wakeful.harness import ops
from wakeful.harness.errors import NotFound, StoreUnavailable

__all__ = ["router"]

router = APIRouter(tags=["control"])
G = "/v1/agent-groups/{group_id}"
GOAL = G + "/goals/{goal_id}"



class GoalIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    operation_id: str | None = Field(default=None, min_length=1, max_length=160)
    title: str
    objective: str
    claim_mode: str | None = None
    subjects: dict[str, str] | None = None
    budget: dict[str, Any] | None = None


class NextIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    agent_id: str | None = Field(default=None, min_length=1, max_length=40)  # an agent key names its agent
    goal_id: str | None = Field(default=None, min_length=1, max_length=40)
    claim: bool = True
    key: str | None = Field(default=None, min_length=1, max_length=160)
    ttl_s: int | None = Field(default=None, ge=60, le=86_400)


def control_of(request: Request) -> Control:
    """The node's control plane (``wakeful.control.embed.Harness``); 503 on a node started without one."""
    control = harness_of(request).control_if_running
    if not isinstance(control, Control):
        raise StoreUnavailable("the control plane is not running on this node")
    return control


def actor_of(principal: Principal, group_id: str) -> Actor:
    if principal.agent_id is not None:
        return Actor("agent", principal.agent_id, group_id)
    return Actor("person", principal.key_id, group_id)


def new_operation_id() -> str:
    """Faces generate one when omitted (control-plane.md §3.1); such a call is not replayable."""
    return f"api:{secrets.token_hex(12)}"


async def goal_in_group(control: Control, group_id: str, goal_id: str) -> dict[str, Any]:
    try:
        goal = await control.goal(goal_id)
    except ControlRefused as exc:
        if exc.code == "not_found":
            raise ControlRefused("not_found", f"goal {goal_id[:40]} not found", resource="goal") from None
        raise
    if goal["group_id"] != group_id:
        raise ControlRefused("not_found", f"goal {goal_id[:40]} not found", resource="goal")
    return goal


# ---------------------------------------------------------------- goals and commands


@router.post(G + "/goals", status_code=201)
async def create_goal(group_id: str, body: GoalIn, request: Request, principal: MemberPrincipal) -> dict[str, Any]:
    """Create a goal (``goal.create``); an agent creator is registered on it."""
    control = control_of(request)
    fields = body.model_dump(exclude_none=True, exclude={"operation_id"})
    envelope = {"operation_id": body.operation_id or new_operation_id(),
                "command": {"type": "goal.create", **fields}}
    receipt = await control.submit(actor_of(principal, group_id), envelope)
    return {"goal": await control.goal(receipt["goal_id"]), "receipt": receipt}


@router.get(G + "/goals")
async def list_goals(group_id: str, request: Request, principal: MemberPrincipal,
                     status: Annotated[str | None, Query(max_length=10)] = None,
                     limit: Limit = 50, cursor: Cursor = None) -> dict[str, Any]:
    """Goals of the group (an agent principal sees the goals it is registered on)."""
    goals = await control_of(request).goals(group_id, status=status, agent_id=principal.agent_id)
    return page(goals, limit=limit, cursor=cursor, key=lambda g: str(g["id"]), render=lambda g: g)


@router.get(GOAL)
async def get_goal(group_id: str, goal_id: str, request: Request, principal: MemberPrincipal) -> dict[str, Any]:
    """The goal and its status summary."""
    control = control_of(request)
    goal = await goal_in_group(control, group_id, goal_id)
    return {"goal": goal, "status": await control.status(goal_id)}


@router.post(GOAL + "/commands")
async def submit_command(group_id: str, goal_id: str, request: Request, principal: MemberPrincipal,
                         envelope: Annotated[dict[str, Any], Body()]) -> dict[str, Any]:
    """One command envelope (control-plane.md §3.1); a replay returns the original receipt, ``replayed: true``."""
    control = control_of(request)
    await goal_in_group(control, group_id, goal_id)
    if envelope.get("goal_id", goal_id) != goal_id:
        raise ControlRefused("invalid_command", "goal_id in the body differs from the path", field="goal_id")
    env = {**envelope, "goal_id": goal_id}
    env.setdefault("operation_id", new_operation_id())
    return await control.submit(actor_of(principal, group_id), env)


@router.post(GOAL + "/criteria/{criterion_id}/validate")
async def validate_criterion(group_id: str, goal_id: str, criterion_id: str, request: Request,
                             principal: MemberPrincipal) -> dict[str, Any]:
    """Run the criterion's validator in the node's script sandbox (or reuse its run) and record the evidence."""
    control = control_of(request)
    await goal_in_group(control, group_id, goal_id)
    return await validate(control, actor_of(principal, group_id), goal_id, criterion_id,
                          script_runner(harness_of(request).scripts))


# ---------------------------------------------------------------- projections and reads


@router.get(GOAL + "/status")
async def goal_status(group_id: str, goal_id: str, request: Request, principal: MemberPrincipal) -> dict[str, Any]:
    control = control_of(request)
    await goal_in_group(control, group_id, goal_id)
    return await control.status(goal_id)


@router.get(GOAL + "/board")
async def goal_board(group_id: str, goal_id: str, request: Request, principal: MemberPrincipal) -> dict[str, Any]:
    control = control_of(request)
    await goal_in_group(control, group_id, goal_id)
    return await control.board(goal_id)


@router.get(GOAL + "/work")
async def list_work(group_id: str, goal_id: str, request: Request, principal: MemberPrincipal,
                    status: Annotated[str | None, Query(max_length=10)] = None,
                    cls: Annotated[str | None, Query(alias="class", max_length=12)] = None,
                    limit: Limit = 50, cursor: Cursor = None) -> dict[str, Any]:
    control = control_of(request)
    await goal_in_group(control, group_id, goal_id)
    items = await control.items(goal_id, status=status, cls=cls)
    items.sort(key=lambda it: str(it["id"]))
    return page(items, limit=limit, cursor=cursor, key=lambda it: str(it["id"]), render=lambda it: it)


@router.get(GOAL + "/work/{item_id}")
async def get_work(group_id: str, goal_id: str, item_id: str, request: Request,
                   principal: MemberPrincipal) -> dict[str, Any]:
    """The item with its claim, evidence and effects."""
    control = control_of(request)
    await goal_in_group(control, group_id, goal_id)
    return await control.item(goal_id, item_id)


@router.get(GOAL + "/acceptance")
async def get_acceptance(group_id: str, goal_id: str, request: Request, principal: MemberPrincipal,
                         revision: Annotated[int | None, Query(ge=0, le=2**31)] = None) -> dict[str, Any]:
    control = control_of(request)
    await goal_in_group(control, group_id, goal_id)
    return await control.acceptance(goal_id, revision=revision)


@router.get(GOAL + "/evidence")
async def list_evidence(group_id: str, goal_id: str, request: Request, principal: MemberPrincipal,
                        item: Annotated[str | None, Query(max_length=40)] = None,
                        criterion: Annotated[str | None, Query(max_length=64)] = None,
                        limit: Limit = 50, cursor: Cursor = None) -> dict[str, Any]:
    """Evidence with its applicability now, oldest first."""
    control = control_of(request)
    await goal_in_group(control, group_id, goal_id)
    rows = await control.evidence(goal_id, item=item, criterion=criterion)
    return page(rows, limit=limit, cursor=cursor, key=lambda e: f"{int(e['seq']):020d}:{e['id']}", render=lambda e: e)


@router.get(GOAL + "/effects")
async def list_effects(group_id: str, goal_id: str, request: Request, principal: MemberPrincipal,
                       state: Annotated[str | None, Query(max_length=10)] = None,
                       limit: Limit = 50, cursor: Cursor = None) -> dict[str, Any]:
    control = control_of(request)
    await goal_in_group(control, group_id, goal_id)
    rows = sorted(await control.effects(goal_id, state=state), key=lambda e: str(e["id"]))
    return page(rows, limit=limit, cursor=cursor, key=lambda e: str(e["id"]), render=lambda e: e)


@router.get(GOAL + "/commits")
async def list_commits(group_id: str, goal_id: str, request: Request, principal: MemberPrincipal,
                       after_seq: Annotated[int, Query(ge=0)] = 0,
                       limit: Annotated[int, Query(ge=1, le=200)] = 50) -> dict[str, Any]:
    """The commit log after ``after_seq``: ``{items, next_after_seq}`` (null at the end)."""
    control = control_of(request)
    await goal_in_group(control, group_id, goal_id)
    rows = await control.commits(goal_id, after_seq=after_seq, limit=limit)
    return {"items": rows, "next_after_seq": rows[-1]["seq"] if len(rows) == limit else None}


@router.get(GOAL + "/receipts/{operation_id}")
async def get_receipt(group_id: str, goal_id: str, operation_id: str, request: Request,
                      principal: MemberPrincipal) -> dict[str, Any]:
    control = control_of(request)
    await goal_in_group(control, group_id, goal_id)
    return await control.receipt(goal_id, operation_id)


# ---------------------------------------------------------------- next


async def _next_agent(request: Request, principal: Principal, group_id: str, agent_id: str) -> None:
    """An agent principal asks only for itself; a person for an agent of its group (else 404)."""
    try:
        await ops.agent_in_scope(harness_of(request), principal, group_id, agent_id)
    except NotFound:
        raise ControlRefused("not_found", f"agent {agent_id[:40]} not found", resource="agent") from None


@router.get(G + "/next")
async def next_read(group_id: str, request: Request, principal: MemberPrincipal,
                    agent_id: Annotated[str | None, Query(max_length=40)] = None,
                    goal_id: Annotated[str | None, Query(max_length=40)] = None) -> dict[str, Any]:
    """The ``next`` decision (read-only)."""
    agent = _asking_agent(principal, agent_id)
    await _next_agent(request, principal, group_id, agent)
    return await control_of(request).next(agent, goal_id)


def _asking_agent(principal: Principal, agent_id: str | None) -> str:
    """The agent ``next`` is for: named, or the agent of an agent key (issue 20: the body need not repeat it)."""
    agent = agent_id or principal.agent_id
    if agent is None:
        raise ControlRefused("invalid_command", "agent_id is required for a person principal", field="agent_id")
    return agent


@router.post(G + "/next")
async def next_claim(group_id: str, body: NextIn, request: Request, principal: MemberPrincipal) -> dict[str, Any]:
    """The ``next`` decision; a ``start`` also acquires the item, and the answer carries the claim receipt."""
    agent = _asking_agent(principal, body.agent_id)
    await _next_agent(request, principal, group_id, agent)
    if principal.agent_id is None and body.claim:
        raise ControlRefused("forbidden", "only the agent itself claims work", field="claim")
    return await control_of(request).next(agent, body.goal_id, claim=body.claim, key=body.key, ttl_s=body.ttl_s)
