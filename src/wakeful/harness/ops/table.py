"""The operation table: every harness operation a face offers, by dotted name, with the HTTP route that
offers it over the network (interfaces.md §2.2). Faces call operations through a :class:`~.backend.Backend`;
the in-process backend calls ``fn`` and the HTTP backend calls ``method path`` — so an MCP tool or a CLI command
is written once and runs against the local store or a ``--server`` alike.

An operation is ``async fn(harness, principal, **arguments) -> view``: it checks the principal's scope, opens its
own transactions and answers exactly the JSON the HTTP route answers.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from wakeful.harness.ops.routes import ROUTES, Route

if TYPE_CHECKING:
    from wakeful.harness.embed import Harness
    from wakeful.harness.principal import Principal

__all__ = ["OPERATIONS", "Operation", "operation"]

OpFn = Callable[..., Awaitable[Any]]
F = TypeVar("F", bound=OpFn)
_PATH_PARAM = re.compile(r"\{([a-z_][a-z0-9_]*)\}")


@dataclass(frozen=True, slots=True)
class Operation:
    """One operation: ``name`` (``loops.get``), its function, and the HTTP route offering it.

    Path parameters are the ``{names}`` of ``path``; of the other arguments, those in ``query`` (all of them for
    GET and DELETE) travel in the query string and the rest in the JSON body. ``status`` is the route's success
    status (204 answers ``None``)."""

    name: str
    fn: OpFn
    method: str
    path: str
    query: tuple[str, ...] = ()
    status: int = 200
    read_only: bool = False

    @property
    def path_params(self) -> tuple[str, ...]:
        return tuple(_PATH_PARAM.findall(self.path))

    async def __call__(self, harness: Harness, principal: Principal, **arguments: Any) -> Any:
        return await self.fn(harness, principal, **arguments)


OPERATIONS: dict[str, Operation] = {}


def operation(name: str, method: str, path: str, *, query: tuple[str, ...] = (), status: int = 200) -> Callable[[F], F]:
    """Register ``fn`` as the operation ``name`` offered at ``method path`` (a name is registered once)."""

    def register(fn: F) -> F:
        if name in OPERATIONS:
            raise ValueError(f"operation {name} is registered twice")
        if ROUTES.get(name) != Route(name, method, path, query, status):  # what a remote client sends
            raise ValueError(f"operation {name}: {method} {path} is not its route in wakeful.harness.ops.routes")
        OPERATIONS[name] = Operation(name, fn, method, path, query, status, read_only=method == "GET")
        return fn

    return register
