"""issue 16: one malloc arena for the whole process (runtime/scheduler.py ``one_malloc_arena``), counted with glibc's
own ``malloc_stats`` in a fresh interpreter (a process keeps the arenas its threads made)."""

from __future__ import annotations

import ctypes
import subprocess
import sys

import pytest

_PROBE = """
import ctypes, sys, threading
if sys.argv[1] == "one":
    from wakeful.runtime.scheduler import one_malloc_arena
    assert one_malloc_arena()
barrier = threading.Barrier(4)
def work():
    barrier.wait()  # four threads alive and allocating at once
    keep = [bytearray(3000) for _ in range(200)]
    barrier.wait()
threads = [threading.Thread(target=work) for _ in range(4)]
for t in threads: t.start()
for t in threads: t.join()
ctypes.CDLL(None).malloc_stats()
"""


def _arenas(mode: str) -> int:
    out = subprocess.run([sys.executable, "-c", _PROBE, mode], capture_output=True, text=True, check=True, timeout=60)
    return sum(1 for line in out.stderr.splitlines() if line.startswith("Arena "))


@pytest.mark.skipif(not hasattr(ctypes.CDLL(None), "malloc_stats"), reason="glibc only")
def test_threads_share_the_main_arena() -> None:
    assert _arenas("default") > 1  # the probe does make per-thread arenas without the limit
    assert _arenas("one") == 1


_NODE = """
import asyncio, ctypes, sys, tempfile
from pathlib import Path
from wakeful.harness.config import Config
from wakeful.harness.embed import Harness
async def main():
    h = Harness(Config(data_dir=Path(tempfile.mkdtemp())), sweeps=False)
    await h.start()
    group = await h.create_group("g")
    await h.create_agent(group.id, "a")  # rows through the store's thread
    await h.stop()
asyncio.run(main())
ctypes.CDLL(None).malloc_stats()
"""


@pytest.mark.skipif(not hasattr(ctypes.CDLL(None), "malloc_stats"), reason="glibc only")
def test_a_node_on_sqlite_allocates_from_one_arena() -> None:
    out = subprocess.run([sys.executable, "-c", _NODE], capture_output=True, text=True, check=True, timeout=120)
    assert sum(1 for line in out.stderr.splitlines() if line.startswith("Arena ")) == 1
