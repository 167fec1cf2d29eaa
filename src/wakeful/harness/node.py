"""A harness node: runs a ``Runtime`` in-process and keeps the store's active Loops resident in it.

harness.md §4.3 (adoption), §4.2 rows 2, 4–6, 9 (runtime reports), §5 (fencing of reports), §7 (reloads).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import operator
import sys
from collections.abc import AsyncIterator, Coroutine
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from wakeful.errors import Busy, InvalidObject, InvalidParams, MailboxFull, ObjectNotFound, WakefulError
from wakeful.harness import lifecycle as lc
from wakeful.harness import notices
from wakeful.harness.budget import LimitWatch
from wakeful.harness.capabilities import runtime_capabilities
from wakeful.harness.capability_http import configured_tools
from wakeful.harness.checkpoint import load_config
from wakeful.harness.config import Config
from wakeful.harness.errors import StoreUnavailable
from wakeful.harness.instruments import Instruments
from wakeful.harness.integrity import ArtifactProblem, read_verified
from wakeful.harness.registry import ToolRegistry
from wakeful.harness.source_lines import stored_table, with_source_line
from wakeful.harness.store import drift, jsontext, loops, schema
from wakeful.harness.store.core import Store, Tx
from wakeful.harness.store.group import GroupCommit
from wakeful.harness.store.ids import new_id
from wakeful.harness.store.loops import LogLine, Loop
from wakeful.harness.store.reads import SharedRead, padded
from wakeful.runtime import Clock, ObjectStatus, Runtime, RuntimeOptions, SystemClock
from wakeful.runtime.policy import CapabilityPolicy, parse_capabilities

if TYPE_CHECKING:
    from wakeful.harness.placement import Placement

__all__ = ["Created", "Node", "Resident", "Seen"]

# issue 16 (restart-3s3): on PostgreSQL a start's step 1 (the lease check and the UPDATE … RETURNING of 500 rows,
# five round trips) took longer than the steps 2–5 of the batch before it, so with one batch begun ahead the chain
# waited 0.7–1.8 s for step 1 at N = 10,000; with two it waits 0.1–0.2 s. Three gained nothing more (the server's
# two CPUs: the attaches slowed as much)
LOAD_AHEAD = 2
log = logging.getLogger("wakeful.harness")
_DRIFT_KEY = operator.attrgetter("loop_id", "incarnation", "object_id")  # what the reconcile compares (drift)
# keys of the lifecycle group commit (``Node.lifecycle``): units run in key order, so every batch takes the group
# quota locks of its creates first and then the Loop rows of its load steps in id order (the store's lock order)
CREATE_KEY, LOAD_KEY = "0:", "1:"
LOAD_KIND = LOAD_KEY + "load-steps"  # §4.3 steps 1 and 4 of the loads waiting together (``Node._load_steps``)

RELOAD_DELAY_NS = 1_000_000_000  # §7: a reload happens at least 1 s after the fault
HOUR_MS = 3_600_000


@dataclass(slots=True)
class Resident:
    """One object of this node's runtime and the Loop incarnation it runs."""

    loop_id: str
    incarnation: int
    object_id: str
    agent_id: str = ""  # §19: the agent whose lease the object runs under
    # the Loop's group (issue 16: the intake's scope check of a resident Loop reads no row; one string per group)
    group_id: str = ""
    # §11: no re-trigger within an object — the ids delivered to it, each with its first delivery here on the
    # monotonic clock (§12 ack deadlines); one map, not a set beside a dict (issue 16: ~0.2 KB per idle Loop)
    delivered: dict[str, int] = field(default_factory=dict)
    # events whose admission stamped a hand-off to this object that was refused: stamped again when delivered
    stamp_again: set[str] | None = None


