"""The steps of ``wakeful bench harness`` against one wakeful node (benchmarks.md §2.1 steps 2–7), over HTTP.

Each step returns its figures as a dict and carries the load average at its end; correctness failures (a 5xx,
an accepted event never acked, a Loop not running again) go to ``failures``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections import Counter
from collections.abc import Callable, Coroutine
from importlib import resources
from typing import Any

from wakeful.bench.harness_http import Connection, HttpAnswer
from wakeful.bench.harness_node import CpuWindow, NodeProcess, Tenant, TestStore, cpu_seconds, load_average
from wakeful.bench.memory import snapshot
from wakeful.bench.progress import Progress, percentile
from wakeful.bench.variants import BenchError

__all__ = ["Answers", "Fleet", "NodeSteps"]

CREATE_IN_FLIGHT = 16  # §2.1 step 2
# a client's answer to 503 (the store gave no lock in time, nothing was written) and to 429 (back-pressure: a Loop's
# mailbox is full until it acks, or a rate bucket is empty): again after Retry-After, at most RETRIES times; each
# retry is counted in the step's ``retried`` by status, and only an answer still failing is an error. (A small N with
# 64 requests in flight sends each Loop more than its guest acks at once: 429 mailbox_full, which is not a failure.)
RETRIES = 5
RETRIED = frozenset({429, 503})
RETRY_S = 1.0  # the wait when the answer names none (StoreUnavailable carries no Retry-After)
RETRY_MAX_S = 5.0  # a longer Retry-After is cut to this (the steps are short)
SAMPLE_CHARS = 200  # error_samples: the message of the first answer of each failing status, cut to this
INGEST_IN_FLIGHT = 64  # §2.1 step 5
WAKE_RATE_S = 0.2  # §2.1 step 6: one at a time at 5/s
RUNNING_TIMEOUT_S = 600.0
# wait_running lists every Loop again this long after the last listing ended: a listing of a page costs the node
# the page alone (issue 16), so a fine poll does not slow what it measures; the coarse 0.2 s added up to 0.2 s
RUNNING_POLL_S = 0.05
DRAIN_TIMEOUT_S = 300.0
# §2.1 step 4: the idle window starts after this long with nothing sent (at most the window itself): PostgreSQL
# backends flush their counters up to 10 s late (PGSTAT_IDLE_INTERVAL), so the create step's last commits landed
# in an idle window opened at once — 1,000 of them at N = 1,000 — and the node's post-create work with them
IDLE_SETTLE_S = 11.0
LOW, HIGH = 40, 95  # below and above the example's threshold of 90


def _program() -> str:
    return resources.files("wakeful.sdk").joinpath("examples/threshold_alert.c").read_text(encoding="utf-8")


class Fleet:
    """The run's agents (one session each) and Loops, in creation order."""

    def __init__(self) -> None:
        self.agents: list[tuple[str, str]] = []  # (agent_id, session_id)
        self.loops: list[str] = []
        self.loop_agent: dict[str, int] = {}
        self.incarnations: dict[str, int] = {}


async def _pool(n: int, work: Callable[[int], Coroutine[Any, Any, None]]) -> None:
    """Run ``work(worker)`` on ``n`` workers until each returns; the first error cancels the rest."""
    async with asyncio.TaskGroup() as group:
        for worker in range(n):
            group.create_task(work(worker))


class Answers:
    """The answers of one step's requests: final statuses, 429s and 503s retried, and per non-2xx status the first body
    (``error_samples``: its ``error`` code and ``message``, so a failed run says why, not only how often)."""

    def __init__(self) -> None:
        self.statuses: Counter[str] = Counter()
        self.retried: Counter[str] = Counter()
        self.samples: dict[str, dict[str, str | None]] = {}

    async def send(self, conn: Connection, method: str, path: str, body: Any) -> HttpAnswer:
        """``body`` to ``path``, again after a 429's or 503's Retry-After (bounded); the final answer is counted."""
        answer = await conn.request(method, path, body)
        for _ in range(RETRIES):
            if answer.status not in RETRIED:
                break
            self.retried[str(answer.status)] += 1
            self._sample(answer)
            await asyncio.sleep(min(RETRY_MAX_S, RETRY_S if answer.retry_after is None else answer.retry_after))
            answer = await conn.request(method, path, body)
        self.statuses[str(answer.status)] += 1
        if not 200 <= answer.status < 300:
            self._sample(answer)
        return answer

    def errors(self, ok: int) -> dict[str, int]:
        return {k: v for k, v in self.statuses.items() if k != str(ok)}

    def _sample(self, answer: HttpAnswer) -> None:
        key = str(answer.status)
        if key not in self.samples:
            self.samples[key] = sample_of(answer)


