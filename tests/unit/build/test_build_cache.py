"""build.md §8: the cache key, atomic entries, SHA-checked reads, LRU eviction by count and bytes."""

from __future__ import annotations

import os
import time
from pathlib import Path

from wakeful.build.cache import BuildCache, cache_key

REQ = {"sdk_version": 1, "entry": "m.c", "files": {"m.c": "int x;\n", "a.h": ""}}


def test_cache_key_is_canonical_and_covers_toolchain_and_request() -> None:
    k = cache_key("tc", REQ)
    reordered = {"files": {"a.h": "", "m.c": "int x;\n"}, "entry": "m.c", "sdk_version": 1}
    assert cache_key("tc", reordered) == k and len(k) == 64
    assert cache_key("tc2", REQ) != k
    assert cache_key("tc", {**REQ, "entry": "a.h"}) != k
    assert cache_key("tc", {**REQ, "files": {"m.c": "int x;\r\n", "a.h": ""}}) != k


def test_cache_key_covers_the_compiler_revision_and_the_limits() -> None:
    # issue 21: a result obtained with another compiler or under other limits is never reused
    limits = {"deadline_seconds": 15.0, "cpu_seconds": 10, "memory_bytes": 1 << 30}
    k = cache_key("tc", REQ, revision="zig 0.17.1 / clang 22.1.8", limits=limits)
    assert k == cache_key("tc", REQ, revision="zig 0.17.1 / clang 22.1.8", limits=dict(reversed(limits.items())))
    assert cache_key("tc", REQ, revision="zig 0.17.2 / clang 22.1.8", limits=limits) != k
    assert cache_key("tc", REQ, revision="zig 0.17.1 / clang 22.1.8", limits={**limits, "deadline_seconds": 2.0}) != k
    assert cache_key("tc", REQ, revision="zig 0.17.1 / clang 22.1.8", limits={**limits, "memory_bytes": 1}) != k


def test_cache_roundtrip_and_layout(tmp_path: Path) -> None:
    cache = BuildCache(tmp_path)
    key = cache_key("tc", REQ)
    assert cache.get(key) is None
    cache.put(key, {"state": "succeeded", "sha256": "x"}, b"\x7fELFdata")
    assert (tmp_path / key[:2] / key).is_file()
    record, elf = cache.get(key)  # type: ignore[misc]
    assert elf == b"\x7fELFdata" and record["state"] == "succeeded"
    assert cache.stats()["hits"] == 1 and cache.stats()["misses"] == 1
    assert not [p for p in tmp_path.rglob(".*tmp")]


def test_cache_corrupt_entry_is_deleted_and_missed(tmp_path: Path) -> None:
    cache = BuildCache(tmp_path)
    key = cache_key("tc", REQ)
    cache.put(key, {"state": "succeeded"}, b"\x7fELFdata")
    path = tmp_path / key[:2] / key
    data = bytearray(path.read_bytes())
    data[-1] ^= 1
    path.write_bytes(bytes(data))
    assert cache.get(key) is None and not path.exists()
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(b"\x01")
    assert cache.get(key) is None and not path.exists()


def test_cache_evicts_least_recently_used_by_count(tmp_path: Path) -> None:
    cache = BuildCache(tmp_path, max_entries=3)
    keys = [cache_key(f"tc{i}", REQ) for i in range(4)]
    for k in keys[:3]:
        cache.put(k, {"state": "failed"}, b"")
        time.sleep(0.01)
    assert cache.get(keys[0]) is not None  # now the most recently used
    cache.put(keys[3], {"state": "failed"}, b"")
    assert cache.get(keys[1]) is None
    assert all(cache.get(k) is not None for k in (keys[0], keys[2], keys[3]))


def test_cache_evicts_by_bytes_and_reloads_index(tmp_path: Path) -> None:
    cache = BuildCache(tmp_path, max_bytes=10_000)
    keys = [cache_key(f"tc{i}", REQ) for i in range(5)]
    for k in keys:
        cache.put(k, {"state": "succeeded"}, os.urandom(3000))
        time.sleep(0.01)
    assert cache.stats()["bytes"] <= 10_000
    assert cache.get(keys[-1]) is not None and cache.get(keys[0]) is None
    fresh = BuildCache(tmp_path, max_bytes=10_000)
    assert fresh.stats()["entries"] == cache.stats()["entries"]
