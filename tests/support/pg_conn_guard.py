"""Counts this process's open TCP connections to the test PostgreSQL (from ``/proc``), so control tests can
prove they close every store, pool and engine they open: the shared server has a finite ``max_connections``.

``no_leaked_pg_connections`` is an autouse fixture (import it into a directory's ``conftest.py``): it fails a test
that leaves more connections open than it found (after a garbage collection, so only connections still
referenced or never closed count).
"""

from __future__ import annotations

import gc
import os
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from support.harness_fixtures import PG_URL

_ESTABLISHED = "01"


def _pg_port() -> int:
    return urlsplit(PG_URL).port or 5432


def _socket_inodes(pid: int | str = "self") -> set[str]:
    inodes = set()
    fd_dir = Path(f"/proc/{pid}/fd")
    for fd in os.listdir(fd_dir):
        try:
            target = os.readlink(fd_dir / fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    return inodes


def open_pg_connections(pid: int | str = "self") -> int:
    """How many established TCP connections of process ``pid`` go to the test PostgreSQL's port."""
    port = f"{_pg_port():04X}"
    mine = _socket_inodes(pid)
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            cols = line.split()
            remote, state, inode = cols[2], cols[3], cols[9]
            if state == _ESTABLISHED and remote.rsplit(":", 1)[1] == port and inode in mine:
                count += 1
    return count


def settled_pg_connections(target: int = 0, timeout_s: float = 2.0) -> int:
    """The count once closing connections have gone, down to ``target`` (a closed socket may linger a moment)."""
    deadline = time.monotonic() + timeout_s
    collected = False
    while True:
        count = open_pg_connections()
        if count <= target or time.monotonic() >= deadline:
            return count
        if not collected:  # once: a full collection of a large suite's heap costs seconds
            gc.collect()
            collected = True
        time.sleep(0.05)


@pytest.fixture(autouse=True)
def no_leaked_pg_connections() -> Iterator[None]:
    before = open_pg_connections()
    yield
    after = settled_pg_connections(before)
    assert after <= before, f"the test left {after - before} PostgreSQL connection(s) open (before {before})"
