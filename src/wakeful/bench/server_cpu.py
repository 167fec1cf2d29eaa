"""CPU time of the stdio server per fan-out event, measured in one process (docs/performance.md).

A development measure next to ``wakeful bench density`` (benchmarks.md §1.3 step 6): the frames of a fan-out
are fed to a ``wakeful runtime`` session exactly as its stdin reader would, 24 deliveries at a time plus the
previous round's ``host.call`` replies, and only the session's own process CPU time is counted (no client
process, no pipe wake-ups). Other work on the machine stretches wall time but hardly this figure, so
before/after comparisons hold on a busy machine. Run: ``python -m wakeful.bench.server_cpu [count] [repeats]``.
"""

from __future__ import annotations

import asyncio
import base64
import fcntl
import gc
import json
import os
import re
import sys
import time
from typing import Any

from wakeful.bench.compile_time import build_elf
from wakeful.bench.variants import density_request, make_variants
from wakeful.runtime import RuntimeOptions, Session

__all__ = ["measure_server_cpu"]

WINDOW = 24  # the bench client's outstanding requests (§1.3 step 1)
_F_SETPIPE_SZ = 1031
_CALL_ID = re.compile(rb'"id":"(sf:[^"]+)","method":"host.call"')
_OBJECT_ID = re.compile(rb'"object_id":"([^"]+)"')


def measure_server_cpu(count: int = 10_000, repeats: int = 5) -> dict[str, Any]:
    """Load ``count`` density objects into a session, then time ``repeats`` fan-outs (process CPU seconds)."""
    elf = build_elf(density_request())
    return asyncio.run(_measure(make_variants(elf, "data"), count, repeats))


class _Driver:
    """Feeds frames to a session and reads what it wrote (the session never blocks: a 1 MiB pipe)."""

    def __init__(self, count: int) -> None:
        self.stdin_r, self.stdin_w = os.pipe()
        self.stdout_r, stdout_w = os.pipe()
        for fd in (self.stdout_r, stdout_w):
            os.set_blocking(fd, False)
        fcntl.fcntl(stdout_w, _F_SETPIPE_SZ, 1 << 20)
        self.session = Session(RuntimeOptions(max_objects=count + 1), stdin=self.stdin_r, stdout=stdout_w, poll_us=0)
        self.stdout_w = stdout_w
        self.sequence = 0
        self.cpu = 0.0

    def frame(self, method: str, params: dict[str, Any]) -> bytes:
        self.sequence += 1
        message = {"jsonrpc": "2.0", "id": f"c{self.sequence}", "method": method, "params": params}
        return json.dumps(message, separators=(",", ":")).encode() + b"\n"

    def output(self) -> bytes:
        chunks = []
        while True:
            try:
                data = os.read(self.stdout_r, 1 << 20)
            except BlockingIOError:
                break
            if not data:
                break
            chunks.append(data)
        return b"".join(chunks)

    async def feed(self, data: bytes) -> bytes:
        """Dispatch ``data`` as one read chunk, let the loop run the batches and the writer; timed."""
        began = time.process_time()
        self.session.feed(data)
        for _ in range(3):
            await asyncio.sleep(0)
        self.cpu += time.process_time() - began
        return self.output()

    def close(self) -> None:
        for fd in (self.stdin_r, self.stdin_w, self.stdout_r, self.stdout_w):
            os.close(fd)


async def _measure(variant: Any, count: int, repeats: int) -> dict[str, Any]:
    driver = _Driver(count)
    session = driver.session
    await session.rt.open()
    session.initialized = True
    session.begin_in_process()
    try:
        ids = []
        for n in range(count):
            elf = base64.b64encode(variant(n)).decode("ascii")
            out = await driver.feed(driver.frame("sf.object.load", {"elf": elf, "capabilities": [{"name": "benchmark.ack"}]}))
            ids.append(_OBJECT_ID.findall(out)[-1].decode())
            await driver.feed(driver.frame("sf.object.start", {"object_id": ids[-1]}))
        await asyncio.sleep(0.3)  # the post-burst gc of vm.md §7 (100 ms after the last load)
        driver.output()
        seconds = []
        for round_ in range(repeats):
            driver.cpu = 0.0
            seconds.append(await _fan_out(driver, ids, round_))
        await session.rt.close()
        for _ in range(3):  # the writer's last turns, then no more writes to the pipes closed below
            await asyncio.sleep(0)
            driver.output()
    finally:
        session.end_in_process()
        driver.close()
    best = min(seconds)
    return {"count": count, "seconds": seconds, "best_s": best, "us_per_event": best / count * 1e6}


async def _fan_out(driver: _Driver, ids: list[str], round_: int) -> float:
    acks = 0
    replies: list[bytes] = []
    for start in range(0, len(ids) + WINDOW, WINDOW):
        frames = [driver.frame("sf.event.deliver", {"object_id": oid, "event_id": f"{round_}-{start + k}",
                                                    "topic": "benchmark", "payload": {"sequence": start + k}})
                  for k, oid in enumerate(ids[start:start + WINDOW])]
        if not frames and not replies:
            break
        out = await driver.feed(b"".join(replies + frames))
        calls = _CALL_ID.findall(out)
        acks += len(calls)
        replies = [b'{"jsonrpc":"2.0","id":"' + call + b'","result":{"accepted":true}}\n' for call in calls]
    while replies:  # the last calls' replies
        calls = _CALL_ID.findall(await driver.feed(b"".join(replies)))
        acks += len(calls)
        replies = [b'{"jsonrpc":"2.0","id":"' + call + b'","result":{"accepted":true}}\n' for call in calls]
    if acks != len(ids):
        raise RuntimeError(f"{acks} host calls for {len(ids)} events")
    gc.collect()
    return driver.cpu


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    result = measure_server_cpu(int(args[0]) if args else 10_000, int(args[1]) if len(args) > 1 else 5)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