class Node:
    """Keeps active Loops loaded; every report from the runtime is applied fenced by incarnation.

    The residents (Loop id → ``Resident``), the object map, the reload and capacity queues and the per-Loop
    load/unload locks are the node's own; collaborators (dispatch, pending events, intake, Loop tools, views,
    placement) use only this surface:

    - wiring, set at construction: ``store``, ``config``, ``clock``, ``tools``, ``node_id``, ``watch``,
      ``runtime``, ``dispatch``, ``pending``; ``placement`` (§19, set by the Harness before ``open``)
    - running: ``open``, ``close``, ``tick``, ``settle``, ``spawn``, ``flush_logs``
    - Loops: ``load``, ``try_load``, ``end_incarnation``, ``replay``, ``stamp_again`` (intake's refused hand-off)
    - reading the residents: ``resident(loop_id)``, ``residents()``, ``resident_count``, ``identity(object_id)`` (§5),
      ``waiting_for_capacity(loop_id)``, ``queued(loop_id)``, ``busy(loop_id)``, ``is_locked(loop_id)``
    - ``evict(res)``: the self-fence of a cluster node (§19.2), without the store
    - observers: ``add_instrument`` / ``remove_instrument`` (``harness.instruments``); collaborators report
      through ``announce`` (message), ``transitioned`` and ``instruments.admitted`` / ``instruments.claimed``
    """

    def __init__(
        self, store: Store, config: Config, *, clock: Clock | None = None, tools: ToolRegistry | None = None,
        node_id: str | None = None,
    ) -> None:
        from wakeful.harness.dispatch import Dispatch
        from wakeful.harness.pending import PendingEvents

        self.store, self.config = store, config
        self.clock: Clock = clock or SystemClock()
        # no registry given (the CLI's local mode): the configuration's [capabilities] still name Loop tools
        self.tools = tools if tools is not None else configured_tools(config, self.clock.monotonic_ns)
        self.node_id = node_id or new_id("node")  # the Harness passes the data directory's id (placement/identity.py)
        self.instruments = Instruments()  # the one subscription list (message, transition, admitted, claimed)
        self.watch = LimitWatch()
        self.dispatch = Dispatch(self)
        self.pending = PendingEvents(self)  # §11/§12: replay, ack deadlines, pruning at the reconcile tick
        self.runtime = Runtime(
            RuntimeOptions(max_objects=config.max_objects), host_handler=self.dispatch.handle,
            on_state=self._on_state, on_log=self._on_log, clock=self.clock, on_log_refused=self._on_log_refused,
        )
        self._residents: dict[str, Resident] = {}
        self._objects: dict[str, Resident] = {}
        self.residents_added = 0  # objects made resident since the node started (the fence's "anything new?")
        self._reload_due: dict[str, int] = {}  # loop id → monotonic ns
        self._waiting_capacity: set[str] = set()
        self._load_deferred: set[str] = set()  # loads an unavailable store deferred; retried on the next tick
        self._reporting: set[str] = set()  # Loops whose terminal report is being applied
        self._tasks: set[asyncio.Task[Any]] = set()
        self._locks: dict[str, _LoopLock] = {}  # one load/unload at a time per Loop, while one runs or waits
        # issue 16: the write steps of concurrent creates and loads (the create's insert, §4.3 steps 1 and 4) share
        # transactions. A committer of their own, not the store's: a create takes the group's quota lock before
        # any row, and the store's batches lock Loop rows first (store.group), so the two never mix in one batch
        self.lifecycle = GroupCommit(store)
        self._pending_reads: SharedRead[tuple[str, bool], tuple[list[Any], Loop | None]] = SharedRead(
            store, self._read_pending)
        self._logs = _LogBuffer()
        self.placement: Placement | None = None  # §19 cluster (PostgreSQL): set by the Harness before open

    # ------------------------------------------------------------------ observers

    def add_instrument(self, instrument: object) -> None:
        """Subscribe an ``Instrument`` (or any object with some of its hooks); twice is once."""
        self.instruments.add(instrument)

    def remove_instrument(self, instrument: object) -> None:
        """Unsubscribe; an instrument that is not subscribed is ignored."""
        self.instruments.remove(instrument)

    # ------------------------------------------------------------------ the residents, read

    def resident(self, loop_id: str) -> Resident | None:
        """The Loop's object on this node (any incarnation), None when it is not resident."""
        return self._residents.get(loop_id)

    def residents(self) -> list[Resident]:
        """The resident Loops now, in the order they were loaded (a copy)."""
        return list(self._residents.values())

    @property
    def resident_count(self) -> int:
        """How many Loops are resident (one read of the map: the renewer thread's heartbeat reads it too)."""
        return len(self._residents)

    def waiting_for_capacity(self, loop_id: str) -> bool:
        """§4.3 step 3: the runtime was full; the Loop stays active and the next tick loads it."""
        return loop_id in self._waiting_capacity

    def queued(self, loop_id: str) -> bool:
        """A tick will load the Loop: a reload is due (§7) or it waits for capacity (§4.3 step 3)."""
        return loop_id in self._reload_due or loop_id in self._waiting_capacity

    def busy(self, loop_id: str) -> bool:
        """This node has the Loop in hand: resident, queued for a tick, or its terminal report being applied."""
        return loop_id in self._residents or self.queued(loop_id) or loop_id in self._reporting

    def deferred_loads(self) -> list[str]:
        """The Loops whose load an unavailable store deferred, sorted; the next tick retries them (issue 16)."""
        return sorted(self._load_deferred)

    def is_locked(self, loop_id: str) -> bool:
        """A load, unload or reconcile of the Loop runs right now (it re-reads the row when it is done)."""
        held = self._locks.get(loop_id)
        return held is not None and held.lock.locked()

    # ------------------------------------------------------------------ start and drain

    async def open(self) -> None:
        """Start the runtime and adopt every active Loop, oldest first (§4.2 row 2)."""
        await self.runtime.open()
        await self._adopt_all()

    async def close(self) -> None:
        """§19.4 drain, single node: end every incarnation (Loops stay active), stop the runtime."""
        await self.settle()
        await self.end_many(list(self._residents))
        await self.flush_logs()
        await self.runtime.close()
        await self.dispatch.drain()
        await self.settle()

    async def _adopt_all(self) -> None:
        if self.placement is not None and not len(self.placement.book):
            return  # §19: no lease held yet (a cluster node's start) — its placement adopts its agents' Loops
        L = schema.loop
        async with self.store.tx(readonly=True) as tx:  # oldest first; only the columns the choice needs
            rows = list(await tx.execute(sa.select(L.c.id, L.c.agent_id).where(L.c.state == lc.ACTIVE)
                                         .order_by(L.c.created_ms, L.c.id)))
        ids = [row.id for row in rows
               if self.placement is None or self.placement.holds(row.agent_id)]  # §19: leased agents only
        await self.load_many(ids)

    # ------------------------------------------------------------------ §4.3 for many Loops at once

    async def load_many(self, loop_ids: list[str]) -> int:
        """§4.3 for many Loops (a node's start, the adoption of claimed agents), oldest first as given: the same
        steps as ``load``, batched — step 1 for ``loops.BATCH`` Loops in one transaction, the artifact read and
        verified once per digest of a batch, step 4 in one transaction, step 5's pending events in one read.
        issue 16 / benchmarks.md §2.2: a restart costs a few statements per batch, not four transactions per
        Loop. Loops resident, queued for a tick or being loaded or unloaded right now are left alone; an
        unavailable store defers the batch's Loops to the next tick. Returns how many were loaded."""
        if not loop_ids:
            return 0
        # one collection after the whole burst (vm.md §7), not per batch; a large burst without the collector
        self.runtime.scheduler.hold_hygiene(len(loop_ids))
        try:
            return await self._load_batches(loop_ids)
        finally:
            self.runtime.scheduler.release_hygiene(len(loop_ids))

    # issue 16 (a restart at N = 10,000 on PostgreSQL: the server's time for the batches' statements was half of a
    # start's wall): there the batches are a pipeline — the next ``LOAD_AHEAD`` batches' Loops are locked and their
    # step 1 runs in the server while this batch's objects are loaded, attached and started; steps 2–5 stay in batch
    # order. On SQLite (one writer, in this process) a batch's step 1 waits for the one before to end, as it did
    async def _load_batches(self, loop_ids: list[str]) -> int:
        chunks = [loop_ids[start:start + loops.BATCH] for start in range(0, len(loop_ids), loops.BATCH)]
        depth = LOAD_AHEAD if self.store.dialect == "postgresql" else 0  # batches begun ahead of the one loading
        aheads: collections.deque[asyncio.Task[_Begun]] = collections.deque()
        begun_so_far = 0
        loaded = 0

        def begin_ahead(upto: int) -> None:  # step 1 of the next chunks, up to ``upto`` in flight
            nonlocal begun_so_far
            while begun_so_far < len(chunks) and len(aheads) < upto:
                aheads.append(asyncio.ensure_future(self._begin_chunk(chunks[begun_so_far])))
                begun_so_far += 1

        begin_ahead(1)
        try:
            while aheads:
                begun = await aheads.popleft()
                begin_ahead(depth)
                async with begun.locks:
                    try:
                        if begun.error is not None:
                            raise begun.error
                        loaded += await self._load_begun_batch(begun.rows)
                    except StoreUnavailable as exc:
                        log.warning("loading %d Loops deferred: %s", len(begun.taken), exc.message)
                        self._load_deferred.update(i for i in begun.taken if i not in self._residents)
                begin_ahead(1)
        except BaseException:
            for ahead in aheads:  # a batch's step 1 committed or not: its Loops are left to the ticks, unlocked
                ahead.cancel()
            for ahead in aheads:
                with contextlib.suppress(BaseException):
                    await (await ahead).locks.aclose()
            raise
        return loaded

    async def _begin_chunk(self, chunk: list[str]) -> _Begun:
        """A batch's Loops that are free, locked, and their step 1 (rows begun, or the store's refusal)."""
        taken = [i for i in chunk if i not in self._residents and i not in self._reload_due
                 and i not in self._reporting and not self.is_locked(i)]
        locks = contextlib.AsyncExitStack()
        try:
            await locks.enter_async_context(self._lock_free(taken))  # free (checked above, nothing ran since)
            try:
                return _Begun(taken, locks, await self._begin_batch(taken))
            except StoreUnavailable as exc:
                return _Begun(taken, locks, [], exc)
        except BaseException:
            await locks.aclose()
            raise

    async def _begin_batch(self, loop_ids: list[str]) -> list[Loop]:
        """§4.3 step 1 for a batch: the rows whose incarnation this node began."""
        if not loop_ids:
            return []
        for loop_id in loop_ids:
            self._waiting_capacity.discard(loop_id)
            self._load_deferred.discard(loop_id)
        if self.placement is not None and self.placement.state != "alive":
            return []
        async with self.store.tx() as tx:  # step 1, for the batch
            ids = loop_ids
            if self.placement is not None:  # only Loops whose agent lease this node holds at the epoch it believes
                ids = await self.placement.leases_ok_many(tx, loop_ids)
            return await loops.begin_incarnations(tx, ids, node_id=self.node_id)

    async def _load_begun_batch(self, rows: list[Loop]) -> int:
        """§4.3 steps 2–5 for a batch whose step 1 committed; returns how many were started."""
        # step 2: once per digest of the batch (the bytes re-read and re-hashed for this load, §8)
        elves: dict[tuple[str, str], bytes | ArtifactProblem] = {}
        loadable: list[tuple[Loop, bytes]] = []
        for row in rows:
            key = (row.group_id, row.artifact_sha256)
            if key not in elves:
                try:
                    elves[key] = await read_verified(self.store, self.config.artifact_dir, *key)
                except ArtifactProblem as problem:
                    elves[key] = problem
            elf = elves[key]
            if isinstance(elf, ArtifactProblem):
                await self._pause_fault(row.id, row.incarnation, elf.failure, elf.detail)
                continue
            loadable.append((row, elf))
        made = await self._load_runtime_many(loadable)  # step 3
        if not made:
            return 0
        triples = [(r.id, r.incarnation, o) for r, o in made]
        try:  # step 4, for the batch: on PostgreSQL one statement committing by itself (no BEGIN, no COMMIT)
            if self.store.singles:
                attached = await self.store.single(lambda tx: loops.attach_objects(tx, triples))
            else:
                async with self.store.tx() as tx:
                    attached = await loops.attach_objects(tx, triples)
        except BaseException:
            for _, object_id in made:
                await self.runtime.unload(object_id)
            raise
        started: list[Resident] = []
        for row, object_id in made:
            if row.id not in attached:  # the Loop changed meanwhile
                await self.runtime.unload(object_id)
                continue
            res = Resident(row.id, row.incarnation, object_id, row.agent_id, sys.intern(row.group_id))
            if await self._start_object(res):  # step 5
                started.append(res)
        await self._replay_many(started)
        return len(started)

    async def _replay_many(self, started: list[Resident]) -> None:
        """Step 5's replay for freshly started objects: their pending events in one read per batch."""
        if not started:
            return
        E = schema.loop_event
        ids = [res.loop_id for res in started]
        async with self.store.tx(readonly=True) as tx:
            stmt = sa.select(E.c.loop_id, E.c.event_id, E.c.topic, E.c.payload).where(
                E.c.loop_id.in_(ids), E.c.status == "pending",
            ).order_by(E.c.loop_id, E.c.received_ms, E.c.event_id)
            pending: dict[str, list[Any]] = {}
            for r in await tx.execute(stmt):
                pending.setdefault(r.loop_id, []).append(r)
        for res in started:
            if pending.get(res.loop_id) and self._residents.get(res.loop_id) is res:
                await self._deliver(res, [r for r in pending[res.loop_id] if r.event_id not in res.delivered])

    # ------------------------------------------------------------------ §4.3 adoption sequence

    # issue 16: the lock lives only while a load, unload or reconcile of the Loop runs or waits for it; a lock
    # kept for each Loop ever touched cost every resident Loop an asyncio.Lock and its map entry (~0.2 KB)
    @contextlib.asynccontextmanager
    async def _lock(self, loop_id: str) -> AsyncIterator[None]:
        held = self._locks.get(loop_id)
        if held is None:
            held = self._locks[loop_id] = _LoopLock()
        held.users += 1
        try:
            async with held.lock:
                yield
        finally:
            held.users -= 1
            if held.users == 0 and self._locks.get(loop_id) is held:
                del self._locks[loop_id]

    # ``_lock`` for many Loops none of which is locked (a batch of ``load_many``): one context for the batch, not a
    # generator and an exit-stack entry per Loop (issue 16: 10,000 at a restart)
    @contextlib.asynccontextmanager
    async def _lock_free(self, loop_ids: list[str]) -> AsyncIterator[None]:
        held: list[tuple[str, _LoopLock]] = []  # acquired
        try:
            for loop_id in loop_ids:
                entry = self._locks.get(loop_id)
                if entry is None:
                    entry = self._locks[loop_id] = _LoopLock()
                entry.users += 1
                try:
                    await entry.lock.acquire()  # free: no wait
                except BaseException:
                    self._unused(loop_id, entry)
                    raise
                held.append((loop_id, entry))
            yield
        finally:
            for loop_id, entry in held:
                entry.lock.release()
                self._unused(loop_id, entry)

    def _unused(self, loop_id: str, entry: _LoopLock) -> None:
        """One user of a Loop's lock left; the entry goes with the last one."""
        entry.users -= 1
        if entry.users == 0 and self._locks.get(loop_id) is entry:
            del self._locks[loop_id]

    async def load(self, loop_id: str) -> Resident | None:
        """Steps 1–5 of §4.3; None when the Loop was not loaded (not active, fault, capacity, lost race)."""
        async with self._lock(loop_id):
            return await self._load(loop_id)

    async def try_load(self, loop_id: str, *, if_absent: bool = False, seen: Seen | None = None) -> Resident | None:
        """``load`` for sweeps and after commits: an unavailable store leaves the Loop to the next tick;
        with ``if_absent`` a Loop that became resident meanwhile is left alone. ``seen``: filled with the Loop's
        row and pending count as the replay read them after the start (issue 16: a create's answer without a
        read of its own); left empty when this call did not load the Loop."""
        async with self._lock(loop_id):
            return await self._try_load_locked(loop_id, if_absent=if_absent, seen=seen)

    async def _try_load_locked(self, loop_id: str, *, if_absent: bool, seen: Seen | None,
                               begun: Loop | None = None) -> Resident | None:
        try:
            if if_absent and loop_id in self._residents:
                return self._residents[loop_id]
            if begun is not None and begun.id == loop_id and self._untouched(loop_id):
                return await self._load_begun(begun, seen)
            return await self._load(loop_id, seen)
        except StoreUnavailable as exc:
            log.warning("loading %s deferred: %s", loop_id, exc.message)
            self._load_deferred.add(loop_id)  # issue 16: the next tick retries it, not the reconcile
            return None

    @contextlib.asynccontextmanager
    async def creating(self, loop_id: str) -> AsyncIterator[Created]:
        """Held by a create from before its insert until its load is done (``LoopTools.create_full``): the
        node's own sweeps and adoptions leave the new Loop to it (they load a Loop once at a time, ``_lock``), so
        the incarnation its insert began (``begun``) is the one it loads. ``created.load(...)`` is ``try_load``
        with the lock held; ``begun``: the row of a Loop whose §4.3 step 1 for this node its insert committed
        (``LoopTools._insert_many``) — the load starts at step 2 with it. The creates in flight hold the runtime's
        load burst (``hold_hygiene``): their waits for the store are not the quiet that ends it."""
        # issue 16 (creates at N = 10,000): a create burst pauses for 100 ms between loads whenever its creates all
        # wait on a lifecycle commit (a loaded machine, a slow batch), and each such pause ended the burst: a
        # collection of the whole heap per 1,000 creates (0.4–0.7 s each at 4,000 Loops, 0.56 ms of node CPU per
        # create at 10,000). Held, the burst ends 100 ms after its last create, as a restart's batches do
        scheduler = self.runtime.scheduler
        scheduler.hold_hygiene()
        try:
            async with self._lock(loop_id):
                yield Created(self, loop_id)
        finally:
            scheduler.release_hygiene()

    # issue 16 (creates/s): §4.3 steps 2–4 of a Loop a create is about to insert at incarnation 1 here. The object
    # is loaded before the insert and the insert writes its ``object_id`` (step 4 in the transaction that makes the
    # row, which nobody can have seen before it commits), so the create's load is step 5 alone: no load-steps unit
    # (the rows' lock and the attach) and no second lifecycle commit to wait for. The object does not run before
    # the commit (``Created.load`` starts it); a create that does not use it unloads it.
    async def preload(self, *, loop_id: str, group_id: str, sha256: str, config: dict[str, Any],
                      capabilities: Any) -> str | None:
        """The object of a new Loop at incarnation 1, loaded but not started; None when the artifact or the runtime
        refuses (the create's load then meets the refusal and answers it as for any load)."""
        try:
            elf = await read_verified(self.store, self.config.artifact_dir, group_id, sha256)
            caps = parse_capabilities(runtime_capabilities(capabilities, self.tools.loop_tool_names()))
            status = await self.runtime.load(elf, config=load_config(config, loop_id, 1, None), capabilities=caps,
                                             label=loop_id)
        except (ArtifactProblem, StoreUnavailable, WakefulError):
            return None
        return status.object_id

    async def _start_created(self, row: Loop, seen: Seen | None) -> Resident | None:
        """Step 5 of a created Loop whose insert attached its preloaded object (``preload``)."""
        assert row.object_id is not None
        res = Resident(row.id, row.incarnation, row.object_id, row.agent_id, sys.intern(row.group_id))
        if not await self._start_object(res):
            return None
        try:
            await self.replay(row.id, seen)
        except StoreUnavailable as exc:
            log.warning("replay of %s deferred: %s", row.id, exc.message)
            self._load_deferred.add(row.id)  # the next tick loads it again (as a load whose replay failed)
        return res

    async def _load(self, loop_id: str, seen: Seen | None = None) -> Resident | None:
        self._reload_due.pop(loop_id, None)
        self._waiting_capacity.discard(loop_id)
        self._load_deferred.discard(loop_id)
        if self.placement is not None and not await self.placement.before_load(loop_id):
            return None  # §19.2: another node holds the agent's lease (and was signalled)
        if loop_id in self._residents:
            await self._end(loop_id)
        row = await self._next_incarnation(loop_id)
        if row is None:
            return None
        return await self._load_begun(row, seen)

    def _untouched(self, loop_id: str) -> bool:
        """Nothing of this node has worked on the Loop yet (no reload due, no wait for capacity, no deferral)."""
        return (loop_id not in self._reload_due and loop_id not in self._waiting_capacity
                and loop_id not in self._load_deferred and loop_id not in self._reporting)

    async def _load_begun(self, row: Loop, seen: Seen | None) -> Resident | None:
        """Steps 2–5 of a Loop whose step 1 committed (``_load``'s, or its create's transaction: ``begun``)."""
        try:
            elf = await read_verified(self.store, self.config.artifact_dir, row.group_id, row.artifact_sha256)
        except ArtifactProblem as problem:
            await self._pause_fault(row.id, row.incarnation, problem.failure, problem.detail)
            return None
        return await self._load_object(row, elf, seen)

    # step 1: the only place the incarnation rises
    async def _next_incarnation(self, loop_id: str) -> Loop | None:
        # an item of the lifecycle group commit's load-steps unit (``_load_steps``), answered after its commit
        row: Loop | None = await self.lifecycle.submit_batch(LOAD_KIND, _Step(loop_id), self._load_steps)
        return row

    # issue 16 (benchmarks.md §2.2 creates/s): §4.3 steps 1 and 4 of the loads waiting meanwhile (each create loads
    # its Loop) are one batch unit with a fixed number of statements, not a unit and a statement each: one lease
    # read for all step-1 Loops (PostgreSQL), their Loop rows locked in id order (PostgreSQL; the store's lock
    # order across units and nodes, as the per-Loop units sorted by key kept it), one conditional update raising
    # every incarnation, one attach statement for every step 4. A node loads a Loop once at a time (``_lock``), so
    # no Loop is twice in one unit.
    async def _load_steps(self, tx: Tx, items: list[_Step]) -> list[Loop | bool | None]:
        begin = [s.loop_id for s in items if s.object_id is None]
        attach = [(s.loop_id, s.incarnation, s.object_id) for s in items if s.object_id is not None]
        if begin and self.placement is not None:  # §4.3 step 1: this node holds the agent's lease at its epoch
            begin = await self.placement.leases_ok_many(tx, begin)
        if tx.dialect == "postgresql":
            ids = sorted({*begin, *(i for i, _, _ in attach)})
            L = schema.loop
            clock = tx.clock_column()  # the transaction's store-clock reading rides on the locked rows
            if ids and (len(ids) > 1 or clock is not None):
                stmt = sa.select(L.c.id, *([clock] if clock is not None else [])).where(L.c.id.in_(padded(ids)))
                for row in await tx.execute(stmt.order_by(L.c.id).with_for_update()):
                    tx.seed_now(row)
        rows = {r.id: r for r in await loops.begin_incarnations(tx, begin, node_id=self.node_id)}
        attached = await loops.attach_objects(tx, attach)
        return [rows.get(s.loop_id) if s.object_id is None else s.loop_id in attached for s in items]

    # steps 3–5: load, attach (fenced), start, replay
    async def _load_object(self, row: Loop, elf: bytes, seen: Seen | None = None) -> Resident | None:
        object_id = await self._load_runtime(row, elf)
        if object_id is None:
            return None
        res = Resident(row.id, row.incarnation, object_id, row.agent_id, sys.intern(row.group_id))
        if not await self._attach(res):
            await self.runtime.unload(res.object_id)
            return None
        if not await self._start_object(res):
            return None
        await self.replay(row.id, seen)
        return res

    # step 3: the runtime's load; None when it refused (told, paused or queued for capacity)
    async def _load_runtime(self, row: Loop, elf: bytes) -> str | None:
        config = load_config(row.config, row.id, row.incarnation, row.checkpoint)
        try:
            caps = self._capabilities(row)
            status = await self.runtime.load(elf, config=config, capabilities=caps, label=row.id)
        except WakefulError as exc:
            await self._load_refused(row, exc)
            return None
        return status.object_id

    # step 3 for a batch (issue 16: a restart at N = 10,000): the rows in order, each run of rows of one ELF and
    # one capability policy loaded by one call of the runtime (``Runtime.load_many``: the program made, the policy
    # and the helpers bound once, no status per object); the rows loaded, each with its object id
    async def _load_runtime_many(self, loadable: list[tuple[Loop, bytes]]) -> list[tuple[Loop, str]]:
        policies: dict[str | None, CapabilityPolicy] = {}  # the Loops' stored capabilities (JSON text) → parsed once
        runs: list[tuple[bytes, CapabilityPolicy, list[Loop]]] = []
        for row, elf in loadable:
            try:
                caps = self._capabilities(row, policies)
            except WakefulError as exc:
                await self._load_refused(row, exc)
                continue
            if runs and runs[-1][0] is elf and runs[-1][1] is caps:
                runs[-1][2].append(row)
            else:
                runs.append((elf, caps, [row]))
        made: list[tuple[Loop, str]] = []
        for elf, caps, run in runs:
            items = [(load_config(r.config, r.id, r.incarnation, r.checkpoint), r.id) for r in run]
            for row, got in zip(run, await self.runtime.load_many(elf, items, capabilities=caps), strict=True):
                if isinstance(got, str):
                    made.append((row, got))
                else:
                    await self._load_refused(row, got)
        return made

    async def _load_refused(self, row: Loop, exc: WakefulError) -> None:
        """The runtime refused step 3 for ``row`` (harness.md §4.3): an artifact it rejects pauses the Loop, a full
        runtime leaves it active for the next tick, refused parameters fault it; anything else is raised."""
        if isinstance(exc, InvalidObject):
            await self._pause_fault(row.id, row.incarnation, "artifact_rejected", f"artifact_rejected: {exc}")
        elif isinstance(exc, Busy):
            self._waiting_capacity.add(row.id)  # step 3: stays active, retried on the next tick
        elif isinstance(exc, InvalidParams):
            await self._fault(row.id, row.incarnation, f"load refused: {exc.message}")
        else:
            raise exc

    # issue 16: a batch's Loops mostly share one capability list (the builtins): it is parsed once per batch
    # (``policies``, keyed by the stored JSON text; None for the builtins) and every object of the batch gets the
    # one policy
    def _capabilities(self, row: Loop, policies: dict[str | None, CapabilityPolicy] | None = None) -> CapabilityPolicy:
        if policies is None:
            return parse_capabilities(runtime_capabilities(row.capabilities, self.tools.loop_tool_names()))
        key = None if row.capabilities is None else jsontext.encode(row.capabilities)
        policy = policies.get(key)
        if policy is None:
            policy = policies[key] = self._capabilities(row)
        return policy

    # step 5's start of an attached object: resident from here; False when the start failed (a fault)
    async def _start_object(self, res: Resident) -> bool:
        self._residents[res.loop_id] = self._objects[res.object_id] = res
        self.residents_added += 1
        try:
            self.runtime.start_unreported(res.object_id)  # issue 16: no status built per Loop
        except WakefulError as exc:  # §7: a start failure of an object that loaded is a fault
            self._residents.pop(res.loop_id, None)
            self._objects.pop(res.object_id, None)
            await self.runtime.unload(res.object_id)
            await self._fault(res.loop_id, res.incarnation, f"start failed: {exc.message}")
            return False
        return True

    # step 4: update object_id only where id, incarnation and state = active still match
    async def _attach(self, res: Resident) -> bool:
        attached: bool = await self.lifecycle.submit_batch(
            LOAD_KIND, _Step(res.loop_id, res.incarnation, res.object_id), self._load_steps)
        return attached

    # ------------------------------------------------------------------ ending an incarnation

    async def end_incarnation(self, loop_id: str) -> None:
        """Stop and unload the object; clear ``object_id`` only where the incarnation still matches."""
        async with self._lock(loop_id):
            await self._end(loop_id)

    async def _end(self, loop_id: str) -> None:
        res = self._residents.pop(loop_id, None)
        self._reload_due.pop(loop_id, None)
        if res is None:
            return
        self._objects.pop(res.object_id, None)
        await self.runtime.unload(res.object_id)
        try:
            async with self.store.tx() as tx:
                await loops.detach_object(tx, loop_id, res.incarnation)
        except StoreUnavailable:
            log.warning("could not clear object_id of %s: store unavailable", loop_id)

    async def end_many(self, loop_ids: list[str]) -> None:
        """``end_incarnation`` for many Loops (a drain): the objects stopped and unloaded, ``object_id`` cleared
        where the incarnation still matches in one statement per ``loops.BATCH`` Loops, not a transaction each.
        A Loop being loaded or unloaded right now is ended on its own, after that work."""
        for start in range(0, len(loop_ids), loops.BATCH):
            chunk = loop_ids[start:start + loops.BATCH]
            busy = [i for i in chunk if self.is_locked(i)]
            async with contextlib.AsyncExitStack() as locks:
                for i in chunk:
                    if i not in busy:  # free (checked above, and nothing ran in between): no wait
                        await locks.enter_async_context(self._lock(i))
                ended: list[Resident] = []
                for loop_id in chunk:
                    res = self._residents.pop(loop_id, None) if loop_id not in busy else None
                    self._reload_due.pop(loop_id, None)
                    if res is not None:
                        self._objects.pop(res.object_id, None)
                        await self.runtime.unload(res.object_id)
                        ended.append(res)
                try:
                    if ended:
                        async with self.store.tx() as tx:
                            await loops.detach_objects(tx, [(res.loop_id, res.incarnation) for res in ended])
                except StoreUnavailable:
                    log.warning("could not clear object_id of %d Loops: store unavailable", len(ended))
            for loop_id in busy:
                await self.end_incarnation(loop_id)

    async def evict(self, res: Resident) -> bool:
        """§19.2 self-fence: retire the object at once, without the store (the row keeps its object_id until the
        lease holder adopts); False when ``res`` is no longer the Loop's resident object."""
        if self._residents.get(res.loop_id) is not res:
            return False
        del self._residents[res.loop_id]
        self._objects.pop(res.object_id, None)
        self._reload_due.pop(res.loop_id, None)
        self._waiting_capacity.discard(res.loop_id)
        with contextlib.suppress(Exception):
            await self.runtime.unload(res.object_id)
        return True

    def identity(self, object_id: str) -> Resident | None:
        """§5: object id → the Loop and incarnation it runs (None for a retired object)."""
        res = self._objects.get(object_id)
        if res is not None and self.placement is not None and not self.placement.may_act(res):
            return None  # §5/§19.2: the agent lease cannot be proven any more: the object counts as retired
        return res

    # ------------------------------------------------------------------ runtime reports

    def _on_state(self, status: ObjectStatus) -> None:
        res = self._objects.pop(status.object_id, None)
        if res is None:
            return  # a report from a retired object (our own stops retire the object first)
        if self._residents.get(res.loop_id) is res:
            del self._residents[res.loop_id]
        if status.state == "stopped":
            return  # stopped by the runtime itself: the Loop stays active and reconcile reloads it
        outcome = status.outcome or {}
        self._reporting.add(res.loop_id)
        if status.state == "exited":
            self.spawn(self._reported(res, self._exited(res, int(outcome.get("exit_code", 0)))))
        else:
            self.spawn(self._reported(res, self._faulted(res, str(outcome.get("error", "fault")), status.fault)))

    async def _reported(self, res: Resident, work: Coroutine[Any, Any, None]) -> None:
        try:
            await work
        finally:
            self._reporting.discard(res.loop_id)

    # §4.2 row 4: guest returns → paused(exited), told unless it exited 0 after a wake
    async def _exited(self, res: Resident, exit_code: int) -> None:
        await self.runtime.unload(res.object_id)
        told: str | None = None
        async with self.store.tx() as tx:
            row = await self._current(tx, res)
            if row is None:
                return
            await lc.move(tx, row, lc.PAUSED, "exited", actor="guest", detail=f"exit code {notices.exit_code_text(exit_code)}",
                          exit_code=exit_code, object_id=None)
            if notices.telling_on_exit(exit_code, row.notified_since_activation):
                text = notices.exited(row.name, row.id, exit_code)
                told = await lc.write_notice(tx, row, "exited", text)
        self.transitioned(res.loop_id)
        self.announce(told)

    async def _faulted(self, res: Resident, text: str, where: dict[str, Any] | None = None) -> None:
        await self.runtime.unload(res.object_id)
        await self._fault(res.loop_id, res.incarnation, text, where)

    # §4.2 rows 5–6 and §7: reload at most 3 times in a fixed 1-hour window, then failed
    async def _fault(self, loop_id: str, incarnation: int, text: str,
                    where: dict[str, Any] | None = None) -> None:
        """``where`` is the fault detail (function, pc): with the artifact's line table the text names the line."""
        told = None
        reload = False
        await self.flush_logs()  # issue 18: the guest's earlier lines come before the fault line
        async with self.store.tx() as tx:
            row = await self._current(tx, _Inc(loop_id, incarnation))
            if row is None:
                return
            if where is not None:  # issue 18: `main.c:42: <fault> (in wf_json_get_str)` for a built artifact
                text = with_source_line(await stored_table(tx, row.group_id, row.artifact_sha256), text, where)
            now = await tx.now_ms()
            start, count = row.reload_window_start_ms, row.reload_count
            if start is None or now < start or now - start >= HOUR_MS:
                start, count = now, 0
            failure = lc.appended_failure(row.failure, text)
            await lc.append_log(tx, loop_id, incarnation, "harness", f"fault: {text}")
            if count < self.config.limits.reloads_per_hour:
                await lc.move(tx, row, lc.ACTIVE, None, actor="system", detail=f"fault, reload: {text}",
                              failure=failure, reload_count=count + 1, reload_window_start_ms=start,
                              object_id=None)
                reload = True
            else:
                await lc.move(tx, row, lc.FAILED, None, actor="system", detail=f"failed: {text}",
                              failure=failure, reload_count=count, reload_window_start_ms=start, object_id=None)
                content = notices.failed(row.name, row.id, count, text, await lc.pending_count(tx, loop_id))
                told = await lc.write_notice(tx, row, "failed", content)
        if reload:
            self._reload_due[loop_id] = self.clock.monotonic_ns() + RELOAD_DELAY_NS
        self.transitioned(loop_id)
        self.announce(told)

    # §4.2 row 9: artifact missing/changed or rejected by the loader → paused(fault), told once
    async def _pause_fault(self, loop_id: str, incarnation: int, failure: str, detail: str) -> None:
        told: str | None = None
        async with self.store.tx() as tx:
            row = await self._current(tx, _Inc(loop_id, incarnation))
            if row is None:
                return
            await lc.move(tx, row, lc.PAUSED, "fault", actor="system", detail=detail, failure=failure,
                          object_id=None)
            await lc.append_log(tx, loop_id, incarnation, "harness", detail)
            told = await lc.write_notice(tx, row, "fault", notices.fault(row.name, row.id, detail))
        self.transitioned(loop_id)
        self.announce(told)

    # §4.3: terminal reports are applied only where the incarnation still matches
    async def _current(self, tx: Any, res: Resident | _Inc) -> Loop | None:
        row = await loops.find_loop(tx, res.loop_id, for_update=True)
        if row is None or row.incarnation != res.incarnation or row.state != lc.ACTIVE:
            return None
        return row

    # ------------------------------------------------------------------ events (§11)

    async def replay(self, loop_id: str, seen: Seen | None = None) -> int:
        """Deliver pending events in ``(received_ms, event_id)`` order; stop at the first refusal. ``seen``: the
        Loop's row and its pending count, read in the same transaction (``try_load``)."""
        res = self._residents.get(loop_id)
        if res is None:
            return 0
        # issue 16: the replays asked for while one reads share the next read (a burst of creates loads many)
        rows, row = await self._pending_reads.submit((loop_id, seen is not None))
        if seen is not None:
            seen.row, seen.pending = row, len(rows)
        return await self._deliver(res, [r for r in rows if r.event_id not in res.delivered])

    @staticmethod
    async def _read_pending(tx: Tx, asked: list[tuple[str, bool]]) -> list[tuple[list[Any], Loop | None]]:
        """The replays' read: each Loop's pending events in replay order and, where asked, its row — a statement
        each for all the Loops asked together."""
        E = schema.loop_event
        ids = sorted({loop_id for loop_id, _ in asked})
        stmt = sa.select(E.c.loop_id, E.c.event_id, E.c.topic, E.c.payload).where(
            E.c.loop_id.in_(padded(ids)), E.c.status == "pending",
        ).order_by(E.c.loop_id, E.c.received_ms, E.c.event_id)
        pending: dict[str, list[Any]] = {}
        for r in await tx.execute(stmt):
            pending.setdefault(r.loop_id, []).append(r)
        wanted = sorted({loop_id for loop_id, want in asked if want})
        rows = await loops.find_loops(tx, wanted) if wanted else {}
        return [(pending.get(loop_id, []), rows.get(loop_id) if want else None) for loop_id, want in asked]

    async def _deliver(self, res: Resident, pending: list[Any]) -> int:
        """Deliver ``pending`` (event rows in replay order) to ``res``; stop at the first refusal."""
        delivered = []
        swallowed = False
        for event in pending:
            try:
                done = await self.runtime.deliver(res.object_id, event.event_id, event.topic,
                                                  jsontext.decode(event.payload))
            except (MailboxFull, Busy, ObjectNotFound, InvalidParams):
                break
            if done.duplicate and event.event_id not in res.delivered:
                swallowed = True  # an id re-admitted after the dedup retention, still among the object's last 128
                break
            res.delivered.setdefault(event.event_id, self.clock.monotonic_ns())
            delivered.append(event.event_id)
        if delivered:
            await self._stamp_delivery(res, delivered)
        if swallowed:  # only a fresh object can receive it (§11): reload, keeping the order
            self.spawn(self._reload_swallowed(res))
        return len(delivered)

    async def _reload_swallowed(self, res: Resident) -> None:
        if self._residents.get(res.loop_id) is res:
            log.info("reloading %s: the runtime took a re-admitted event id for a repeat", res.loop_id)
            await self.try_load(res.loop_id)

    # §11: the first delivery stamps first_delivered_ms and deadline_ms if unset — or if the stamp was written by
    # the admission for a hand-off to this object that was refused (``stamp_again``)
    async def _stamp_delivery(self, res: Resident, event_ids: list[str]) -> None:
        E = schema.loop_event
        again = sorted(res.stamp_again.intersection(event_ids)) if res.stamp_again else []
        unset = E.c.first_delivered_ms.is_(None)
        async with self.store.tx() as tx:
            now = await tx.now_ms()
            await tx.execute(sa.update(E).where(
                E.c.loop_id == res.loop_id, E.c.event_id.in_(event_ids),
                sa.or_(unset, E.c.event_id.in_(again)) if again else unset,
            ).values(first_delivered_ms=now, deadline_ms=now + self.config.limits.ack_deadline_s * 1000))
        if res.stamp_again is not None:
            res.stamp_again.difference_update(again)

    def stamp_again(self, res: Resident, event_id: str) -> None:
        """Intake: ``event_id``'s admission stamped a delivery to ``res`` that was refused; its delivery by the
        store path (``replay``) stamps it again, so the stamp is the first delivery's (§11)."""
        if res.stamp_again is None:
            res.stamp_again = set()
        res.stamp_again.add(event_id)

    # ------------------------------------------------------------------ placement tick

    async def tick(self, *, reconcile: bool = True) -> None:
        """Due reloads (§7), capacity waits (§4.3 step 3), and — with ``reconcile`` — the reconcile (§19.3):
        unload/adopt, replay pending events, ack deadlines. The Harness's sweep passes ``reconcile`` only every
        ``placement.reconcile_s`` (60 s) while ticking every ``placement.tick_s`` (10 s)."""
        await self.settle()
        now = self.clock.monotonic_ns()
        for loop_id, due in sorted(self._reload_due.items(), key=lambda kv: kv[1]):
            if due <= now:
                await self.try_load(loop_id, if_absent=True)
        for loop_id in sorted(self._waiting_capacity | self._load_deferred):
            await self.try_load(loop_id, if_absent=True)
        if reconcile:
            await self._reconcile()
            await self.pending.reconcile()
        await self.flush_logs()
        await self.settle()

    # §19.3 reconcile, single node: every decision is taken under the Loop's lock on a fresh read. issue 16: the
    # residents are compared with the Loop rows by the store in one read (``drift``), which answers only the Loops
    # that need a change — an idle node's reconcile is one transaction and no row decoded however many Loops it
    # runs; only a Loop that needs a change is read again (under its lock)
    async def _reconcile(self) -> None:
        residents = list(map(_DRIFT_KEY, self._residents.values()))
        agents = None if self.placement is None else sorted(self.placement.book.snapshot())
        async with self.store.tx(readonly=True) as tx:
            found = await drift.drift(tx, residents, agents)
        rows = {r.loop_id: r for r in found}
        active = {loop_id for loop_id, r in rows.items() if r.state == lc.ACTIVE
                  and (self.placement is None or self.placement.holds(r.agent_id or ""))}  # §19.3: owned agents
        for loop_id in sorted(rows):
            if self.is_locked(loop_id) or loop_id in self._reload_due or loop_id in self._reporting:
                continue  # being loaded, unloaded, reloaded or reported right now
            if not self._reconcile_due(self._residents.get(loop_id), rows[loop_id], loop_id in active):
                continue
            try:
                await self._reconcile_one(loop_id)
            except StoreUnavailable as exc:
                log.warning("reconcile of %s deferred: %s", loop_id, exc.message)

    @staticmethod
    def _reconcile_due(res: Resident | None, row: drift.Drift, active: bool) -> bool:
        """What ``_reconcile_one`` would change, judged on the reconcile's read: an object to end or reload, or an
        owned active Loop to load. It decides again on its own fresh read."""
        if res is None:
            return active
        return (row.state != lc.ACTIVE or row.incarnation != res.incarnation or row.object_id != res.object_id)

    async def _reconcile_one(self, loop_id: str) -> None:
        async with self._lock(loop_id):
            async with self.store.tx(readonly=True) as tx:
                row = await loops.find_loop(tx, loop_id)
            res = self._residents.get(loop_id)
            active = row is not None and row.state == lc.ACTIVE
            if res is not None and (not active or row is None or row.incarnation != res.incarnation):
                await self._end(loop_id)  # no longer active, or adopted at a newer incarnation
            elif res is not None and row is not None and row.object_id != res.object_id:
                await self._load(loop_id)  # §4.2 row 14: a retry retired this object (object_id cleared)
            elif res is None and active and loop_id not in self._reporting:
                await self._load(loop_id)

    # ------------------------------------------------------------------ guest logs (§2.7)

    def _on_log(self, object_id: str, message: str) -> bool | None:
        res = self._objects.get(object_id)
        if res is not None:
            self._logs.add(res.loop_id, res.incarnation, message, self.clock.monotonic_ns())
        return None

    def _on_log_refused(self, object_id: str, reason: str) -> None:
        """A line the runtime refused (sdk.md §9.3: over 1,024 bytes or its rate): counted and said at the flush."""
        res = self._objects.get(object_id)
        if res is not None:
            self._logs.refuse(res.loop_id, reason)

    async def flush_logs(self) -> None:
        """Write buffered guest lines (and the dropped counts) in one transaction."""
        lines, dropped = self._logs.take()
        refused = self._logs.take_refused()
        if not lines and not dropped and not refused:
            return

        async def work(tx: Tx) -> None:  # (on SQLite a unit of the group commit: no commit of its own)
            now = await tx.now_ms()
            ids = sorted(set(lines) | set(dropped) | set(refused))
            L = schema.loop
            current: dict[str, int] = {}  # issue 16: the Loops' incarnations in one read per batch
            for start in range(0, len(ids), loops.BATCH):
                stmt = sa.select(L.c.id, L.c.incarnation).where(L.c.id.in_(ids[start:start + loops.BATCH]))
                current.update((r.id, int(r.incarnation)) for r in await tx.execute(stmt))
            batches: dict[str, list[LogLine]] = {}
            for loop_id in ids:
                incarnation = current.get(loop_id)
                if incarnation is None:
                    continue  # deleted meanwhile
                batch = [LogLine(now, inc, "guest", text) for inc, text in lines.get(loop_id, [])]
                if dropped.get(loop_id):  # issue 18: say that lines were dropped, and how many
                    batch.append(LogLine(now, incarnation, "harness", _dropped_text(dropped[loop_id])))
                for reason, count in sorted(refused.get(loop_id, {}).items()):  # and those the runtime refused
                    batch.append(LogLine(now, incarnation, "harness", _refused_text(reason, count)))
                batches[loop_id] = batch
                lost = dropped.get(loop_id, 0) + sum(refused.get(loop_id, {}).values())
                await loops.add_dropped_logs(tx, loop_id, lost)  # a statement only when lines were lost
            await loops.append_logs_many(tx, batches)

        try:
            await self.store.write(work, key="~logs")
        except StoreUnavailable:
            log.warning("guest log lines lost: store unavailable")

    # ------------------------------------------------------------------ background work

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("harness task failed", exc_info=task.exception())

    async def settle(self, rounds: int = 50) -> None:
        """Wait until the reports and post-commit work spawned so far are applied (tests and drain)."""
        for _ in range(rounds):
            await asyncio.sleep(0)
            if not self._tasks:
                return
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    # §2.7: after commit each transition goes to the instruments; they re-read the Loop (and sweep)
    def transitioned(self, loop_id: str) -> None:
        """Report a committed state change of the Loop to the instruments (``transition``)."""
        self.instruments.transition(loop_id)

    def announce(self, message_id: str | None) -> None:
        """Hand a committed message to the instruments (``message``: the wake handlers, interfaces.md §5)."""
        if message_id is not None:
            self.instruments.message(message_id)


