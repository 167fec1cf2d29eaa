"""A node's id kept across restarts in its data directory, so a restarted node reclaims its own leases at once.

issue 16 / benchmarks.md §2.2: after kill -9 a node came back under a new id and waited for its old leases to
expire (TTL) before anyone, itself included, could run those Loops again. ``<data_dir>/node.id`` holds the id;
the file is locked (``flock``) for as long as the node runs, so only one live process ever uses an id:

* the lock is free → the previous holder of the id is dead (the kernel drops a killed process's locks), and the
  id is reused: ``Placement.start`` then takes over the leases still held under it at a new epoch.
* the lock is held (a second node started on the same data directory) → that node runs under a fresh id that is
  not written down, exactly as before this file existed.
* the file names another host (a data directory copied to another machine or baked into an image) → a fresh id,
  written down for next time: a copied directory never makes two hosts one node.

harness.md §1 says ids are never reused; a node id is the one exception, and only by the same node (same data
directory, same host) after its previous process has ended: it names the node, not one run of it.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import socket
from pathlib import Path

from wakeful.harness.store.ids import is_id, new_id

__all__ = ["NodeIdentity"]

log = logging.getLogger("wakeful.placement")

FILE_NAME = "node.id"


class NodeIdentity:
    """``NodeIdentity.take(data_dir)`` → the id to run under (``node_id``); ``release()`` at stop."""

    def __init__(self, node_id: str, fd: int | None, path: Path) -> None:
        self.node_id = node_id
        self.path = path
        self._fd = fd
        self.reused = False  # the id came from the file (a restart of the same node)

    @property
    def kept(self) -> bool:
        """True while this process holds the file, i.e. the id is the data directory's own."""
        return self._fd is not None

    @classmethod
    def take(cls, data_dir: Path) -> NodeIdentity:
        path = Path(data_dir) / FILE_NAME
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:  # an unwritable data directory: run under a fresh id as before
            log.warning("node id file %s not usable (%s): using a fresh id", path, exc)
            return cls(new_id("node"), None, path)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return cls(new_id("node"), None, path)  # another live node runs on this data directory
        host = socket.gethostname()
        known = _parse(os.read(fd, 4096).decode("utf-8", "replace"), host)
        identity = cls(known or new_id("node"), fd, path)
        identity.reused = known is not None
        if known is None:
            os.lseek(fd, 0, os.SEEK_SET)
            os.ftruncate(fd, 0)
            os.write(fd, f"{identity.node_id} {host}\n".encode())
            os.fsync(fd)
        return identity

    def release(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


def _parse(text: str, host: str) -> str | None:
    """The id written by a node on this host, or None (empty, malformed, or another host's)."""
    parts = text.split()
    if len(parts) != 2 or parts[1] != host:
        return None
    return parts[0] if is_id(parts[0], "node") else None
