"""The injectable clock of vm.md §7."""

from __future__ import annotations

import pytest

from wakeful.runtime import ManualClock, SystemClock


def test_manual_clock_moves_only_when_advanced() -> None:
    clock = ManualClock(start_ns=5_000_000, unix_start_ms=1_000)
    assert clock.monotonic_ns() == 5_000_000 and clock.unix_ms() == 1_000
    clock.advance(ms=2.5)
    assert clock.monotonic_ns() == 7_500_000 and clock.unix_ms() == 1_002
    clock.advance(ns=500_000)
    assert clock.unix_ms() == 1_003
    with pytest.raises(ValueError):
        clock.advance(ms=-1)
    with pytest.raises(ValueError):
        clock.set_ns(0)


def test_system_clock_is_monotonic_and_after_1970() -> None:
    clock = SystemClock()
    a = clock.monotonic_ns()
    assert clock.monotonic_ns() >= a
    assert clock.unix_ms() > 1_600_000_000_000
