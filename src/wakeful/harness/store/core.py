"""``Store`` (open, migrate, close) and ``Tx``, the one-transaction unit every state change runs in.

harness.md §3: one store-clock reading per transaction, no success before commit, and every driver failure
(connection loss, lock timeout, disk full, commit error) surfaces as ``StoreUnavailable``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql as pg_dialect
from sqlalchemy.dialects import sqlite as sqlite_dialect
from sqlalchemy.engine import CursorResult
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from wakeful.harness.errors import HarnessError, InvalidRequest, StoreUnavailable
from wakeful.harness.store.bell import MessageBell
from wakeful.harness.store.clock import STORE_MS_SQL, WallClock, read_store_ms
from wakeful.harness.store.engine import (
    EngineTarget,
    NodeLock,
    SessionTimeouts,
    is_nul_text,
    is_unavailable,
    lost_uncommitted,
    make_engine,
    parse_url,
    unavailable_from,
)
from wakeful.harness.store.group import BatchWork, GroupCommit

if TYPE_CHECKING:
    from wakeful.harness.store.migrations import MigrationOutcome

__all__ = ["Store", "Tx"]

log = logging.getLogger(__name__)
T = TypeVar("T")
WRITER_WAIT_S = 5.0  # the longest wait for the SQLite write turn: the busy timeout it replaces (SQLITE_PRAGMAS)


class Tx:
    """One open transaction: ``conn`` for Core statements, ``await now_ms()`` for the store clock."""

    def __init__(self, store: Store, conn: AsyncConnection) -> None:
        self.store = store
        self.conn = conn
        self.dialect = store.dialect
        self._now_ms: int | None = None
        self._after_commit: list[Callable[[], None]] = []
        self.shared: dict[str, Any] = {}  # state the units of one group-commit transaction share (Store.grouped)

    def after_commit(self, action: Callable[[], None]) -> None:
        """Run ``action`` once this transaction has committed (never on rollback); its errors are logged."""
        self._after_commit.append(action)

    def after_commit_mark(self) -> int:
        """A mark for ``drop_after_commit``: the actions registered so far."""
        return len(self._after_commit)

    def drop_after_commit(self, mark: int) -> None:
        """Forget the actions registered since ``mark`` (a unit that refused, or wrote nothing after all)."""
        del self._after_commit[mark:]

    def _committed(self) -> None:
        for action in self._after_commit:
            try:
                action()
            except Exception:  # a post-commit signal must not turn a committed change into a failure
                log.exception("after-commit action failed")

    # harness.md §3: one store-clock reading per transaction
    async def now_ms(self) -> int:
        if self._now_ms is None:
            self._now_ms = await read_store_ms(self.conn, self.dialect, self.store.clock)
        return self._now_ms

    def clock_column(self) -> sa.ColumnElement[Any] | None:
        """The store clock as a column to read along with a statement's row (``seed_now``), while this transaction
        has not read it yet and it is a statement of its own (PostgreSQL without an injected clock); else None."""
        if self._now_ms is not None or self.dialect != "postgresql" or self.store.clock is not None:
            return None
        return sa.literal_column(STORE_MS_SQL).label("wakeful_store_ms")

    def seed_now(self, row: Any) -> None:
        """The transaction's one store-clock reading from a row read with ``clock_column`` (harness.md §3)."""
        value = getattr(row, "wakeful_store_ms", None)
        if value is not None and self._now_ms is None:
            self._now_ms = int(value)

    async def execute(self, stmt: Any, params: Any = None) -> CursorResult[Any]:
        result: CursorResult[Any] = await self.conn.execute(stmt, params)
        return result

    async def insert_if_absent(self, table: sa.Table, values: Mapping[str, Any], *,
                               along: sa.Update | None = None) -> bool:
        """INSERT … ON CONFLICT DO NOTHING; True when the row was inserted, False for a duplicate key.

        ``along``: an UPDATE run only when the row was inserted — on PostgreSQL in the same statement (a
        data-modifying CTE: one round trip for both), on SQLite right after the insert."""
        dialect_mod: Any = pg_dialect if self.dialect == "postgresql" else sqlite_dialect
        stmt = dialect_mod.insert(table).values(**values).on_conflict_do_nothing()
        if along is not None and self.dialect == "postgresql":
            return await self._insert_along(stmt, table, along)
        result = await self.conn.execute(stmt)
        inserted = bool(result.rowcount == 1)
        if inserted and along is not None:
            await self.conn.execute(along)
        return inserted

    # issue 16 (event → wake on PostgreSQL): a wake's message and its Loop row's UPDATE were two round trips on the
    # path; as one statement the UPDATE sees the insert's RETURNING (empty for a duplicate: then nothing updates)
    async def _insert_along(self, insert: Any, table: sa.Table, along: sa.Update) -> bool:
        first_key = next(iter(table.primary_key.columns))
        ins = insert.returning(first_key).cte("wakeful_inserted")
        upd = along.where(sa.exists(sa.select(ins.c[first_key.name]))).cte("wakeful_along")
        stmt = sa.select(sa.select(sa.func.count()).select_from(ins).scalar_subquery().label("n")).add_cte(upd)
        return bool((await self.conn.execute(stmt)).scalar_one() == 1)

    def for_update(self, stmt: sa.Select[Any]) -> sa.Select[Any]:
        """Row lock on PostgreSQL (``SELECT … FOR UPDATE``); SQLite already holds the write lock."""
        return stmt.with_for_update() if self.dialect == "postgresql" else stmt

    def for_share(self, stmt: sa.Select[Any]) -> sa.Select[Any]:
        """Shared row lock on PostgreSQL (``SELECT … FOR SHARE``): excludes the row's writers, not other sharers."""
        return stmt.with_for_update(read=True) if self.dialect == "postgresql" else stmt

    async def first(self, stmt: sa.Select[Any], *, for_update: bool = False) -> sa.Row[Any] | None:
        """The first row of ``stmt`` or None; ``for_update`` locks it (``for_update`` above)."""
        return (await self.execute(self.for_update(stmt) if for_update else stmt)).first()


