"""`wakeful group | agent | session | key …` (interfaces.md §4.2): one code path over a harness ``Backend``.

Local mode runs the operations in process as the operator (``LocalBackend(harness, OPERATOR)`` on the store,
no node running here); remote mode (`--server` / `$WAKEFUL_SERVER`) sends them to the server's HTTP API with
the key (``HttpBackend(SyncCaller(remote))``). A :class:`Place` says where ids without their group belong: the
key's group remotely, the operator's whole store locally. Outputs: docs/decisions-cli-remote.md.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeVar

import typer

from wakeful.cli import remote
from wakeful.cli.backend import every_item
from wakeful.cli.db_cmd import store_url
from wakeful.cli.output import Unavailable, out_for
from wakeful.cli.remote import RemoteError
from wakeful.cli.tables import record_lines, table_lines
from wakeful.errors import WakefulError

if TYPE_CHECKING:  # the harness (and SQLAlchemy) load when a command runs, not when the CLI starts
    from wakeful.cli.output import Out
    from wakeful.cli.remote import Remote
    from wakeful.harness import Harness
    from wakeful.harness.ops import Backend

__all__ = ["Place", "register"]

T = TypeVar("T")
JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable output on stdout.")]


class Place:
    """Where a command runs: its backend, and the groups of the ids it names."""

    backend: Backend

    async def groups(self, group_id: str | None) -> list[str]:
        """``group_id``, else the groups a command without ``--group`` covers."""
        raise NotImplementedError

    async def own_group(self) -> str | None:
        """The group a command means without ``--group``: the key's (remotely); locally none."""
        raise NotImplementedError

    async def group_of_agent(self, agent_id: str) -> str:
        raise NotImplementedError

    async def group_of_session(self, session_id: str) -> str:
        raise NotImplementedError

    async def group_of_key(self, key_id: str) -> str | None:
        """The key's group (None: an admin key)."""
        raise NotImplementedError

    async def create_admin_key(self, label: str | None) -> dict[str, Any]:
        raise NotImplementedError

    async def admin_keys(self) -> list[dict[str, Any]]:
        raise NotImplementedError

    async def revoke_admin_key(self, key_id: str) -> None:
        raise NotImplementedError


class LocalPlace(Place):
    """The node's own store, as the operator: every group is in scope."""

    def __init__(self, harness: Harness) -> None:
        from wakeful.harness.ops import OPERATOR, LocalBackend

        self.harness, self.operator = harness, OPERATOR
        self.backend = LocalBackend(harness, OPERATOR)

    async def groups(self, group_id: str | None) -> list[str]:
        return [group_id] if group_id is not None else [g["id"] for g in await every_item(self.backend, "groups.list")]

    async def own_group(self) -> str | None:
        return None

    async def group_of_agent(self, agent_id: str) -> str:
        from wakeful.harness import ops

        return str((await ops.agents.find(self.harness, self.operator, agent_id))["group_id"])

    async def group_of_session(self, session_id: str) -> str:
        from wakeful.harness import ops

        return str((await ops.sessions.find(self.harness, self.operator, session_id))["group_id"])

    async def group_of_key(self, key_id: str) -> str | None:
        from wakeful.harness import ops

        found = (await ops.keys.find(self.harness, self.operator, key_id))["group_id"]
        return None if found is None else str(found)

    async def create_admin_key(self, label: str | None) -> dict[str, Any]:
        from wakeful.harness import ops

        return await ops.keys.create_admin(self.harness, self.operator, label=label)

    async def admin_keys(self) -> list[dict[str, Any]]:
        from wakeful.harness import ops

        return await ops.keys.admin_keys(self.harness, self.operator)

    async def revoke_admin_key(self, key_id: str) -> None:
        from wakeful.harness import ops

        await ops.keys.revoke_admin(self.harness, self.operator, key_id=key_id)