class Created:
    """A create's hold on its new Loop (``Node.creating``)."""

    __slots__ = ("loop_id", "node")

    def __init__(self, node: Node, loop_id: str) -> None:
        self.node, self.loop_id = node, loop_id

    async def load(self, *, seen: Seen | None = None, begun: Loop | None = None) -> Resident | None:
        """``Node.try_load(loop_id, if_absent=True, seen=seen)`` under the create's hold, from ``begun``; a
        ``begun`` row with an ``object_id`` names the object its insert attached (``Node.preload``): started here."""
        node = self.node
        if begun is not None and begun.object_id is not None:
            if begun.id == self.loop_id and self.loop_id not in node._residents and node._untouched(self.loop_id):
                return await node._start_created(begun, seen)
            await node.runtime.unload(begun.object_id)  # (never the case under the create's hold)
            begun = None
        return await node._try_load_locked(self.loop_id, if_absent=True, seen=seen, begun=begun)


@dataclass(slots=True)
class Seen:
    """A Loop's row and pending count as a load's replay read them (``Node.try_load``)."""

    row: Loop | None = None
    pending: int = 0


@dataclass(frozen=True, slots=True)
class _Step:
    """One load's item of the load-steps unit: §4.3 step 1 of ``loop_id`` (no ``object_id``) or its step 4."""

    loop_id: str
    incarnation: int = 0
    object_id: str | None = None


