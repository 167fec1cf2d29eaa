"""Group commit (issue 16, benchmarks.md §2.2): concurrent small write units of one store share one transaction.

``await store.grouped(work, key=...)`` queues ``work(tx)``; one committer task takes everything queued, runs each
unit in arrival order (stably sorted by ``key``, so row locks are always taken in one order) inside one write
transaction, commits, and only then resolves each caller with its own result. Units that arrive while a batch
commits form the next batch, so batching adds no wait of its own: under load the batches grow, alone a unit
commits at once. On SQLite, units that arrive while a batch still runs its statements join it (``_late``).

Per-unit outcomes: a ``HarnessError`` raised by a unit is that unit's own answer and the others still commit —
so a unit must raise its typed refusals before it writes anything. Any other failure (a driver error, a lost
connection, a failed commit) rolls the whole batch back, and each unit of it is then run again alone in a
transaction of its own, so one bad unit fails alone and nothing is answered before its own commit. A batch of one
unit is run again only when its session was lost with nothing committed (``StoreUnavailable.lost_uncommitted``).

Row locks across units (PostgreSQL): each unit locks its Loop rows in id order, but two units of one batch are
two such passes — an admission unit taking Loops {a, b} and an ack unit taking {c} on one node, {c} and {a} on
another, lock a before c on the first and c before a on the second: the two batches deadlock (two nodes on one
store; PostgreSQL aborts one after ``deadlock_timeout``, or ``statement_timeout`` ends the wait first). So a unit may
name the Loop rows it will lock (``locks``); before the units run, the batch locks all of them in one statement in
id order, and every batch of every node then takes its Loop rows in one order.

``await store.grouped_batch(kind, item, work)`` goes one step further for many small requests of one kind (acks):
the items submitted while the previous ones wait form one unit, ``work(tx, items)``, which answers every item with
a fixed number of statements for the whole batch; each item gets its own answer (a ``HarnessError`` in its place
is raised to that caller alone). A batch unit that fails otherwise is retried item by item.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import sqlalchemy as sa

from wakeful.harness.errors import HarnessError, StoreUnavailable
from wakeful.harness.store import schema

if TYPE_CHECKING:
    from wakeful.harness.store.core import Store, Tx

__all__ = ["BatchWork", "GroupCommit", "LOCKED_AHEAD", "MAX_BATCH", "PAUSE_ENV", "Waiters", "copy_outcome"]

log = logging.getLogger(__name__)
MAX_BATCH = 256  # units per transaction; the rest wait for the next batch
LOCKED_AHEAD = "group.locked_ahead"  # ``Tx.shared`` key: the batch holds its units' Loop rows FOR UPDATE already
# test-only pause points (tests/integration/harness_ingress/test_harness_ingress_group_kill.py): a directory in
# which a file ``hold-before`` / ``hold-after`` stops the next batch right before / right after its COMMIT (the
# batch writes ``held-before`` / ``held-after`` there) until the file is removed. Unset: no file system access.
PAUSE_ENV = "WAKEFUL_TEST_GROUP_COMMIT_PAUSE_DIR"
_PAUSE_POLL_S = 0.02


ItemT = TypeVar("ItemT")  # an item of a batch unit
T = TypeVar("T")
BatchWork = Callable[["Tx", list[Any]], Awaitable[list[Any]]]  # items → one answer (or HarnessError) per item
Locks = Callable[[], Iterable[str]]  # the ids of the Loop rows a unit will lock (asked right before the batch runs)


class Waiters:
    """The callers of one shared task (a batch unit), each answered through a future of its own that a single
    done-callback of the task settles (issue 16): ``asyncio.shield`` per caller gave each an outer future and two
    done-callbacks — two more loop turns per caller when the task ended. As with ``shield``, a caller cancelled
    while it waits cancels only its own future, never the task."""

    __slots__ = ("_futures", "_task")

    def __init__(self, task: asyncio.Future[Any]) -> None:
        self._task = task
        self._futures: list[asyncio.Future[Any]] = []
        task.add_done_callback(self._settle)

    def wait(self) -> asyncio.Future[Any]:
        """A future with the task's outcome (result, exception or cancellation)."""
        future = self._task.get_loop().create_future()
        if self._task.done():
            copy_outcome(future, self._task)
        else:
            self._futures.append(future)
        return future

    def _settle(self, task: asyncio.Future[Any]) -> None:
        for future in self._futures:
            copy_outcome(future, task)
        self._futures = []


def copy_outcome(future: asyncio.Future[Any], task: asyncio.Future[Any]) -> None:
    """Give ``future`` the outcome of the finished ``task`` (its result, exception or cancellation), unless
    ``future`` is done already (its caller was cancelled, or it was answered otherwise)."""
    if future.done():
        return
    if task.cancelled():
        future.cancel()
    elif (exc := task.exception()) is not None:
        future.set_exception(exc)
    else:
        future.set_result(task.result())


