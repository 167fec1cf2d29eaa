"""Control-plane routes (interfaces.md §2.2 "Control plane"): goals, command envelopes, projections, work items,
acceptance, evidence, effects, the commit log, receipts and ``next``.

Each route parses, calls its operation in ``wakeful.control.ops`` (which owns the scope checks and the actor:
from authentication, never from the body) and answers it. Kernel refusals map as §2.2 says: ``invalid_command``
400; ``forbidden``, ``not_registered``, ``excluded`` 403; ``not_found`` 404; ``unavailable`` 503; every other code
409 with details.
Goals of another group are ``404`` (never revealed).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Query, Request
from pydantic import BaseModel, ConfigDict, Field

from wakeful.api.auth import MemberPrincipal
from wakeful.api.context import harness_of
from wakeful.api.errors import register_status
from wakeful.api.pages import Cursor, Limit
from wakeful.control import ops as cops

__all__ = ["router"]

router = APIRouter(tags=["control"])
G = "/v1/agent-groups/{group_id}"
GOAL = G + "/goals/{goal_id}"

for _code, _status in cops.refusal_statuses().items():  # §2.2: the kernel's codes, in the one error table
    register_status(_code, _status)


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


# ---------------------------------------------------------------- goals and commands (wakeful.control.ops)


@router.post(G + "/goals", status_code=201)
async def create_goal(group_id: str, body: GoalIn, request: Request, principal: MemberPrincipal) -> dict[str, Any]:
    """Create a goal (``goal.create``); an agent creator is registered on it."""
    return await cops.create_goal(harness_of(request), principal, group_id=group_id,
                                  **body.model_dump(exclude_none=True))


@router.get(G + "/goals")
async def list_goals(group_id: str, request: Request, principal: MemberPrincipal,
                     status: Annotated[str | None, Query(max_length=10)] = None,
                     limit: Limit = 50, cursor: Cursor = None) -> dict[str, Any]:
    """Goals of the group (an agent principal sees the goals it is registered on)."""
    return await cops.list_goals(harness_of(request), principal, group_id=group_id, status=status, limit=limit,
                                 cursor=cursor)


@router.get(GOAL)
async def get_goal(group_id: str, goal_id: str, request: Request, principal: MemberPrincipal) -> dict[str, Any]:
    """The goal and its status summary."""
    return await cops.get_goal(harness_of(request), principal, group_id=group_id, goal_id=goal_id)


@router.post(GOAL + "/commands")
async def submit_command(group_id: str, goal_id: str, request: Request, principal: MemberPrincipal,
                         envelope: Annotated[dict[str, Any], Body()]) -> dict[str, Any]:
    """One command envelope (control-plane.md §3.1); a replay returns the original receipt, ``replayed: true``."""
    harness = harness_of(request)
    members = await cops.check_envelope(harness, principal, group_id, goal_id, envelope)
    return await cops.submit(harness, principal, group_id=group_id, goal_id=goal_id, **members)


@router.post(GOAL + "/criteria/{criterion_id}/validate")
async def validate_criterion(group_id: str, goal_id: str, criterion_id: str, request: Request,
                             principal: MemberPrincipal) -> dict[str, Any]:
    """Run the criterion's validator in the node's script sandbox (or reuse its run) and record the evidence."""
    return await cops.validate_criterion(harness_of(request), principal, group_id=group_id, goal_id=goal_id,
                                         criterion_id=criterion_id)


# ---------------------------------------------------------------- projections and reads


@router.get(GOAL + "/status")
async def goal_status(group_id: str, goal_id: str, request: Request, principal: MemberPrincipal) -> dict[str, Any]:
    return await cops.goal_status(harness_of(request), principal, group_id=group_id, goal_id=goal_id)


@router.get(GOAL + "/board")
async def goal_board(group_id: str, goal_id: str, request: Request, principal: MemberPrincipal) -> dict[str, Any]:
    return await cops.goal_board(harness_of(request), principal, group_id=group_id, goal_id=goal_id)


@router.get(GOAL + "/work")
async def list_work(group_id: str, goal_id: str, request: Request, principal: MemberPrincipal,
                    status: Annotated[str | None, Query(max_length=10)] = None,
                    cls: Annotated[str | None, Query(alias="class", max_length=12)] = None,
                    limit: Limit = 50, cursor: Cursor = None) -> dict[str, Any]:
    return await cops.list_work(harness_of(request), principal, group_id=group_id, goal_id=goal_id, status=status,
                                limit=limit, cursor=cursor, **{"class": cls})


@router.get(GOAL + "/work/{item_id}")
async def get_work(group_id: str, goal_id: str, item_id: str, request: Request,
                   principal: MemberPrincipal) -> dict[str, Any]:
    """The item with its claim, evidence and effects."""
    return await cops.get_work(harness_of(request), principal, group_id=group_id, goal_id=goal_id, item_id=item_id)


@router.get(GOAL + "/acceptance")
async def get_acceptance(group_id: str, goal_id: str, request: Request, principal: MemberPrincipal,
                         revision: Annotated[int | None, Query(ge=0, le=2**31)] = None) -> dict[str, Any]:
    return await cops.get_acceptance(harness_of(request), principal, group_id=group_id, goal_id=goal_id,
                                     revision=revision)


@router.get(GOAL + "/evidence")
async def list_evidence(group_id: str, goal_id: str, request: Request, principal: MemberPrincipal,
                        item: Annotated[str | None, Query(max_length=40)] = None,
                        criterion: Annotated[str | None, Query(max_length=64)] = None,
                        limit: Limit = 50, cursor: Cursor = None) -> dict[str, Any]:
    """Evidence with its applicability now, oldest first."""
    return await cops.list_evidence(harness_of(request), principal, group_id=group_id, goal_id=goal_id, item=item,
                                    criterion=criterion, limit=limit, cursor=cursor)


@router.get(GOAL + "/effects")
async def list_effects(group_id: str, goal_id: str, request: Request, principal: MemberPrincipal,
                       state: Annotated[str | None, Query(max_length=10)] = None,
                       limit: Limit = 50, cursor: Cursor = None) -> dict[str, Any]:
    return await cops.list_effects(harness_of(request), principal, group_id=group_id, goal_id=goal_id, state=state,
                                   limit=limit, cursor=cursor)


@router.get(GOAL + "/commits")
async def list_commits(group_id: str, goal_id: str, request: Request, principal: MemberPrincipal,
                       after_seq: Annotated[int, Query(ge=0)] = 0,
                       limit: Annotated[int, Query(ge=1, le=200)] = 50) -> dict[str, Any]:
    """The commit log after ``after_seq``: ``{items, next_after_seq}`` (null at the end)."""
    return await cops.list_commits(harness_of(request), principal, group_id=group_id, goal_id=goal_id,
                                   after_seq=after_seq, limit=limit)


@router.get(GOAL + "/receipts/{operation_id}")
async def get_receipt(group_id: str, goal_id: str, operation_id: str, request: Request,
                      principal: MemberPrincipal) -> dict[str, Any]:
    return await cops.get_receipt(harness_of(request), principal, group_id=group_id, goal_id=goal_id,
                                  operation_id=operation_id)


# ---------------------------------------------------------------- next


@router.get(G + "/next")
async def next_read(group_id: str, request: Request, principal: MemberPrincipal,
                    agent_id: Annotated[str | None, Query(max_length=40)] = None,
                    goal_id: Annotated[str | None, Query(max_length=40)] = None) -> dict[str, Any]:
    """The ``next`` decision (read-only)."""
    return await cops.next_read(harness_of(request), principal, group_id=group_id, agent_id=agent_id,
                                goal_id=goal_id)


@router.post(G + "/next")
async def next_claim(group_id: str, body: NextIn, request: Request, principal: MemberPrincipal) -> dict[str, Any]:
    """The ``next`` decision; a ``start`` also acquires the item, and the answer carries the claim receipt."""
    return await cops.next_claim(harness_of(request), principal, group_id=group_id, **body.model_dump())
