"""The realistic variant (benchmarks.md §1.2): the guide's threshold-alert Loop with a full dedup window.

N copies with a harness-like config each handle 128 events with distinct ids, checkpointing as the example
does; the snapshot is taken once all are back in ``wait: event``. Reported, no target; in-process.
"""

from __future__ import annotations

import asyncio
import gc
import os
import time
from importlib import resources
from typing import Any

from wakeful.bench.memory import per_object, snapshot
from wakeful.bench.progress import NullProgress, Progress
from wakeful.bench.variants import BenchError
from wakeful.runtime import HostCall, Runtime, RuntimeOptions

__all__ = ["EVENTS_PER_OBJECT", "measure_realistic", "threshold_request"]

EVENTS_PER_OBJECT = 128  # a full dedup window (runtime-protocol.md §8)
PER_ROUND = 16  # events queued per object per round, well inside the 32-entry mailbox
CAPS = [{"name": "loop.state.put"}, {"name": "agent.notify"}, {"name": "loop.ack"}]
WAIT_S = 60.0


def threshold_request() -> dict[str, Any]:
    """The build request of the guide's threshold-alert example (sdk.md §15)."""
    text = resources.files("wakeful.sdk").joinpath("examples/threshold_alert.c").read_text(encoding="utf-8")
    return {"sdk_version": 1, "entry": "main.c", "files": {"main.c": text}}


def _config(n: int) -> dict[str, Any]:
    """A harness-like config: loop id, incarnation and a state of a few hundred bytes."""
    notes = [f"observation {i} of loop {n}: nominal" for i in range(8)]
    return {
        "loop_id": f"loop_{n:06d}",
        "incarnation": 1,
        "threshold": 90,
        "state": {"above": False, "notes": notes, "since_ms": 1_700_000_000_000 + n},
    }


class _Host:
    """§1.2: the bench host's answers to the three capabilities the example uses."""

    def __init__(self) -> None:
        self.acks = 0
        self.messages = 0

    def __call__(self, call: HostCall) -> dict[str, Any]:
        capability = call.capability
        if capability == "loop.ack":
            self.acks += 1
            return {"status": "acked", "event_id": call.arguments.get("event_id"), "duplicate": False}
        if capability == "agent.notify":
            self.messages += 1
            return {"status": "queued", "message_id": f"msg_{self.messages}"}
        return {"status": "stored", "bytes": len(str(call.arguments))}


async def _until(predicate: Any, what: str) -> None:
    began = time.monotonic()
    while not predicate():
        await asyncio.sleep(0)
        if time.monotonic() - began > WAIT_S:
            raise BenchError(f"realistic variant: {what} not reached within {WAIT_S:.0f} s")


def _all_waiting(rt: Runtime, ids: list[str]) -> bool:
    for object_id in ids:
        status = rt.get_nowait(object_id)
        if status.state in ("loaded", "starting"):
            return False
        if status.state != "running":
            raise BenchError(f"realistic variant: {object_id} is {status.state}: {status.outcome}")
        if status.wait != "event":
            return False
    return True


async def _events(rt: Runtime, ids: list[str], host: _Host, progress: Progress) -> None:
    progress.phase("realistic events", EVENTS_PER_OBJECT)
    for first in range(0, EVENTS_PER_OBJECT, PER_ROUND):
        target = host.acks + len(ids) * PER_ROUND
        for e in range(first, first + PER_ROUND):
            value = 95 if e % 2 else 40  # crossing up and down: notify and checkpoint as the example does
            for n, object_id in enumerate(ids):  # ids distinct per object too, as a harness's would be
                rt.deliver_nowait(
                    object_id, f"evt_{n:06d}_{e:04d}", "metric", {"name": "cpu", "value": value}
                )
        await _until(lambda t=target: host.acks >= t, "every ack")
        progress.advance(first + PER_ROUND)


async def _run(elf: bytes, count: int, progress: Progress) -> dict[str, Any]:
    host = _Host()
    rt = Runtime(RuntimeOptions(max_objects=count), host_handler=host)
    await rt.open()
    try:
        gc.collect()
        baseline = snapshot(os.getpid())
        ids = []
        for n in range(count):
            object_id = rt.load_nowait(elf, config=_config(n), capabilities=CAPS).object_id
            rt.start_nowait(object_id)
            ids.append(object_id)
        await _until(lambda: _all_waiting(rt, ids), "wait: event after start")
        await _events(rt, ids, host, progress)
        await _until(lambda: _all_waiting(rt, ids), "wait: event after the events")
        gc.collect()
        memory = rt.stats_nowait()["wakeful"]["memory"]
        realistic = snapshot(os.getpid(), memory)
        for object_id in ids:
            rt.unload_nowait(object_id)
    finally:
        await rt.close()
    snaps = {"baseline": baseline, "realistic": realistic}
    return {
        "count": count,
        "events_per_object": EVENTS_PER_OBJECT,
        "snapshots": snaps,
        "realistic_pss_per_object": per_object(realistic, baseline, "pss", count),
        "realistic_rss_per_object": per_object(realistic, baseline, "rss", count),
        "acks": host.acks,
        "notifications": host.messages,
    }


def measure_realistic(elf: bytes, count: int, progress: Progress | None = None) -> dict[str, Any]:
    """§1.2 realistic variant for ``count`` copies of the threshold-alert example."""
    return asyncio.run(_run(elf, count, progress or NullProgress()))
