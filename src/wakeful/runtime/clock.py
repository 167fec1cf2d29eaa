"""The runtime's injectable clock: monotonic nanoseconds for scheduling and Unix milliseconds for guests.

``SystemClock`` reads the OS clocks; ``ManualClock`` only moves when a test advances it (vm.md §7).
"""

from __future__ import annotations

import time
from typing import Protocol

__all__ = ["Clock", "ManualClock", "SystemClock"]


class Clock(Protocol):
    """What the scheduler and helpers read time through (vm.md §7: "the scheduler reads time only
    through an injectable clock")."""

    def monotonic_ns(self) -> int: ...

    def unix_ms(self) -> int: ...


class SystemClock:
    """The process's monotonic clock and the wall clock."""

    def monotonic_ns(self) -> int:
        return time.monotonic_ns()

    def unix_ms(self) -> int:
        # sdk.md §9.1: 0 if the clock reads before 1970
        return max(0, time.time_ns() // 1_000_000)


class ManualClock:
    """A clock that stands still until ``advance`` is called; the wall clock moves with it."""

    def __init__(self, start_ns: int = 1_000_000_000, unix_start_ms: int = 1_767_225_600_000) -> None:
        self._now_ns = start_ns
        self._unix_offset_ms = unix_start_ms - start_ns // 1_000_000

    def monotonic_ns(self) -> int:
        return self._now_ns

    def unix_ms(self) -> int:
        return max(0, self._now_ns // 1_000_000 + self._unix_offset_ms)

    def advance(self, *, ms: float = 0, ns: int = 0) -> None:
        """Move time forward (never backward)."""
        step = ns + int(ms * 1_000_000)
        if step < 0:
            raise ValueError("a monotonic clock cannot go back")
        self._now_ns += step

    def set_ns(self, now_ns: int) -> None:
        """Jump to an absolute reading (not earlier than the current one)."""
        if now_ns < self._now_ns:
            raise ValueError("a monotonic clock cannot go back")
        self._now_ns = now_ns
