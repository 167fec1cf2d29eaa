"""Guest handles (sdk.md §5): one runtime-wide number counter and memory guard, one table per object.
A handle owns a JSON value (a ``jsonval.Json`` box) or a ``bytes`` string; numbers are never reused.

Memory is charged by estimated Python bytes (``footprint``; decisions-runtime-helpers.md, "Handle memory"):
a JSON handle costs its box's ``cost``, a bytes handle its header and data, each plus ``footprint.HANDLE``.
"""

from __future__ import annotations

from wakeful.runtime.footprint import BYTES_HEAD, HANDLE
from wakeful.runtime.jsonval import Json

__all__ = [
    "MAX_HANDLE", "MAX_HANDLE_BYTES", "MAX_LIVE", "MAX_OBJECT_HANDLE_BYTES", "SF_INVALID", "SF_LIMIT",
    "HandleSpace", "HandleTable", "entry_size",
]

# sdk.md §3 statuses used by the table
SF_INVALID = -1
SF_LIMIT = -2

# sdk.md §5 and README limits
MAX_LIVE = 128
MAX_HANDLE = (1 << 63) - 1
MAX_HANDLE_BYTES = 512 * 1024 * 1024  # sdk.md §5 runtime guard, in estimated Python bytes
MAX_OBJECT_HANDLE_BYTES = 16 * 1024 * 1024  # per object: 1/32 of the guard (decisions-runtime-helpers.md)

Entry = Json | bytes


def entry_size(entry: Entry) -> int:
    """Bytes an entry is charged: its estimated Python size plus the handle's own."""
    return HANDLE + (entry.cost if type(entry) is Json else BYTES_HEAD + len(entry))  # type: ignore[union-attr]


class HandleSpace:
    """The runtime-wide part of the handle model: the number counter and the live-bytes guard (sdk.md §5).

    One per ``Runtime``; every object's ``HandleTable`` draws from it. ``first`` and ``last`` exist so tests
    can reach counter exhaustion; ``max_bytes`` caps all tables together, ``object_max_bytes`` each one.
    """

    def __init__(self, *, first: int = 1, last: int = MAX_HANDLE, max_bytes: int = MAX_HANDLE_BYTES,
                 object_max_bytes: int = MAX_OBJECT_HANDLE_BYTES) -> None:
        self.next = first
        self.last = last
        self.max_bytes = max_bytes
        self.object_max_bytes = object_max_bytes
        self.live_bytes = 0
        self.live_handles = 0

    def table(self, *, limit: int = MAX_LIVE) -> HandleTable:
        """A new, empty per-object table."""
        return HandleTable(self, limit=limit)


class HandleTable:
    """One object's live handles (sdk.md §5): at most ``limit`` entries, numbers from the shared space."""

    __slots__ = ("bytes", "entries", "limit", "space")  # no more: one per object (density, benchmarks.md §1.8)

    def __init__(self, space: HandleSpace, *, limit: int = MAX_LIVE) -> None:
        self.space = space
        self.limit = limit
        self.entries: dict[int, Entry] = {}
        self.bytes = 0

    def __len__(self) -> int:
        return len(self.entries)

    # sdk.md §5: 128 live handles, counter up to 2^63-1, the memory guards (object, runtime); all give SF_LIMIT
    def add(self, entry: Entry) -> int:
        """Store ``entry`` under a fresh number and return it, or ``SF_LIMIT`` (nothing consumed)."""
        space = self.space
        # entry_size, inlined (hot: 4 per event)
        size = HANDLE + (entry.cost if type(entry) is Json else BYTES_HEAD + len(entry))  # type: ignore[union-attr]
        handle = space.next
        live = space.live_bytes + size
        entries = self.entries
        if (len(entries) >= self.limit or handle > space.last or live > space.max_bytes
                or self.bytes + size > space.object_max_bytes):
            return SF_LIMIT
        space.next = handle + 1
        entries[handle] = entry
        self.bytes += size
        space.live_bytes = live
        space.live_handles += 1
        return handle

    def get(self, handle: int) -> Entry | None:
        """The entry of a live handle of this table, else ``None`` (unknown, dropped or foreign)."""
        return self.entries.get(handle)

    def json(self, handle: int) -> Json | None:
        """The JSON box of a live JSON handle, else ``None``."""
        entry = self.entries.get(handle)
        return entry if type(entry) is Json else None

    def replace(self, handle: int, entry: Entry) -> int:
        """Swap the entry of a live handle (builders); ``SF_LIMIT`` if a guard would be crossed."""
        old = self.entries[handle]
        delta = entry_size(entry) - entry_size(old)
        if delta > 0 and (self.space.live_bytes + delta > self.space.max_bytes
                          or self.bytes + delta > self.space.object_max_bytes):
            return SF_LIMIT
        self.entries[handle] = entry
        self.bytes += delta
        self.space.live_bytes += delta
        return 0

    # sdk.md §5: sf_drop releases a handle; unknown numbers are SF_INVALID
    def drop(self, handle: int) -> int:
        """Release a handle: 0, or ``SF_INVALID`` if it is not live here."""
        entry = self.entries.pop(handle, None)
        if entry is None:
            return SF_INVALID
        size = HANDLE + (entry.cost if type(entry) is Json else BYTES_HEAD + len(entry))  # type: ignore[union-attr]
        self.bytes -= size
        self.space.live_bytes -= size
        self.space.live_handles -= 1
        return 0

    def clear(self) -> None:
        """Discard every handle (the object ended, runtime-protocol.md §7.1)."""
        self.space.live_bytes -= self.bytes
        self.space.live_handles -= len(self.entries)
        self.entries.clear()
        self.bytes = 0
