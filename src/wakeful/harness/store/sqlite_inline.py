"""SQLite statements run on the event loop's thread; only what may wait runs on the connection's thread.

issue 16 (event → wake latency, benchmarks.md §2.2): aiosqlite runs every call of a connection on a thread of its
own — a cursor, each statement, each fetch, each cursor close: 3–4 round trips to that thread per statement,
three for ``BEGIN`` alone, and on a loaded machine every round trip waits for a CPU twice (the thread's wake-up,
then the event loop's). A statement of the store is tens of microseconds of SQLite work on pages in memory, less
than one round trip. So ``InlineConnection`` runs those calls directly, on the caller's thread, and sends to the
connection's thread only what may wait for the disk or another process: ``COMMIT`` (its fsync, the WAL
checkpoint), ``ROLLBACK``, ``BEGIN IMMEDIATE`` (it may wait ``busy_timeout`` for another process's write lock),
any statement that is not plain DML or a deferred ``BEGIN`` (``VACUUM INTO``, ``PRAGMA``, DDL), and the
connection's opening and closing. A write transaction is then two round trips (``BEGIN IMMEDIATE``, ``COMMIT``)
whatever its statements; a read transaction none (its ``COMMIT`` only ends the read: ``InlineConnection._note``).

The two threads never use the connection at once: every call is awaited before the next one starts (one task
holds a pooled connection), and ``sqlite3`` is opened with ``check_same_thread=False`` (SQLAlchemy's setting).
``thread_calls`` counts the round trips of the process (tests count them).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import aiosqlite

__all__ = ["InlineConnection", "connect", "thread_calls"]

# statements that never wait for a lock or the disk: plain DML (in WAL mode a reader does not block, and a write
# statement runs inside a write transaction that already holds the lock) and a deferred BEGIN
_INLINE_SQL = ("SELECT", "INSERT", "UPDATE", "DELETE", "WITH", "REPLACE", "BEGIN DEFERRED", "SAVEPOINT", "RELEASE")
_INLINE_CURSOR = frozenset({"fetchone", "fetchmany", "fetchall", "close"})
_counter = [0]


def thread_calls() -> int:
    """Round trips to SQLite connection threads so far in this process."""
    return _counter[0]


def _inline(fn: Callable[..., Any], args: tuple[Any, ...]) -> bool:
    owner = getattr(fn, "__self__", None)
    name = getattr(fn, "__name__", "")
    if isinstance(owner, sqlite3.Cursor):
        if name in ("execute", "executemany"):
            return bool(args) and isinstance(args[0], str) and args[0].lstrip()[:14].upper().startswith(_INLINE_SQL)
        return name in _INLINE_CURSOR
    return isinstance(owner, sqlite3.Connection) and name == "cursor"


class InlineConnection(aiosqlite.Connection):
    """An aiosqlite connection that runs the calls that cannot wait inline (module docstring)."""

    def __init__(self, connector: Callable[[], sqlite3.Connection]) -> None:
        super().__init__(connector, 64)
        self._thread.daemon = True  # (as SQLAlchemy sets it for aiosqlite: an unclosed connection never blocks exit)
        # the open transaction began deferred and has run only SELECTs: the connection's change count at its BEGIN
        self._reading: int | None = None

    async def _execute(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        if _inline(fn, args) or self._ends_a_read(fn):
            if not self._running or not self._connection:
                raise ValueError("Connection closed")
            self._note(fn, args)
            return fn(*args, **kwargs)
        self._reading = None
        _counter[0] += 1
        return await super()._execute(fn, *args, **kwargs)  # type: ignore[no-untyped-call]

    # issue 16 (creates/s): the COMMIT of a transaction that began deferred and ran only SELECTs (a read
    # transaction) writes nothing and waits for nothing — in WAL mode it ends the read snapshot — so it runs inline
    # too: a read transaction is then no round trip to the thread at all (a burst of creates ran four of them per
    # batch: the creates' read, the replays' read, the Loop bridge's, the listing's)
    def _note(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
        if getattr(fn, "__name__", "") not in ("execute", "executemany") or not args or not isinstance(args[0], str):
            return
        head = args[0].lstrip()[:14].upper()
        if head.startswith("BEGIN DEFERRED"):
            conn = self._connection
            self._reading = None if conn is None else int(conn.total_changes)
        elif not head.startswith("SELECT"):
            self._reading = None

    def _ends_a_read(self, fn: Callable[..., Any]) -> bool:
        if self._reading is None or getattr(fn, "__name__", "") != "commit":
            return False
        conn: sqlite3.Connection | None = self._connection
        reading, self._reading = self._reading, None
        if conn is None:
            return False
        changes = int(conn.total_changes)
        return getattr(fn, "__self__", None) is conn and changes == reading


def connect(path: Path) -> Callable[[], Any]:
    """The ``async_creator`` of the SQLite engine: an ``InlineConnection`` to ``path``, opened on its thread."""

    async def creator() -> InlineConnection:
        conn = InlineConnection(partial(sqlite3.connect, str(path), check_same_thread=False))
        _counter[0] += 1
        await conn
        return conn

    return creator
