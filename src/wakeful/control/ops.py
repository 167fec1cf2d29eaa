"""Control-plane operations (interfaces.md §2.2 "Control plane"): goals, command envelopes, projections, work
items, acceptance, evidence, effects, the commit log, receipts and ``next``, in the harness operation table
(``wakeful.harness.ops.table``) so the HTTP routes, the MCP tools and the command line call them alike.

Each answers exactly what its HTTP route answers. The actor comes from the principal, never from the body: an
agent principal acts as its agent, the local operator as ``operator``, another person principal as
``person:<key id>``. Goals of another group are ``not_found`` (never revealed). The kernel is the harness's
``control_if_running``; a node without one answers ``unavailable``.

The operator's command line names a goal (or, for ``next``, an agent) by id alone: ``group_id=None`` is accepted
from an unscoped admin principal (the operator, also acting as an agent of any group) in process, never over HTTP
(a path parameter is always a group); the group is then the goal's (the agent's).
"""

from __future__ import annotations

import secrets
from typing import TYPE_CHECKING, Any

from wakeful.control.actor import Actor
from wakeful.control.core import Control
from wakeful.control.errors import CODES, ControlRefused, http_status
from wakeful.control.fields import refuse
from wakeful.control.validators import script_runner, validate
from wakeful.harness.errors import NotFound, StoreUnavailable
from wakeful.harness.ops import agent_in_scope, page
from wakeful.harness.ops.table import operation
from wakeful.harness.principal import check_group, require_admin
from wakeful.harness.store import agents

if TYPE_CHECKING:
    from wakeful.harness import Harness
    from wakeful.harness.principal import Principal

__all__ = ["ENVELOPE", "actor_of", "check_envelope", "control_of", "goal_in_group", "new_operation_id",
           "refusal_statuses"]

ENVELOPE = ("operation_id", "command", "expected")  # the members of §3.1 besides goal_id (the path's)


def refusal_statuses() -> dict[str, int]:
    """The kernel's refusal codes and the HTTP status each answers (§2.2), for the faces' one error table."""
    return {code: http_status(code) for code in sorted(CODES)}


def control_of(harness: Harness) -> Control:
    """The node's control plane; ``unavailable`` on a node started without one."""
    control = harness.control_if_running
    if not isinstance(control, Control):
        raise StoreUnavailable("the control plane is not running on this node")
    return control


def actor_of(principal: Principal, group_id: str) -> Actor:
    """The actor a principal's commands are recorded as (control-plane.md §3.1)."""
    if principal.agent_id is not None:
        return Actor("agent", principal.agent_id, group_id)
    if principal.operator:
        return Actor("operator", "operator", group_id)
    return Actor("person", principal.key_id, group_id)


def new_operation_id() -> str:
    """Faces generate one when omitted (control-plane.md §3.1); such a call is not replayable."""
    return f"api:{secrets.token_hex(12)}"


async def goal_in_group(control: Control, group_id: str, goal_id: str) -> dict[str, Any]:
    """The goal, if it belongs to ``group_id``; else ``not_found``."""
    try:
        goal = await control.goal(goal_id)
    except ControlRefused as exc:
        if exc.code == "not_found":
            raise ControlRefused("not_found", f"goal {goal_id[:40]} not found", resource="goal") from None
        raise
    if goal["group_id"] != group_id:
        raise ControlRefused("not_found", f"goal {goal_id[:40]} not found", resource="goal")
    return goal


def _unscoped(principal: Principal, what: str) -> None:
    """``group_id=None``: only an admin principal scoped to no group (the operator in process)."""
    require_admin(principal)
    if principal.group_id is not None or principal.agent_group_id is not None:
        raise NotFound(f"{what} not found")


async def _goal(harness: Harness, principal: Principal, group_id: str | None,
                goal_id: str) -> tuple[Control, dict[str, Any]]:
    if group_id is None:
        _unscoped(principal, f"goal {goal_id[:40]}")
        control = control_of(harness)
        goal = await control.goal(goal_id)
        return control, await goal_in_group(control, str(goal["group_id"]), goal_id)
    check_group(principal, group_id)
    control = control_of(harness)
    return control, await goal_in_group(control, group_id, goal_id)


async def check_envelope(harness: Harness, principal: Principal, group_id: str, goal_id: str,
                         envelope: dict[str, Any]) -> dict[str, Any]:
    """The envelope members :func:`submit` takes, from a request body: a ``goal_id`` differing from the path's,
    or an unknown member, is refused (after the goal's scope is checked, as the kernel would)."""
    body = dict(envelope)
    stray = [name for name in body if name not in ENVELOPE and name != "goal_id"]
    if body.pop("goal_id", goal_id) != goal_id or stray:
        await _goal(harness, principal, group_id, goal_id)
        if envelope.get("goal_id", goal_id) != goal_id:
            raise ControlRefused("invalid_command", "goal_id in the body differs from the path", field="goal_id")
        raise refuse(str(stray[0]), "unknown member")
    return body


