"""``Placement``: one node's part in a cluster on PostgreSQL — registration, leases, sweeps, signals, drain.

harness.md §19: a Loop runs only on the node holding its agent's lease. The node claims free agents when an
operation arrives for them or in the stranded sweep (fair share), adopts their active Loops, keeps the leases
renewed from its own thread (``Renewer``), fences itself when it cannot prove a lease, and on drain ends every
incarnation and releases every lease so other nodes adopt at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import socket
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql as pg_dialect

from wakeful.harness import lifecycle as lc
from wakeful.harness.errors import StoreUnavailable
from wakeful.harness.instruments import Instrument
from wakeful.harness.placement import leases, nodes, signals
from wakeful.harness.placement.book import LeaseBook
from wakeful.harness.placement.renewer import Renewer
from wakeful.harness.store import loops, schema
from wakeful.harness.store.core import Tx
from wakeful.harness.store.reads import by_keys
from wakeful.harness.tasks import cancel_and_wait

if TYPE_CHECKING:
    from wakeful.harness.node import Node, Resident

__all__ = ["DRAIN_BOUND_S", "SWEEP_PAGE", "Placement"]

log = logging.getLogger("wakeful.placement")

SWEEP_PAGE = 200  # §19.3: the stranded sweep pages 200 rows ordered by (updated_ms, id)
FAIR_SHARE_SLACK = 1.25  # §19.3: claim while below 1.25 × (active agents ÷ live nodes)
DRAIN_BOUND_S = 25.0  # §19.4
L, E, A = schema.loop, schema.loop_event, schema.agent_lease


class Placement:
    """Attach with ``node.placement = Placement(node)``; then ``await start()``, ``tick()`` on the placement
    period, ``fence()`` often (cheap, in memory) and ``await drain()`` at shutdown."""

    def __init__(
        self, node: Node, *, name: str | None = None, wall: Any = None,
        monotonic_ns: Callable[[], int] | None = None,
    ) -> None:
        from wakeful import __version__

        cfg = node.config.placement
        self.node, self.store = node, node.store
        self.node_id = node.node_id
        self.name = name or node.config.node_name or socket.gethostname()
        self.version = __version__
        self.ttl_ms = cfg.lease_ttl_s * 1000
        self.dead_after_ms = cfg.dead_after_s * 1000
        self.cfg = cfg
        # lease proofs run on the process's monotonic clock (tests of the lease logic inject one): fencing
        # guards against real time passing, which a test clock that jumps would fake in both directions
        self.mono = monotonic_ns or time.monotonic_ns
        self.book = LeaseBook(self.mono, (cfg.lease_ttl_s - cfg.renew_s) * 1_000_000_000)
        self.state = "new"  # new → alive → draining → gone
        self.renewer = Renewer(
            node.config.effective_store_url, book=self.book, node_id=self.node_id,
            ttl_ms=self.ttl_ms, renew_s=cfg.renew_s, heartbeat_s=cfg.heartbeat_s,
            monotonic_ns=self.mono, objects=lambda: self.node.resident_count,
            on_lost=self._lost_threadsafe, wall=wall,
        )
        # issue 16: the LISTEN connection is checked once per tick period, not every second
        self.listener = signals.Listener(node.store, self._on_signal, ping_s=max(1.0, float(cfg.tick_s)))
        self._cursor: tuple[int, str] | None = None
        self._claiming: dict[str, asyncio.Lock] = {}  # one claim at a time per agent on this node
        self._agent_of: dict[str, str] = {}  # loop id → agent id (an agent never changes; saves a read per load)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._tick_lock = asyncio.Lock()
        self._replaying: set[str] = set()  # Loops with a replay queued by a signal
        self.wants_messages: Callable[[], bool] = lambda: False  # set by the Harness: wake handlers exist
        self.fenced_loops = 0  # objects unloaded by self-fencing (tests, status)
        self._reclaimed: set[str] = set()  # agents whose leases start() took over, adopted by the next tick
        self._fenced_at: tuple[int, int, str] | None = None  # what the last fence that unloaded nothing saw

    # ------------------------------------------------------------------ start, sweeps, drain

    @property
    def accepting(self) -> bool:
        """§19.4: a draining node refuses intake (503)."""
        return self.state == "alive"

    async def start(self, *, sweeps: bool = True) -> None:
        """§19.1: insert the node row (alive); start the renewer thread, the listener and the sweeps; claim and
        adopt stranded agents once right away. Call after ``node.open()`` (the runtime must be running)."""
        self._loop = asyncio.get_running_loop()
        sent_ns = self.mono()
        async with self.store.tx() as tx:
            await nodes.register(tx, node_id=self.node_id, name=self.name, host=socket.gethostname(),
                                 pid=os.getpid(), version=self.version, capacity=self.node.config.max_objects)
            # a restart under this node's own id: its leases, and those its drain released, up to the fair share
            mine = await leases.reclaim(tx, self.node_id, self.ttl_ms, released=await self._share(tx))
        for agent_id, epoch in mine.items():
            self.book.add(agent_id, epoch, sent_ns)
            self.node.instruments.claimed(agent_id)  # a reclaim is a claim: the agent's unhandled wakes are offered
        self._reclaimed.update(mine)  # adopted by the first tick, below
        if mine:
            log.info("reclaimed %d leases of this node's previous run", len(mine))
        self.state = "alive"
        self.node.add_instrument(_Signaller(self))  # §19.3: tell a Loop's holder about changes made here
        await asyncio.to_thread(self.renewer.start)
        self.listener.start()
        if not sweeps:
            await self.tick()  # embedders driving ticks themselves find the stranded Loops adopted on return
            return
        # issue 16 / benchmarks.md §2.2: a restart's own Loops run before the node serves (as on SQLite, where the
        # node's open loads them): loaded by the first tick in the background, they raced the faces' first requests
        # — at N = 10,000 the harness bench's listings, polled while it waited, took most of the load's CPU
        try:
            await self._adopt_pending()
        except StoreUnavailable as exc:  # left in _reclaimed for the first tick
            log.warning("placement adoption deferred: %s", exc.message)
        fence_every = max(0.05, min(1.0, self.cfg.renew_s / 4))
        self._tasks = [
            self._loop.create_task(_every(self.cfg.tick_s, self.tick, first=0.0)),  # adoption in the background
            self._loop.create_task(_every(fence_every, self.fence)),
        ]

    async def _share(self, tx: Tx) -> int:
        """§19.3's claim limit, as the stranded sweep counts it: 1.25 × (active agents ÷ live nodes)."""
        live = max(1, await nodes.live_nodes(tx, self.dead_after_ms))
        active = int((await tx.execute(
            sa.select(sa.func.count(sa.distinct(L.c.agent_id))).where(L.c.state == lc.ACTIVE))).scalar_one())
        return math.ceil(FAIR_SHARE_SLACK * max(1, active) / live)  # the sweep claims while below it

    async def drain(self) -> None:
        """§19.4: draining → end every incarnation → release every lease → gone (bounded by 25 s)."""
        if self.state in ("draining", "gone"):
            return
        self.state = "draining"  # from here loads are refused, so a running tick ends quickly
        with contextlib.suppress(TimeoutError):  # let it end rather than cutting its transactions
            await asyncio.wait_for(self._tick_lock.acquire(), 10)
        await cancel_and_wait(self._tasks)
        self._tasks = []
        with contextlib.suppress(StoreUnavailable):
            async with self.store.tx() as tx:
                await nodes.set_state(tx, self.node_id, "draining")
        try:
            await asyncio.wait_for(self._hand_over(), DRAIN_BOUND_S)
        except (TimeoutError, StoreUnavailable) as exc:
            log.warning("drain incomplete (%s): lease expiry covers the rest", type(exc).__name__)
        self.book.drop(list(self.book.snapshot()))
        await asyncio.to_thread(self.renewer.stop)
        await self.listener.stop()
        with contextlib.suppress(StoreUnavailable):
            async with self.store.tx() as tx:
                await nodes.set_state(tx, self.node_id, "gone")
        self.state = "gone"
        if self._tick_lock.locked():
            self._tick_lock.release()

    async def _hand_over(self) -> None:
        await self.node.settle()
        await self.node.end_many([res.loop_id for res in self.node.residents()])
        await self.node.flush_logs()
        held = self.book.snapshot()
        if held:
            async with self.store.tx() as tx:
                await leases.release(tx, self.node_id, held)
            with contextlib.suppress(StoreUnavailable):
                await signals.notify(self.store, signals.LOOPS, f"* {self.node_id}")  # others sweep now, not next tick

    # ------------------------------------------------------------------ what this node may do

    def holds(self, agent_id: str) -> bool:
        """True while this node can prove the agent's lease on its monotonic clock."""
        return self.state in ("alive", "draining") and self.book.holds(agent_id)

    def may_act(self, res: Resident) -> bool:
        """§5 second fence, checked before every host call: the object's agent lease is still provable."""
        return self.holds(res.agent_id)

    def learn(self, loop_id: str, agent_id: str) -> None:
        """The agent of a Loop this node just created (issue 16: its load, the lease check of its step 1 and the
        signal of its transition need no read of the row to know it; a Loop's agent never changes)."""
        self._agent_of[loop_id] = agent_id

    async def before_load(self, loop_id: str) -> bool:
        """§19.2: before adopting, make sure this node holds the agent's lease; claim it when it is free (an
        operation arrived here). When another node holds it, signal that node instead and do not load."""
        if self.state != "alive":
            return False
        agent_id = self._agent_of.get(loop_id)
        if agent_id is not None and self.holds(agent_id):
            return True  # step 1 re-checks the lease in its transaction anyway
        if agent_id is None:  # (issue 16: a Loop created here is known, and its row is not read again)
            async with self.store.tx(readonly=True) as tx:
                row = await loops.find_loop(tx, loop_id)
            if row is None or row.state != lc.ACTIVE:
                return True  # step 1 finds nothing to do
            agent_id = row.agent_id
        taken = await self._take(agent_id)
        if taken is not None:
            if taken:  # claimed by this call: adopt the agent's other Loops (once, not once per waiting load)
                self.node.spawn(self.adopt_agent(agent_id))
            return True
        with contextlib.suppress(StoreUnavailable):
            await signals.notify(self.store, signals.LOOPS, f"{loop_id} {self.node_id}")
        return False

    async def claim_for_create(self, agent_id: str) -> None:
        """§19.2 before a create of the agent's Loop is inserted (``LoopTools.create_full``): claim the agent's
        lease when nobody holds it, as its load would (``before_load``), so that the insert's transaction already
        begins the Loop here (§4.3 step 1 in the insert, ``agents_held``).

        issue 16 (creates/s on PostgreSQL): claimed by the first load instead, every create of a new agent that
        reached its insert before that claim committed — with 16 creates in flight, 20 Loops per agent, 44 % of
        the harness bench's creates — was inserted at incarnation 0 and took step 1 in a load-steps unit of its
        own, behind the claim's transaction. The creates of one agent wait for one claim (``_take``)."""
        if self.state != "alive" or self.holds(agent_id):
            return
        try:
            taken = await self._take(agent_id)
        except StoreUnavailable:
            return  # the insert and the load decide (each answers or retries as before)
        if taken:  # claimed by this call: the agent's other Loops are adopted, as after a load
            self.node.spawn(self.adopt_agent(agent_id))

    async def agents_held(self, tx: Tx, agent_ids: list[str]) -> set[str]:
        """§4.3 step 1's lease check for the Loops a batch of creates inserts (``LoopTools._insert_many``), in its
        transaction and one statement: those of ``agent_ids`` whose lease this node holds at the epoch it
        believes, the lease rows read ``FOR SHARE`` (as ``leases_ok_many``)."""
        if self.state != "alive":
            return set()
        mine = sorted({a for a in agent_ids if self.book.epoch(a) is not None})
        if not mine:
            return set()
        stmt, params = by_keys(tx.dialect, "placement.agents_held", lambda keys: tx.for_share(sa.select(
            A.c.agent_id, A.c.epoch).where(keys, A.c.node_id == sa.bindparam("node_id"))), A.c.agent_id, mine)
        rows = await tx.execute(stmt, {**(params or {}), "node_id": self.node_id})
        return {r.agent_id for r in rows if self.book.epoch(r.agent_id) == int(r.epoch)}

    async def leases_ok_many(self, tx: Tx, loop_ids: list[str]) -> list[str]:
        """§4.3 step 1 for a batch of Loops (``Node.load_many``, ``Node._load_steps``), in its transaction and one
        statement: those of ``loop_ids`` (in their order) whose agent's lease this node holds at the epoch it
        believes. The lease rows are read ``FOR SHARE`` (loads of one agent run side by side; a claim waits until
        the step commits). Expiry is not re-judged here: a claim would have raised the epoch, and the monotonic
        proof in ``book`` already stops this node before the store clock lets anyone claim (§19.2)."""
        if self.state != "alive" or not loop_ids:
            return []
        stmt = sa.select(L.c.id, L.c.agent_id, A.c.node_id, A.c.epoch).select_from(
            L.join(A, A.c.agent_id == L.c.agent_id)).where(L.c.id.in_(loop_ids), A.c.node_id == self.node_id)
        if tx.dialect == "postgresql":
            stmt = stmt.with_for_update(read=True, of=A)
        ok: set[str] = set()
        for row in await tx.execute(stmt):
            self._agent_of[row.id] = row.agent_id
            if self.book.epoch(row.agent_id) == int(row.epoch):
                ok.add(row.id)
        return [loop_id for loop_id in loop_ids if loop_id in ok]

    # ------------------------------------------------------------------ claims and adoption

    async def claim(self, agent_id: str) -> bool:
        """§19.2 claim (absent or expired on the store clock); the proof starts before the request is sent.
        True also when this node already holds the lease (claims of one agent on this node are serialised)."""
        return await self._take(agent_id) is not None

    async def _take(self, agent_id: str) -> bool | None:
        """``claim``: True when this call claimed the lease, False when this node held it already, None when
        another node holds it."""
        lock = self._claiming.setdefault(agent_id, asyncio.Lock())
        try:
            async with lock:
                if self.holds(agent_id):
                    return False  # another task of this node claimed it meanwhile
                return True if await self._claim(agent_id) else None
        finally:
            if not lock.locked() and self._claiming.get(agent_id) is lock:
                del self._claiming[agent_id]

    async def _claim(self, agent_id: str) -> bool:
        sent_ns = self.mono()
        async with self.store.tx() as tx:
            lease = await leases.claim(tx, agent_id, self.node_id, self.ttl_ms)
        if lease is None:
            return False
        self.book.add(agent_id, lease.epoch, sent_ns)
        log.info("claimed agent %s at epoch %d", agent_id, lease.epoch)
        self.node.instruments.claimed(agent_id)  # the Harness offers the agent's unhandled messages
        return True

    async def adopt_agent(self, agent_id: str) -> int:
        """§19.2: adopt each of the agent's active Loops, oldest first, at a new incarnation, then replay."""
        return await self.adopt_agents([agent_id])

    # ------------------------------------------------------------------ §19.3 placement tick

    async def tick(self) -> None:
        """Renew when the renewer has not, fence, release idle leases, sweep stranded agents (claim + adopt), poll
        for undelivered events, sweep dead nodes' rows.

        issue 16 / benchmarks.md §2.2: what the tick needs to know is read in one transaction (``_survey``), and
        it writes only when that read found work, so an idle node's tick is one read however many Loops it runs."""
        if self.state != "alive":
            return
        async with self._tick_lock:
            if self.state != "alive":
                return  # drained while this tick waited
            for step in (self.renew, self.fence, self._adopt_pending):
                try:
                    await step()
                except StoreUnavailable as exc:
                    log.warning("placement %s deferred: %s", step.__name__, exc.message)
            try:
                survey = await self._survey()
            except StoreUnavailable as exc:
                log.warning("placement sweep deferred: %s", exc.message)
                return
            for name, act in (("release", lambda: self._release_idle(survey.idle)),
                              ("stranded sweep", lambda: self._claim_stranded(survey)),
                              ("event poll", lambda: self._replay_undelivered(survey.undelivered)),
                              ("node sweep", lambda: self._sweep_gone_nodes(survey.gone_due))):
                try:
                    await act()
                except StoreUnavailable as exc:
                    log.warning("placement %s deferred: %s", name, exc.message)

    async def _survey(self) -> _Survey:
        """The tick's reads, in one read-only transaction."""
        survey = _Survey()
        held = sorted(self.book.snapshot())
        async with self.store.tx(readonly=True) as tx:
            now = await tx.now_ms()
            survey.idle = await self._idle_agents(tx, held)
            await self._stranded(tx, now, survey)
            if self.node.resident_count:
                survey.undelivered = await self._undelivered(tx)
            survey.gone_due = await nodes.gone_due(tx)
        return survey

    async def _adopt_pending(self) -> None:
        """issue 16: on this tick, not the 60 s reconcile — adopt the agents reclaimed at start, and retry the
        loads an unavailable store deferred (a lock timeout, a lost connection) on this node."""
        agents, self._reclaimed = sorted(self._reclaimed), set()
        try:
            await self.adopt_agents([a for a in agents if self.holds(a)])
        except StoreUnavailable:
            self._reclaimed.update(agents)
            raise
        node = self.node
        for loop_id in node.deferred_loads():
            if node.resident(loop_id) is None and not node.is_locked(loop_id):
                await node.try_load(loop_id, if_absent=True)

    async def renew(self) -> None:
        """§19.3: the placement tick renews too — issue 16: only when the renewer thread has not renewed within
        ``renew_s`` (stuck, paused, or not yet), so a healthy node renews once per period, not twice."""
        last = self.renewer.renewed_ns
        sent_ns = self.mono()
        if last is not None and sent_ns - last < self.cfg.renew_s * 1_000_000_000:
            return
        held = self.book.snapshot()
        if not held:
            return
        async with self.store.tx() as tx:
            lost = await leases.renew(tx, self.node_id, held, self.ttl_ms)
        if self.book.renewed(held, held.keys() - lost, sent_ns):
            await self.fence()

    # issue 16 / benchmarks.md §2.2 idle work: the store answers the held agents that are idle, not the busy ones,
    # so an idle node's tick decodes no row per agent (on PostgreSQL the agents go as one array: one parameter)
    async def _idle_agents(self, tx: Tx, held: list[str]) -> set[str]:
        """Of the agents held, those with no active Loop (and no unhandled message for our wake handlers)."""
        if not held:
            return set()
        if tx.dialect != "postgresql":  # (a cluster node runs on PostgreSQL; kept for a store without arrays)
            idle = set(held)
            for chunk in _chunks(held, 500):
                idle.difference_update(await self._busy_of(tx, chunk))
            return idle
        mine = sa.select(sa.func.unnest(sa.bindparam("agents", held, type_=pg_dialect.ARRAY(sa.Text)))
                         .label("agent_id")).subquery("mine")
        stmt = sa.select(mine.c.agent_id).where(~sa.exists().where(L.c.agent_id == mine.c.agent_id,
                                                                   L.c.state == lc.ACTIVE))
        if self.wants_messages():
            M = schema.message
            stmt = stmt.where(~sa.exists().where(
                M.c.agent_id == mine.c.agent_id, M.c.handled_ms.is_(None), M.c.kind.in_(("loop", "lifecycle"))))
        return {r.agent_id for r in await tx.execute(stmt)}

    async def _busy_of(self, tx: Tx, chunk: list[str]) -> set[str]:
        """Of ``chunk``, the agents with an active Loop (or an unhandled message for our wake handlers)."""
        stmt = sa.select(L.c.agent_id).where(L.c.agent_id.in_(chunk), L.c.state == lc.ACTIVE).distinct()
        busy = {r.agent_id for r in await tx.execute(stmt)}
        if self.wants_messages():
            M = schema.message
            stmt = sa.select(M.c.agent_id).where(
                M.c.agent_id.in_(chunk), M.c.handled_ms.is_(None), M.c.kind.in_(("loop", "lifecycle")),
            ).distinct()
            busy.update(r.agent_id for r in await tx.execute(stmt))
        return busy

    async def _release_idle(self, idle: set[str]) -> None:
        """§19.2 release: the agent has no active Loop (and no unhandled message for our wake handlers)."""
        if not idle:
            return  # issue 16: the residents are looked at only when the survey found an idle agent
        held = self.book.snapshot()
        resident_agents = {res.agent_id for res in self.node.residents()}
        idle_held = {a: e for a, e in held.items() if a in idle and a not in resident_agents}
        if not idle_held:
            return
        async with self.store.tx() as tx:
            await leases.release(tx, self.node_id, idle_held)
        self.book.drop(idle_held)

    async def _stranded(self, tx: Tx, now: int, survey: _Survey) -> None:
        """§19.3: a page of active Loops whose agent lease is missing or expired (ordered by (updated_ms, id)),
        the agents with unhandled messages and no lease when this node has wake handlers, and — only when there
        is something to claim — the live nodes and active agents for the fair share."""
        stmt = sa.select(L.c.id, L.c.agent_id, L.c.updated_ms).select_from(
            L.outerjoin(A, A.c.agent_id == L.c.agent_id),
        ).where(L.c.state == lc.ACTIVE, sa.or_(A.c.agent_id.is_(None), A.c.expires_ms <= now))
        if self._cursor is not None:
            stmt = stmt.where(sa.tuple_(L.c.updated_ms, L.c.id) > sa.tuple_(*self._cursor))
        rows = list(await tx.execute(stmt.order_by(L.c.updated_ms, L.c.id).limit(SWEEP_PAGE)))
        self._cursor = None if len(rows) < SWEEP_PAGE else (int(rows[-1].updated_ms), str(rows[-1].id))
        waiting: list[str] = []
        if self.wants_messages():  # §19.3: agents with unhandled messages, when this node has wake handlers
            M = schema.message
            stmt = sa.select(M.c.agent_id).select_from(M.outerjoin(A, A.c.agent_id == M.c.agent_id)).where(
                M.c.handled_ms.is_(None), M.c.kind.in_(("loop", "lifecycle")),
                sa.or_(A.c.agent_id.is_(None), A.c.expires_ms <= now),
            ).distinct().limit(SWEEP_PAGE)
            waiting = [r.agent_id for r in await tx.execute(stmt)]
        survey.candidates = [row.agent_id for row in rows] + waiting
        if any(not self.holds(agent_id) for agent_id in survey.candidates):
            survey.live = max(1, await nodes.live_nodes(tx, self.dead_after_ms))
            survey.active_agents = int((await tx.execute(
                sa.select(sa.func.count(sa.distinct(L.c.agent_id))).where(L.c.state == lc.ACTIVE))).scalar_one())

    async def _claim_stranded(self, survey: _Survey) -> None:
        """§19.3: claim the surveyed stranded agents while below capacity and below 1.25 × the fair share."""
        limit = FAIR_SHARE_SLACK * max(1, survey.active_agents) / survey.live
        seen: set[str] = set()
        claimed: list[str] = []
        for agent_id in survey.candidates:
            if agent_id in seen or self.holds(agent_id):
                continue
            seen.add(agent_id)
            if len(self.book) >= limit or self.node.resident_count >= self.node.config.max_objects:
                break
            if await self.claim(agent_id):
                claimed.append(agent_id)
        await self.adopt_agents(claimed)

    async def adopt_agents(self, agents: list[str]) -> int:
        """§19.2: adopt the active Loops of the claimed ``agents``, oldest first, each at a new incarnation, then
        replay. issue 16 / benchmarks.md §2.2: the Loops are listed in one read and loaded in batches
        (``Node.load_many``: a few statements per batch, not per Loop), so a takeover or a restart of N Loops
        costs O(N / batch) transactions. Returns how many were loaded."""
        agents = [a for a in agents if self.holds(a)]
        if not agents:
            return 0
        found: list[tuple[int, str]] = []
        async with self.store.tx(readonly=True) as tx:
            for chunk in _chunks(sorted(agents), 500):
                stmt = sa.select(L.c.id, L.c.agent_id, L.c.created_ms).where(
                    L.c.agent_id.in_(chunk), L.c.state == lc.ACTIVE)
                for row in await tx.execute(stmt):
                    self._agent_of[row.id] = row.agent_id
                    found.append((int(row.created_ms), row.id))
        ids = [loop_id for _, loop_id in sorted(found)]  # oldest first, as §19.2 asks of each agent
        node = self.node
        todo = [i for i in ids if node.resident(i) is None and not node.queued(i) and not node.is_locked(i)]
        return await node.load_many(todo)

    async def poll_events(self) -> int:
        """Backup for lost signals: replay resident Loops of this node with never-delivered pending events."""
        if not self.node.resident_count:
            return 0
        async with self.store.tx(readonly=True) as tx:
            ids = await self._undelivered(tx)
        return await self._replay_undelivered(ids)

    async def _undelivered(self, tx: Tx) -> list[str]:
        stmt = sa.select(E.c.loop_id).select_from(E.join(L, L.c.id == E.c.loop_id)).where(
            L.c.node_id == self.node_id, L.c.state == lc.ACTIVE, E.c.status == "pending",
            E.c.first_delivered_ms.is_(None),
        ).distinct()
        return [r.loop_id for r in await tx.execute(stmt)]

    async def _replay_undelivered(self, ids: list[str]) -> int:
        n = 0
        for loop_id in ids:
            if self.node.resident(loop_id) is not None:
                n += await self.node.replay(loop_id)
        return n

    async def _sweep_gone_nodes(self, due: bool) -> None:
        """§19.1: dead nodes' rows to ``gone``; written only when the survey found one."""
        if due:
            async with self.store.tx() as tx:
                await nodes.sweep_gone(tx)

    # ------------------------------------------------------------------ §19.2 self-fence

    async def fence(self) -> int:
        """Unload, at once and without the store, every object whose agent lease this node cannot prove.

        issue 16 / benchmarks.md §2.2 idle work: the residents are looked at only when something could have
        changed the answer since the last look found none to unload — a lease forgotten (``book.removals``), an
        object loaded (``node.residents_added``) or the state — so the idle node's fence every 2.5 s is O(1)."""
        self.book.expire()
        seen = (self.book.removals, self.node.residents_added, self.state)
        if seen == self._fenced_at:
            return 0
        held = self.book.snapshot() if self.state in ("alive", "draining") else {}
        doomed = [res for res in self.node.residents() if res.agent_id not in held]
        self._fenced_at = None if doomed else seen  # after an unload, look again next time
        for res in doomed:
            if await self.node.evict(res):
                self.fenced_loops += 1
        if doomed:
            log.warning("self-fenced: unloaded %d objects whose lease could not be proven", len(doomed))
        return len(doomed)

    def _lost_threadsafe(self, agents: list[str]) -> None:
        loop = self._loop
        if loop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(lambda: self.node.spawn(self.fence()))

    # ------------------------------------------------------------------ signals (§10.2, §19.3)

    def admitted(self, loop_id: str) -> None:
        """After an admission commits: deliver here when the Loop is resident, else NOTIFY the holder."""
        if self.node.resident(loop_id) is not None:
            self.node.spawn(self.node.replay(loop_id))
        else:
            self.node.spawn(self._notify(signals.EVENTS, loop_id))

    def _transitioned(self, loop_id: str) -> None:
        """A state change committed here for a Loop resident elsewhere: tell its holder (§19.3). Issue 16: not when
        this node holds the agent's lease — the holder is this node (a create of an agent it holds, whose load
        follows here), and an object of the Loop elsewhere is fenced by the lease it lost."""
        if self.state != "alive" or self._busy_here(loop_id):
            return
        agent_id = self._agent_of.get(loop_id)
        if agent_id is not None and self.holds(agent_id):
            return
        self.node.spawn(self._notify(signals.LOOPS, loop_id))

    def _busy_here(self, loop_id: str) -> bool:
        return self.node.busy(loop_id)

    async def _notify(self, channel: str, loop_id: str) -> None:
        with contextlib.suppress(StoreUnavailable):  # polling and the reconcile tick cover a lost signal
            await signals.notify(self.store, channel, f"{loop_id} {self.node_id}")

    def _on_signal(self, channel: str, message: str) -> None:
        payload, _, sender = message.partition(" ")
        if self.state != "alive" or sender == self.node_id or len(payload) > 40:
            return  # ids are at most 40 characters; anything else is not ours to act on
        if channel == signals.EVENTS:
            if self.node.resident(payload) is not None and payload not in self._replaying:
                self._replaying.add(payload)  # one queued replay per Loop however many signals arrive
                self.node.spawn(self._replay(payload))
        elif channel == signals.LOOPS:
            if payload == "*":
                if not self._tick_lock.locked():
                    self.node.spawn(self.tick())
            elif not self._busy_here(payload) or self.node.resident(payload) is not None:
                self.node.spawn(self._reconsider(payload))

    async def _replay(self, loop_id: str) -> None:
        self._replaying.discard(loop_id)  # admissions from now on are covered by this replay's read or the next
        with contextlib.suppress(StoreUnavailable):  # the placement tick polls for undelivered events
            await self.node.replay(loop_id)

    async def _reconsider(self, loop_id: str) -> None:
        """A Loop changed on another node: end a stale object here, or adopt it if its agent is ours."""
        try:
            async with self.store.tx(readonly=True) as tx:
                row = await loops.find_loop(tx, loop_id)
            res = self.node.resident(loop_id)
            if self.node.is_locked(loop_id):
                return  # being loaded or unloaded here right now; that work re-reads the row
            active_here = row is not None and row.state == lc.ACTIVE and self.holds(row.agent_id)
            if res is not None and (row is None or row.state != lc.ACTIVE or row.incarnation != res.incarnation):
                await self.node.end_incarnation(loop_id)
            elif res is not None and row is not None and row.object_id != res.object_id and active_here:
                await self.node.try_load(loop_id)  # §4.2 row 14: a retry retired this object (object_id cleared)
            elif res is None and active_here:
                await self.node.try_load(loop_id, if_absent=True)
        except StoreUnavailable:
            pass


@dataclass(slots=True)
class _Survey:
    """What one placement tick read (``Placement._survey``)."""

    idle: set[str] = field(default_factory=set)  # held agents with no active Loop and no unhandled message
    candidates: list[str] = field(default_factory=list)  # stranded agents, in sweep order (may repeat)
    live: int = 1  # live nodes (read only when there is a candidate)
    active_agents: int = 0  # agents with an active Loop (likewise)
    undelivered: list[str] = field(default_factory=list)  # this node's Loops with never-delivered events
    gone_due: bool = False  # a dead node's row is due for ``gone``


class _Signaller(Instrument):
    """The placement's instrument on its node: a state change committed here is signalled to the holder."""

    def __init__(self, placement: Placement) -> None:
        self.placement = placement

    def transition(self, loop_id: str) -> None:
        self.placement._transitioned(loop_id)


def _chunks(items: list[str], size: int) -> list[list[str]]:
    return [items[i:i + size] for i in range(0, len(items), size)]


async def _every(seconds: float, work: Callable[[], Awaitable[Any]], *, first: float | None = None) -> None:
    await asyncio.sleep(seconds if first is None else first)
    while True:
        try:
            await work()
        except Exception:
            log.exception("placement sweep failed")
        await asyncio.sleep(seconds)
