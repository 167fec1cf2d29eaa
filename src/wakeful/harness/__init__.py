"""wakeful.harness: durable Loops for agents — the store, the Loop lifecycle and the embedding API.

Imports vm, build, runtime, sdk, errors and SQLAlchemy; never the faces (cli, api, mcp, bench).
"""

from __future__ import annotations

from wakeful.harness.config import Config, Limits
from wakeful.harness.embed import Harness, WakeMessage
from wakeful.harness.errors import HarnessError, StoreUnavailable

# ops-events (issue 15): the intake's strict JSON reader, for a face that reads an event payload from a file
from wakeful.harness.eventbody import parse_value as parse_event_payload
from wakeful.harness.instruments import Instrument
from wakeful.harness.node import Node
from wakeful.harness.registry import Tool, ToolContext
from wakeful.harness.store import Store, Tx
from wakeful.harness.tools import LoopTools

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
