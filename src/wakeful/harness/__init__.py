"""wakeful.harness: durable Loops for agents — the store, the Loop lifecycle and the embedding API.

Imports vm, build, runtime, sdk, errors and SQLAlchemy; never the faces (cli, api, mcp, bench).

The names below load when first read (PEP 562): importing a light module of the harness (``errors``, the
operation routes a remote client sends) does not load the store and SQLAlchemy (docs/decisions-cli-start.md).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from wakeful.harness.config import Config, Limits
    from wakeful.harness.embed import Harness, WakeMessage
    from wakeful.harness.errors import HarnessError, StoreUnavailable
    from wakeful.harness.eventbody import parse_value as parse_event_payload
    from wakeful.harness.instruments import Instrument
    from wakeful.harness.node import Node
    from wakeful.harness.registry import Tool, ToolContext
    from wakeful.harness.store import Store, Tx
    from wakeful.harness.tools import LoopTools

# name → (module, attribute); ops-events (issue 15): parse_event_payload is the intake's strict JSON reader, for a
# face that reads an event payload from a file
_LAZY = {
    "Config": ("wakeful.harness.config", "Config"),
    "Limits": ("wakeful.harness.config", "Limits"),
    "Harness": ("wakeful.harness.embed", "Harness"),
    "WakeMessage": ("wakeful.harness.embed", "WakeMessage"),
    "HarnessError": ("wakeful.harness.errors", "HarnessError"),
    "StoreUnavailable": ("wakeful.harness.errors", "StoreUnavailable"),
    "parse_event_payload": ("wakeful.harness.eventbody", "parse_value"),
    "Instrument": ("wakeful.harness.instruments", "Instrument"),
    "Node": ("wakeful.harness.node", "Node"),
    "Tool": ("wakeful.harness.registry", "Tool"),
    "ToolContext": ("wakeful.harness.registry", "ToolContext"),
    "Store": ("wakeful.harness.store", "Store"),
    "Tx": ("wakeful.harness.store", "Tx"),
    "LoopTools": ("wakeful.harness.tools", "LoopTools"),
}

__all__ = [
    "Config",
    "HarnessError",
    "Instrument",
    "Harness",
    "Limits",
    "LoopTools",
    "Node",
    "Store",
    "StoreUnavailable",
    "ToolContext",
    "Tool",
    "Tx",
    "WakeMessage",
    "parse_event_payload",
]


def __getattr__(name: str) -> Any:
    found = _LAZY.get(name)
    if found is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(found[0]), found[1])
    globals()[name] = value  # read once
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
