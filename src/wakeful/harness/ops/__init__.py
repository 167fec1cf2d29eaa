"""wakeful.harness.ops: the harness operations every face calls — one module per resource, each operation
``(harness, principal, **arguments) → view`` owning its transactions and its authorisation.

Faces (``api``, ``mcp``, ``cli``, the dashboard) parse, authenticate, call one operation through a
:class:`Backend` and render; they never open a transaction or import ``wakeful.harness.store``.
"""

from __future__ import annotations

from wakeful.harness.ops import agents, groups, keys, loops, messages, sessions
from wakeful.harness.ops.backend import ApiCaller, Backend, HttpBackend, LocalBackend, Refused, SyncCaller
from wakeful.harness.ops.table import OPERATIONS, Operation, operation
from wakeful.harness.principal import OPERATOR, Principal

__all__ = [
    "OPERATIONS",
    "OPERATOR",
    "ApiCaller",
    "Backend",
    "HttpBackend",
    "LocalBackend",
    "Operation",
    "Principal",
    "Refused",
    "SyncCaller",
    "agents",
    "groups",
    "keys",
    "loops",
    "messages",
    "operation",
    "sessions",
]
