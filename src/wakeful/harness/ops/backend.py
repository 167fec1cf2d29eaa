"""The one way a face reaches the harness: ``await backend.call("loops.get", group_id=…, loop_id=…)``.

:class:`LocalBackend` runs the operation in process with the caller's principal; :class:`HttpBackend` sends
the operation's HTTP request to a running node, whose key decides the principal. Both answer the same JSON and
raise the same typed errors (an HTTP refusal becomes a :class:`Refused` carrying the server's code and details).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import quote

from wakeful.harness.errors import HarnessError, InvalidRequest
from wakeful.harness.ops.routes import route_named
from wakeful.harness.ops.table import OPERATIONS, Operation

if TYPE_CHECKING:
    from wakeful.harness.embed import Harness
    from wakeful.harness.principal import Principal

__all__ = ["ApiCaller", "Backend", "HttpBackend", "LocalBackend", "Refused", "SyncCaller", "operation_named"]


class Refused(HarnessError):
    """A refusal answered by a remote node: its ``{error, message, …details}`` body."""

    def __init__(self, code: str, message: str, *, status: int = 0, **details: Any) -> None:
        super().__init__(message, **details)
        self.code = code
        self.status = status


class Backend(Protocol):
    """What a face holds: one call per operation."""

    async def call(self, name: str, /, **arguments: Any) -> Any: ...


class ApiCaller(Protocol):
    """An HTTP client of the node's API (the CLI's ``Remote``, the MCP thin client)."""

    async def request(self, method: str, path: str, *, json: Any = None,
                      params: Mapping[str, Any] | None = None) -> Any: ...


def operation_named(name: str) -> Operation:
    from wakeful.harness.ops import register_all

    register_all()

    found = OPERATIONS.get(name)
    if found is None:
        raise KeyError(f"no operation named {name}")
    return found


class LocalBackend:
    """Operations in process, on ``harness``, as ``principal``."""

    def __init__(self, harness: Harness, principal: Principal) -> None:
        self.harness = harness
        self.principal = principal

    async def call(self, name: str, /, **arguments: Any) -> Any:
        return await operation_named(name)(self.harness, self.principal, **arguments)


class HttpBackend:
    """Operations over the HTTP API of a running node (the caller's key decides the principal)."""

    def __init__(self, api: ApiCaller) -> None:
        self.api = api

    async def call(self, name: str, /, **arguments: Any) -> Any:
        op = route_named(name)  # the route alone: a remote client never loads the operations (and the store)
        path = op.path
        for param in op.path_params:
            value = arguments.pop(param, None)
            if not isinstance(value, str) or value in ("", ".", ".."):
                raise InvalidRequest(f"{name} needs {param}", field=param)
            path = path.replace("{" + param + "}", quote(value[:256], safe=""))
        sent = {k: v for k, v in arguments.items() if v is not None}
        if op.method in ("GET", "DELETE"):
            return await self.api.request(op.method, path, params=sent)
        params = {k: sent.pop(k) for k in op.query if k in sent}
        return await self.api.request(op.method, path, json=sent, params=params or None)


class SyncCaller:
    """An :class:`ApiCaller` over a blocking client with ``request(method, path, json=, params=)`` (run in a
    worker thread so the event loop keeps turning)."""

    def __init__(self, client: Any) -> None:
        self.client = client

    async def request(self, method: str, path: str, *, json: Any = None,
                      params: Mapping[str, Any] | None = None) -> Any:
        return await asyncio.to_thread(self.client.request, method, path, json=json,
                                       params=dict(params) if params else None)