@dataclass(slots=True)
class _Begun:
    """A batch of ``Node.load_many`` after its step 1: the Loops taken (locked by ``locks``), the rows begun, or
    the store's refusal of the step."""

    taken: list[str]
    locks: contextlib.AsyncExitStack
    rows: list[Loop]
    error: StoreUnavailable | None = None


@dataclass(frozen=True, slots=True)
class _Inc:
    loop_id: str
    incarnation: int


class _LoopLock:
    """A Loop's lock and how many hold it or wait for it (the entry goes when the last one leaves)."""

    __slots__ = ("lock", "users")

    def __init__(self) -> None:
        self.lock = asyncio.Lock()
        self.users = 0


class _LogBuffer:
    """§2.7: guest lines wait for the next flush; on average at most 1 line per second per Loop persists."""

    BURST = 10

    def __init__(self) -> None:
        self._lines: dict[str, list[tuple[int, str]]] = {}
        self._tokens: dict[str, tuple[float, int]] = {}
        self._dropped: dict[str, int] = {}
        self._refused: dict[str, dict[str, int]] = {}  # loop id → reason → lines the runtime refused

    def refuse(self, loop_id: str, reason: str) -> None:
        counts = self._refused.setdefault(loop_id, {})
        counts[reason] = counts.get(reason, 0) + 1

    def take_refused(self) -> dict[str, dict[str, int]]:
        refused, self._refused = self._refused, {}
        return refused

    def add(self, loop_id: str, incarnation: int, text: str, mono_ns: int) -> None:
        tokens, last = self._tokens.get(loop_id, (float(self.BURST), mono_ns))
        tokens = min(float(self.BURST), tokens + (mono_ns - last) / 1e9)
        if tokens >= 1.0:
            # U+0000 (a guest's raw bytes may hold it) cannot be stored as text: shown as U+FFFD, the batch kept
            self._lines.setdefault(loop_id, []).append((incarnation, text[:1024].replace("\x00", "\ufffd")))
            tokens -= 1.0
        else:
            self._dropped[loop_id] = self._dropped.get(loop_id, 0) + 1
        self._tokens[loop_id] = (tokens, mono_ns)

    def take(self) -> tuple[dict[str, list[tuple[int, str]]], dict[str, int]]:
        lines, dropped = self._lines, self._dropped
        self._lines, self._dropped = {}, {}
        return lines, dropped


def _refused_text(reason: str, count: int) -> str:
    # sdk.md §9.3: the guest got SF_LIMIT for these lines; the owner reads why in the Loop's log
    why = "longer than 1024 bytes" if reason == "length" else "over its rate of 10 a second"
    return f"{count} guest log line{'s' if count != 1 else ''} refused by the runtime: {why}"


def _dropped_text(count: int) -> str:
    # harness.md §2.7: guest lines over the rate are dropped; the Loop's dropped_logs keeps the total
    return (f"{count} guest log line{'s' if count != 1 else ''} dropped: over the log rate "
            f"(a burst of {_LogBuffer.BURST}, then 1 a second)")
