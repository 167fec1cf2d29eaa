"""The content-addressed build cache (build.md §8): key, atomic writes, SHA-checked reads, LRU bounds.

An entry is one file ``<dir>/<k[0:2]>/<key>``: a 4-byte header length, the result JSON, then the ELF.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import struct
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

CACHE_FORMAT = 2  # 2: the key covers the compiler revision and the build limits (issue 21)
DEFAULT_MAX_BYTES = 256 << 20
DEFAULT_MAX_ENTRIES = 50_000


def cache_key(fingerprint: str, request: dict[str, Any], *, revision: str = "",
              limits: Mapping[str, int | float] | None = None) -> str:
    """SHA-256 of the canonical JSON ``{format, toolchain, revision, limits, request}`` (the request as received).

    ``revision`` is the compiler's ("zig <v> / clang <v>") and ``limits`` the build limits in force (deadline,
    CPU, memory, output sizes): a result obtained under other limits or another compiler is never reused.
    """
    canonical = {
        "format": CACHE_FORMAT,
        "toolchain": fingerprint,
        "revision": revision,
        "limits": dict(sorted((limits or {}).items())),
        "request": {
            "sdk_version": request["sdk_version"],
            "entry": request["entry"],
            "files": dict(sorted(request["files"].items())),
        },
    }
    text = json.dumps(canonical, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


class BuildCache:
    """Entries under ``directory``; evicts least recently used entries after each insert."""

    def __init__(self, directory: Path, *, max_bytes: int = DEFAULT_MAX_BYTES,
                 max_entries: int = DEFAULT_MAX_ENTRIES) -> None:
        self.directory = directory
        self.max_bytes = max_bytes
        self.max_entries = max_entries
        self.hits = 0
        self.misses = 0
        self._lock = threading.Lock()
        self._index: dict[str, tuple[int, float]] | None = None  # key -> (size, last use)

    def path(self, key: str) -> Path:
        return self.directory / key[:2] / key

    def get(self, key: str) -> tuple[dict[str, Any], bytes] | None:
        """The stored (record, elf), or None; a corrupt entry is deleted and counts as a miss."""
        entry = self._read(key)
        with self._lock:
            if entry is None:
                self.misses += 1
                return None
            self.hits += 1
            now = time.time()
            self._ensure_index()[key] = (self._entry_size(key), now)
        with contextlib.suppress(OSError):
            os.utime(self.path(key), (now, now))
        return entry

    def _read(self, key: str) -> tuple[dict[str, Any], bytes] | None:
        try:
            data = self.path(key).read_bytes()
        except OSError:
            return None
        try:
            (size,) = struct.unpack_from("<I", data, 0)
            record = json.loads(data[4 : 4 + size])
            elf = data[4 + size :]
            ok = isinstance(record, dict) and record.get("elf_sha256") == hashlib.sha256(elf).hexdigest()
        except (struct.error, ValueError):
            ok = False
        if not ok:
            self._delete(key)
            return None
        return record, elf

    def put(self, key: str, record: dict[str, Any], elf: bytes) -> None:
        """Store atomically (temporary name, then rename), then evict down to the bounds."""
        record = dict(record, elf_sha256=hashlib.sha256(elf).hexdigest())
        header = json.dumps(record, sort_keys=True).encode()
        data = struct.pack("<I", len(header)) + header + elf
        target = self.path(key)
        target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        tmp = target.with_name(f".{key}.{os.getpid()}.{threading.get_ident()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, target)
        with self._lock:
            self._ensure_index()[key] = (len(data), time.time())
            self._evict()

    def _evict(self) -> None:
        index = self._ensure_index()
        total = sum(size for size, _ in index.values())
        if total <= self.max_bytes and len(index) <= self.max_entries:
            return
        for key, (size, _) in sorted(index.items(), key=lambda kv: kv[1][1]):
            if total <= self.max_bytes and len(index) <= self.max_entries:
                break
            self._delete_locked(key)
            total -= size

    def _ensure_index(self) -> dict[str, tuple[int, float]]:
        if self._index is None:
            self._index = {}
            for sub in self.directory.glob("??"):
                for entry in sub.iterdir():
                    if not entry.name.startswith("."):
                        with contextlib.suppress(OSError):
                            st = entry.stat()
                            self._index[entry.name] = (st.st_size, st.st_mtime)
        return self._index

    def _entry_size(self, key: str) -> int:
        try:
            return self.path(key).stat().st_size
        except OSError:
            return 0

    def _delete(self, key: str) -> None:
        with self._lock:
            self._delete_locked(key)

    def _delete_locked(self, key: str) -> None:
        with contextlib.suppress(OSError):
            self.path(key).unlink()
        if self._index is not None:
            self._index.pop(key, None)

    def stats(self) -> dict[str, int]:
        with self._lock:
            index = self._ensure_index()
            return {"hits": self.hits, "misses": self.misses, "entries": len(index),
                    "bytes": sum(size for size, _ in index.values())}
