"""Compile time (benchmarks.md §1.6): distinct density-guest bundles through the whole build pipeline.

Sequential cold builds (cache off) → p50/p95 ms; ``build.workers`` = 2 → builds per second; the same requests
again → cache-hit p50 ms. Also the one compile of the density guest that the runtime runs use.
"""

from __future__ import annotations

import asyncio
import secrets
import tempfile
import time
from pathlib import Path
from typing import Any

from wakeful.bench.progress import NullProgress, Progress, percentile
from wakeful.bench.variants import BenchError, density_request
from wakeful.build import Builder, BuildOptions, BuildResult

__all__ = ["build_elf", "measure_compile"]

IN_FLIGHT = 8  # keeps both workers busy, far below the build queue's bound (build.md §5.2: 32 waiting → BUSY)


def _checked(result: BuildResult, what: str) -> bytes:
    if result.state != "succeeded" or result.elf is None:
        raise BenchError(f"{what} did not build: {result.error or result.state}")
    return result.elf


def build_elf(request: dict[str, Any], builder: Builder | None = None) -> bytes:
    """One build through the build service (build.md §1); a failure is a ``BenchError``."""
    if builder is not None:
        return _checked(builder.compile_blocking(request), "a benchmark guest")
    with Builder(BuildOptions()) as own:
        return _checked(own.compile_blocking(request), "a benchmark guest")


def _requests(count: int) -> list[dict[str, Any]]:
    """§1.6: distinct bundles — the density guest with a different constant written into the source."""
    base = secrets.randbits(40) << 16  # fresh per run, so no earlier run's cache can answer
    return [density_request(base + i) for i in range(count)]


def _cold(root: Path, requests: list[dict[str, Any]], progress: Progress) -> list[float]:
    progress.phase("compile (cold)", len(requests))
    times: list[float] = []
    with Builder(BuildOptions(build_root=root / "cold", cache=False, workers=1)) as builder:
        builder.info()
        for i, request in enumerate(requests):
            began = time.perf_counter()
            _checked(builder.compile_blocking(request, use_cache=False), "a compile-time bundle")
            times.append((time.perf_counter() - began) * 1000)
            progress.advance(i + 1)
    return times


async def _parallel_and_hits(root: Path, requests: list[dict[str, Any]]) -> tuple[float, list[float]]:
    with Builder(BuildOptions(build_root=root / "warm", cache=True, workers=2)) as builder:
        await asyncio.to_thread(builder.info)
        room = asyncio.Semaphore(IN_FLIGHT)

        async def one(request: dict[str, Any]) -> BuildResult:
            async with room:
                return await builder.compile(request)

        began = time.perf_counter()
        results = await asyncio.gather(*(one(r) for r in requests))
        per_s = len(requests) / (time.perf_counter() - began)
        for result in results:
            _checked(result, "a compile-time bundle")
        hits: list[float] = []
        for request in requests:
            began = time.perf_counter()
            _checked(await builder.compile(request), "a cached bundle")
            hits.append((time.perf_counter() - began) * 1000)
    return per_s, hits


def measure_compile(builds: int, progress: Progress | None = None) -> dict[str, Any]:
    """§1.6 figures for ``builds`` distinct bundles (``builds`` ≥ 1)."""
    progress = progress or NullProgress()
    requests = _requests(builds)
    with tempfile.TemporaryDirectory(prefix="wakeful-bench-build-") as tmp:
        cold = _cold(Path(tmp), requests, progress)
        progress.note("compile: parallel builds and cache hits")
        per_s, hits = asyncio.run(_parallel_and_hits(Path(tmp), _requests(builds)))
    return {
        "builds": builds,
        "cold_ms": {"p50": percentile(cold, 50), "p95": percentile(cold, 95)},
        "parallel_builds_per_s": per_s,
        "hit_ms": {"p50": percentile(hits, 50)},
    }
