"""URL → async SQLAlchemy engine with the store's per-dialect settings, the node lock file, and the
translation of driver errors into ``StoreUnavailable`` (harness.md §3).
"""

from __future__ import annotations

import asyncio
import fcntl
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import sqlalchemy.exc as sa_exc
from sqlalchemy import event
from sqlalchemy.engine import Connection, ExceptionContext
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.pool import ConnectionPoolEntry

from wakeful.harness.errors import InvalidRequest, NodeLocked, StoreUnavailable
from wakeful.harness.store import sqlite_inline

__all__ = [
    "EngineTarget", "NodeLock", "SessionTimeouts", "is_nul_text", "is_unavailable", "lost_uncommitted", "make_engine",
    "parse_url", "session_timeouts", "unavailable_from",
]

# harness.md §3: the SQLite pragmas applied on every connection
SQLITE_PRAGMAS = (
    "PRAGMA journal_mode=WAL",
    "PRAGMA synchronous=FULL",
    "PRAGMA foreign_keys=ON",
    "PRAGMA busy_timeout=5000",
    # issue 16: a 256 KiB page cache per connection instead of SQLite's 2 MiB: a node pools up to 16 connections,
    # and each one's cache filled with the pages of N Loops (PSS per Loop 12.5 -> 10.7 KB at N = 1,000); hot
    # index pages fit, the rest comes from the OS page cache
    "PRAGMA cache_size=-256",
)
# lock waits on PostgreSQL end as errors (→ StoreUnavailable) instead of hanging
PG_LOCK_TIMEOUT_MS = 5000
# PostgreSQL SQLSTATE classes that mean "the store is not available now" (connection, resources, admin, locks)
_PG_UNAVAILABLE_PREFIXES = ("08", "53", "57", "58")
_PG_UNAVAILABLE_CODES = {"55P03", "40P01", "40001", "25006"}
# the server ended a session idle in a transaction (idle_in_transaction_session_timeout): it ran no COMMIT of it
_PG_IDLE_ENDED = "25P03"
# asyncpg refuses a statement with these before it sends a byte: the session is closed, or its protocol is stuck
# after a message the server sent unasked — the FATAL that ended the session, read before the socket's close
# ("cannot switch to state 11; another operation (2) is in progress")
_UNSENT_PREFIXES = ("cannot switch to state", "connection is closed", "cannot perform operation: connection is closed")


@dataclass(frozen=True)
class SessionTimeouts:
    """``statement_timeout`` and ``idle_in_transaction_session_timeout`` of a node's PostgreSQL sessions (ms)."""

    statement_ms: int
    idle_in_transaction_ms: int


# issue 16: a node frozen (SIGSTOP, a stalled VM) while its session was idle in a transaction kept that session's
# row locks for the whole freeze, so the Loop could not move even after its lease expired. The rule: a frozen
# session lets go of its locks within statement_timeout + idle_in_transaction_session_timeout of the freeze, and
# that sum is at most TTL − renew (each half of it). The frozen node renewed at most ``renew`` before the freeze,
# so its lease expires no earlier than TTL − renew after it: by the time anyone may claim the agent, the locks
# are gone and the adoption does not wait on them. (Defaults: TTL 30 s, renew 10 s → 10 s each.)
def session_timeouts(lease_ttl_s: float, renew_s: float) -> SessionTimeouts:
    """The node's session timeouts derived from its lease settings (``placement.lease_ttl_s``, ``renew_s``)."""
    window_ms = int((lease_ttl_s - renew_s) * 1000)
    if window_ms < 2:
        raise ValueError("the lease TTL must exceed the renew interval")
    half = window_ms // 2
    return SessionTimeouts(statement_ms=half, idle_in_transaction_ms=half)


@dataclass(frozen=True)
class EngineTarget:
    """A parsed store URL: the dialect, the SQLAlchemy URL and, for SQLite, the database file."""

    dialect: str
    sa_url: str
    sqlite_path: Path | None
    search_path: str | None


# harness.md §3: sqlite:///<file> → aiosqlite; postgresql:// → asyncpg
def parse_url(url: str) -> EngineTarget:
    scheme, _, rest = url.partition("://")
    if not rest:
        raise InvalidRequest(f"store URL {url!r} has no scheme", field="store.url")
    base = scheme.split("+", 1)[0]
    if base == "sqlite":
        return _sqlite_target(rest)
    if base in ("postgresql", "postgres"):
        return _pg_target(url)
    raise InvalidRequest(f"store URL scheme {scheme!r} is not sqlite or postgresql", field="store.url")