def sample_of(answer: HttpAnswer) -> dict[str, str | None]:
    """The ``{error, message}`` of an error body (a body that is not one: its first bytes as the message)."""
    try:
        body = answer.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and isinstance(body.get("message"), str):
        code = body.get("error")
        return {"error": code if isinstance(code, str) else None, "message": body["message"][:SAMPLE_CHARS]}
    return {"error": None, "message": answer.body[:SAMPLE_CHARS].decode("utf-8", "replace")}


class NodeSteps:
    """Drives one node: ``g`` is the group path, connections carry the group key."""

    def __init__(self, nodes: list[NodeProcess], store: TestStore, tenant: Tenant, progress: Progress) -> None:
        self.nodes, self.store, self.tenant, self.progress = nodes, store, tenant, progress
        self.node = nodes[0]  # the node that is killed and restarted (step 7); with --nodes K the others stay
        self.owner: dict[str, int] = {}  # Loop id → index of the node it is resident on
        self.g = f"/v1/agent-groups/{tenant.group}"
        self.fleet = Fleet()
        self.failures: list[str] = []
        self._event_seq = 0
        self.baselines: list[dict[str, Any]] = []

    def connection(self, k: int = 0) -> Connection:
        """A connection to node ``k mod K`` (workers spread over the nodes)."""
        node = self.nodes[k % len(self.nodes)]
        return Connection("127.0.0.1", node.port, {"Authorization": f"Bearer {self.tenant.group_key}"})

    async def commits(self) -> int | None:
        """Database commits so far: PostgreSQL's ``xact_commit`` of the run's database; on SQLite the nodes' own
        count of committed write transactions (``Store.commits`` in ``GET /v1/info``, a group-commit batch once)."""
        if self.store.kind == "postgresql":
            return await self.store.commits()
        total = 0
        for node in self.nodes:
            conn = Connection("127.0.0.1", node.port, {"Authorization": f"Bearer {self.tenant.admin_key}"})
            try:
                answer = await conn.request("GET", "/v1/info")
            finally:
                await conn.close()
            if answer.status != 200:
                return None
            total += int(answer.json().get("store_commits", 0))
        return total

    def cpu(self) -> list[float]:
        return [cpu_seconds(node.pid) for node in self.nodes]

    # ------------------------------------------------------------------ step 2: create
    async def create(self, count: int, per_agent: int) -> dict[str, Any]:
        agents = -(-count // per_agent)
        self.progress.phase("agents", agents)
        await self._make_agents(agents)
        artifact = await self._build()
        await asyncio.sleep(0.5)
        # §2.1 step 3 "before": the nodes with the tenant and the build, no Loop yet
        self.baselines = [snapshot(node.pid) for node in self.nodes]
        self.progress.phase("create", count)
        answers = Answers()
        cpus0 = self.cpu()  # the nodes' CPU over the step: a per-create figure that survives a loaded machine
        began = time.monotonic()
        todo = iter(range(count))
        made: dict[int, str] = {}

        async def worker(w: int) -> None:
            conn = self.connection(w)
            try:
                for n in todo:
                    agent_id, session_id = self.fleet.agents[n // per_agent]
                    body = {"agent_id": agent_id, "session_id": session_id, "artifact": artifact,
                            "name": f"alert-{n}", "config": {"threshold": 90}}
                    answer = await answers.send(conn, "POST", self.g + "/loops", body)
                    if answer.status == 201:
                        made[n] = str(answer.json()["id"])
                        self.progress.advance(len(made))
            finally:
                await conn.close()

        await _pool(CREATE_IN_FLIGHT, worker)
        created_s = time.monotonic() - began
        for n in sorted(made):
            self.fleet.loops.append(made[n])
            self.fleet.loop_agent[made[n]] = n // per_agent
        errors = answers.errors(201)
        if errors:
            self.failures.append(f"create: answers {errors} {answers.samples}")
        running = await self.wait_running(began, min_incarnation={})
        cpu_s = sum(b - a for a, b in zip(cpus0, self.cpu()))  # (the listings that saw them all running included)
        return {"count": count, "created": len(made), "create_s": round(created_s, 3),
                "creates_per_s": round(len(made) / created_s, 1) if created_s else None,
                "node_cpu_s": round(cpu_s, 3),
                "node_cpu_ms_per_create": round(cpu_s * 1000 / len(made), 3) if made else None,
                "errors": errors, "retried": dict(answers.retried), "error_samples": answers.samples,
                "all_running_s": running, "load_average": load_average()}

    async def _make_agents(self, agents: int) -> None:
        todo = iter(range(agents))
        made: dict[int, tuple[str, str]] = {}

        async def worker(_: int) -> None:
            conn = self.connection()
            try:
                for n in todo:
                    a = await conn.request("POST", self.g + "/agents", {"name": f"agent-{n}"})
                    if a.status != 201:
                        raise BenchError(f"create agent: {a.status} {a.body[:200]!r}")
                    agent_id = str(a.json()["id"])
                    s = await conn.request("POST", f"{self.g}/agents/{agent_id}/sessions", {"title": "inbox"})
                    if s.status != 201:
                        raise BenchError(f"create session: {s.status} {s.body[:200]!r}")
                    made[n] = (agent_id, str(s.json()["id"]))
                    self.progress.advance(len(made))
            finally:
                await conn.close()

        await _pool(CREATE_IN_FLIGHT, worker)
        self.fleet.agents = [made[n] for n in range(agents)]

    async def _build(self) -> str:
        conn = self.connection()
        try:
            answer = await conn.request("POST", self.g + "/builds", {
                "source": _program(), "path": "/loops/alert.elf", "agent_id": self.fleet.agents[0][0]})
        finally:
            await conn.close()
        body = answer.json()
        if answer.status != 200 or body.get("state") != "succeeded":
            raise BenchError(f"build of the threshold-alert example failed: {answer.status} {answer.body[:300]!r}")
        return str(body["artifact"])

    # ------------------------------------------------------------------ running / pending
    async def _pages(self, k: int = 0) -> list[dict[str, Any]]:
        conn = self.connection(k)
        items: list[dict[str, Any]] = []
        cursor: str | None = None
        try:
            while True:
                path = self.g + "/loops?limit=200" + (f"&cursor={cursor}" if cursor else "")
                answer = await conn.request("GET", path)
                if answer.status != 200:
                    raise BenchError(f"list Loops: {answer.status} {answer.body[:200]!r}")
                page = answer.json()
                items.extend(page["items"])
                cursor = page.get("next_cursor")
                if not cursor:
                    return items
        finally:
            await conn.close()

    async def wait_running(self, began: float, min_incarnation: dict[str, int]) -> float | None:
        """Seconds from ``began`` until every Loop is resident at an incarnation above ``min_incarnation``."""
        want = len(self.fleet.loops)
        self.progress.phase("running", want)
        while time.monotonic() - began < RUNNING_TIMEOUT_S:
            try:  # each node reports "resident" only for its own Loops (the others' are "remote")
                lists = [await self._pages(k) for k in range(len(self.nodes))]
            except (OSError, BenchError):
                await asyncio.sleep(0.2)
                continue
            items = lists[0]
            self._drop_stopped(items)
            want = len(self.fleet.loops)
            owner: dict[str, int] = {}
            for k, listed in enumerate(lists):
                for item in listed:
                    runtime = item.get("runtime") or {}
                    if runtime.get("state") == "resident" and item["incarnation"] > min_incarnation.get(item["id"], 0):
                        owner[str(item["id"])] = k
            done = len(owner)
            self.progress.advance(done)
            if done >= want:  # the time when the listing that saw them all ended (an upper bound, never early)
                self.owner = owner
                self.fleet.incarnations = {str(i["id"]): int(i["incarnation"]) for i in items}
                return round(time.monotonic() - began, 3)
            await asyncio.sleep(RUNNING_POLL_S)
        self.failures.append(f"not all {want} Loops running within {RUNNING_TIMEOUT_S:.0f} s")
        return None

    def _drop_stopped(self, items: list[dict[str, Any]]) -> None:
        """A Loop that left ``active`` (its program exited, it failed) is a failure of the run; the steps go on
        without it, so one stopped Loop does not hold every later wait to its timeout."""
        for item in items:
            if item["state"] != "active" and item["id"] in self.fleet.loop_agent:
                self.failures.append(f"Loop {item['id']} ({item.get('name')}) is {item['state']} "
                                     f"({item.get('pause_reason')}, exit code {item.get('exit_code')})")
                del self.fleet.loop_agent[item["id"]]
                self.fleet.loops.remove(item["id"])

    async def pending(self) -> int:
        items = await self._pages()
        self._drop_stopped(items)
        return sum(int(item.get("pending_count") or 0) for item in items if item["state"] == "active")

    # ------------------------------------------------------------------ step 3/4: memory and idle
    def memory(self) -> dict[str, Any]:
        """§2.1 step 3: the nodes' PSS/RSS growth per durable Loop (summed over ``--nodes``)."""
        afters = [snapshot(node.pid) for node in self.nodes]
        n = max(1, len(self.fleet.loops))

        def grown(key: str) -> float:
            return round(sum(float(a[key] - b[key]) for a, b in zip(afters, self.baselines)) / n, 1)

        return {"before": self.baselines[0], "after": afters[0], "pss_per_loop": grown("pss"),
                "rss_per_loop": grown("rss"), "load_average": load_average(),
                "per_node": [{"node": node.node_name, "loops": sum(1 for v in self.owner.values() if v == k),
                              "pss": a["pss"], "pss_growth": a["pss"] - b["pss"]}
                             for k, (node, a, b) in enumerate(zip(self.nodes, afters, self.baselines))]}

    async def idle(self, seconds: float) -> dict[str, Any]:
        await asyncio.sleep(min(IDLE_SETTLE_S, seconds))
        self.progress.phase("idle", int(seconds))
        cpus0, commits0, began = self.cpu(), await self.commits(), time.monotonic()
        while (elapsed := time.monotonic() - began) < seconds:
            self.progress.advance(int(elapsed))
            await asyncio.sleep(min(1.0, seconds - elapsed))
        cpus1, commits1 = self.cpu(), await self.commits()
        cpu0, cpu1 = sum(cpus0), sum(cpus1)
        window = time.monotonic() - began
        per_min = 60.0 / window if window else 0.0
        commits = None if commits0 is None or commits1 is None else commits1 - commits0
        return {"seconds": round(window, 2), "cpu_s": round(cpu1 - cpu0, 3),
                "cpu_s_per_min": round((cpu1 - cpu0) * per_min, 3), "commits": commits,
                "commits_per_min": None if commits is None else round(commits * per_min, 1),
                "per_node_cpu_s_per_min": [round((b - a) * per_min, 3) for a, b in zip(cpus0, cpus1)],
                "load_average": load_average()}

    # ------------------------------------------------------------------ step 5: ingest
    def _event(self, value: int) -> dict[str, Any]:
        self._event_seq += 1
        return {"topic": "metric", "event_id": f"e{self._event_seq}", "payload": {"name": "cpu", "value": value}}

    async def ingest(self, seconds: float) -> dict[str, Any]:
        loops = self.fleet.loops
        self.progress.phase("ingest", int(seconds))
        latencies: list[float] = []  # from the first send to the final answer (retries included, as a client sees)
        answers = Answers()
        commits0, cpus0 = await self.commits(), self.cpu()
        window = CpuWindow()
        began = time.monotonic()
        stop_at = began + seconds
        turn = iter(range(1 << 62))

        async def worker(w: int) -> None:
            conn = self.connection(w)
            try:
                while (now := time.monotonic()) < stop_at:
                    loop_id = loops[next(turn) % len(loops)]
                    await answers.send(conn, "POST", f"{self.g}/loops/{loop_id}/events", self._event(LOW))
                    latencies.append(time.monotonic() - now)
                    if len(latencies) % 256 == 0:
                        self.progress.advance(int(now - began))
            finally:
                await conn.close()

        await _pool(INGEST_IN_FLIGHT, worker)
        elapsed = time.monotonic() - began
        accepted = answers.statuses.get("202", 0)
        drain_began = time.monotonic()
        drained = await self._drain()
        drain_s = time.monotonic() - drain_began
        commits1, cpus1 = await self.commits(), self.cpu()
        errors = answers.errors(202)
        if errors:
            self.failures.append(f"ingest: answers {errors} {answers.samples}")
        commits = None if commits0 is None or commits1 is None else commits1 - commits0
        node_cpu_s = sum(cpus1) - sum(cpus0)  # the ingest and its drain: every accepted event delivered and acked
        return {"seconds": round(elapsed, 2), "in_flight": INGEST_IN_FLIGHT, "accepted": accepted,
                "accepted_per_s": round(accepted / elapsed, 1), "errors": errors,
                "retried": dict(answers.retried), "error_samples": answers.samples,
                "latency_ms": {"p50": round(percentile(latencies, 50) * 1000, 2),
                               "p99": round(percentile(latencies, 99) * 1000, 2)},
                "drained": drained, "drain_s": round(drain_s, 2), "commits": commits,
                "commits_per_event": None if commits is None or not accepted else round(commits / accepted, 3),
                "node_cpu_s": round(node_cpu_s, 2),
                "node_cpu_ms_per_event": round(node_cpu_s * 1000 / accepted, 4) if accepted else None,
                "per_node_cpu_s": [round(b - a, 2) for a, b in zip(cpus0, cpus1)],
                "cpu": window.finish(node_cpu_s), "load_average": load_average()}

    async def _drain(self) -> bool:
        """§2.1 step 5: every accepted event delivered and acked (no pending event left on any Loop)."""
        began = time.monotonic()
        while time.monotonic() - began < DRAIN_TIMEOUT_S:
            if await self.pending() == 0:
                return True
            await asyncio.sleep(0.2)
        self.failures.append(f"ingest: events still pending {DRAIN_TIMEOUT_S:.0f} s after the step")
        return False

    # ------------------------------------------------------------------ step 6: wake latency
    async def wake(self, wakes: int) -> dict[str, Any]:
        agent_id, session_id = self.fleet.agents[0]
        targets = [lp for lp in self.fleet.loops if self.fleet.loop_agent[lp] == 0]
        if not targets:
            self.failures.append("wake: no running Loop of the first agent left")
            return {"wakes": wakes, "samples": 0, "latency_ms": {"p50": 0.0, "p99": 0.0},
                    "load_average": load_average()}
        seen: dict[str, float] = {}
        arrived = asyncio.Event()
        opened = asyncio.Event()
        reader = asyncio.create_task(self._stream(session_id, seen, arrived, opened))
        samples: list[float] = []
        conn = self.connection()
        self.progress.phase("wake", wakes)
        try:
            await asyncio.wait_for(opened.wait(), 30)
            for i in range(wakes):
                slot = time.monotonic() + WAKE_RATE_S
                loop_id = targets[i % len(targets)]
                await conn.request("POST", f"{self.g}/loops/{loop_id}/events", self._event(LOW))
                event = self._event(HIGH)
                key = f"above:{event['event_id']}"
                sent = time.monotonic()
                answer = await conn.request("POST", f"{self.g}/loops/{loop_id}/events", event)
                if answer.status != 202:
                    self.failures.append(f"wake: answer {answer.status}")
                    continue
                while key not in seen:
                    arrived.clear()
                    try:
                        await asyncio.wait_for(arrived.wait(), 30)
                    except TimeoutError:
                        self.failures.append(f"wake: no message for {key} within 30 s")
                        break
                if key in seen:
                    samples.append(seen[key] - sent)
                self.progress.advance(i + 1)
                await asyncio.sleep(max(0.0, slot - time.monotonic()))
        finally:
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await reader
            await conn.close()
        return {"wakes": wakes, "samples": len(samples),
                "latency_ms": {"p50": round(percentile(samples, 50) * 1000, 2),
                               "p99": round(percentile(samples, 99) * 1000, 2)},
                "load_average": load_average()}

    async def _stream(self, session_id: str, seen: dict[str, float], arrived: asyncio.Event,
                      opened: asyncio.Event) -> None:
        import httpx

        headers = {"Authorization": f"Bearer {self.tenant.group_key}"}
        async with httpx.AsyncClient(base_url=self.node.url, timeout=None) as client, client.stream(
                "GET", f"{self.g}/sessions/{session_id}/stream", headers=headers) as answer:
            async for line in answer.aiter_lines():
                if line.startswith(": stream open"):
                    opened.set()
                elif line.startswith("data:"):
                    message = json.loads(line[5:])
                    if message.get("dedup_key"):
                        seen[str(message["dedup_key"])] = time.monotonic()
                        arrived.set()

    # ------------------------------------------------------------------ step 7: restart
    def _moved(self) -> dict[str, int]:
        """The incarnations a restart of node 0 must exceed: its own Loops' (the other nodes' Loops stay)."""
        return {lp: inc for lp, inc in self.fleet.incarnations.items() if self.owner.get(lp, 0) == 0}

    async def restart(self) -> dict[str, Any]:
        before = self._moved()
        self.node.kill9()
        began = time.monotonic()
        self.node.start()
        after_kill = await self.wait_running(began, min_incarnation=before)
        before = self._moved()
        code = self.node.terminate()
        if code != 0:
            self.failures.append(f"restart: SIGTERM exit code {code}")
        began = time.monotonic()
        self.node.start()
        after_term = await self.wait_running(began, min_incarnation=before)
        return {"kill9_all_running_s": after_kill, "sigterm_exit_code": code, "sigterm_all_running_s": after_term,
                "load_average": load_average()}

