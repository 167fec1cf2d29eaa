"""wakeful.harness: durable Loops for agents — the store, the Loop lifecycle and the embedding API.

Imports vm, build, runtime, sdk, errors and SQLAlchemy; never the faces (cli, api, mcp, bench).
"""

from __future__ import annotations

from wakeful.harness.errors import HarnessError, StoreUnavailable
from wakeful.harness.store import Store, Tx

__all__ = ["HarnessError", "Store", "StoreUnavailable", "Tx"]
