"""The stdio transport of the density benchmark (benchmarks.md §1.3): a ``wakeful runtime`` subprocess.

Runs the eight steps of §1.3 through ``BenchClient`` and returns one ``runs[]`` entry of §1.7.
"""

from __future__ import annotations

import base64
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

from wakeful.bench.memory import per_object_figures, snapshot
from wakeful.bench.plan import CAPS, FANOUT_S, QUIET_S, SETTLE_S, WARMUP, Plan
from wakeful.bench.progress import NullProgress, Progress, percentile
from wakeful.bench.stdio_client import BenchClient, Reply, RpcFailed
from wakeful.bench.variants import BenchError

__all__ = ["StdioPlan", "run_stdio"]

PAGE = 256  # §6.8 list limit


@dataclass(frozen=True, kw_only=True)
class StdioPlan(Plan):
    """What one stdio run needs; ``argv`` overrides the runtime command (tests)."""

    argv: list[str] | None = None


def run_stdio(plan: StdioPlan, progress: Progress | None = None) -> dict[str, Any]:
    """§1.3 steps 1-8 against a ``wakeful runtime`` child; returns the ``runs[]`` entry of §1.7."""
    progress = progress or NullProgress()
    client = BenchClient(plan.argv, max_objects=plan.count + WARMUP)
    try:
        init = client.call("sf.initialize", {"protocol_version": 1})
        result = _procedure(client, plan, progress)
    except (BenchError, TimeoutError) as exc:
        client.kill()
        raise BenchError(f"stdio run failed: {exc}\n{client.stderr_tail()}") from None
    began = time.monotonic()
    exit_code = client.shutdown()  # runtime-protocol.md §16: exits 0 within 2 s with every object still live
    shutdown_ms = round((time.monotonic() - began) * 1000)
    if exit_code != 0:
        result["failures"].append(f"runtime exited {exit_code}: {client.stderr_tail(400)}")
    result["init"] = {
        "pid": client.pid,
        "session_id": init.get("session_id"),
        "execution_threads": 1,
        "exit_code": exit_code,
        "shutdown_ms": shutdown_ms,
    }
    return result


def _counters(client: BenchClient) -> dict[str, Any]:
    """The runtime's own counters from ``wakeful.stats`` (§13), or none when the child lacks it."""
    try:
        stats = client.call("wakeful.stats", {})
    except RpcFailed:
        return {}
    return dict(stats.get("memory", {})) | {"shapes": stats.get("shapes", {})}


def _snap(client: BenchClient) -> dict[str, Any]:
    return snapshot(client.pid, _counters(client))


def _procedure(client: BenchClient, plan: StdioPlan, progress: Progress) -> dict[str, Any]:
    shapes_before = _counters(client).get("shapes", {})
    _warm_up(client, plan)
    snaps = {"baseline": _snap(client)}
    ids, load_start_s = _load_start(client, plan, progress)
    _settle(client, len(ids), progress)
    time.sleep(QUIET_S)  # the runtime's post-burst gc (vm.md §7 memory hygiene) belongs to settling
    snaps["active"] = _snap(client)
    idle = _idle_rtt(client, ids, plan.samples)
    control = _control_rtt(client, plan.samples)
    acks_before = client.acks
    fanout_s = _fan_out(client, ids, progress)
    time.sleep(0.1)
    snaps["after_events"] = _snap(client)
    time.sleep(plan.soak_seconds)
    failures = _not_running(client)
    snaps["after_soak"] = _snap(client)
    _unload(client, ids)
    snaps["after_unload"] = _snap(client)
    shapes_after = _counters(client).get("shapes", {})
    return {
        "transport": "stdio",
        "count": plan.count,
        "distinct": plan.distinct,
        "snapshots": _strip(snaps),
        "load_start_s": load_start_s,
        "fanout_s": fanout_s,
        "acks": client.acks - acks_before,
        "idle_rtt_ms": idle,
        "control_rtt_ms": control,
        **per_object_figures(snaps, plan.count),
        "shapes": {
            k: shapes_after.get(k, 0) - shapes_before.get(k, 0) for k in ("translated", "hits", "misses")
        },
        "failures": failures,
    }


