"""One command body, local or remote: the harness operations (``wakeful.harness.ops``) through a ``Backend``.

Local mode: the configured store, offline (``Harness.offline``: nothing runs here; the node running on the store
acts on what is written), as the operator — who names a Loop by id alone, so ``group`` is ``None``. Remote mode
(``--server``): the HTTP API with the key (``HttpBackend`` over the CLI's ``Remote``); ``group`` is the key's.
Typed errors exit 1 (``unavailable``: 3), as every command of interfaces.md §4.2.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar
from urllib.parse import unquote

from wakeful.cli import remote
from wakeful.cli.db_cmd import store_url
from wakeful.cli.output import Out, Unavailable
from wakeful.errors import WakefulError

if TYPE_CHECKING:
    from wakeful.harness.ops import Backend

__all__ = ["run"]

T = TypeVar("T")


def run(out: Out, body: Callable[[Backend, str | None], Awaitable[T]]) -> T:
    """``body(backend, group)`` in this command's mode; its typed errors end the command with their exit code."""
    if remote.server_url() is None:
        return _local(out, body)
    return remote.call(out, lambda: _remote(body))


def _local(out: Out, body: Callable[[Backend, str | None], Awaitable[T]]) -> T:
    from wakeful.harness import Harness
    from wakeful.harness.config import load_config
    from wakeful.harness.errors import StoreUnavailable
    from wakeful.harness.ops import OPERATOR, LocalBackend

    async def go() -> T:
        harness = Harness(load_config(), db_url=store_url())
        async with harness.offline():
            return await body(LocalBackend(harness, OPERATOR), None)

    try:
        return asyncio.run(go())
    except StoreUnavailable as exc:
        out.fail(Unavailable(exc.message))
    except WakefulError as exc:
        out.fail(exc)


def _remote(body: Callable[[Backend, str | None], Awaitable[T]]) -> T:
    from wakeful.harness.ops import HttpBackend, SyncCaller

    api = remote.connect()
    group = unquote(api.group())  # the key's group, as the server names it (HttpBackend encodes path segments)

    async def go() -> T:
        return await body(HttpBackend(SyncCaller(api)), group)

    return asyncio.run(go())
