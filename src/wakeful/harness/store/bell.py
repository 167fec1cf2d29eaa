"""The message bell: hands a session's new messages to its readers when the transaction that wrote them commits.

A same-node hint only — readers still poll the store as a backup (messages written by other nodes or processes).

A reader either waits once (``wait``) or holds a subscription (``subscribe``) for as long as it follows the session:
every ring while it is subscribed is kept for it, so a commit that lands while the reader is busy (reading the
store, writing to its client) is not lost, and the rung messages themselves are handed over (``Subscription.take``)
— a stream can send a committed message without reading it back from the store (issue 16, event → wake latency).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator
from typing import Any

__all__ = ["MessageBell", "Subscription"]


class Subscription:
    """One reader's subscription to a session: the messages rung for it since its last ``take``."""

    __slots__ = ("_event", "_loop", "_pushed", "_thread")

    def __init__(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._thread = threading.get_ident()
        self._event = asyncio.Event()
        self._pushed: list[Any] = []

    def _deliver(self, message: Any) -> None:  # on the reader's loop
        if message is not None:
            self._pushed.append(message)
        self._event.set()

    def _ring(self, message: Any) -> None:
        if threading.get_ident() == self._thread:
            self._deliver(message)  # the committing task runs on the reader's loop: no hop through its self-pipe
            return
        with contextlib.suppress(RuntimeError):  # a reader whose loop has closed
            self._loop.call_soon_threadsafe(self._deliver, message)

    async def wait(self, timeout: float) -> bool:
        """Until a ring since the last ``take`` (at once when one came meanwhile) or ``timeout`` seconds pass."""
        if self._event.is_set():
            return True
        try:
            async with asyncio.timeout(timeout):
                await self._event.wait()
            return True
        except TimeoutError:
            return False

    def take(self) -> list[Any]:
        """The messages rung since the last ``take``, in commit order (a ring without a message adds none)."""
        self._event.clear()
        pushed, self._pushed = self._pushed, []
        return pushed


class MessageBell:
    """``ring(session_id, message)`` after commit; a reader ``await wait(session_id, timeout)`` (True when rung) or
    holds ``with bell.subscribe(session_id) as sub:``."""

    def __init__(self) -> None:
        self._waiting: dict[str, list[tuple[asyncio.AbstractEventLoop, asyncio.Event]]] = {}
        self._subscribers: dict[str, list[Subscription]] = {}

    def ring(self, session_id: str, message: Any = None) -> None:
        """Wake every reader of ``session_id`` (from any thread; an event is set on its own loop); ``message``, the
        committed message (``sessions.Message``), goes to each subscription."""
        for loop, event in self._waiting.pop(session_id, ()):
            with contextlib.suppress(RuntimeError):  # a reader whose loop has closed
                loop.call_soon_threadsafe(event.set)
        for sub in tuple(self._subscribers.get(session_id, ())):
            sub._ring(message)

    async def wait(self, session_id: str, timeout: float) -> bool:
        """Until the session's bell rings or ``timeout`` seconds pass."""
        entry = (asyncio.get_running_loop(), asyncio.Event())
        self._waiting.setdefault(session_id, []).append(entry)
        try:
            async with asyncio.timeout(timeout):
                await entry[1].wait()
            return True
        except TimeoutError:
            return False
        finally:
            waiters = self._waiting.get(session_id)
            if waiters is not None and entry in waiters:
                waiters.remove(entry)
                if not waiters and self._waiting.get(session_id) is waiters:
                    self._waiting.pop(session_id, None)  # a ring from another thread may have popped it already

    @contextlib.contextmanager
    def subscribe(self, session_id: str) -> Iterator[Subscription]:
        """A subscription to ``session_id``'s rings for the ``with`` block (on the caller's loop)."""
        sub = Subscription()
        subs = self._subscribers.setdefault(session_id, [])
        subs.append(sub)
        try:
            yield sub
        finally:
            subs.remove(sub)
            if not subs and self._subscribers.get(session_id) is subs:
                del self._subscribers[session_id]

    @property
    def readers(self) -> int:
        """Readers waiting or subscribed now (for tests and stats)."""
        return sum(len(w) for w in self._waiting.values()) + sum(len(s) for s in self._subscribers.values())
