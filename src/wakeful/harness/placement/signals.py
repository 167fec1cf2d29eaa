"""Cross-node signals on PostgreSQL: ``NOTIFY wakeful_events`` after admission (harness.md §10.2) and
``NOTIFY wakeful_loops`` after control changes (§19.3), received on one LISTEN connection per node.

Signals only make delivery prompt; polling on the placement tick is the backup, so a lost notification (or a
listener that is reconnecting) delays work by at most one tick and loses nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import logging
from collections.abc import Callable
from typing import Any

import sqlalchemy as sa

from wakeful.harness.store.core import Store
from wakeful.harness.tasks import cancel_and_wait

__all__ = ["EVENTS", "LOOPS", "Listener", "channel_of", "connect_kwargs", "notify"]

log = logging.getLogger("wakeful.placement")

EVENTS = "wakeful_events"  # payload: "<loop id> <sender node id>" after an admission
LOOPS = "wakeful_loops"  # payload: "<loop id or *> <sender node id>"; "*": leases were released, sweep now


def channel_of(store: Store, name: str) -> str:
    """The PostgreSQL channel of ``name`` (EVENTS or LOOPS) for this store. Channels are per database, so a store
    in a schema of its own (``?search_path=…``) adds a digest of it: deployments in two schemas of one database
    never hear each other. The default schema keeps the plain names."""
    scope = store.target.search_path
    if not scope:
        return name
    return f"{name}_{hashlib.sha256(scope.encode()).hexdigest()[:16]}"


async def notify(store: Store, channel: str, payload: str) -> None:
    """Send one notification on ``channel`` (EVENTS or LOOPS) of this store (delivered at commit). Raises
    ``StoreUnavailable`` like any transaction."""
    async with store.tx() as tx:
        await tx.execute(sa.text("SELECT pg_notify(:c, :p)"), {"c": channel_of(store, channel), "p": payload})


_SA_ONLY = ("async_creator_fn", "prepared_statement_cache_size", "prepared_statement_name_func")


def connect_kwargs(store: Store) -> dict[str, Any]:
    """asyncpg ``connect`` arguments for the LISTEN connection, translated from the store URL exactly as the
    pool's connections are (host, port, user, password, database and every query option such as ``ssl``), so
    TLS and the other options of the URL hold for it too; options only SQLAlchemy's adapter takes are dropped."""
    _, opts = store.engine.dialect.create_connect_args(store.engine.url)
    return {k: v for k, v in dict(opts).items() if k not in _SA_ONLY}


class Listener:
    """A dedicated asyncpg connection LISTENing on both channels; reconnects with backoff while running.

    issue 16: the connection is checked with a ``SELECT 1`` (a transaction PostgreSQL counts) only after
    ``ping_s`` without a notification; a connection the server closes ends the wait at once.

    After a period in which notifications arrived, the next check comes ``settle_s`` after they stop, not a whole
    ``ping_s`` later: PostgreSQL runs a transaction in the listening backend for each notification it takes in,
    and that backend reports those commits to ``pg_stat_database`` only at its next statement. With a check only
    ``ping_s`` (10-20 s) after a burst, the burst's commits (one per Loop created, ~1,000 at N = 1,000) were
    counted in the idle window that followed it (benchmarks.md §2.1 step 4: 3,036 "idle" commits per minute
    against the node's ~36)."""

    def __init__(self, store: Store, on_signal: Callable[[str, str], None], *, ping_s: float = 1.0,
                 settle_s: float = 1.0) -> None:
        self.store = store
        self.on_signal = on_signal
        self.ping_s = ping_s
        self.settle_s = min(settle_s, ping_s)
        self.pings = 0  # liveness checks sent (tests)
        self._task: asyncio.Task[None] | None = None
        self._heard = False  # a notification arrived since the last check
        self._quiet = True  # waiting a whole ping_s (no notification in the last period)
        self._wake: asyncio.Event | None = None  # ends a wait: the connection closed, or a burst began
        self._names = {channel_of(store, name): name for name in (EVENTS, LOOPS)}  # channel → EVENTS / LOOPS
        self.connected = asyncio.Event()

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        await cancel_and_wait([self._task])
        self._task = None

    def _received(self, conn: Any, pid: int, channel: str, payload: str) -> None:
        self._heard = True
        if self._quiet and self._wake is not None:  # a burst began: check settle_s after it ends
            self._quiet = False
            self._wake.set()
        try:
            self.on_signal(self._names.get(channel, channel), payload)
        except Exception:
            log.exception("signal handler failed for %s %s", channel, payload)

    async def _run(self) -> None:
        import asyncpg  # type: ignore[import-untyped]

        delay = 0.5
        while True:
            conn: Any = None
            try:
                conn = await asyncpg.connect(**connect_kwargs(self.store), timeout=10)
                wake = self._wake = asyncio.Event()
                conn.add_termination_listener(functools.partial(_set_on_close, wake))
                for channel in self._names:
                    await conn.add_listener(channel, self._received)
                self.connected.set()
                delay = 0.5
                period, self._quiet = self.ping_s, True
                while not conn.is_closed():
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(period):
                            await wake.wait()
                    wake.clear()
                    if conn.is_closed():
                        break
                    if self._heard:
                        self._heard = False  # the connection delivered within the period: alive
                        period, self._quiet = self.settle_s, False  # check soon after the burst ends
                        continue
                    period, self._quiet = self.ping_s, True
                    self.pings += 1
                    with contextlib.suppress(asyncio.TimeoutError):
                        await conn.execute("SELECT 1", timeout=5)  # notice a dead connection
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.info("LISTEN connection lost (%s); reconnecting", type(exc).__name__)
            finally:
                self.connected.clear()
                if conn is not None and not conn.is_closed():
                    with contextlib.suppress(Exception):
                        await asyncio.wait_for(conn.close(), 2)
            await asyncio.sleep(delay)
            delay = min(10.0, delay * 2)


def _set_on_close(wake: asyncio.Event, conn: Any) -> None:
    wake.set()
