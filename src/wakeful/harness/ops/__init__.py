"""wakeful.harness.ops: the harness operations every face calls — one module per resource, each operation
``(harness, principal, **arguments) → view`` owning its transactions and its authorisation.

Faces (``api``, ``mcp``, ``cli``, the dashboard) parse, authenticate, call one operation through a
:class:`Backend` and render; they never open a transaction or import ``wakeful.harness.store``.

The names below load when first read (PEP 562): a remote client (``HttpBackend``) needs the routes alone
(``routes``), not the operations and the store behind them (docs/decisions-cli-start.md). Reading
``OPERATIONS`` registers every operation first.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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

# the modules that register operations (importing one registers its operations in table.OPERATIONS)
OPERATION_MODULES = ("agents", "artifacts", "builds", "events", "groups", "keys", "loops", "messages", "nodes",
                     "scripts", "sessions", "webhooks")
_SUBMODULES = frozenset({*OPERATION_MODULES, "local", "scope", "store_admin"})
_LAZY = {
    **{name: "wakeful.harness.ops.backend" for name in
       ("ApiCaller", "Backend", "HttpBackend", "LocalBackend", "Refused", "SyncCaller")},
    **{name: "wakeful.harness.ops.pages" for name in ("decode_cursor", "encode_cursor", "page")},
    **{name: "wakeful.harness.ops.scope" for name in ("agent_in_scope", "loop_in_scope")},
    **{name: "wakeful.harness.ops.store_checks" for name in ("STORE_CHECKS", "check_store", "clock_check")},
    **{name: "wakeful.harness.ops.table" for name in ("Operation", "operation")},
    **{name: "wakeful.harness.principal" for name in ("OPERATOR", "Principal")},
}

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
    "register_all",
    "scope",
    "scripts",
    "sessions",
    "store_admin",
    "webhooks",
]


def register_all() -> None:
    """Import every operation module, so ``table.OPERATIONS`` holds every operation."""
    for name in OPERATION_MODULES:
        importlib.import_module(f"{__name__}.{name}")


def __getattr__(name: str) -> Any:
    if name == "OPERATIONS":
        register_all()
        from wakeful.harness.ops.table import OPERATIONS

        value: Any = OPERATIONS
    elif name in _SUBMODULES:
        value = importlib.import_module(f"{__name__}.{name}")
    elif name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value  # read once
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