@dataclass
class _Collection(Generic[ItemT]):
    """The batch unit of one kind that has not started yet, and the items it will take."""

    task: asyncio.Future[list[Any]]
    items: list[ItemT]
    waiters: Waiters = field(init=False)

    def __post_init__(self) -> None:
        self.waiters = Waiters(self.task)


@dataclass
class _Unit:
    work: Callable[[Tx], Awaitable[Any]]
    key: str
    future: asyncio.Future[Any] = field(repr=False)
    locks: Locks | None = None


class GroupCommit:
    """The group committer of one ``Store`` (``store.grouping``)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.batches = 0  # batch transactions committed (each unit answered from one of them)
        self.units = 0  # units answered from a committed batch (refusals included)
        self.largest = 0  # the largest batch so far
        self.joined = 0  # units that joined a batch while it ran (SQLite, ``_late``)
        self.singles = 0  # statements of ``single`` in flight (each occupies the lane as a batch would)
        self._quiet: list[asyncio.Future[None]] = []  # batch units waiting for the singles in flight to end
        self._queue: list[_Unit] = []
        self._task: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._collecting: dict[str, _Collection[Any]] = {}  # kind → its next batch unit (Store.grouped_batch)
        pause = os.environ.get(PAUSE_ENV)
        self._pause_dir = Path(pause) if pause else None

    async def submit(self, work: Callable[[Tx], Awaitable[Any]], key: str = "", locks: Locks | None = None) -> Any:
        loop = self._bind()
        unit = _Unit(work, key, loop.create_future(), locks)
        self._queue.append(unit)
        if self._task is None or self._task.done():
            self._task = loop.create_task(self._run())
        return await unit.future

    async def submit_batch(self, kind: str, item: Any, work: BatchWork, *, limit: int = MAX_BATCH,
                           lock_of: Callable[[Any], str] | None = None) -> Any:
        """``item`` joins the next batch unit of ``kind`` (at most ``limit`` items; more start another unit);
        returns its own answer after that unit's transaction committed (``Store.grouped_batch``). ``lock_of``:
        the id of the Loop row the unit locks for an item."""
        self._bind()  # (bound here too: a batch unit may be submitted later, after the singles in flight)
        coll = self._collecting.get(kind)
        if coll is None or coll.task.done() or len(coll.items) >= limit:  # (done: failed before it ran)
            items: list[Any] = []

            def close() -> None:
                opened = self._collecting.get(kind)
                if opened is not None and opened.items is items:
                    del self._collecting[kind]  # closed: items from now on go to the next unit

            async def unit(tx: Tx) -> list[Any]:
                close()
                return await work(tx, items)  # (a rerun of the unit answers the same items)

            def locks() -> list[str]:
                close()  # the items the batch locks for are the items the unit answers
                assert lock_of is not None
                return [lock_of(i) for i in items]

            coll = _Collection(asyncio.ensure_future(self._after_singles(
                lambda: self.submit(unit, kind, locks if lock_of else None))), items)
            self._collecting[kind] = coll
        index = len(coll.items)
        coll.items.append(item)
        try:
            answers = await coll.waiters.wait()
        except HarnessError:
            raise
        except Exception as exc:
            log.info("batch unit %s of %d items failed (%s); answering one alone", kind, len(coll.items),
                     type(exc).__name__)

            async def alone(tx: Tx) -> Any:
                return (await work(tx, [item]))[0]

            answer = await self.submit(alone, kind)
        else:
            answer = answers[index]
        if isinstance(answer, HarnessError):
            raise answer
        return answer

    def _bind(self) -> asyncio.AbstractEventLoop:
        loop = asyncio.get_running_loop()
        if self._loop is not loop:  # a store used from another event loop (as the SQLite writer turn allows)
            self._queue, self._task, self._loop, self._collecting, self._quiet = [], None, loop, {}, []
        return loop

    def collecting(self, kind: str) -> int:
        """Items collected for the next batch unit of ``kind`` (not counting one committing)."""
        coll = self._collecting.get(kind)
        return 0 if coll is None or coll.task.done() else len(coll.items)

    @property
    def batching(self) -> bool:
        """A batch committing or queued."""
        return bool(self._queue) or (self._task is not None and not self._task.done())

    @property
    def idle(self) -> bool:
        """No batch committing or queued, no batch unit collecting items and no ``single`` in flight."""
        return (not self.singles and not self.batching
                and all(c.task.done() for c in self._collecting.values()))

    # issue 16 (event → wake on PostgreSQL): a request alone on an idle lane may be one statement that commits as it
    # runs (``Store.single``: no BEGIN, no COMMIT) instead of a batch of one. While it runs it occupies the lane:
    # callers that find the lane not ``idle`` batch as before, so under load they still share commits (session
    # 10's single acks did not count themselves, every ack found the lane idle and was a commit of its own). The
    # batch unit of the items that come meanwhile starts only when the single has ended (``_after_singles``), so the
    # lane stays busy from then on as long as items keep coming — one single per quiet spell, not one per batch.
    async def single(self, work: Callable[[Tx], Awaitable[T]]) -> T:
        """``store.single(work)``, counted as the lane's work in flight while it runs."""
        self.singles += 1
        try:
            return await self.store.single(work)
        finally:
            self.singles -= 1
            if not self.singles:
                quiet, self._quiet = self._quiet, []
                for future in quiet:
                    if not future.done():
                        future.set_result(None)

    async def _after_singles(self, submit: Callable[[], Awaitable[T]]) -> T:
        while self.singles:
            future = asyncio.get_running_loop().create_future()
            self._quiet.append(future)
            await future
        return await submit()

    @property
    def queued(self) -> int:
        """Units waiting for the next batch (not counting the one committing)."""
        return len(self._queue)

    async def _run(self) -> None:
        while self._queue:
            batch, self._queue = self._queue[:MAX_BATCH], self._queue[MAX_BATCH:]
            batch = [u for u in batch if not u.future.done()]  # a caller that gave up before its batch began
            if not batch:
                continue
            batch.sort(key=lambda u: u.key)
            try:
                await self._commit(batch)  # (units that join it while it runs are added to ``batch``)
            except BaseException as exc:  # never leave a caller waiting (cancellation at shutdown included)
                for unit in batch:
                    _settle(unit, exc, failed=True)
                if not isinstance(exc, Exception):
                    raise

    async def _commit(self, batch: list[_Unit]) -> None:
        outcomes: list[tuple[bool, Any]] = []
        try:
            async with self.store.tx() as tx:
                await _lock_ahead(tx, batch)
                ran = 0
                while ran < len(batch):
                    unit = batch[ran]
                    ran += 1
                    mark = tx.after_commit_mark()
                    try:
                        outcomes.append((False, await unit.work(tx)))
                    except HarnessError as exc:  # this unit's typed refusal (it wrote nothing)
                        tx.drop_after_commit(mark)
                        outcomes.append((True, exc))
                    if ran == len(batch):
                        batch.extend(self._late(tx, len(batch)))
                await self._pause("before")
        except Exception as exc:
            if len(batch) == 1 and not (isinstance(exc, StoreUnavailable) and exc.lost_uncommitted):
                _settle(batch[0], exc, failed=True)
                return
            log.info("group commit of %d units failed (%s); running each alone", len(batch), type(exc).__name__)
            await asyncio.gather(*(self._alone(unit) for unit in batch))
            return
        self.batches += 1
        self.units += len(batch)
        self.largest = max(self.largest, len(batch))
        await self._pause("after")
        for unit, (failed, value) in zip(batch, outcomes):
            _settle(unit, value, failed=failed)

    # issue 16 (event → wake latency): on SQLite the units queued while this batch ran its statements join it
    # before its COMMIT instead of waiting for a commit of their own — an ack that arrives while an admission's
    # statements run, or the other way round, is answered by the same commit. Nothing waits for them (the batch
    # commits as soon as no unit is queued). Not on PostgreSQL: there the batch locks its units' Loop rows in one
    # statement before any unit runs (``_lock_ahead``), and a late unit would lock rows after that, out of order.
    def _late(self, tx: Tx, size: int) -> list[_Unit]:
        if tx.dialect != "sqlite" or not self._queue or size >= MAX_BATCH:
            return []
        room = MAX_BATCH - size
        late, self._queue = self._queue[:room], self._queue[room:]
        self.joined += sum(1 for u in late if not u.future.done())
        return sorted((u for u in late if not u.future.done()), key=lambda u: u.key)

    async def _alone(self, unit: _Unit) -> None:
        if unit.future.done():
            return
        try:
            async with self.store.tx() as tx:
                value = await unit.work(tx)
        except Exception as exc:
            _settle(unit, exc, failed=True)
            return
        _settle(unit, value, failed=False)

    async def _pause(self, point: str) -> None:
        if self._pause_dir is None or not (self._pause_dir / f"hold-{point}").exists():
            return
        (self._pause_dir / f"held-{point}").write_text(str(os.getpid()))
        while (self._pause_dir / f"hold-{point}").exists():
            await asyncio.sleep(_PAUSE_POLL_S)


async def _lock_ahead(tx: Tx, batch: list[_Unit]) -> None:
    """The Loop rows the units of a batch will lock, locked in id order by one statement (PostgreSQL; SQLite's
    write transaction is the lock). A unit alone already locks its rows in one pass."""
    if tx.dialect != "postgresql" or len(batch) < 2:
        return
    ids = sorted({i for u in batch if u.locks is not None for i in u.locks()})
    if ids:
        L = schema.loop
        await tx.execute(sa.select(L.c.id).where(L.c.id.in_(ids)).order_by(L.c.id).with_for_update())
        tx.shared[LOCKED_AHEAD] = True  # (the units' own locks of these rows find them held already)


def _settle(unit: _Unit, value: Any, *, failed: bool) -> None:
    if unit.future.done():
        return
    if isinstance(value, asyncio.CancelledError):
        unit.future.cancel()
    elif failed:
        unit.future.set_exception(value)
    else:
        unit.future.set_result(value)
