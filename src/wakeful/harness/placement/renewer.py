"""Lease renewal and node heartbeat from a dedicated thread with its own event loop and connection.

harness.md §19.2: renewals must not be starved by long guest work. Guests run on the node's asyncio loop, so the
renewer runs in its own thread with its own ``Store`` (engine and connection); CPython's thread switching gives
it the GIL every few milliseconds however long a guest runs. Results go to the thread-safe ``LeaseBook``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable

from wakeful.harness.errors import StoreUnavailable
from wakeful.harness.placement import leases, nodes
from wakeful.harness.placement.book import LeaseBook
from wakeful.harness.store.clock import WallClock
from wakeful.harness.store.core import Store
from wakeful.harness.store.engine import session_timeouts

__all__ = ["Renewer"]

log = logging.getLogger("wakeful.placement")


class Renewer:
    """Heartbeats the node row each ``heartbeat_s`` and renews every lease in ``book`` each ``renew_s``, the renewal
    in the same transaction as a heartbeat."""

    def __init__(
        self, url: str, *, book: LeaseBook, node_id: str, ttl_ms: int, renew_s: float, heartbeat_s: float,
        monotonic_ns: Callable[[], int], objects: Callable[[], int], on_lost: Callable[[list[str]], None],
        wall: WallClock | None = None,
    ) -> None:
        self.url, self.book, self.node_id, self.ttl_ms = url, book, node_id, ttl_ms
        self.renew_s, self.heartbeat_s = renew_s, heartbeat_s
        self._mono, self._objects, self._on_lost, self._wall = monotonic_ns, objects, on_lost, wall
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._wake: asyncio.Event | None = None
        self._ready = threading.Event()
        self.renewals = 0  # successful renewal rounds (tests, status)
        # monotonic reading sent before the last renewal that succeeded (None: none yet); the placement tick
        # renews itself only when this is older than renew_s (a stuck or paused renewer)
        self.renewed_ns: int | None = None
        self.failures = 0
        self.paused = False  # tests: simulate blocked renewals

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=f"wakeful-renewer-{self.node_id}", daemon=True)
        self._thread.start()
        self._ready.wait(10)

    def stop(self, timeout: float = 10.0) -> None:
        loop, stop = self._loop, self._stop
        if loop is not None and stop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(stop.set)
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def kick(self) -> None:
        """Renew now (after a claim, so a fresh lease gets its first proof soon)."""
        loop, wake = self._loop, self._wake
        if loop is not None and wake is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(wake.set)

    def _run(self) -> None:
        asyncio.run(self._main())

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop, self._wake = asyncio.Event(), asyncio.Event()
        self._ready.set()
        timeouts = session_timeouts(self.ttl_ms / 1000, self.renew_s)  # the same sessions as the node's pool
        store = await Store.open(self.url, clock=self._wall, migrate=False, timeouts=timeouts)
        next_renew = next_beat = 0.0
        try:
            while not self._stop.is_set():
                now = self._loop.time()
                renew = now >= next_renew or self._wake.is_set()
                if renew or now >= next_beat:
                    self._wake.clear()
                    beat_ok, renew_ok = await self.round(store, renew=renew)
                    # every round heartbeats, so a renewal off the beat (a retry) realigns the two schedules
                    next_beat = now + (self.heartbeat_s if beat_ok else 0.5)
                    if renew:
                        next_renew = now + (self.renew_s if renew_ok else min(1.0, self.renew_s / 2))
                delay = max(0.01, min(next_beat, next_renew) - self._loop.time())
                waits = [asyncio.ensure_future(self._stop.wait()), asyncio.ensure_future(self._wake.wait())]
                await asyncio.wait(waits, timeout=delay, return_when=asyncio.FIRST_COMPLETED)
                for w in waits:
                    w.cancel()
        finally:
            await store.close()

    # issue 16 / benchmarks.md §2.2: one transaction per heartbeat, the renewal of every lease of the node riding
    # in it (one statement, leases.renew) when it is due — an idle node's renewer commits once per heartbeat_s
    # however many agents it holds
    async def round(self, store: Store, *, renew: bool) -> tuple[bool, bool]:
        """One heartbeat of the node row and, with ``renew``, the renewal of every lease in the book, in one
        transaction on ``store``; (heartbeat written, leases renewed). Failures are counted and logged."""
        if self.paused:
            return False, False
        held = self.book.snapshot() if renew else {}
        sent_ns = self._mono()
        try:
            async with asyncio.timeout(max(1.0, self.renew_s if held else self.heartbeat_s)):
                async with store.tx() as tx:
                    await nodes.heartbeat(tx, self.node_id, objects=self._objects())
                    lost = await leases.renew(tx, self.node_id, held, self.ttl_ms)
        except (StoreUnavailable, TimeoutError) as exc:
            self.failures += renew
            log.warning("%s failed: %s", "lease renewal" if renew else "heartbeat", exc)
            return False, False
        except Exception:
            self.failures += renew
            log.exception("%s failed", "lease renewal" if renew else "heartbeat")
            return False, False
        if not renew:
            return True, False
        if held:
            self.renewals += 1
            self.renewed_ns = sent_ns
            gone = self.book.renewed(held, held.keys() - lost, sent_ns)
            if gone:
                log.warning("leases lost to another node: %s", ", ".join(sorted(gone)[:10]))
                self._on_lost(gone)
        return True, True
