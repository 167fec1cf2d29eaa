"""The single node on SQLite (harness.md §19: "with SQLite there is one node and every rule still runs,
trivially"): its ``node`` row and heartbeat, so ``GET /v1/nodes`` and ``wakeful status`` show it. No leases:
the ``<db>.node`` lock file already guarantees that no other node runs on the file.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
from typing import TYPE_CHECKING

from wakeful.harness.errors import StoreUnavailable
from wakeful.harness.placement import nodes

if TYPE_CHECKING:
    from wakeful.harness.node import Node

__all__ = ["SoloNode"]

log = logging.getLogger("wakeful.placement")


class SoloNode:
    """``start`` registers the row (alive), ``heartbeat`` refreshes it with the objects gauge, ``stop`` marks it
    gone. Store failures are logged, never raised: the row is informational on SQLite."""

    def __init__(self, node: Node) -> None:
        self.node = node
        self.name = node.config.node_name or socket.gethostname()

    async def start(self) -> None:
        from wakeful import __version__

        try:
            async with self.node.store.tx() as tx:
                await nodes.register(tx, node_id=self.node.node_id, name=self.name, host=socket.gethostname(),
                                     pid=os.getpid(), version=__version__, capacity=self.node.config.max_objects)
        except StoreUnavailable as exc:
            log.warning("node row not registered: %s", exc.message)

    async def heartbeat(self) -> None:
        try:
            async with self.node.store.tx() as tx:
                await nodes.heartbeat(tx, self.node.node_id, objects=self.node.resident_count)
        except StoreUnavailable as exc:
            log.warning("heartbeat failed: %s", exc.message)

    async def stop(self) -> None:
        with contextlib.suppress(StoreUnavailable):
            async with self.node.store.tx() as tx:
                await nodes.set_state(tx, self.node.node_id, "gone")
