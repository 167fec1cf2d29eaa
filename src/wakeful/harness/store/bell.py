"""The message bell: wakes the readers of a session's new messages when a transaction that wrote one commits.

A same-node hint only — readers still poll the store as a backup (messages written by other nodes or processes).
"""

from __future__ import annotations

import asyncio
import contextlib

__all__ = ["MessageBell"]


class MessageBell:
    """``ring(session_id)`` after commit; ``await wait(session_id, timeout)`` in a reader (True when rung)."""

    def __init__(self) -> None:
        self._waiting: dict[str, list[tuple[asyncio.AbstractEventLoop, asyncio.Event]]] = {}

    def ring(self, session_id: str) -> None:
        """Wake every reader of ``session_id`` (from any thread; an event is set on its own loop)."""
        for loop, event in self._waiting.pop(session_id, ()):
            with contextlib.suppress(RuntimeError):  # a reader whose loop has closed
                loop.call_soon_threadsafe(event.set)

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

    @property
    def readers(self) -> int:
        """Readers waiting now (for tests and stats)."""
        return sum(len(w) for w in self._waiting.values())
