"""Loop operations (interfaces.md §2.2 "Loops"): create, list, detail, pause, resume, delete, logs, transitions.

Each answers exactly what its HTTP route answers (the Loop object of ``wakeful.harness.views.loop_object``); see
``wakeful.harness.ops.table``. Scope: a Loop, agent or session outside the principal's scope is ``not_found``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from wakeful.harness.errors import AgentNotFound, InvalidRequest, SessionNotFound
from wakeful.harness.ops.pages import decode_cursor, page
from wakeful.harness.ops.scope import loop_in_scope
from wakeful.harness.ops.table import operation
from wakeful.harness.principal import check_group
from wakeful.harness.store import agents, loops, sessions
from wakeful.harness.views import loop_object, loop_objects

if TYPE_CHECKING:
    from wakeful.harness.embed import Harness
    from wakeful.harness.principal import Principal

__all__ = ["create", "delete", "full_loop", "get", "list_loops", "log_line", "logs", "pause", "resume",
           "transitions"]

INCLUDES = ("checkpoint", "logs", "pending")
STATES = ("active", "paused", "failed")
PAUSE_REASONS = ("manual", "exited", "budget", "archive", "quota", "fault")


def log_line(line: loops.LogLine) -> dict[str, Any]:
    return {"seq": line.seq, "at_ms": line.at_ms, "incarnation": line.incarnation, "source": line.source,
            "text": line.text}


async def full_loop(harness: Harness, view: dict[str, Any]) -> dict[str, Any]:
    """The Loop object of one harness view (its row read for ``wakes``, ``reloads`` and ``runtime``)."""
    return (await loop_objects(harness, [view]))[0]


def _id_text(value: object, field: str) -> str:
    if not isinstance(value, str) or not 1 <= len(value) <= 40:
        raise InvalidRequest(f"{field} must be an id (1..40 characters)", field=field)
    return value


@operation("loops.create")
async def create(harness: Harness, principal: Principal, *, group_id: str, agent_id: str, session_id: str,
                 artifact: str, name: str | None = None, config: Any = None,
                 capabilities: list[Any] | None = None) -> dict[str, Any]:
    """A new Loop of ``agent_id`` waking ``session_id`` (both of ``group_id`` and in the principal's scope)."""
    check_group(principal, group_id)
    _id_text(agent_id, "agent_id")
    _id_text(session_id, "session_id")
    if not isinstance(artifact, str) or not 1 <= len(artifact) <= 512:
        raise InvalidRequest("artifact must be sha256:<hex> or an artifact path", field="artifact")

    def in_scope(agent: agents.Agent | None, session: sessions.Session | None) -> None:
        # run first, over the one read of the create (agent, session, artifact; shared with concurrent creates)
        if agent is None or agent.group_id != group_id or not principal.sees_agent(agent.id):
            raise AgentNotFound(f"agent {agent_id[:40]} not found")
        if session is None or session.group_id != group_id or not principal.sees_agent(session.agent_id):
            raise SessionNotFound(f"session {session_id[:40]} not found")
        if session.agent_id != agent_id:  # interfaces.md §2.2: 404 session_not_found, not a 400
            raise SessionNotFound(f"session {session_id} is not a session of agent {agent_id}")

    view, row = await harness.loops.create_full(agent_id=agent_id, session_id=session_id, artifact=artifact,
                                                config=config, capabilities=capabilities, name=name,
                                                creator=principal.actor, check=in_scope)
    return loop_object(harness, view, row)  # the view's own row: no second read


@operation("loops.list")
async def list_loops(harness: Harness, principal: Principal, *, group_id: str, limit: int = 50,
                     cursor: str | None = None, agent_id: str | None = None, state: str | None = None,
                     pause_reason: str | None = None) -> dict[str, Any]:
    """A page of the group's Loops in id order (an agent principal sees only its own)."""
    check_group(principal, group_id)
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 200:
        raise InvalidRequest("limit must be an integer in 1..200", field="limit")
    if state is not None and state not in STATES:
        raise InvalidRequest(f"state takes {', '.join(STATES)}", field="state")
    if pause_reason is not None and pause_reason not in PAUSE_REASONS:
        raise InvalidRequest(f"pause_reason takes {', '.join(PAUSE_REASONS)}", field="pause_reason")
    if principal.agent_id is not None:
        if agent_id is not None and agent_id != principal.agent_id:
            return {"items": [], "next_cursor": None}
        agent_id = principal.agent_id
    # issue 16: the page is chosen in the query (id order, after the cursor's id, one row more than asked to
    # know whether another page follows), not cut from a listing of every Loop of the group
    pairs = await harness.loops.page(group_id=group_id, limit=limit + 1, after=decode_cursor(cursor),
                                     agent_id=agent_id, state=state, pause_reason=pause_reason)
    rows = {row.id: row for _, row in pairs}  # the objects are made from the page's own rows (one read a page)
    out = page([view for view, _ in pairs], limit=limit, cursor=None, key=lambda v: str(v["loop_id"]),
               render=lambda v: v)
    out["items"] = [loop_object(harness, v, rows.get(str(v["loop_id"]))) for v in out["items"]]
    return out


@operation("loops.get")
async def get(harness: Harness, principal: Principal, *, group_id: str, loop_id: str,
              include: str | None = None) -> dict[str, Any]:
    """The Loop object, with ``include`` (comma-separated ``checkpoint,logs,pending``) parts added."""
    row = await loop_in_scope(harness, principal, group_id, loop_id)
    wanted = {part for part in (include or "").split(",") if part}
    unknown = wanted - set(INCLUDES)
    if unknown:
        raise InvalidRequest(f"include takes checkpoint, logs, pending (not {sorted(unknown)[0]})", field="include")
    out = loop_object(harness, await harness.loops.get(loop_id), row)
    if "checkpoint" in wanted:
        out["checkpoint"] = row.checkpoint
    if "logs" in wanted:
        await harness.node.flush_logs()
        async with harness.store.tx(readonly=True) as tx:
            out["logs"] = [log_line(line) for line in await loops.list_logs(tx, loop_id, limit=50)]
    if "pending" in wanted:
        listed = await harness.events(loop_id, "list", status="pending", limit=200)
        out["pending"] = listed.get("events", [])
    return out


@operation("loops.pause")
async def pause(harness: Harness, principal: Principal, *, group_id: str, loop_id: str) -> dict[str, Any]:
    """Pause an active Loop (a Loop that is not active is answered unchanged)."""
    await loop_in_scope(harness, principal, group_id, loop_id)
    return await full_loop(harness, await harness.loops.pause(loop_id, actor=principal.actor))


@operation("loops.resume")
async def resume(harness: Harness, principal: Principal, *, group_id: str, loop_id: str) -> dict[str, Any]:
    """Resume a paused or failed Loop at a new incarnation."""
    await loop_in_scope(harness, principal, group_id, loop_id)
    return await full_loop(harness, await harness.loops.resume(loop_id, actor=principal.actor))


@operation("loops.delete")
async def delete(harness: Harness, principal: Principal, *, group_id: str, loop_id: str) -> None:
    """Delete the Loop and everything it holds (its webhook stops at once); the route answers 204."""
    await loop_in_scope(harness, principal, group_id, loop_id)
    await harness.loops.delete(loop_id, actor=principal.actor)


@operation("loops.logs")
async def logs(harness: Harness, principal: Principal, *, group_id: str, loop_id: str,
               after_seq: int | None = None, limit: int = 200) -> dict[str, Any]:
    """Stored log lines, oldest first, after the node's buffer is flushed."""
    await loop_in_scope(harness, principal, group_id, loop_id)
    await harness.node.flush_logs()
    async with harness.store.tx(readonly=True) as tx:
        lines = await loops.list_logs(tx, loop_id, limit=limit, after_seq=after_seq)
    return {"items": [log_line(line) for line in lines], "next_after_seq": lines[-1].seq if lines else after_seq}


@operation("loops.transitions")
async def transitions(harness: Harness, principal: Principal, *, group_id: str, loop_id: str) -> dict[str, Any]:
    """The newest state transitions."""
    await loop_in_scope(harness, principal, group_id, loop_id)
    async with harness.store.tx(readonly=True) as tx:
        found = await loops.list_transitions(tx, loop_id)
    return {"items": [{"seq": t.seq, "at_ms": t.at_ms, "from_state": t.from_state, "from_reason": t.from_reason,
                       "to_state": t.to_state, "to_reason": t.to_reason, "incarnation": t.incarnation,
                       "actor": t.actor, "detail": t.detail} for t in found]}