def _strip(snaps: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {name: {k: v for k, v in snap.items() if k != "shapes"} for name, snap in snaps.items()}


def _load_params(elf: bytes) -> dict[str, Any]:
    return {"elf": base64.b64encode(elf).decode("ascii"), "capabilities": CAPS}


# §1.3 step 3 (and step 2's warm-up): loads pipelined, each start sent once its load answered
def _load_and_start(client: BenchClient, plan: StdioPlan, numbers: range, progress: Progress) -> list[str]:
    loads: deque[Reply] = deque()
    starts: list[Reply] = []
    for n in numbers:
        loads.append(client.submit("sf.object.load", _load_params(plan.variant(n)), flush=False))
        while loads and loads[0].done():
            object_id = loads.popleft().result()["object_id"]
            starts.append(client.submit("sf.object.start", {"object_id": object_id}, flush=False))
        if n & 255 == 255:
            progress.advance(len(starts))
    client.flush()
    while loads:
        object_id = loads.popleft().result(FANOUT_S)["object_id"]
        starts.append(client.submit("sf.object.start", {"object_id": object_id}, flush=False))
    client.flush()
    return [f.result(FANOUT_S)["object_id"] for f in starts]


def _warm_up(client: BenchClient, plan: StdioPlan) -> None:
    ids = _load_and_start(client, plan, range(plan.count, plan.count + WARMUP), NullProgress())
    _settle(client, len(ids), NullProgress())
    _unload(client, ids)


def _load_start(client: BenchClient, plan: StdioPlan, progress: Progress) -> tuple[list[str], float]:
    progress.phase("load + start", plan.count)
    began = time.perf_counter()
    ids = _load_and_start(client, plan, range(plan.count), progress)
    elapsed = time.perf_counter() - began
    progress.advance(plan.count)
    return ids, elapsed


def _statuses(client: BenchClient) -> list[dict[str, Any]]:
    """Every object's status through ``sf.object.list`` pages (§6.8)."""
    out: list[dict[str, Any]] = []
    after = None
    while True:
        params: dict[str, Any] = {"limit": PAGE} | ({"after": after} if after else {})
        page = client.call("sf.object.list", params)
        out += page["objects"]
        after = page.get("next")
        if after is None:
            return out


def _waiting(status: dict[str, Any]) -> bool:
    return status.get("state") == "running" and status.get("wait") == "event"


# §1.3 step 4: list pages until every object is running with wait: event (≤ 30 s)
def _settle(client: BenchClient, count: int, progress: Progress) -> None:
    progress.phase("settle", count)
    deadline = time.monotonic() + SETTLE_S
    while True:
        statuses = _statuses(client)
        ready = sum(1 for s in statuses if _waiting(s))
        progress.advance(ready)
        if ready == len(statuses) == count:
            return
        if time.monotonic() > deadline:
            raise BenchError(f"{count - ready} objects not in wait: event after {SETTLE_S:.0f} s")
        time.sleep(0.01)


# §1.3 step 5: idle_rtt (deliver → ack → back in wait: event, polled with sf.object.get)
def _idle_rtt(client: BenchClient, ids: list[str], samples: int) -> dict[str, float]:
    times: list[float] = []
    for i in range(samples):
        object_id = ids[i % len(ids)]
        target = client.acks + 1
        began = time.perf_counter()
        client.call(
            "sf.event.deliver",
            {
                "object_id": object_id,
                "event_id": f"idle-{i}",
                "topic": "benchmark",
                "payload": {"sequence": -1},
            },
        )
        if not client.wait_acks(target, FANOUT_S):
            raise BenchError(f"no ack from {object_id} within {FANOUT_S:.0f} s")
        while not _waiting(client.call("sf.object.get", {"object_id": object_id})):
            if time.perf_counter() - began > FANOUT_S:
                raise BenchError(f"{object_id} did not return to wait: event")
        times.append((time.perf_counter() - began) * 1000)
    return {"p50": percentile(times, 50), "p99": percentile(times, 99)}


# §1.3 step 5: control_rtt, spinfoam's measure: sequential sf.stats round trips
def _control_rtt(client: BenchClient, samples: int) -> dict[str, float]:
    times: list[float] = []
    for _ in range(samples):
        began = time.perf_counter()
        client.call("sf.stats", {})
        times.append((time.perf_counter() - began) * 1000)
    return {"p50": percentile(times, 50), "p99": percentile(times, 99)}


# §1.3 step 6: one event to every object; first delivery to the N-th ack (fail after 60 s)
def _fan_out(client: BenchClient, ids: list[str], progress: Progress) -> float:
    progress.phase("fan-out", len(ids))
    target = client.acks + len(ids)
    began = time.perf_counter()
    futures = [
        client.submit(
            "sf.event.deliver",
            {"object_id": object_id, "event_id": str(n), "topic": "benchmark", "payload": {"sequence": n}},
            flush=False,
        )
        for n, object_id in enumerate(ids)
    ]
    client.flush()
    while not client.wait_acks(target, 0.05):
        progress.advance(len(ids) - (target - client.acks))
        if time.perf_counter() - began > FANOUT_S:
            raise BenchError(f"{target - client.acks} acks missing after {FANOUT_S:.0f} s")
    elapsed = time.perf_counter() - began
    if client.acks < target:
        raise BenchError(f"the runtime closed with {target - client.acks} acks missing")
    for future in futures:
        future.result(FANOUT_S)
    progress.advance(len(ids))
    return elapsed


# §1.3 step 7: every object must still be running
def _not_running(client: BenchClient) -> list[str]:
    return [
        f"{s['object_id']} is {s['state']}: {s.get('outcome')}"
        for s in _statuses(client)
        if s.get("state") != "running"
    ]


# §1.3 step 8: unload all (pipelined)
def _unload(client: BenchClient, ids: list[str]) -> None:
    futures = [client.submit("sf.object.unload", {"object_id": object_id}, flush=False) for object_id in ids]
    client.flush()
    for future in futures:
        future.result(FANOUT_S)
