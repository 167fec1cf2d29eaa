"""``<data>/node.json``: where a running node of a data directory listens (issue 19, docs/decisions-cli-store.md).

``wakeful serve`` writes it once it listens and removes it at a clean stop; the CLI reads it to find the node
(and the store it opened), ``doctor`` to report the node whatever its port. A file left by a killed node names a
pid that no longer runs and is ignored.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any

__all__ = ["FILE", "live_node", "remove", "write"]

FILE = "node.json"
MAX_READ = 64 << 10  # bytes: the file is a few hundred; a larger one is not ours


def write(data_dir: Path, *, url: str, store_url: str, node_name: str, reconcile_s: float | None = None) -> Path:
    """Record this process as the node of ``data_dir`` (mode 0600: the store URL may carry a password), with
    its reconcile period (a local ``loop create`` says how long until the node adopts the Loop)."""
    path = data_dir / FILE
    record: dict[str, Any] = {"url": url, "pid": os.getpid(), "data_dir": str(data_dir), "store_url": store_url,
                              "node_name": node_name}
    if reconcile_s is not None:
        record["reconcile_s"] = reconcile_s
    tmp = path.with_name(f".{FILE}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(record, f, indent=2)
        f.write("\n")
    tmp.replace(path)
    return path


def remove(data_dir: Path) -> None:
    """At a clean stop: remove the file if it still names this process (a newer node's file is left alone)."""
    found = _read(data_dir / FILE)
    if found is not None and found.get("pid") == os.getpid():
        with contextlib.suppress(OSError):
            (data_dir / FILE).unlink()


def live_node(data_dir: Path) -> dict[str, Any] | None:
    """The record of the node running on ``data_dir``, or ``None`` (no file, a malformed one, or a dead pid)."""
    found = _read(data_dir / FILE)
    if found is None or not isinstance(found.get("pid"), int) or not isinstance(found.get("url"), str):
        return None
    if not _alive(found["pid"]):
        return None
    return found


def _alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process holds the pid: it runs
    except OSError:
        return False
    return True


def _read(path: Path) -> dict[str, Any] | None:
    try:
        with path.open("rb") as f:
            value = json.loads(f.read(MAX_READ))
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None
