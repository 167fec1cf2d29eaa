"""The store checks of ``wakeful doctor`` (run by the harness, since they open the store) (interfaces.md §4.2, harness.md §3): reachable within a bounded time,
schema version equal to the code's, SQLite in WAL with ``synchronous=FULL``, PostgreSQL signals, locks and clock.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from wakeful.checks import FAIL, NOT_CHECKED, OK, SKIPPED, WARN, Check
from wakeful.errors import WakefulError
from wakeful.harness.config import redacted_url

if TYPE_CHECKING:
    from wakeful.harness.store import Store

__all__ = ["STORE_CHECKS", "check_store", "clock_check"]

STORE_CHECKS = ("store", "schema", "sqlite_wal", "pg_notify", "pg_advisory_locks", "pg_clock")
SQLITE_ONLY = ("sqlite_wal",)
PG_ONLY = ("pg_notify", "pg_advisory_locks", "pg_clock")
STEP_S = 5.0  # every store step is bounded: an unreachable store fails quickly instead of hanging the doctor
MAX_SKEW_MS = 1000  # interfaces.md §4.2: the node clock within 1 s of the database clock
SYNCHRONOUS = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}

Step = Callable[["Store"], Awaitable[Check]]


async def check_store(url: str) -> list[Check]:
    """One record per name of ``STORE_CHECKS``, in that order."""
    from wakeful.harness.store.engine import parse_url

    try:
        dialect = parse_url(url).dialect
    except WakefulError as exc:
        failed = Check("store", FAIL, exc.message, "set store.url / --db / $WAKEFUL_DB_URL (interfaces.md §7)")
        return [failed, *_not_checked(STORE_CHECKS[1:], "the store URL is invalid")]
    found = await _dialect_checks(url, dialect)
    return [found.get(name) or _absent(name, dialect) for name in STORE_CHECKS]


def _absent(name: str, dialect: str) -> Check:
    """A check that did not run: the other dialect's (``ok``, skipped) or one the store's failure prevented."""
    other = PG_ONLY if dialect == "sqlite" else SQLITE_ONLY
    if name in other:
        return Check(name, OK, SKIPPED + f"only on {'PostgreSQL' if dialect == 'sqlite' else 'SQLite'}")
    return Check(name, WARN, NOT_CHECKED + "the store is not reachable", "fix the store check first")


async def _dialect_checks(url: str, dialect: str) -> dict[str, Check]:
    try:
        async with asyncio.timeout(STEP_S):
            opened = await _open(url)
    except Exception as exc:  # noqa: BLE001 - e.g. a data directory this user cannot search: the check's detail
        text = str(exc).splitlines()[0][:200] if str(exc) else ""
        return {"store": Check("store", FAIL, f"{redacted_url(url)}: {type(exc).__name__}: {text}",
                               "check the data directory and store.url / --db")}
    if isinstance(opened, Check):
        return {"store": opened}
    store = opened
    try:
        reach = await _bounded("store", _reachable(store, redacted_url(url)))
        if reach.status == FAIL:
            return {"store": reach}
        steps: list[tuple[str, Step]] = [("schema", _schema)]
        if dialect == "sqlite":
            steps += [("sqlite_wal", _sqlite_wal)]
        else:
            steps += [("pg_notify", _pg_notify), ("pg_advisory_locks", _pg_advisory), ("pg_clock", _pg_clock)]
        return {"store": reach, **{name: await _bounded(name, step(store)) for name, step in steps}}
    finally:
        await store.close()


def _not_checked(names: tuple[str, ...], why: str) -> list[Check]:
    return [Check(n, WARN, NOT_CHECKED + why, "fix the store check first") for n in names]


async def _open(url: str) -> Store | Check:
    """The store object (no connection yet); a missing SQLite file is a failed ``store`` check —
    the doctor never creates the database."""
    from wakeful.harness.store import Store
    from wakeful.harness.store.engine import parse_url

    target = parse_url(url)
    if target.sqlite_path is not None and not target.sqlite_path.is_file():
        return Check("store", FAIL, f"the SQLite file {target.sqlite_path} does not exist",
                     "run `wakeful db upgrade` (or start `wakeful serve`, which creates it)")
    return await Store.open(url, migrate=False)


async def _bounded(name: str, step: Awaitable[Check]) -> Check:
    """A step that raises or outlives ``STEP_S`` is a failed check naming why (never a traceback)."""
    try:
        async with asyncio.timeout(STEP_S):
            return await step
    except TimeoutError:
        return Check(name, FAIL, f"no answer within {STEP_S:g} s", "check the database host, port and firewall")
    except WakefulError as exc:
        return Check(name, FAIL, exc.message, "check the database and its logs")
    except Exception as exc:  # noqa: BLE001 - a driver's error becomes the check's detail
        text = str(exc).splitlines()[0][:200] if str(exc) else ""
        return Check(name, FAIL, f"{type(exc).__name__}: {text}", "check the database and its logs")


async def _reachable(store: Store, shown: str) -> Check:
    try:
        async with store.tx(readonly=True) as tx:
            await tx.execute(sa.text("SELECT 1"))
    except WakefulError as exc:
        return Check("store", FAIL, f"{shown}: {exc.message}", "start the database or fix store.url / --db")
    except (OSError, sa.exc.SQLAlchemyError) as exc:
        return Check("store", FAIL, f"{shown}: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}",
                     "start the database or fix store.url / --db")
    return Check("store", OK, f"{shown} ({store.dialect}) answers")


# harness.md §3: equal → start; empty, older or newer need an operator
async def _schema(store: Store) -> Check:
    from wakeful.harness.store.migrations import HEAD, stored_version

    stored = await stored_version(store)
    if stored == HEAD:
        return Check("schema", OK, f"version {HEAD}, equal to the code's")
    if stored is None:
        return Check("schema", FAIL, f"the store is empty (the code's version is {HEAD})", "run `wakeful db upgrade`")
    if stored < HEAD:
        return Check("schema", FAIL, f"the store is at version {stored}, older than the code's {HEAD}",
                     "run `wakeful db upgrade` (SQLite: a backup is written first)")
    return Check("schema", FAIL, f"the store is at version {stored}, newer than this wakeful's {HEAD}",
                 "upgrade wakeful on this machine to the version the store was upgraded by")


# harness.md §3: the pragmas every store connection applies must hold on this file and file system
async def _sqlite_wal(store: Store) -> Check:
    async with store.tx(readonly=True) as tx:
        journal = str((await tx.conn.exec_driver_sql("PRAGMA journal_mode")).scalar_one()).lower()
        sync = int((await tx.conn.exec_driver_sql("PRAGMA synchronous")).scalar_one())
    detail = f"journal_mode={journal}, synchronous={SYNCHRONOUS.get(sync, sync)}"
    if journal != "wal" or sync < 2:
        return Check("sqlite_wal", FAIL, detail + " (expected wal and FULL)",
                     "put the data directory on a local file system that supports WAL (not NFS or SMB)")
    return Check("sqlite_wal", OK, detail)


# harness.md §10.2, §19.3: a NOTIFY sent through the store reaches a LISTEN connection
async def _pg_notify(store: Store) -> Check:
    import asyncpg  # type: ignore[import-untyped]

    from wakeful.harness.placement.signals import channel_of, connect_kwargs, notify

    channel, payload = f"wakeful_doctor_{secrets.token_hex(4)}", secrets.token_hex(8)
    got: asyncio.Queue[str] = asyncio.Queue()
    conn: Any = await asyncpg.connect(**connect_kwargs(store), timeout=STEP_S)
    try:
        await conn.add_listener(channel_of(store, channel), lambda _c, _pid, _ch, text: got.put_nowait(text))
        await notify(store, channel, payload)
        received = await got.get()
    finally:
        with contextlib.suppress(Exception):
            await conn.close(timeout=2)
    if received != payload:
        return Check("pg_notify", FAIL, f"LISTEN got {received!r}, not the payload sent",
                     "check for a connection pooler rewriting notifications")
    return Check("pg_notify", OK, "a NOTIFY through the store reached a LISTEN connection")


# harness.md §3, §15: advisory locks exclude across connections (a transaction pooler breaks them)
async def _pg_advisory(store: Store) -> Check:
    key = secrets.randbits(62)
    async with store.engine.connect() as first, store.engine.connect() as second:
        held = (await first.execute(sa.text("SELECT pg_try_advisory_lock(:k)"), {"k": key})).scalar_one()
        also = (await second.execute(sa.text("SELECT pg_try_advisory_lock(:k)"), {"k": key})).scalar_one()
        if also:
            await second.execute(sa.text("SELECT pg_advisory_unlock(:k)"), {"k": key})
        freed = (await first.execute(sa.text("SELECT pg_advisory_unlock(:k)"), {"k": key})).scalar_one()
    if not held or also or not freed:
        return Check("pg_advisory_locks", FAIL, f"lock {held}, second connection {also}, unlock {freed}: advisory "
                     "locks do not exclude", "connect to PostgreSQL directly or through a session-mode pooler")
    return Check("pg_advisory_locks", OK, "a session advisory lock excluded a second connection and was released")


async def _pg_clock(store: Store) -> Check:
    samples = []
    for _ in range(3):
        before = time.time_ns()
        db_ms = await store.now_ms()  # clock_timestamp(), as every store timestamp (harness.md §3)
        after = time.time_ns()
        samples.append((after - before, db_ms - (before + after) / 2e6))
    rtt_ns, skew_ms = min(samples)
    return clock_check(skew_ms, rtt_ns / 1e6)


def clock_check(skew_ms: float, rtt_ms: float) -> Check:
    """Fail only when the skew is beyond 1 s even allowing for half the round trip of the reading."""
    side = "behind" if skew_ms > 0 else "ahead of"
    detail = f"the node clock is {abs(skew_ms):.0f} ms {side} the database clock (±{rtt_ms / 2:.0f} ms)"
    if abs(skew_ms) - rtt_ms / 2 > MAX_SKEW_MS:
        return Check("pg_clock", FAIL, detail, "synchronise both clocks with NTP (chrony, systemd-timesyncd)")
    return Check("pg_clock", OK, detail)
