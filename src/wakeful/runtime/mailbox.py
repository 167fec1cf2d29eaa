"""Per-object event mailbox: a bounded FIFO with the last-128-ids dedup window.

runtime-protocol.md §6.9 and §8. Envelope validation (topic, payload, encoded size) is the caller's;
this module applies the dedup → fullness → append part of the check order.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from wakeful.errors import MailboxFull

__all__ = ["DEDUP_WINDOW", "MAILBOX_BYTES", "MAILBOX_ENTRIES", "Mailbox"]

MAILBOX_ENTRIES = 32
MAILBOX_BYTES = 32_768
DEDUP_WINDOW = 128


class Mailbox:
    """FIFO of envelopes with their encoded sizes, and the ids of the last 128 accepted events."""

    __slots__ = ("_entries", "_ids", "_recent", "bytes")

    def __init__(self) -> None:
        self._entries: deque[tuple[Any, int]] = deque()
        self._recent: deque[str] = deque()
        self._ids: set[str] = set()
        self.bytes = 0

    def __len__(self) -> int:
        return len(self._entries)

    def is_duplicate(self, event_id: str) -> bool:
        # §8: the window holds the last 128 accepted ids, including consumed ones
        return event_id in self._ids

    def check_room(self, size: int) -> None:
        """§6.9: 32 entries already queued, or bytes plus this envelope over 32,768 → MAILBOX_FULL."""
        if len(self._entries) >= MAILBOX_ENTRIES:
            raise MailboxFull(f"mailbox full: {MAILBOX_ENTRIES} events queued")
        if self.bytes + size > MAILBOX_BYTES:
            raise MailboxFull(f"mailbox full: {self.bytes} + {size} bytes exceeds {MAILBOX_BYTES}")

    def offer(self, event_id: str, envelope: Any, size: int) -> bool:
        """Queue an envelope; returns ``True`` if ``event_id`` was a duplicate (nothing queued).

        §6.9 order: duplicate (even when full) → room → append and remember the id.
        """
        if self.is_duplicate(event_id):
            return True
        self.check_room(size)
        self._entries.append((envelope, size))
        self.bytes += size
        self._remember(event_id)
        return False

    def pop(self) -> Any:
        """The oldest envelope, or ``None`` when empty (sf_event_next, §8)."""
        if not self._entries:
            return None
        envelope, size = self._entries.popleft()
        self.bytes -= size
        return envelope

    def clear(self) -> None:
        """§7.1: the mailbox and its dedup window are cleared when the object ends."""
        self._entries.clear()
        self._recent.clear()
        self._ids.clear()
        self.bytes = 0

    def _remember(self, event_id: str) -> None:
        self._recent.append(event_id)
        self._ids.add(event_id)
        if len(self._recent) > DEDUP_WINDOW:
            self._ids.discard(self._recent.popleft())
