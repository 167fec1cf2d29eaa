"""Child process of the 150 MB sanity test (vm.md §10): load and start N density guests, settle them in
`wait: event`, acknowledge a few events, then print RSS and counts as one JSON line."""

from __future__ import annotations

import gc
import json
import sys
from pathlib import Path
from typing import Any

from wakeful.runtime import ManualClock, Runtime, RuntimeOptions


def rss_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


def main() -> None:
    elf = Path(sys.argv[1]).read_bytes()
    count = int(sys.argv[2])
    acks: list[Any] = []
    clock = ManualClock()
    rt = Runtime(RuntimeOptions(max_objects=count), host_handler=lambda call: acks.append(call.id) or {},
                 clock=clock)
    baseline = rss_bytes()
    ids = []
    for _ in range(count):
        oid = rt.load_nowait(elf, capabilities=[{"name": "benchmark.ack"}]).object_id
        rt.start_nowait(oid)
        ids.append(oid)
    while rt.scheduler.has_work():
        rt.run_batch()
    for i, oid in enumerate(ids[:50]):
        rt.deliver_nowait(oid, f"ev{i}", "bench", {"sequence": i})
    while rt.scheduler.has_work():
        rt.run_batch()
    clock.advance(ms=200)  # lets the load-burst hygiene (gc.collect + gc.freeze) run
    rt.run_batch()
    gc.collect()
    waits: dict[str, int] = {}
    for oid in ids:
        status = rt.get_nowait(oid)
        key = f"{status.state}/{status.wait}"
        waits[key] = waits.get(key, 0) + 1
    print(json.dumps({
        "rss": rss_bytes(), "baseline": baseline, "waits": waits, "acks": len(acks),
        "gc_freezes": rt.scheduler.gc_freezes,
    }))


if __name__ == "__main__":
    main()