class RemotePlace(Place):
    """A server's API with a key: ids without a group are the key's group's (``GET /v1/info``)."""

    def __init__(self, client: Remote) -> None:
        from wakeful.harness.ops import HttpBackend, SyncCaller

        self.client = client
        self.backend = HttpBackend(SyncCaller(client))

    async def _own(self) -> str:
        return await asyncio.to_thread(self.client.group)

    async def own_group(self) -> str | None:
        return await self._own()

    async def groups(self, group_id: str | None) -> list[str]:
        return [group_id] if group_id is not None else [await self._own()]

    async def group_of_agent(self, agent_id: str) -> str:
        return await self._own()

    async def group_of_session(self, session_id: str) -> str:
        return await self._own()

    async def group_of_key(self, key_id: str) -> str | None:
        return await self._own()

    async def create_admin_key(self, label: str | None) -> dict[str, Any]:
        # the API makes no admin key: its own refusal (invalid_request) is the answer
        return dict(await self.backend.call("keys.create", group_id=await self._own(), role="admin", label=label))

    async def admin_keys(self) -> list[dict[str, Any]]:
        return []

    async def revoke_admin_key(self, key_id: str) -> None:
        raise RemoteError("forbidden", "admin keys are revoked on the node", status=403)


def _act(out: Out, body: Callable[[Place], Awaitable[T]]) -> T:
    """Run ``body`` at the command's place: the server with the key (remote mode), else the local store."""
    if remote.server_url() is not None:
        async def there() -> T:
            return await body(RemotePlace(remote.connect()))

        return remote.call(out, lambda: asyncio.run(there()))
    from wakeful.harness import Harness, StoreUnavailable

    async def local() -> T:
        async with Harness(db_url=store_url()).offline() as harness:
            return await body(LocalPlace(harness))

    try:
        return asyncio.run(local())
    except StoreUnavailable as exc:
        out.fail(Unavailable(exc.message))
    except WakefulError as exc:
        out.fail(exc)


def _show(ctx: typer.Context, json_: bool, body: Callable[[Place], Awaitable[Any]]) -> None:
    from wakeful.cli.output import escape

    out = out_for(ctx, json_)
    value = _act(out, body)
    if out.json:
        out.document(value)
        return
    # issue 19: a list is a table, one record key: value lines, times ISO-8601 (tables.py)
    for line in table_lines(value) if isinstance(value, list) else record_lines(value):
        out.text(escape(line))  # names are data, never markup


# ---- wakeful group …


def group_create(ctx: typer.Context, name: str, json_: JsonOpt = False) -> None:
    """Create a group."""
    _show(ctx, json_, lambda p: p.backend.call("groups.create", name=name))


def group_list(ctx: typer.Context, json_: JsonOpt = False) -> None:
    """List groups."""
    _show(ctx, json_, lambda p: every_item(p.backend, "groups.list"))


# ---- wakeful agent …


def agent_create(ctx: typer.Context, name: str,
                 group: Annotated[str, typer.Option("--group", help="Group id.")], json_: JsonOpt = False) -> None:
    """Create an agent in a group."""
    _show(ctx, json_, lambda p: p.backend.call("agents.create", group_id=group, name=name))


async def _agents(place: Place, group: str | None) -> list[Any]:
    return [a for g in await place.groups(group) for a in await every_item(place.backend, "agents.list", group_id=g)]


def agent_list(ctx: typer.Context, group: Annotated[str | None, typer.Option("--group")] = None,
               json_: JsonOpt = False) -> None:
    """List agents."""
    _show(ctx, json_, lambda p: _agents(p, group))


def _steer_agent(ctx: typer.Context, json_: bool, agent_id: str, op: str) -> None:
    async def body(place: Place) -> Any:
        return await place.backend.call(op, group_id=await place.group_of_agent(agent_id), agent_id=agent_id)

    _show(ctx, json_, body)


def agent_archive(ctx: typer.Context, agent_id: str, json_: JsonOpt = False) -> None:
    """Archive an agent: its active Loops become paused(archive)."""
    _steer_agent(ctx, json_, agent_id, "agents.archive")


def agent_unarchive(ctx: typer.Context, agent_id: str, json_: JsonOpt = False) -> None:
    """Unarchive an agent: its archived Loops are re-admitted within quota, oldest first."""
    _steer_agent(ctx, json_, agent_id, "agents.unarchive")


