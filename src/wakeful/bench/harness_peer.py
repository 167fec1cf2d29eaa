"""The peer of ``wakeful bench harness`` (benchmarks.md §2.1 step 8): DBOS Transact on the same PostgreSQL.

N async workflows each loop on ``recv`` with a timeout (the durable waiter); ingest is ``DBOSClient.send`` with
64 in flight; wake latency is ``send`` to the recorded result (``set_event``, read with ``get_event``); restart is
kill -9 and SIGTERM of the DBOS process, timed until all N workflows wait in ``recv`` again (DBOS recovers its
pending workflows at launch). The DBOS process is a child (``python -m wakeful.bench.harness_peer URL``) so its
memory and CPU are its own; it takes line commands on stdin and answers JSON lines on stdout.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from wakeful.bench.harness_node import CpuWindow, TestStore, cpu_seconds, load_average
from wakeful.bench.memory import snapshot
from wakeful.bench.progress import Progress, percentile
from wakeful.bench.variants import BenchError

__all__ = ["run_dbos"]

RECV_TIMEOUT_S = 3600
CREATE_IN_FLIGHT, INGEST_IN_FLIGHT, WAKE_RATE_S = 16, 64, 0.2
WAIT_S = 600.0
SAMPLE_CHARS = 200  # error_samples: a failure's message cut to this (as harness_steps)
# DBOS's executor, which also runs its async workflows' blocking database calls (asyncio.to_thread), is unbounded by
# default: at N = 10,000 every waiter woken by a message got a thread of its own (about 10,000 threads, load average
# 1,700 on 2 cores, the run never ended). A bounded pool is DBOS's own setting (``max_executor_threads``); 64 leaves
# the peer as many threads as the bench keeps sends in flight
PEER_THREADS = 64


# ---------------------------------------------------------------------- the DBOS process


def _child(url: str) -> None:  # pragma: no cover - runs in the child process
    from dbos import DBOS, SetWorkflowID

    DBOS(config={"name": "wkbench", "system_database_url": url, "log_level": "WARNING",
                 "max_executor_threads": PEER_THREADS})
    waiting: set[int] = set()
    consumed = [0]
    recorded: dict[str, float] = {}

    @DBOS.workflow()
    async def waiter(n: int) -> None:
        while True:
            waiting.add(n)
            message = await DBOS.recv_async("metric", timeout_seconds=RECV_TIMEOUT_S)
            waiting.discard(n)
            if message is None:
                continue
            consumed[0] += 1
            if message.get("wake"):
                await DBOS.set_event_async(str(message["id"]), True)
                recorded[str(message["id"])] = time.monotonic()  # CLOCK_MONOTONIC: the bench's clock too

    async def main() -> None:
        DBOS.launch()
        loop = asyncio.get_running_loop()
        _say({"ready": True})
        while line := (await loop.run_in_executor(None, sys.stdin.readline)).strip():
            command, _, arg = line.partition(" ")
            if command == "create":
                began = time.monotonic()
                todo = iter(range(int(arg)))

                async def one(todo: Any = todo) -> None:
                    for n in todo:
                        with SetWorkflowID(f"w{n}"):
                            await DBOS.start_workflow_async(waiter, n)

                await asyncio.gather(*(one() for _ in range(CREATE_IN_FLIGHT)))
                _say({"create_s": time.monotonic() - began})
            elif command == "waiting":
                want, began = int(arg), time.monotonic()
                while len(waiting) < want and time.monotonic() - began < WAIT_S:
                    await asyncio.sleep(0.05)
                _say({"waiting": len(waiting)})
            elif command == "recorded":
                _say({"t": recorded.get(arg)})
            elif command == "consumed":
                _say({"consumed": consumed[0]})

    asyncio.run(main())
    os._exit(0)  # SIGTERM-free clean stop when stdin closes: DBOS threads are daemons of no interest here


def _say(doc: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(doc) + "\n")
    sys.stdout.flush()


class _Peer:
    """The DBOS child process seen from the bench."""

    def __init__(self, url: str, log: str) -> None:
        self.url, self.log = url, log
        self.proc: subprocess.Popen[str] | None = None

    def start(self) -> None:
        with open(self.log, "a") as log:
            self.proc = subprocess.Popen([sys.executable, "-m", "wakeful.bench.harness_peer", self.url],
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True)
        self.read()

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def ask(self, line: str) -> dict[str, Any]:
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        return self.read()

    def read(self) -> dict[str, Any]:
        assert self.proc is not None and self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise BenchError("the DBOS process ended early")
        return dict(json.loads(line))

    def stop(self, kill: bool) -> int:
        assert self.proc is not None
        if kill:
            self.proc.kill()
        else:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
        code = self.proc.wait(60)
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None and not pipe.closed:
                pipe.close()
        return code


# ---------------------------------------------------------------------- the steps


def run_dbos(options: Any, progress: Progress) -> dict[str, Any]:
    store = TestStore("postgresql", options.pg_url).open()
    peer = _Peer(store.url, str(store.data_dir / "dbos.log"))
    run: dict[str, Any] = {"system": "dbos", "store": "postgresql", "count": options.count,
                           "load_average_start": load_average(), "failures": []}
    try:
        peer.start()
        run["steps"] = _steps(peer, store, options, progress, run["failures"])
    except BenchError as exc:
        run.setdefault("steps", {})
        run["failures"].append(exc.message)
    finally:
        if peer.proc is not None and peer.proc.poll() is None:
            peer.stop(kill=True)
        store.close()
    return run


def _steps(peer: _Peer, store: TestStore, options: Any, progress: Progress,
           failures: list[str]) -> dict[str, Any]:
    from dbos import DBOSClient

    n = options.count
    out: dict[str, Any] = {}
    baseline = snapshot(peer.pid)
    progress.phase("dbos create", n)
    began = time.monotonic()
    create_s = float(peer.ask(f"create {n}")["create_s"])
    waiting = int(peer.ask(f"waiting {n}")["waiting"])
    out["create"] = {"count": n, "created": n, "create_s": round(create_s, 3),
                     "creates_per_s": round(n / create_s, 1), "errors": {}, "retried": {}, "error_samples": {},
                     "all_running_s": round(time.monotonic() - began, 3) if waiting >= n else None,
                     "load_average": load_average()}
    time.sleep(1.0)
    after = snapshot(peer.pid)
    out["memory"] = {"before": baseline, "after": after, "pss_per_loop": round((after["pss"] - baseline["pss"]) / n, 1),
                     "rss_per_loop": round((after["rss"] - baseline["rss"]) / n, 1), "load_average": load_average()}
    out["idle"] = _idle(peer, store, options.idle_seconds, progress) if options.idle_seconds else None
    client = DBOSClient(system_database_url=store.url)
    try:
        out["ingest"] = _ingest(peer, store, client, n, options.seconds, progress, failures) if options.seconds else None
        out["wake"] = _wake(peer, client, n, options.wakes, progress, failures) if options.wakes else None
    finally:
        client.destroy()
    out["restart"] = _restart(peer, n, progress, failures)
    return out


def _commits(store: TestStore) -> int | None:
    return asyncio.run(store.commits())


def _idle(peer: _Peer, store: TestStore, seconds: float, progress: Progress) -> dict[str, Any]:
    progress.phase("dbos idle", int(seconds))
    cpu0, commits0, began = cpu_seconds(peer.pid), _commits(store), time.monotonic()
    time.sleep(seconds)
    cpu1, commits1, window = cpu_seconds(peer.pid), _commits(store), time.monotonic() - began
    commits = None if commits0 is None or commits1 is None else commits1 - commits0
    return {"seconds": round(window, 2), "cpu_s": round(cpu1 - cpu0, 3),
            "cpu_s_per_min": round((cpu1 - cpu0) * 60 / window, 3), "commits": commits,
            "commits_per_min": None if commits is None else round(commits * 60 / window, 1),
            "load_average": load_average()}


def _ingest(peer: _Peer, store: TestStore, client: Any, n: int, seconds: float, progress: Progress,
            failures: list[str]) -> dict[str, Any]:
    progress.phase("dbos ingest", int(seconds))
    latencies: list[float] = []
    errors: dict[str, int] = {}
    samples: dict[str, dict[str, str | None]] = {}  # the first failure of each kind (the client does not retry)
    consumed0 = int(peer.ask("consumed")["consumed"])
    commits0 = _commits(store)
    window = CpuWindow()
    began = time.monotonic()
    stop_at = began + seconds
    counter = iter(range(1 << 62))

    def worker() -> None:
        while (now := time.monotonic()) < stop_at:
            k = next(counter)
            try:
                client.send(f"w{k % n}", {"value": 40, "id": f"e{k}"}, "metric")
                latencies.append(time.monotonic() - now)
            except Exception as exc:  # any failure of a send is an error of the run, counted by kind
                errors[type(exc).__name__] = errors.get(type(exc).__name__, 0) + 1
                samples.setdefault(type(exc).__name__, {"error": None, "message": str(exc)[:SAMPLE_CHARS]})

    with ThreadPoolExecutor(INGEST_IN_FLIGHT) as pool:
        for future in [pool.submit(worker) for _ in range(INGEST_IN_FLIGHT)]:
            future.result()
    elapsed = time.monotonic() - began
    accepted = len(latencies)
    drain_began = time.monotonic()
    drained = False
    while time.monotonic() - drain_began < WAIT_S:
        if int(peer.ask("consumed")["consumed"]) - consumed0 >= accepted:
            drained = True
            break
        time.sleep(0.2)
    if not drained:
        failures.append("dbos ingest: messages not consumed")
    if errors:
        failures.append(f"dbos ingest: errors {errors}")
    commits1 = _commits(store)
    commits = None if commits0 is None or commits1 is None else commits1 - commits0
    return {"seconds": round(elapsed, 2), "in_flight": INGEST_IN_FLIGHT, "accepted": accepted,
            "accepted_per_s": round(accepted / elapsed, 1), "errors": errors, "retried": {},
            "error_samples": samples, "latency_ms": {"p50": round(percentile(latencies, 50) * 1000, 2),
                           "p99": round(percentile(latencies, 99) * 1000, 2)},
            "drained": drained, "drain_s": round(time.monotonic() - drain_began, 2), "commits": commits,
            "commits_per_event": None if commits is None or not accepted else round(commits / accepted, 3),
            "node_cpu_s": None, "node_cpu_ms_per_event": None,  # the peer runs in its own process: not counted
            "cpu": window.finish(), "load_average": load_average()}


def _wake(peer: _Peer, client: Any, n: int, wakes: int, progress: Progress, failures: list[str]) -> dict[str, Any]:
    progress.phase("dbos wake", wakes)
    samples: list[float] = []
    give_up = time.monotonic() + WAIT_S  # a peer that cannot keep up ends its step as a failure, not the bench
    for i in range(wakes):
        if time.monotonic() > give_up:
            failures.append(f"dbos wake: {i} of {wakes} wakes sent within {WAIT_S:g} s")
            break
        slot = time.monotonic() + WAKE_RATE_S
        key = f"wake{i}"
        sent = time.monotonic()
        client.send(f"w{i % n}", {"wake": True, "id": key}, "metric")
        if client.get_event(f"w{i % n}", key, timeout_seconds=30):  # then: when was the result recorded
            recorded = peer.ask(f"recorded {key}")["t"]
            if recorded is not None:
                samples.append(float(recorded) - sent)
        progress.advance(i + 1)
        time.sleep(max(0.0, slot - time.monotonic()))
    return {"wakes": wakes, "samples": len(samples),
            "latency_ms": {"p50": round(percentile(samples, 50) * 1000, 2),
                           "p99": round(percentile(samples, 99) * 1000, 2)}, "load_average": load_average()}


def _restart(peer: _Peer, n: int, progress: Progress, failures: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {"load_average": None}
    for name, kill in (("kill9_all_running_s", True), ("sigterm_all_running_s", False)):
        progress.phase(f"dbos {name[:6]}", 1)
        code = peer.stop(kill=kill)
        if not kill and code != 0:
            failures.append(f"dbos clean stop exit code {code}")
        began = time.monotonic()
        peer.start()
        waiting = int(peer.ask(f"waiting {n}")["waiting"])
        out[name] = round(time.monotonic() - began, 3) if waiting >= n else None
        if waiting < n:
            failures.append(f"dbos {name}: {waiting} of {n} workflows waiting again")
    out["load_average"] = load_average()
    return out


if __name__ == "__main__":  # pragma: no cover
    _child(sys.argv[1])