# ---------------------------------------------------------------- goals and commands


@operation("goals.create")
async def create_goal(harness: Harness, principal: Principal, /, *, group_id: str, title: str, objective: str,
                      operation_id: str | None = None, claim_mode: str | None = None,
                      subjects: dict[str, str] | None = None, budget: dict[str, Any] | None = None) -> dict[str, Any]:
    """Create a goal (``goal.create``); an agent creator is registered on it. Answers ``{goal, receipt}``."""
    check_group(principal, group_id)
    control = control_of(harness)
    fields = {k: v for k, v in (("title", title), ("objective", objective), ("claim_mode", claim_mode),
                                ("subjects", subjects), ("budget", budget)) if v is not None}
    envelope = {"operation_id": operation_id or new_operation_id(), "command": {"type": "goal.create", **fields}}
    receipt = await control.submit(actor_of(principal, group_id), envelope)
    return {"goal": await control.goal(receipt["goal_id"]), "receipt": receipt}


@operation("goals.list")
async def list_goals(harness: Harness, principal: Principal, /, *, group_id: str, status: str | None = None,
                     limit: int = 50, cursor: str | None = None) -> dict[str, Any]:
    """Goals of the group (an agent principal sees the goals it is registered on), one page."""
    check_group(principal, group_id)
    goals = await control_of(harness).goals(group_id, status=status, agent_id=principal.agent_id)
    return page(goals, limit=limit, cursor=cursor, key=lambda g: str(g["id"]), render=lambda g: g)


@operation("goals.get")
async def get_goal(harness: Harness, principal: Principal, /, *, group_id: str | None,
                   goal_id: str) -> dict[str, Any]:
    """The goal and its status summary."""
    control, goal = await _goal(harness, principal, group_id, goal_id)
    return {"goal": goal, "status": await control.status(goal_id)}


@operation("goals.submit")
async def submit(harness: Harness, principal: Principal, /, *, group_id: str | None, goal_id: str,
                 command: dict[str, Any] | None = None, operation_id: str | None = None,
                 expected: dict[str, Any] | None = None) -> dict[str, Any]:
    """One command envelope (control-plane.md §3.1); a replay returns the original receipt, ``replayed: true``."""
    control, goal = await _goal(harness, principal, group_id, goal_id)
    envelope: dict[str, Any] = {"operation_id": operation_id or new_operation_id(), "goal_id": goal_id}
    if command is not None:
        envelope["command"] = command
    if expected is not None:
        envelope["expected"] = expected
    return await control.submit(actor_of(principal, str(goal["group_id"])), envelope)


@operation("goals.validate")
async def validate_criterion(harness: Harness, principal: Principal, /, *, group_id: str | None, goal_id: str,
                             criterion_id: str) -> dict[str, Any]:
    """Run the criterion's validator in the node's script sandbox (or reuse its run) and record the evidence."""
    control, goal = await _goal(harness, principal, group_id, goal_id)
    return await validate(control, actor_of(principal, str(goal["group_id"])), goal_id, criterion_id,
                          script_runner(harness.scripts))


# ---------------------------------------------------------------- projections and reads


@operation("goals.status")
async def goal_status(harness: Harness, principal: Principal, /, *, group_id: str | None,
                      goal_id: str) -> dict[str, Any]:
    control, _ = await _goal(harness, principal, group_id, goal_id)
    return await control.status(goal_id)


@operation("goals.board")
async def goal_board(harness: Harness, principal: Principal, /, *, group_id: str | None,
                     goal_id: str) -> dict[str, Any]:
    control, _ = await _goal(harness, principal, group_id, goal_id)
    return await control.board(goal_id)


@operation("work.list")
async def list_work(harness: Harness, principal: Principal, /, *, group_id: str | None, goal_id: str,
                    status: str | None = None, limit: int = 50, cursor: str | None = None,
                    **filters: Any) -> dict[str, Any]:
    """The goal's items, one page; ``class`` (a Python keyword, so passed as ``**{"class": …}``) filters."""
    unknown = set(filters) - {"class"}
    if unknown:
        raise TypeError(f"work.list takes no argument {sorted(unknown)[0]}")
    control, _ = await _goal(harness, principal, group_id, goal_id)
    items = await control.items(goal_id, status=status, cls=filters.get("class"))
    items.sort(key=lambda it: str(it["id"]))
    return page(items, limit=limit, cursor=cursor, key=lambda it: str(it["id"]), render=lambda it: it)