# ---- wakeful session …


def session_create(ctx: typer.Context, agent: Annotated[str, typer.Option("--agent")],
                   title: Annotated[str, typer.Option("--title")] = "", json_: JsonOpt = False) -> None:
    """Create a session (an inbox) for an agent."""
    async def body(place: Place) -> Any:
        return await place.backend.call("sessions.create", group_id=await place.group_of_agent(agent),
                                        agent_id=agent, title=title)

    _show(ctx, json_, body)


def session_list(ctx: typer.Context, agent: Annotated[str | None, typer.Option("--agent")] = None,
                 json_: JsonOpt = False) -> None:
    """List sessions."""
    async def body(place: Place) -> list[Any]:
        owners = ([(await place.group_of_agent(agent), agent)] if agent else
                  [(str(a["group_id"]), str(a["id"])) for a in await _agents(place, None)])
        return [s for g, a in owners for s in await every_item(place.backend, "sessions.list", group_id=g, agent_id=a)]

    _show(ctx, json_, body)


def session_messages(ctx: typer.Context, session_id: str, json_: JsonOpt = False) -> None:
    """Messages of a session, oldest first."""
    async def body(place: Place) -> list[Any]:
        return await every_item(place.backend, "messages.list", cap=1000,
                           group_id=await place.group_of_session(session_id), session_id=session_id)

    _show(ctx, json_, body)


# ---- wakeful key …


def key_create(ctx: typer.Context, role: Annotated[Literal["admin", "group", "agent"], typer.Option("--role", help="What the key may do.")],
               group: Annotated[str | None, typer.Option("--group")] = None,
               agent: Annotated[str | None, typer.Option("--agent")] = None,
               label: Annotated[str | None, typer.Option("--label")] = None, json_: JsonOpt = False) -> None:
    """Create an API key; its text is printed once."""
    from wakeful.harness.errors import InvalidRequest

    async def body(place: Place) -> Any:
        if role == "admin" and group is None and agent is None:
            return await place.create_admin_key(label)
        where = group or (await place.group_of_agent(agent) if agent else await place.own_group())
        if where is None:
            raise InvalidRequest(f"a {role} key needs a group (--group)", field="group_id")
        return await place.backend.call("keys.create", group_id=where, role=role, agent_id=agent, label=label)

    _show(ctx, json_, body)


def key_list(ctx: typer.Context, group: Annotated[str | None, typer.Option("--group")] = None,
             json_: JsonOpt = False) -> None:
    """List API keys (never their secrets)."""
    async def body(place: Place) -> list[Any]:
        found = [k for g in await place.groups(group) for k in await every_item(place.backend, "keys.list", group_id=g)]
        return (await place.admin_keys() if group is None else []) + found

    _show(ctx, json_, body)


def key_revoke(ctx: typer.Context, key_id: str, json_: JsonOpt = False) -> None:
    """Revoke an API key."""
    async def body(place: Place) -> dict[str, Any]:
        group = await place.group_of_key(key_id)
        if group is None:
            await place.revoke_admin_key(key_id)
        else:
            await place.backend.call("keys.revoke", group_id=group, key_id=key_id)
        return {"key_id": key_id, "revoked": True}

    _show(ctx, json_, body)


def register(group_app: typer.Typer, agent_app: typer.Typer, session_app: typer.Typer, key_app: typer.Typer) -> None:
    """Add these commands to `wakeful group`, `agent`, `session` and `key` (interfaces.md §4.2)."""
    for app, commands in ((group_app, (("create", group_create), ("list", group_list))),
                          (agent_app, (("create", agent_create), ("list", agent_list), ("archive", agent_archive),
                                       ("unarchive", agent_unarchive))),
                          (session_app, (("create", session_create), ("list", session_list),
                                         ("messages", session_messages))),
                          (key_app, (("create", key_create), ("list", key_list), ("revoke", key_revoke)))):
        for name, fn in commands:
            app.command(name)(fn)