class Store:
    """The durable store on SQLite or PostgreSQL. Open with ``await Store.open(url)``."""

    def __init__(self, target: EngineTarget, engine: AsyncEngine, clock: WallClock | None) -> None:
        self.target = target
        self.engine = engine
        self.clock = clock
        self.dialect = target.dialect
        self.url_text = target.sa_url
        self._node_lock: NodeLock | None = None
        self.migration: MigrationOutcome | None = None  # what Store.open's version check did
        self.bell = MessageBell()  # session readers (the SSE stream) wake when a message commits
        self._writer: asyncio.Lock | None = None
        self._writer_loop: asyncio.AbstractEventLoop | None = None
        self.writers_waiting = 0  # write transactions queued for the single SQLite writer
        self.commits = 0  # write transactions committed by this Store (a group-commit batch counts once)
        # awaited inside every write transaction right before its COMMIT (tests hold a commit here)
        self.before_commit: list[Callable[[Tx], Awaitable[None]]] = []
        self.grouping = GroupCommit(self)
        self._lanes: dict[str, GroupCommit] = {}  # PostgreSQL: committers beside ``grouping`` (``lane``)

    @classmethod
    async def open(
        cls,
        url: str,
        *,
        clock: WallClock | None = None,
        upgrade: bool = False,
        migrate: bool = True,
        node_lock: bool = False,
        timeouts: SessionTimeouts | None = None,
    ) -> Store:
        """Connect and apply harness.md §3's version rules (``migrate=False`` only connects).

        ``upgrade`` allows upgrading an older PostgreSQL schema (``wakeful db upgrade`` / ``--upgrade``);
        SQLite upgrades after a ``VACUUM INTO`` backup without it. ``node_lock`` takes ``<db>.node``.
        ``timeouts``: a node's PostgreSQL session timeouts (``engine.session_timeouts``).
        """
        target = parse_url(url)
        store = cls(target, make_engine(target, timeouts), clock)
        try:
            if node_lock and target.sqlite_path is not None:
                store._node_lock = NodeLock(target.sqlite_path)
                store._node_lock.acquire()
            if migrate:
                from wakeful.harness.store.migrations import migrate as run_migrations

                store.migration = await run_migrations(store, allow_upgrade=upgrade)
        except BaseException:
            await store.close()
            raise
        return store

    @property
    def sqlite_path(self) -> Path | None:
        return self.target.sqlite_path

    async def grouped(self, work: Callable[[Tx], Awaitable[T]], *, key: str = "",
                      locks: Callable[[], Iterable[str]] | None = None) -> T:
        """Run ``work(tx)`` in a write transaction shared with the other units queued meanwhile (group commit,
        see ``store.group``); returns its result — or raises its error — only after that transaction committed.
        ``work`` raises its typed refusals (``HarnessError``) before writing anything, and may be run twice (a
        batch that fails for another reason is retried unit by unit). ``key``: units are run in key order
        (arrival order within a key), e.g. the id of the row they lock. ``locks``: the ids of the Loop rows
        ``work`` will lock, asked right before the batch runs; the batch locks those of all its units first, in
        one order (``store.group``: two nodes' batches cannot deadlock on them)."""
        result: T = await self.grouping.submit(work, key, locks)
        return result

    # issue 16 (event → wake): on PostgreSQL a guest's ack queued behind the admission batch committing at the time
    # (the high event's, in the bench's wake step) and committed only after it, then the next event was delivered;
    # in a lane of their own the acks commit beside the admissions, on another pooled session. Both lock their
    # Loop rows first, in id order, in one statement, so the two lanes' batches cannot deadlock on them.
    def lane(self, name: str) -> GroupCommit:
        """The group committer of lane ``name``: on PostgreSQL each lane commits its batches beside the others' (the
        pool's sessions); on SQLite, one writer, every lane is ``grouping``."""
        if not name or self.dialect != "postgresql":
            return self.grouping
        found = self._lanes.get(name)
        if found is None:
            found = self._lanes[name] = GroupCommit(self)
        return found

    async def grouped_batch(self, kind: str, item: Any, work: BatchWork,
                            lock_of: Callable[[Any], str] | None = None, *, lane: str = "") -> Any:
        """``item`` answered by one ``work(tx, items)`` with the other items of ``kind`` submitted meanwhile, as a
        unit of the group commit: ``work`` returns one answer per item, in order, a ``HarnessError`` in the place
        of an item it refuses (raised to that caller alone), and writes nothing for a refused item. Returns the
        item's answer only after the transaction committed (see ``store.group``). ``lock_of``: the id of the Loop
        row ``work`` locks for an item (as ``locks`` of ``grouped``). ``lane``: the committer (``lane``)."""
        return await self.lane(lane).submit_batch(kind, item, work, lock_of=lock_of)

    async def write(self, work: Callable[[Tx], Awaitable[T]], *, key: str = "") -> T:
        """``work(tx)`` as one small write: on SQLite a unit of the group commit (``grouped``: one writer per
        process, so a transaction of its own would only queue for the writer turn and then commit alone — as a
        unit it shares the commit of the admissions and acks queued meanwhile); on PostgreSQL a transaction of
        its own, beside the others on the pool. ``work`` follows ``grouped``'s rules: typed refusals before any
        write, and it may be run twice."""
        if self.dialect == "sqlite":
            return await self.grouped(work, key=key)
        return await self._run(work)

    async def run_rerunnable(self, work: Callable[[Tx], Awaitable[T]]) -> T:
        """``work(tx)`` in a write transaction, and once more on a fresh session when the first one's session was
        lost with nothing committed (``StoreUnavailable.lost_uncommitted``: e.g. the server ended it after its
        idle-in-transaction timeout, on a node starved of CPU). ``work`` may run twice, as a group-commit unit."""
        try:
            return await self._run(work)
        except StoreUnavailable as exc:
            if not exc.lost_uncommitted:
                raise
            log.info("%s; nothing was committed, running the transaction again on a fresh session", exc)
        return await self._run(work)

    async def _run(self, work: Callable[[Tx], Awaitable[T]]) -> T:
        async with self.tx() as tx:
            return await work(tx)

    @asynccontextmanager
    async def tx(self, *, readonly: bool = False) -> AsyncIterator[Tx]:
        """``async with store.tx() as tx:`` — commit on normal exit, roll back on error.

        On SQLite a write transaction starts with ``BEGIN IMMEDIATE`` (``readonly=True``: deferred), after its
        turn at the single writer. On PostgreSQL ``readonly=True`` runs in autocommit (no BEGIN, no COMMIT: each
        statement reads its own snapshot, as at READ COMMITTED in a transaction); a read must not write.
        """
        if self.dialect == "sqlite" and not readonly:
            async with self._write_turn(), self._tx(readonly=False) as tx:
                yield tx
            return
        async with self._tx(readonly=readonly) as tx:
            yield tx

    # issue 16 / benchmarks.md §2.2: one writer per process on SQLite. Concurrent writers of one store queue here
    # (FIFO) instead of sleeping in SQLite's busy handler, which let few of them through and answered the rest
    # ``database is locked``; the wait is bounded by the same busy timeout, so a stuck writer still surfaces.
    @asynccontextmanager
    async def _write_turn(self) -> AsyncIterator[None]:
        loop = asyncio.get_running_loop()
        if self._writer is None or self._writer_loop is not loop:
            self._writer, self._writer_loop = asyncio.Lock(), loop
        writer = self._writer
        self.writers_waiting += 1
        try:
            async with asyncio.timeout(WRITER_WAIT_S):
                await writer.acquire()
        except TimeoutError:
            raise StoreUnavailable(f"store unavailable: no write turn within {WRITER_WAIT_S:g} s") from None
        finally:
            self.writers_waiting -= 1
        try:
            yield
        finally:
            writer.release()

    @property
    def singles(self) -> bool:
        """Whether ``single`` skips the transaction: on PostgreSQL, while no ``before_commit`` hook is installed (a
        hook — a test holding commits — must see every commit)."""
        return self.dialect == "postgresql" and not self.before_commit

    async def single(self, work: Callable[[Tx], Awaitable[T]]) -> T:
        """``work(tx)`` that runs **one** statement, which commits by itself: on PostgreSQL without BEGIN and COMMIT
        (the statement's own implicit transaction commits, WAL flushed, before its answer comes back: one round trip
        instead of three); otherwise (SQLite, or a ``before_commit`` hook installed: ``singles``) ``write``. ``work``
        raises nothing after its statement (nothing could roll it back) and may be run twice, as ``write``'s."""
        if not self.singles:
            return await self.write(work)
        async with self._tx(readonly=False, autocommit=True) as tx:
            return await work(tx)

    # issue 16 (event → wake on PostgreSQL): SQLAlchemy's asyncpg adapter sends BEGIN as a round trip of its own
    # before a transaction's first statement and COMMIT as another after its last. A read (READ COMMITTED: every
    # statement reads its own snapshot anyway) and a write of one statement need neither: on PostgreSQL they run
    # in autocommit (``readonly`` / ``autocommit``), each statement its own transaction — the stream's read after a
    # wake 3 → 1 round trips, a state.put's UPDATE 3 → 1 (``single``).
    @asynccontextmanager
    async def _tx(self, *, readonly: bool, autocommit: bool = False) -> AsyncIterator[Tx]:
        commit_sent = False  # from here on a lost session may have committed
        try:
            async with self.engine.connect() as conn:
                if self.dialect == "sqlite":
                    await conn.execution_options(wakeful_begin="DEFERRED" if readonly else "IMMEDIATE")
                elif readonly or autocommit:
                    await conn.execution_options(isolation_level="AUTOCOMMIT")
                    commit_sent = autocommit  # (its statement commits as it runs)
                await conn.begin()
                tx = Tx(self, conn)
                yield tx
                if not readonly and not autocommit:  # (autocommit: committed already, nothing to hold)
                    for hook in list(self.before_commit):
                        await hook(tx)
                # harness.md §3: no success before commit returns; a commit error is unavailable
                commit_sent = True
                await conn.commit()
            if not readonly:
                self.commits += 1
            tx._committed()
        except HarnessError:
            raise
        except Exception as exc:
            if is_unavailable(exc):
                error = unavailable_from(exc, "a transaction")
                error.lost_uncommitted = self.dialect == "postgresql" and lost_uncommitted(exc, commit_sent=commit_sent)
                raise error from exc
            if is_nul_text(exc):  # a text value with U+0000 that no entry check caught: a typed refusal, not a crash
                raise InvalidRequest("text values must not contain U+0000") from exc
            raise

    async def now_ms(self) -> int:
        """A single store-clock reading outside any caller transaction."""
        async with self.tx(readonly=True) as tx:
            return await tx.now_ms()

    async def close(self) -> None:
        try:
            await self.engine.dispose()
        finally:
            if self._node_lock is not None:
                self._node_lock.release()
                self._node_lock = None
