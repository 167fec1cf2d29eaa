"""The routes a remote client sends (``wakeful.harness.ops.routes``, data alone) are exactly those the operations
register: the operation table refuses a registration whose route is not the table's, and every route has its
operation (docs/decisions-cli-start.md)."""

from __future__ import annotations

import pytest

import wakeful.control  # noqa: F401 - registers the control plane's operations too
from wakeful.harness.ops import OPERATIONS
from wakeful.harness.ops.routes import ROUTES, Route, route_named
from wakeful.harness.ops.table import operation


def test_every_route_is_a_registered_operation_and_back() -> None:
    registered = {op.name: Route(op.name, op.method, op.path, op.query, op.status) for op in OPERATIONS.values()}
    assert registered == ROUTES


def test_a_route_not_in_the_table_is_refused_at_registration() -> None:
    async def probe() -> None:
        return None

    with pytest.raises(ValueError, match="is not its route"):
        operation("probe.unlisted")(probe)
    assert "probe.unlisted" not in OPERATIONS


def test_an_unknown_route_is_a_key_error() -> None:
    assert route_named("loops.list").path_params == ("group_id",)
    with pytest.raises(KeyError, match="no operation named"):
        route_named("loops.nope")
