"""Per-object event mailbox: a bounded FIFO with the last-128-ids dedup window.

runtime-protocol.md §6.9 and §8. Envelope validation (topic, payload, encoded size) is the caller's;
this module applies the dedup → fullness → append part of the check order.
"""

from __future__ import annotations

from typing import Any

from wakeful.errors import MailboxFull

__all__ = ["DEDUP_WINDOW", "MAILBOX_BYTES", "MAILBOX_ENTRIES", "Mailbox"]

MAILBOX_ENTRIES = 32
MAILBOX_BYTES = 32_768
DEDUP_WINDOW = 128


class Mailbox:
    """FIFO of envelopes with their encoded sizes, and the ids of the last 128 accepted events.

    Both are allocated on first use and the FIFO is dropped again when it empties: an idle object's mailbox
    costs a few dozen bytes instead of two deques and a set (benchmarks.md §1.8: ≤ 8 KiB per object).
    The dedup window is an insertion-ordered dict used as an ordered set (oldest id first).
    """

    __slots__ = ("_entries", "_window", "bytes")

    def __init__(self) -> None:
        self._entries: list[tuple[Any, int]] | None = None
        self._window: dict[str, None] | None = None
        self.bytes = 0

    def __len__(self) -> int:
        return len(self._entries) if self._entries is not None else 0

    def is_duplicate(self, event_id: str) -> bool:
        # §8: the window holds the last 128 accepted ids, including consumed ones
        return self._window is not None and event_id in self._window

    def check_room(self, size: int) -> None:
        """§6.9: 32 entries already queued, or bytes plus this envelope over 32,768 → MAILBOX_FULL."""
        if len(self) >= MAILBOX_ENTRIES:
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
        if self._entries is None:
            self._entries = [(envelope, size)]
        else:
            self._entries.append((envelope, size))
        self.bytes += size
        self._remember(event_id)
        return False

    def pop(self) -> Any:
        """The oldest envelope, or ``None`` when empty (sf_event_next, §8)."""
        entries = self._entries
        if not entries:
            return None
        envelope, size = entries.pop(0)  # at most 32 entries: a list shift is cheap
        if not entries:
            self._entries = None
        self.bytes -= size
        return envelope

    def clear(self) -> None:
        """§7.1: the mailbox and its dedup window are cleared when the object ends."""
        self._entries = None
        self._window = None
        self.bytes = 0

    def _remember(self, event_id: str) -> None:
        window = self._window
        if window is None:
            self._window = window = {}
        window[event_id] = None
        if len(window) > DEDUP_WINDOW:
            del window[next(iter(window))]
