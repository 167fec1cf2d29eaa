"""A real node for test_cluster_frozen_session.py: ``python frozen_node.py URL HOME LOOP_ID`` runs an embedded
node (PostgreSQL, background sweeps, the cluster test periods) until it runs the Loop, then opens a transaction
on its own pool, locks the Loop's row, prints ``LOCKED`` and stays in that transaction — where the test freezes
the process with SIGSTOP."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from cluster_nodes import LIMITS, PLACEMENT

from wakeful.harness.config import Config
from wakeful.harness.embed import Harness
from wakeful.harness.store import loops


async def main(url: str, home: str, loop_id: str) -> None:
    config = Config(data_dir=Path(home), store_url=url, placement=PLACEMENT, limits=LIMITS, node_name="frozen")
    h = Harness(config)
    await h.start()
    while h.node.resident(loop_id) is None:
        await asyncio.sleep(0.05)
    print(f"NODE {h.node.node_id}", flush=True)
    async with h.store.tx() as tx:  # the node's own pool session, idle in a transaction holding the row lock
        await loops.get_loop(tx, loop_id, for_update=True)
        print("LOCKED", flush=True)
        await asyncio.sleep(3600)


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
