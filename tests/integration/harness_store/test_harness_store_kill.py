"""harness.md §3 atomicity under a crash: a process killed (SIGKILL) inside a write transaction leaves nothing
half-written, what it committed before survives, the store opens again, and on SQLite the node lock is free."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from wakeful.harness.store import Store, groups

pytestmark = pytest.mark.integration
SRC = Path(__file__).resolve().parents[3] / "src"

CHILD = """
import asyncio, sys
from wakeful.harness.store import Store, groups

async def main(url):
    store = await Store.open(url, node_lock=True)
    async with store.tx() as tx:
        await groups.create_group(tx, name="committed")
    async with store.tx() as tx:
        for n in range(50):
            await groups.create_group(tx, name=f"half-{n}")
        print("inside", flush=True)
        await asyncio.sleep(120)

asyncio.run(main(sys.argv[1]))
"""


async def test_kill_inside_a_transaction(store_url: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, store_url],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert child.stdout is not None
        line = child.stdout.readline()
    finally:
        child.send_signal(signal.SIGKILL)
        _, err = child.communicate(timeout=30)
    assert line.strip() == "inside", err
    assert child.returncode == -signal.SIGKILL
    store = await Store.open(store_url, node_lock=True)  # SQLite: the dead node's lock is gone with it
    try:
        async with store.tx() as tx:
            names = [g.name for g in await groups.list_groups(tx)]
            await groups.create_group(tx, name="after")  # and the store takes writes again
    finally:
        await store.close()
    assert names == ["committed"]
