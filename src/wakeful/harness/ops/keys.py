"""API keys (interfaces.md §1, §2.2; harness.md §2.1): create, list and revoke a group's keys, and
:func:`authenticate` — the one way a face turns a key's text (and the agent it says it acts as) into a
:class:`~wakeful.harness.principal.Principal`, through the node's key cache (≤ 5 s).

An **agent** principal is an ``agent`` key, or a ``group``/``admin`` key acting as an agent; a **person**
principal is a ``group``/``admin`` key acting as no agent.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from wakeful.harness.errors import Forbidden, InvalidRequest, NotFound, Unauthorized
from wakeful.harness.ops.pages import page
from wakeful.harness.ops.table import operation
from wakeful.harness.principal import Principal, require_admin, require_person
from wakeful.harness.store import agents, groups

if TYPE_CHECKING:
    from wakeful.harness.embed import Harness

__all__ = ["admin_keys", "authenticate", "create", "create_admin", "find", "key_view", "known", "list_keys", "revoke",
           "revoke_admin"]

ROLES = ("group", "agent")  # the roles a group's keys take over the API (admin keys are made on the node)


def key_view(key: groups.ApiKey) -> dict[str, Any]:
    return {"id": key.id, "role": key.role, "group_id": key.group_id, "agent_id": key.agent_id,
            "label": key.label, "created_ms": key.created_ms, "last_used_ms": key.last_used_ms,
            "revoked_ms": key.revoked_ms}


async def known(harness: Harness, token: str) -> bool:
    """Whether ``token`` is a live key (the dashboard's login)."""
    return await harness.keys.verify(token) is not None


async def authenticate(harness: Harness, token: str | None, acting_agent: str | None = None) -> Principal:
    """The principal of a key's text acting as ``acting_agent`` (``X-Wakeful-Agent``; None: the key's own).

    ``unauthorized`` for a missing, malformed, unknown or revoked key; ``forbidden`` for an agent key naming
    another agent; ``not_found`` (``field: x-wakeful-agent``) for an agent outside a group key's scope."""
    if not token:
        raise Unauthorized("an Authorization: Bearer wk_… key is required")
    key = await harness.keys.verify(token)
    if key is None:
        raise Unauthorized("the key is unknown or revoked")
    if key.role == "agent":
        if acting_agent is not None and acting_agent != key.agent_id:
            raise Forbidden("an agent key acts only as its own agent")
        return Principal("agent", key.id, key.group_id, key.agent_id, key.group_id)
    if acting_agent is None:
        return Principal(key.role, key.id, key.group_id, None)
    agent = await _find_agent(harness, acting_agent)
    if agent is None or (key.role == "group" and agent.group_id != key.group_id):
        raise NotFound(f"agent {acting_agent[:40]} not found", field="x-wakeful-agent")
    return Principal(key.role, key.id, key.group_id, agent.id, agent.group_id)


async def _find_agent(harness: Harness, agent_id: str) -> agents.Agent | None:
    if not 1 <= len(agent_id) <= 40:
        return None
    async with harness.store.tx(readonly=True) as tx:
        return await agents.find_agent(tx, agent_id)


@operation("keys.create")
async def create(harness: Harness, principal: Principal, *, group_id: str, role: str, agent_id: str | None = None,
                 label: str | None = None) -> dict[str, Any]:
    """A new ``group`` or ``agent`` key of the group: its record and, this once, its text (``key``)."""
    require_person(principal, group_id)
    if role not in ROLES:
        raise InvalidRequest("role must be group or agent (admin keys are made on the node)", field="role")
    async with harness.store.tx() as tx:
        await groups.get_group(tx, group_id)
        key, text = await groups.create_key(tx, role=role, group_id=group_id, agent_id=agent_id, label=label)
    return {**key_view(key), "key": text}


@operation("keys.list")
async def list_keys(harness: Harness, principal: Principal, *, group_id: str, limit: int = 50,
                    cursor: str | None = None) -> dict[str, Any]:
    """One page of the group's keys, by id, never their secrets."""
    require_person(principal, group_id)
    async with harness.store.tx(readonly=True) as tx:
        await groups.get_group(tx, group_id)
        found = sorted(await groups.list_keys(tx, group_id=group_id), key=lambda k: k.id)
    return page(found, limit=limit, cursor=cursor, key=lambda k: k.id, render=key_view)


@operation("keys.revoke")
async def revoke(harness: Harness, principal: Principal, *, group_id: str, key_id: str) -> None:
    """Revoke one of the group's keys; the node's key cache forgets it at once."""
    require_person(principal, group_id)
    async with harness.store.tx() as tx:
        if key_id not in {k.id for k in await groups.list_keys(tx, group_id=group_id)}:
            raise NotFound(f"key {key_id[:40]} not found")
        await groups.revoke_key(tx, key_id)
    harness.keys.forget(key_id)


# ---- admin keys (no group): the operator's, in process only — the HTTP API makes no admin key (harness.md §2.1)


def _operator_only(principal: Principal) -> None:
    if not principal.operator:
        raise Forbidden("admin keys are made and revoked on the node (wakeful key …)")


async def find(harness: Harness, principal: Principal, key_id: str) -> dict[str, Any]:
    """One key's record by id alone (an admin key has ``group_id`` None) — in process, for the operator."""
    require_admin(principal)
    async with harness.store.tx(readonly=True) as tx:
        found = {k.id: k for k in await groups.list_keys(tx)}.get(key_id)
    if found is None:
        raise NotFound(f"key {key_id[:40]} not found")
    return key_view(found)


async def create_admin(harness: Harness, principal: Principal, *, label: str | None = None) -> dict[str, Any]:
    """A new admin key (every group): its record and, this once, its text (``key``)."""
    _operator_only(principal)
    async with harness.store.tx() as tx:
        key, text = await groups.create_key(tx, role="admin", label=label)
    return {**key_view(key), "key": text}


async def admin_keys(harness: Harness, principal: Principal) -> list[dict[str, Any]]:
    """Every admin key's record, oldest first (never a secret)."""
    _operator_only(principal)
    async with harness.store.tx(readonly=True) as tx:
        return [key_view(k) for k in await groups.list_keys(tx) if k.group_id is None]


async def revoke_admin(harness: Harness, principal: Principal, *, key_id: str) -> None:
    """Revoke an admin key; the node's key cache forgets it at once."""
    _operator_only(principal)
    async with harness.store.tx() as tx:
        found = {k.id: k for k in await groups.list_keys(tx)}.get(key_id)
        if found is None or found.group_id is not None:
            raise NotFound(f"key {key_id[:40]} not found")
        await groups.revoke_key(tx, key_id)
    harness.keys.forget(key_id)