@operation("work.get")
async def get_work(harness: Harness, principal: Principal, /, *, group_id: str | None, goal_id: str,
                   item_id: str) -> dict[str, Any]:
    """The item with its claim, evidence and effects."""
    control, _ = await _goal(harness, principal, group_id, goal_id)
    return await control.item(goal_id, item_id)


@operation("goals.acceptance")
async def get_acceptance(harness: Harness, principal: Principal, /, *, group_id: str | None, goal_id: str,
                         revision: int | None = None) -> dict[str, Any]:
    control, _ = await _goal(harness, principal, group_id, goal_id)
    return await control.acceptance(goal_id, revision=revision)


@operation("goals.evidence")
async def list_evidence(harness: Harness, principal: Principal, /, *, group_id: str | None, goal_id: str,
                        item: str | None = None, criterion: str | None = None, limit: int = 50,
                        cursor: str | None = None) -> dict[str, Any]:
    """Evidence with its applicability now, oldest first."""
    control, _ = await _goal(harness, principal, group_id, goal_id)
    rows = await control.evidence(goal_id, item=item, criterion=criterion)
    return page(rows, limit=limit, cursor=cursor, key=lambda e: f"{int(e['seq']):020d}:{e['id']}", render=lambda e: e)


@operation("goals.effects")
async def list_effects(harness: Harness, principal: Principal, /, *, group_id: str | None, goal_id: str,
                       state: str | None = None, limit: int = 50, cursor: str | None = None) -> dict[str, Any]:
    control, _ = await _goal(harness, principal, group_id, goal_id)
    rows = sorted(await control.effects(goal_id, state=state), key=lambda e: str(e["id"]))
    return page(rows, limit=limit, cursor=cursor, key=lambda e: str(e["id"]), render=lambda e: e)


@operation("goals.commits")
async def list_commits(harness: Harness, principal: Principal, /, *, group_id: str | None, goal_id: str,
                       after_seq: int = 0, limit: int = 50) -> dict[str, Any]:
    """The commit log after ``after_seq``: ``{items, next_after_seq}`` (null at the end)."""
    control, _ = await _goal(harness, principal, group_id, goal_id)
    rows = await control.commits(goal_id, after_seq=after_seq, limit=limit)
    return {"items": rows, "next_after_seq": rows[-1]["seq"] if len(rows) == limit else None}


@operation("goals.receipt")
async def get_receipt(harness: Harness, principal: Principal, /, *, group_id: str | None, goal_id: str,
                      operation_id: str) -> dict[str, Any]:
    control, _ = await _goal(harness, principal, group_id, goal_id)
    return await control.receipt(goal_id, operation_id)


# ---------------------------------------------------------------- next


async def _next_agent(harness: Harness, principal: Principal, group_id: str | None, agent_id: str | None) -> str:
    """The agent ``next`` is for: named, or the agent of an agent key (issue 20: the body need not repeat it).
    An agent principal asks only for itself; a person for an agent of its group (else ``not_found``)."""
    agent = agent_id or principal.agent_id
    if agent is None:
        raise ControlRefused("invalid_command", "agent_id is required for a person principal", field="agent_id")
    if group_id is None:
        _unscoped(principal, f"agent {agent[:40]}")
        async with harness.store.tx(readonly=True) as tx:
            found = await agents.find_agent(tx, agent) if 1 <= len(agent) <= 40 else None
        if found is None:
            raise ControlRefused("not_found", f"agent {agent[:40]} not found", resource="agent")
        group_id = found.group_id
    try:
        await agent_in_scope(harness, principal, group_id, agent)
    except NotFound:
        raise ControlRefused("not_found", f"agent {agent[:40]} not found", resource="agent") from None
    return agent


@operation("next.get")
async def next_read(harness: Harness, principal: Principal, /, *, group_id: str | None, agent_id: str | None = None,
                    goal_id: str | None = None) -> dict[str, Any]:
    """The ``next`` decision (read-only)."""
    agent = await _next_agent(harness, principal, group_id, agent_id)
    return await control_of(harness).next(agent, goal_id)


@operation("next.claim")
async def next_claim(harness: Harness, principal: Principal, /, *, group_id: str | None, agent_id: str | None = None,
                     goal_id: str | None = None, claim: bool = True, key: str | None = None,
                     ttl_s: int | None = None) -> dict[str, Any]:
    """The ``next`` decision; a ``start`` also acquires the item, and the answer carries the claim receipt."""
    agent = await _next_agent(harness, principal, group_id, agent_id)
    if principal.agent_id is None and claim:
        raise ControlRefused("forbidden", "only the agent itself claims work", field="claim")
    return await control_of(harness).next(agent, goal_id, claim=claim, key=key, ttl_s=ttl_s)
