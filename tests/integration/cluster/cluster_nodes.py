"""Real cluster nodes for the placement tests: ``wakeful serve`` subprocesses on one PostgreSQL schema with short
placement periods, a setup step that creates tenants and Loops, HTTP event senders and store probes.

Periods: lease TTL 3 s, renew 1 s (so a node self-fences after 2 s without a renewal), heartbeat 1 s, dead after
3 s, placement tick 1 s, reconcile 2 s.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import sqlalchemy as sa

from wakeful.harness.config import Config, Limits, Placement
from wakeful.harness.embed import Harness
from wakeful.harness.store import loops, schema
from wakeful.harness.store.core import Store
from wakeful.harness.store.ids import new_id

GUEST = (Path(__file__).parent / "guests" / "cluster_echo.c").read_text()
# lease TTL 5 s, renew 1 s: the nodes' statement and idle-in-transaction timeouts are (TTL - renew) / 2 = 2 s each
# (harness/store/engine.py); with TTL 3 s they were 1 s, and a node or the in-process set-up descheduled for a
# second on a loaded 2-core machine lost its transaction (CI: StoreUnavailable, idle-in-transaction timeout)
PLACEMENT = Placement(lease_ttl_s=5, renew_s=1, heartbeat_s=1, dead_after_s=3, tick_s=1, reconcile_s=2)
LIMITS = Limits(loops_per_group=1000, notify_per_window=10_000, ingress_per_loop_per_min=6000,
                ingress_global_per_min=600_000)
ENV = {
    **{f"WAKEFUL_PLACEMENT__{k.upper()}": str(getattr(PLACEMENT, k)) for k in PLACEMENT.__dataclass_fields__},
    "WAKEFUL_LIMITS__LOOPS_PER_GROUP": str(LIMITS.loops_per_group),
    "WAKEFUL_LIMITS__NOTIFY_PER_WINDOW": str(LIMITS.notify_per_window),
    "WAKEFUL_LIMITS__INGRESS_PER_LOOP_PER_MIN": str(LIMITS.ingress_per_loop_per_min),
    "WAKEFUL_LIMITS__INGRESS_GLOBAL_PER_MIN": str(LIMITS.ingress_global_per_min),
}
def store_now_ms() -> int:
    return int(time.time() * 1000)


L, E, M, N, A = schema.loop, schema.loop_event, schema.message, schema.node, schema.agent_lease


@dataclass
class ServeNode:
    """One ``wakeful serve --node-name NAME`` process."""

    name: str
    db_url: str
    home: Path
    proc: asyncio.subprocess.Process | None = None
    url: str = ""
    node_id: str = ""
    env: dict[str, str] = field(default_factory=dict)  # overrides of ENV for this node

    async def start(self, timeout: float = 60) -> ServeNode:
        self.home.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, **ENV, **self.env, "WAKEFUL_HOME": str(self.home)}
        env.pop("WAKEFUL_CONFIG", None)
        self.log = (self.home / "serve.log").open("wb")
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "wakeful.cli.main", "serve", "--port", "0", "--db-url", self.db_url,
            "--node-name", self.name, stdout=asyncio.subprocess.PIPE, stderr=self.log, env=env,
        )
        assert self.proc.stdout is not None
        async with asyncio.timeout(timeout):
            while True:
                line = (await self.proc.stdout.readline()).decode()
                if not line:
                    raise AssertionError(f"{self.name} exited: {self.log_text()[-3000:]}")
                found = re.search(r"listening on (http://\S+)", line)
                if found:
                    self.url = found.group(1)
                    break
        return self

    def log_text(self) -> str:
        self.log.flush()
        return (self.home / "serve.log").read_text(errors="replace")

    def signal(self, sig: int) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, sig)

    async def wait(self, timeout: float = 40) -> int:
        assert self.proc is not None
        async with asyncio.timeout(timeout):
            return await self.proc.wait()

    async def close(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signal.SIGCONT)
                self.proc.kill()
            await self.proc.wait()
        self.log.close()


@dataclass
class Tenant:
    group_id: str
    key: str
    loops: list[str] = field(default_factory=list)
    agent_of: dict[str, str] = field(default_factory=dict)
    admin_key: str = ""


async def set_up(db_url: str, home: Path, compile_c: Any, *, agents: int, loops_per_agent: int) -> Tenant:
    """Create one group, ``agents`` agents (a session each) and their Loops through a temporary node, then drain
    it: the Loops stay active and their leases are released for the serve nodes to claim."""
    # max_objects=1: the setup node creates rows and does not spend time running what it hands over
    h = Harness(Config(data_dir=home, store_url=db_url, limits=LIMITS, placement=PLACEMENT, max_objects=1),
                sweeps=False)
    await h.start()
    try:
        group = await h.create_group("g-cluster")
        _, key = await h.create_key("group", group_id=group.id)
        tenant = Tenant(group.id, key)
        tenant.admin_key = (await h.create_key("admin"))[1]
        elf = compile_c(GUEST, name="cluster_echo.c")

        for i in range(agents):
            agent = await h.create_agent(group.id, f"agent{i}")
            session = await h.create_session(agent.id, "inbox")
            art = (await h.upload(agent.id, elf, path="/loops/echo.elf"))["artifact"]
            first = await h.create_loop(agent_id=agent.id, session_id=session.id, artifact=art)  # the real path
            made = [first["id"]]
            async with h.store.tx() as tx:  # the rest as rows in one transaction: setup speed, not under test
                for _ in range(loops_per_agent - 1):
                    row = await loops.insert_loop(
                        tx, group_id=group.id, agent_id=agent.id, session_id=session.id,
                        artifact_sha256=art.removeprefix("sha256:"), config={}, creator=f"agent:{agent.id}",
                        loop_id=new_id("lp", store_now_ms()),
                    )
                    made.append(row.id)
            tenant.loops.extend(made)
            tenant.agent_of.update((lp, agent.id) for lp in made)
    finally:
        await h.stop()
    return tenant


class Probe:
    """Reads the shared store the way an operator would (its own engine, the database clock)."""

    def __init__(self, store: Store) -> None:
        self.store = store

    @classmethod
    async def open(cls, db_url: str) -> Probe:
        return cls(await Store.open(db_url, migrate=False))

    async def close(self) -> None:
        await self.store.close()

    async def node_ids(self) -> dict[str, str]:
        async with self.store.tx(readonly=True) as tx:
            return {r.name: r.id for r in await tx.execute(sa.select(N.c.name, N.c.id).where(N.c.state != "gone"))}

    async def start(self, node: ServeNode) -> ServeNode:
        """Start ``node`` and fill in the id its node row got."""
        await node.start()
        node.node_id = (await self.node_ids())[node.name]
        return node

    async def placed_on(self, node: ServeNode, loops: list[str]) -> bool:
        """Every one of ``loops`` is on ``node`` with a runtime object."""
        rows = await self.placement()
        return all(rows[lp][0] == node.node_id and rows[lp][1] is not None for lp in loops)

    async def placement(self) -> dict[str, tuple[str | None, str | None, int]]:
        """loop id → (node_id, object_id, incarnation)."""
        async with self.store.tx(readonly=True) as tx:
            rows = await tx.execute(sa.select(L.c.id, L.c.node_id, L.c.object_id, L.c.incarnation))
            return {r.id: (r.node_id, r.object_id, int(r.incarnation)) for r in rows}

    async def events(self) -> dict[tuple[str, str], tuple[str, int | None]]:
        async with self.store.tx(readonly=True) as tx:
            rows = await tx.execute(sa.select(E.c.loop_id, E.c.event_id, E.c.status, E.c.acked_incarnation))
            return {(r.loop_id, r.event_id): (r.status, r.acked_incarnation) for r in rows}

    async def event(self, loop_id: str, event_id: str) -> Any:
        """The event row (status, first_delivered_ms, acked_incarnation, …) or None."""
        async with self.store.tx(readonly=True) as tx:
            stmt = sa.select(E).where(E.c.loop_id == loop_id, E.c.event_id == event_id)
            return (await tx.execute(stmt)).first()

    async def loop(self, loop_id: str) -> Any:
        async with self.store.tx(readonly=True) as tx:
            return (await tx.execute(sa.select(L).where(L.c.id == loop_id))).first()

    async def node_rows(self) -> dict[str, Any]:
        async with self.store.tx(readonly=True) as tx:
            return {r.name: r for r in await tx.execute(sa.select(N))}

    async def wakes(self) -> list[tuple[str, str, int]]:
        """(loop id, dedup key, incarnation) of every ``loop`` message."""
        async with self.store.tx(readonly=True) as tx:
            rows = await tx.execute(sa.select(M.c.loop_id, M.c.dedup_key, M.c.incarnation).where(M.c.kind == "loop"))
            return [(r.loop_id, r.dedup_key, int(r.incarnation)) for r in rows]

    async def leases(self) -> dict[str, tuple[str, int, int]]:
        async with self.store.tx(readonly=True) as tx:
            now = await tx.now_ms()
            rows = await tx.execute(sa.select(A.c.agent_id, A.c.node_id, A.c.epoch, A.c.expires_ms))
            return {r.agent_id: (r.node_id, int(r.epoch), int(r.expires_ms) - now) for r in rows}

    async def oldest_pending_age_ms(self) -> int:
        async with self.store.tx(readonly=True) as tx:
            now = await tx.now_ms()
            oldest = (await tx.execute(sa.select(sa.func.min(E.c.received_ms)).where(E.c.status == "pending"))).scalar()
            return 0 if oldest is None else now - int(oldest)


@dataclass
class Sender:
    """Posts events round-robin over nodes; remembers every ``202 duplicate: false`` and every other answer."""

    tenant: Tenant
    nodes: list[ServeNode]
    admitted: dict[tuple[str, str], str] = field(default_factory=dict)  # (loop, event) → node name
    by_node: dict[str, list[float]] = field(default_factory=dict)  # node name → admission times (loop clock)
    refused: list[tuple[str, int, str]] = field(default_factory=list)
    unreachable: dict[str, int] = field(default_factory=dict)
    unanswered: dict[tuple[str, str], str] = field(default_factory=dict)  # (loop, event) → node: no answer came
    skip: set[str] = field(default_factory=set)
    seq: int = 0

    async def run(self, stop: asyncio.Event, *, workers: int = 2, per_s: float = 10.0) -> None:
        """``workers`` concurrent senders, each at most ``per_s`` requests a second."""
        loop = asyncio.get_running_loop()
        async with httpx.AsyncClient(timeout=10) as client:
            async def worker(w: int) -> None:
                i = w
                while not stop.is_set():
                    live = [n for n in self.nodes if n.name not in self.skip]
                    node = live[i % len(live)]
                    loop_id = self.tenant.loops[(i * 7) % len(self.tenant.loops)]
                    i += workers
                    await self.send_one(client, node, loop_id, loop)
                    await asyncio.sleep(1 / per_s)

            await asyncio.gather(*(worker(w) for w in range(workers)))

    async def send_one(self, client: httpx.AsyncClient, node: ServeNode, loop_id: str, loop: Any,
                       payload: dict[str, Any] | None = None) -> int:
        self.seq += 1
        event_id = f"ev{self.seq}"
        try:
            resp = await client.post(
                f"{node.url}/v1/agent-groups/{self.tenant.group_id}/loops/{loop_id}/events",
                json={"event_id": event_id, "topic": "tick", "payload": payload or {"n": self.seq}},
                headers={"Authorization": f"Bearer {self.tenant.key}"},
            )
        except httpx.TransportError:
            self.unreachable[node.name] = self.unreachable.get(node.name, 0) + 1
            self.unanswered[(loop_id, event_id)] = node.name  # (committed or not: its answer was lost)
            return 0
        if resp.status_code == 202 and resp.json().get("duplicate") is False:
            self.admitted[(loop_id, event_id)] = node.name
            self.by_node.setdefault(node.name, []).append(loop.time())
        else:
            self.refused.append((node.name, resp.status_code, resp.text[:200]))
        return resp.status_code


async def until(predicate: Any, timeout: float, step: float = 0.1) -> float:
    """Poll an async predicate; returns the seconds it took (AssertionError after ``timeout``)."""
    loop = asyncio.get_running_loop()
    start = loop.time()
    while not await predicate():
        if loop.time() - start > timeout:
            raise AssertionError(f"condition not reached within {timeout} s")
        await asyncio.sleep(step)
    return loop.time() - start