def _sqlite_target(rest: str) -> EngineTarget:
    path_text = rest[1:] if rest.startswith("/") else rest
    if not path_text or path_text == ":memory:":
        raise InvalidRequest("the SQLite store needs a file path", field="store.url")
    path = Path(path_text)
    return EngineTarget("sqlite", f"sqlite+aiosqlite:///{path}", path, None)


def _pg_target(url: str) -> EngineTarget:
    parts = urlsplit(url)
    query = parse_qsl(parts.query)
    search_path = next((v for k, v in query if k == "search_path"), None)
    rest = urlencode([(k, v) for k, v in query if k != "search_path"])
    sa_url = urlunsplit(("postgresql+asyncpg", parts.netloc, parts.path, rest, parts.fragment))
    return EngineTarget("postgresql", sa_url, None, search_path)


def make_engine(target: EngineTarget, timeouts: SessionTimeouts | None = None) -> AsyncEngine:
    """The async engine with the dialect's settings (pragmas and ``BEGIN IMMEDIATE``, or READ COMMITTED).

    ``timeouts`` (a node's pools; PostgreSQL only) become every session's statement and idle-in-transaction
    timeouts; without them (CLI tools, probes) only the lock timeout applies."""
    if target.dialect == "sqlite":
        assert target.sqlite_path is not None
        target.sqlite_path.parent.mkdir(parents=True, exist_ok=True)
        # issue 16: no ROLLBACK when a connection goes back to the pool — every ``Store`` transaction ends in its
        # COMMIT or ROLLBACK before the connection is returned (an open one is rolled back by the connection's
        # close), and with aiosqlite that reset is one more hop to the driver thread after every transaction
        # issue 16: statements run on the event loop's thread, COMMIT and BEGIN IMMEDIATE on the connection's
        # (``sqlite_inline``: two round trips to the driver thread per write transaction instead of 3–4 a statement)
        engine = create_async_engine(target.sa_url, pool_size=8, max_overflow=8, pool_reset_on_return=None,
                                     async_creator=sqlite_inline.connect(target.sqlite_path))
        _install_sqlite_hooks(engine)
        return engine
    # issue 16: a plan made for each execution, not the prepared statement's generic plan. A node prepares its
    # statements on its first use, and PostgreSQL keeps a generic plan chosen then: made while ``loop`` held a few
    # rows, ``id = ANY($1)`` and ``agent_id = ANY($1)`` were planned as a scan of the table (the cheapest way to
    # read a small one) and stayed so as it grew — at N = 10,000 a create burst read the whole table about once
    # per three creates (15.0 M rows for 10,000 creates). A custom plan is made with the parameters and the table
    # as they are, for ~0.05 ms of the server's planning per statement
    settings = {"lock_timeout": str(PG_LOCK_TIMEOUT_MS), "plan_cache_mode": "force_custom_plan"}
    if timeouts is not None:
        settings["statement_timeout"] = str(timeouts.statement_ms)
        settings["idle_in_transaction_session_timeout"] = str(timeouts.idle_in_transaction_ms)
    if target.search_path:
        settings["search_path"] = target.search_path
    engine = create_async_engine(
        target.sa_url,
        isolation_level="READ COMMITTED",
        pool_size=10,
        max_overflow=10,
        # issue 16 (ingest-2k2): the session used most recently goes out first, so a steady load runs on the few
        # sessions it needs — their prepared statements and type caches warm — instead of rotating through every
        # session of the pool (FIFO), which prepared each batch statement once per session
        pool_use_lifo=True,
        connect_args={"server_settings": settings, "timeout": 10},
    )
    _install_pg_hooks(engine)
    return engine


def _install_pg_hooks(engine: AsyncEngine) -> None:
    # a pooled session whose socket closed while it sat idle (the server or a proxy between went away and came back)
    # is replaced on checkout, before the caller's first statement fails on it: asyncpg's ``is_closed`` is a local
    # flag, no round trip. Without this, each such session failed one transaction after the server was back — a
    # ``/healthz`` right after a 202 answered 503 (issue 16)
    @event.listens_for(engine.sync_engine, "checkout")
    def _on_checkout(dbapi_conn: Any, record: ConnectionPoolEntry, proxy: Any) -> None:
        driver = getattr(dbapi_conn, "driver_connection", None)
        if driver is not None and driver.is_closed():
            raise sa_exc.DisconnectionError("the pooled session's connection closed while it was idle")

    # a session the server ended (lost_uncommitted below) is never used again — asyncpg need not have noticed the
    # close yet — and it is that session alone: the pool's other connections are not thrown away for it
    @event.listens_for(engine.sync_engine, "handle_error")
    def _on_error(ctx: ExceptionContext) -> None:
        exc = ctx.sqlalchemy_exception
        if isinstance(exc, sa_exc.DBAPIError) and (_never_sent(exc) or _PG_IDLE_ENDED in _sqlstates(exc)):
            ctx.is_disconnect = True
            ctx.invalidate_pool_on_disconnect = False


