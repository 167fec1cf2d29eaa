"""One code path per command over the harness operations (issue 15): a command body gets a :class:`Site` — the
:class:`~wakeful.harness.ops.Backend` it calls and the group its operations name — and runs the same way in both
modes of interfaces.md §4.1:

- local mode: the operations run in this process as the operator (``LocalBackend(harness, OPERATOR)``) on a
  ``Harness.offline`` of the configured store (no Loop runs here; a node on the store adopts what is written);
- remote mode (``--server``): over the HTTP API with the key (``HttpBackend(SyncCaller(remote))``).

The operator names a Loop or an agent without its group: locally the group is read from the store, remotely it
is the key's group (an admin key names none: the agent's group, found through ``X-Wakeful-Agent``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import unquote

from wakeful.cli import remote
from wakeful.cli.output import Out, Unavailable
from wakeful.errors import WakefulError

if TYPE_CHECKING:
    from wakeful.cli.remote import Remote
    from wakeful.harness import Harness
    from wakeful.harness.ops import Backend

__all__ = ["Site", "every_item", "loop_lines", "run", "run_plain", "shown_loop"]

T = TypeVar("T")


@dataclass
class Site:
    """Where one command runs: ``backend`` for its operations, ``harness`` (local) or ``server`` (remote)."""

    backend: Backend
    harness: Harness | None = None
    server: Remote | None = None

    @property
    def local(self) -> bool:
        return self.harness is not None

    async def group(self, *, loop: str | None = None, agent: str | None = None) -> str:
        """The group whose routes name this Loop or agent (locally ``""`` when there is none: the operation then
        answers its own refusal — ``not_found``, or an ``invalid_request`` it checks first)."""
        if self.harness is not None:
            return await self.harness.group_of(loop_id=loop, agent_id=agent) or ""
        assert self.server is not None
        if loop is not None:
            remote.segment(loop, "Loop")  # "", "." or ".." is a usage error (exit 2), never a path
        server = self.server
        # the key's group as the server names it: HttpBackend encodes path segments itself
        return unquote(await asyncio.to_thread(lambda: server.group(agent=agent)))

    async def groups(self, *, agent: str | None = None) -> list[str]:
        """The groups a listing covers: the agent's, else every group (locally) or the key's (remotely)."""
        if self.harness is None:
            return [await self.group(agent=agent)]
        if agent is None:
            return await self.harness.group_ids()
        group = await self.harness.group_of(agent_id=agent)
        return [] if group is None else [group]  # an unknown agent has no Loops, as a key's listing answers


async def every_item(backend: Backend, name: str, *, cap: int = 10_000, **arguments: Any) -> list[Any]:
    """Every item of a paged operation (``{items, next_cursor}``), following cursors up to ``cap`` items; a page
    that is not one, or names itself (or pages without end) as the next, is ``invalid_response`` (a server's
    answer, never the store's)."""
    items: list[Any] = []
    cursor: str | None = None
    for _ in range(remote.MAX_PAGES):
        page = await backend.call(name, **arguments, limit=200, cursor=cursor)
        if not isinstance(page, dict) or not isinstance(page.get("items"), list):
            raise remote.RemoteError("invalid_response", f"{name} did not answer a page", status=200)
        items.extend(page["items"])
        following = page.get("next_cursor")
        if not following or len(items) >= cap:
            return items[:cap]
        if not isinstance(following, str) or following == cursor:
            raise remote.RemoteError("invalid_response", f"{name} answered a page naming itself or no cursor as "
                                     "the next", status=200)
        cursor = following
    raise remote.RemoteError("invalid_response", f"{name} named more than {remote.MAX_PAGES} pages", status=200)


def run(out: Out, body: Callable[[Site], Awaitable[T]]) -> T:
    """Run ``body`` at the local store or the server; typed errors exit with their code (unavailable: 3)."""
    if remote.server_url() is not None:
        return remote.call(out, lambda: asyncio.run(_remote(body)))
    from wakeful.harness.errors import StoreUnavailable

    try:
        return asyncio.run(_local(body))
    except StoreUnavailable as exc:
        out.fail(Unavailable(exc.message))
    except WakefulError as exc:
        out.fail(exc)


def run_plain(out: Out, body: Callable[[Backend, str | None], Awaitable[T]]) -> T:
    """``run`` for a body that needs only ``(backend, group)``: the key's group remotely; locally ``None`` (the
    operator names a Loop by its id alone and the operation finds its group)."""

    async def with_site(site: Site) -> T:
        return await body(site.backend, None if site.local else await site.group())

    return run(out, with_site)


async def _local(body: Callable[[Site], Awaitable[T]]) -> T:
    from wakeful.cli.db_cmd import store_url
    from wakeful.harness import Harness
    from wakeful.harness.config import load_config
    from wakeful.harness.ops import OPERATOR, LocalBackend

    harness = Harness(load_config(), db_url=store_url())
    async with harness.offline():
        return await body(Site(LocalBackend(harness, OPERATOR), harness=harness))


async def _remote(body: Callable[[Site], Awaitable[T]]) -> T:
    from wakeful.harness.ops import HttpBackend, SyncCaller

    server = remote.connect()
    return await body(Site(HttpBackend(SyncCaller(server)), server=server))


def shown_loop(view: dict[str, Any]) -> dict[str, Any]:
    """The Loop object as the CLI prints it in both modes: ``runtime`` is the state word (``resident``,
    ``loading``, …) and the API's runtime object is ``runtime_detail``."""
    runtime = view.get("runtime")
    if not isinstance(runtime, dict):
        return view
    return {**view, "runtime": runtime.get("state"), "runtime_detail": runtime}


def loop_lines(view: dict[str, Any]) -> list[str]:
    from wakeful.cli.tables import cell

    keys = ("id", "name", "state", "pause_reason", "failure", "exit_code", "incarnation", "agent_id",
            "session_id", "artifact_sha256", "pending_count", "runtime", "created_ms", "updated_ms")
    return [f"{k}: {cell(k, view.get(k))}" for k in keys]
