"""wakeful.harness.ops: the harness operations every face calls — one module per resource, each operation
``(harness, principal, **arguments) → view`` owning its transactions and its authorisation.

Faces (``api``, ``mcp``, ``cli``, the dashboard) parse, authenticate, call one operation through a
:class:`Backend` and render; they never open a transaction or import ``wakeful.harness.store``.
"""

from __future__ import annotations

from wakeful.harness.ops import (
    agents,
    artifacts,
    builds,
    events,
    groups,
    keys,
    local,
    loops,
    messages,
    nodes,
    scope,
    scripts,
    sessions,
    store_admin,
    webhooks,
)
from wakeful.harness.ops.backend import ApiCaller, Backend, HttpBackend, LocalBackend, Refused, SyncCaller
from wakeful.harness.ops.pages import decode_cursor, encode_cursor, page
from wakeful.harness.ops.scope import agent_in_scope, loop_in_scope
from wakeful.harness.ops.store_checks import STORE_CHECKS, check_store, clock_check
from wakeful.harness.ops.table import OPERATIONS, Operation, operation
from wakeful.harness.principal import OPERATOR, Principal

__all__ = [
    "OPERATIONS",
    "OPERATOR",
    "STORE_CHECKS",
    "ApiCaller",
    "Backend",
    "HttpBackend",
    "LocalBackend",
    "Operation",
    "Principal",
    "Refused",
    "SyncCaller",
    "agent_in_scope",
    "agents",
    "artifacts",
    "builds",
    "check_store",
    "clock_check",
    "decode_cursor",
    "encode_cursor",
    "events",
    "groups",
    "keys",
    "local",
    "loop_in_scope",
    "loops",
    "messages",
    "nodes",
    "operation",
    "page",
    "scope",
    "scripts",
    "sessions",
    "store_admin",
    "webhooks",
]