def _install_sqlite_hooks(engine: AsyncEngine) -> None:
    @event.listens_for(engine.sync_engine, "connect")
    def _on_connect(dbapi_conn: Any, record: ConnectionPoolEntry) -> None:
        # the driver must not open transactions itself: we emit BEGIN below
        dbapi_conn.isolation_level = None
        cursor = dbapi_conn.cursor()
        for pragma in SQLITE_PRAGMAS:
            cursor.execute(pragma)
        cursor.close()

    # harness.md §3: write transactions start with BEGIN IMMEDIATE (no deadlock on lock upgrade)
    @event.listens_for(engine.sync_engine, "begin")
    def _on_begin(conn: Connection) -> None:
        mode = conn.get_execution_options().get("wakeful_begin", "IMMEDIATE")
        conn.exec_driver_sql(f"BEGIN {mode}")


# harness.md §3: connection loss, lock timeout or disk full → StoreUnavailable
def is_unavailable(exc: BaseException) -> bool:
    if isinstance(exc, StoreUnavailable):
        return True
    if isinstance(exc, (asyncio.TimeoutError, ConnectionError)):
        return True
    if isinstance(exc, sa_exc.DBAPIError):
        return _dbapi_unavailable(exc)
    return isinstance(exc, (sa_exc.DisconnectionError, sa_exc.TimeoutError, sa_exc.InterfaceError))


def _dbapi_unavailable(exc: sa_exc.DBAPIError) -> bool:
    if exc.connection_invalidated or isinstance(exc, (sa_exc.OperationalError, sa_exc.InterfaceError)):
        return True
    state = _sqlstate(exc)
    if state is None:
        return isinstance(exc.orig, OSError)
    return state.startswith(_PG_UNAVAILABLE_PREFIXES) or state in _PG_UNAVAILABLE_CODES


def _sqlstate(exc: sa_exc.DBAPIError) -> str | None:
    for holder in (exc.orig, getattr(exc.orig, "__cause__", None)):
        for attr in ("sqlstate", "pgcode"):
            value = getattr(holder, attr, None)
            if isinstance(value, str):
                return value
    return None


# issue 16: a node starved of CPU between two statements of a transaction for longer than its
# idle_in_transaction_session_timeout has that session ended by the server, with nothing committed
def lost_uncommitted(exc: BaseException, *, commit_sent: bool) -> bool:
    """The transaction's session is gone (or unusable) and the transaction did not commit: the failure came before
    its COMMIT was sent, asyncpg never sent the statement that failed, or the server says it ended the session
    while idle. A lost answer to a COMMIT that went out is never this: that transaction may have committed."""
    if not isinstance(exc, sa_exc.DBAPIError) or not (exc.connection_invalidated or _never_sent(exc)):
        return False
    return not commit_sent or _never_sent(exc) or _PG_IDLE_ENDED in _sqlstates(exc)


def _never_sent(exc: sa_exc.DBAPIError) -> bool:
    return isinstance(exc, (sa_exc.InterfaceError, sa_exc.InternalError)) and str(exc.orig).startswith(_UNSENT_PREFIXES)


def _sqlstates(exc: BaseException) -> set[str]:
    """Every SQLSTATE along the cause chain (asyncpg puts the server's reason for a close under its own error)."""
    found: set[str] = set()
    holder: BaseException | None = exc
    for _ in range(8):  # (a bounded walk: SQLAlchemy's error → the adapter's → asyncpg's → the server's)
        if holder is None:
            break
        value = getattr(holder, "sqlstate", None)
        if isinstance(value, str):
            found.add(value)
        holder = getattr(holder, "orig", None) or holder.__cause__
    return found


def is_nul_text(exc: BaseException) -> bool:
    """PostgreSQL refused a text value holding U+0000 (SQLSTATE 22021: character not in repertoire)."""
    return isinstance(exc, sa_exc.DBAPIError) and _sqlstate(exc) == "22021"


def unavailable_from(exc: BaseException, what: str) -> StoreUnavailable:
    """The one typed error for an unreachable store; the driver's text is kept short in the message."""
    detail = str(getattr(exc, "orig", None) or exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
    return StoreUnavailable(f"store unavailable during {what}: {detail}")


class NodeLock:
    """harness.md §3: an exclusive lock file ``<db>.node`` so a second node refuses the same SQLite file."""

    def __init__(self, db_path: Path) -> None:
        self.path = Path(str(db_path) + ".node")
        self._fd: int | None = None

    def acquire(self) -> None:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise NodeLocked(f"another node is running on {self.path.with_suffix('')}") from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
