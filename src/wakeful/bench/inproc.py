"""The in-process transport of the density benchmark (benchmarks.md §1.3): a ``Runtime`` in this process.

Runs the eight steps of §1.3 against ``wakeful.runtime.Runtime`` and returns one ``runs[]`` entry of §1.7.
"""

from __future__ import annotations

import asyncio
import gc
import os
import time
from dataclasses import dataclass
from typing import Any

from wakeful.bench.memory import per_object_figures, snapshot
from wakeful.bench.plan import CAPS, FANOUT_S, QUIET_S, SETTLE_S, WARMUP, Plan
from wakeful.bench.progress import NullProgress, Progress, percentile
from wakeful.bench.variants import BenchError
from wakeful.runtime import HostCall, Runtime, RuntimeOptions

__all__ = ["InprocPlan", "run_inproc"]


@dataclass(frozen=True, kw_only=True)
class InprocPlan(Plan):
    """What one in-process run needs: the shared plan, nothing more."""


class _Acks:
    """§1.3 step 1: the synchronous host handler that counts acks and returns ``{accepted: true}``."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, call: HostCall) -> dict[str, bool]:
        del call
        self.count += 1
        return {"accepted": True}


def _forget_programs() -> None:
    """Each run starts as a fresh process would: no program, verification, twin or shape is cached.

    Without this a ``--repeat`` round (or a second run in one process) gets its 10,000 programs from the
    previous round's program cache and measures neither loading nor per-program memory.
    """
    from wakeful.vm import LOAD_CACHE as CACHE
    from wakeful.vm import LOAD_TWINS as TWINS
    from wakeful.vm import clear_caches

    clear_caches()
    CACHE.clear()
    TWINS.clear()
    gc.collect()


def _snap(rt: Runtime) -> dict[str, Any]:
    memory = rt.stats_nowait()["wakeful"]["memory"]
    return snapshot(os.getpid(), memory)


async def run_inproc(plan: InprocPlan, progress: Progress | None = None) -> dict[str, Any]:
    """§1.3 steps 1-8 in this process; returns the ``runs[]`` entry of §1.7."""
    progress = progress or NullProgress()
    _forget_programs()
    acks = _Acks()
    rt = Runtime(RuntimeOptions(max_objects=plan.count + WARMUP), host_handler=acks)
    await rt.open()
    try:
        return await _procedure(rt, plan, acks, progress)
    finally:
        await rt.close()


async def _procedure(rt: Runtime, plan: InprocPlan, acks: _Acks, progress: Progress) -> dict[str, Any]:
    failures: list[str] = []
    shapes_before = dict(rt.stats_nowait()["wakeful"]["shapes"])
    await _warm_up(rt, plan)
    snaps = {"baseline": _snap(rt)}
    ids, load_start_s, translate_s = _load_start(rt, plan, progress)
    await _settle(rt, ids, progress)
    await asyncio.sleep(QUIET_S)  # the runtime's post-burst gc (vm.md §7 memory hygiene) belongs to settling
    snaps["active"] = _snap(rt)
    idle = await _idle_rtt(rt, ids, plan.samples, acks)
    acks_before = acks.count
    fanout_s = await _fan_out(rt, ids, acks, progress)
    await asyncio.sleep(0.1)
    snaps["after_events"] = _snap(rt)
    await asyncio.sleep(plan.soak_seconds)
    failures += _not_running(rt, ids)
    snaps["after_soak"] = _snap(rt)
    for object_id in ids:
        rt.unload_nowait(object_id)
    gc.collect()
    snaps["after_unload"] = _snap(rt)
    shapes = _shape_delta(shapes_before, rt.stats_nowait()["wakeful"]["shapes"])
    if plan.distinct == "structure":
        shapes["translate_ms_per_object"] = translate_s * 1000 / max(plan.count, 1)
    return {
        "transport": "inproc",
        "count": plan.count,
        "distinct": plan.distinct,
        "init": {"pid": os.getpid(), "execution_threads": 1, "process": "bench"},
        "snapshots": snaps,
        "load_start_s": load_start_s,
        "fanout_s": fanout_s,
        "acks": acks.count - acks_before,
        "idle_rtt_ms": idle,
        "control_rtt_ms": None,
        **per_object_figures(snaps, plan.count),
        "shapes": shapes,
        "failures": failures,
    }


# §1.3 step 2: load, start and unload 100 objects (offset past the measured variants), gc, baseline
async def _warm_up(rt: Runtime, plan: InprocPlan) -> None:
    ids = []
    for n in range(WARMUP):
        status = rt.load_nowait(plan.variant(plan.count + n), capabilities=CAPS)
        rt.start_nowait(status.object_id)
        ids.append(status.object_id)
    await _settle(rt, ids, NullProgress())
    for object_id in ids:
        rt.unload_nowait(object_id)
    gc.collect()


# §1.3 step 3: load_start_s = first load request to last start response
def _load_start(rt: Runtime, plan: InprocPlan, progress: Progress) -> tuple[list[str], float, float]:
    progress.phase("load + start", plan.count)
    ids: list[str] = []
    variant, load, start = plan.variant, rt.load_nowait, rt.start_nowait
    began = time.perf_counter()
    for n in range(plan.count):
        object_id = load(variant(n), capabilities=CAPS).object_id
        start(object_id)
        ids.append(object_id)
        if n & 255 == 255:
            progress.advance(n + 1)
    elapsed = time.perf_counter() - began
    progress.advance(plan.count)
    return ids, elapsed, elapsed


def _waiting(rt: Runtime, object_id: str) -> bool:
    status = rt.get_nowait(object_id)
    return status.state == "running" and status.wait == "event"


# §1.3 step 4: until every object is running with wait: event (≤ 30 s)
async def _settle(rt: Runtime, ids: list[str], progress: Progress) -> None:
    progress.phase("settle", len(ids))
    deadline = time.monotonic() + SETTLE_S
    pending = ids
    while pending:
        pending = [i for i in pending if not _waiting(rt, i)]
        progress.advance(len(ids) - len(pending))
        if time.monotonic() > deadline:
            raise BenchError(f"{len(pending)} objects not in wait: event after {SETTLE_S:.0f} s")
        await asyncio.sleep(0)


# §1.3 step 5: one event to a different object per round, timed until acked and back in wait: event
async def _idle_rtt(rt: Runtime, ids: list[str], samples: int, acks: _Acks) -> dict[str, float]:
    times: list[float] = []
    for i in range(samples):
        object_id = ids[i % len(ids)]
        before = acks.count
        began = time.perf_counter()
        rt.deliver_nowait(object_id, f"idle-{i}", "benchmark", {"sequence": -1})
        while acks.count == before or not _waiting(rt, object_id):
            await asyncio.sleep(0)
            if time.perf_counter() - began > FANOUT_S:
                raise BenchError(f"no ack from {object_id} within {FANOUT_S:.0f} s")
        times.append((time.perf_counter() - began) * 1000)
    return {"p50": percentile(times, 50), "p99": percentile(times, 99)}


# §1.3 step 6: one event to every object; first delivery to the N-th ack (fail after 60 s)
async def _fan_out(rt: Runtime, ids: list[str], acks: _Acks, progress: Progress) -> float:
    progress.phase("fan-out", len(ids))
    target = acks.count + len(ids)
    deliver = rt.deliver_nowait
    began = time.perf_counter()
    for n, object_id in enumerate(ids):
        deliver(object_id, str(n), "benchmark", {"sequence": n})
    while acks.count < target:
        await asyncio.sleep(0)
        progress.advance(len(ids) - (target - acks.count))
        if time.perf_counter() - began > FANOUT_S:
            raise BenchError(f"{target - acks.count} acks missing after {FANOUT_S:.0f} s")
    elapsed = time.perf_counter() - began
    progress.advance(len(ids))
    return elapsed


# §1.3 step 7: every object must still be running
def _not_running(rt: Runtime, ids: list[str]) -> list[str]:
    out = []
    for object_id in ids:
        status = rt.get_nowait(object_id)
        if status.state != "running":
            out.append(f"{object_id} is {status.state}: {status.outcome}")
    return out


def _shape_delta(before: dict[str, int], after: dict[str, int]) -> dict[str, Any]:
    """§1.4: shapes translated, hits and misses during this run."""
    return {k: after.get(k, 0) - before.get(k, 0) for k in ("translated", "hits", "misses")}
