"""Artifacts re-read and hash-checked on every load: the node's file cache first, the database second.

harness.md §8 (and §2.4 for the cache path ``<data>/artifacts/<sha256>.elf``).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from wakeful.errors import WakefulError
from wakeful.harness.store import artifacts
from wakeful.harness.store.core import Store

__all__ = ["ArtifactProblem", "read_verified"]


class ArtifactProblem(WakefulError):
    """§4.2 row 9: ``failure`` is ``artifact_missing`` or ``artifact_changed``; ``detail`` says what was found."""

    def __init__(self, failure: str, detail: str) -> None:
        super().__init__(f"{failure}: {detail}")
        self.failure = failure
        self.detail = detail


# §8: every load re-reads and re-hashes; a bad cache file is deleted and re-read from the database
async def read_verified(store: Store, cache_dir: Path, group_id: str, sha256: str) -> bytes:
    """The pinned bytes, or ``ArtifactProblem`` when the database copy is absent or altered."""
    cached = _read_cache(cache_dir, sha256)
    if cached is not None:
        return cached
    async with store.tx(readonly=True) as tx:
        row = await artifacts.get_artifact(tx, group_id, sha256)
    elf = None if row is None else row.elf
    if elf is None:
        raise ArtifactProblem("artifact_missing", f"no artifact sha256:{sha256} in the store")
    found = hashlib.sha256(elf).hexdigest()
    if found != sha256:
        raise ArtifactProblem("artifact_changed", f"expected sha256:{sha256}, found sha256:{found}")
    _write_cache(cache_dir, sha256, bytes(elf))
    return bytes(elf)


def _read_cache(cache_dir: Path, sha256: str) -> bytes | None:
    path = cache_dir / f"{sha256}.elf"
    try:
        data = path.read_bytes()
    except OSError:
        return None
    if hashlib.sha256(data).hexdigest() == sha256:
        return data
    path.unlink(missing_ok=True)  # a cache file that does not match is deleted (§8)
    return None


def _write_cache(cache_dir: Path, sha256: str, elf: bytes) -> None:
    try:
        cache_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = cache_dir / f".{sha256}.{os.getpid()}.tmp"
        tmp.write_bytes(elf)
        tmp.replace(cache_dir / f"{sha256}.elf")
    except OSError:
        pass  # the cache is an optimisation; the database copy stays authoritative
