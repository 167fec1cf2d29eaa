"""The operation table: every harness operation a face offers, by dotted name, with the HTTP route that
offers it over the network (interfaces.md §2.2). Faces call operations through a :class:`~.backend.Backend`;
the in-process backend calls ``fn`` and the HTTP backend calls ``method path`` — so an MCP tool or a CLI command
is written once and runs against the local store or a ``--server`` alike.

An operation is ``async fn(harness, principal, **arguments) -> view``: it checks the principal's scope, opens its
own transactions and answers exactly the JSON the HTTP route answers.
"""

from __future__ import annotations

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


@dataclass(frozen=True, slots=True)
class Operation:
    """One operation: ``name`` (``loops.get``), its function, and the HTTP route offering it (its entry in
    ``ops.routes``, the one place a route is written).

    Path parameters are the ``{names}`` of ``path``; of the other arguments, those in ``query`` (all of them for
    GET and DELETE) travel in the query string and the rest in the JSON body. ``status`` is the route's success
    status (204 answers ``None``)."""

    name: str
    fn: OpFn
    route: Route

    @property
    def method(self) -> str:
        return self.route.method

    @property
    def path(self) -> str:
        return self.route.path

    @property
    def query(self) -> tuple[str, ...]:
        return self.route.query

    @property
    def status(self) -> int:
        return self.route.status

    @property
    def read_only(self) -> bool:
        return self.route.method == "GET"

    @property
    def path_params(self) -> tuple[str, ...]:
        return self.route.path_params

    async def __call__(self, harness: Harness, principal: Principal, **arguments: Any) -> Any:
        return await self.fn(harness, principal, **arguments)


OPERATIONS: dict[str, Operation] = {}


def operation(name: str) -> Callable[[F], F]:
    """Register ``fn`` as the operation ``name``, offered at its route in ``ops.routes`` (a name is registered
    once, and only with a route there)."""

    def register(fn: F) -> F:
        if name in OPERATIONS:
            raise ValueError(f"operation {name} is registered twice")
        route = ROUTES.get(name)
        if route is None:  # what a remote client sends is that table alone
            raise ValueError(f"operation {name} has no route: a name that is not its route in "
                             "wakeful.harness.ops.routes cannot register")
        OPERATIONS[name] = Operation(name, fn, route)
        return fn

    return register
