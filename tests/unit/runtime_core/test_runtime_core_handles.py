"""The scheduler's two asyncio handles (a soon handle for queued work, one timer for the earliest deadline) driven
by a recording loop on a ManualClock: no deadline is ever left without a handle that fires at or before it.

The loop below runs only what the scheduler asked it to (call_soon, call_later): a lost timer shows as a sleeper
that never wakes, because the driver only advances the clock to the next armed handle.
"""

from __future__ import annotations

from typing import Any

import pytest
import rtcore_guests as g

from wakeful.runtime import ManualClock, Runtime


class _Handle:
    def __init__(self, when_ns: int | None, callback: Any) -> None:
        self.when_ns, self.callback, self.cancelled = when_ns, callback, False

    def cancel(self) -> None:
        self.cancelled = True


class _RecordingLoop:
    """call_soon / call_later on the ManualClock; ``run_until`` fires them in time order."""

    def __init__(self, clock: ManualClock) -> None:
        self.clock = clock
        self.handles: list[_Handle] = []
        self.timers_armed = 0

    def call_soon(self, callback: Any) -> _Handle:
        handle = _Handle(None, callback)
        self.handles.append(handle)
        return handle

    def call_later(self, delay: float, callback: Any) -> _Handle:
        assert delay >= 0
        self.timers_armed += 1
        handle = _Handle(self.clock.monotonic_ns() + round(delay * 1e9), callback)
        self.handles.append(handle)
        return handle

    def run_until(self, until_ns: int) -> None:
        """Run soon handles, else advance to the earliest timer; stop when none is due by ``until_ns``."""
        for _ in range(1_000_000):
            live = [h for h in self.handles if not h.cancelled]
            soon = [h for h in live if h.when_ns is None]
            if soon:
                handle = soon[0]
            else:
                due = [h for h in live if h.when_ns is not None and h.when_ns <= until_ns]
                if not due:
                    break
                handle = min(due, key=lambda h: h.when_ns or 0)
                self.clock.set_ns(max(self.clock.monotonic_ns(), handle.when_ns or 0))
            self.handles.remove(handle)
            handle.callback()
        else:
            raise AssertionError("the loop never went idle")
        self.clock.set_ns(max(self.clock.monotonic_ns(), until_ns))


def _rt(clock: ManualClock) -> tuple[Runtime, _RecordingLoop]:
    rt = g.make_runtime(clock, max_objects=2_000)
    loop = _RecordingLoop(clock)
    rt.scheduler.attach(loop)  # type: ignore[arg-type]
    return rt, loop


def _ms(clock: ManualClock, start_ns: int, ms: int) -> int:
    return start_ns + ms * 1_000_000


@pytest.fixture(scope="module")
def sleeper(compile_c: Any) -> bytes:
    return bytes(compile_c(g.SLEEPER))


@pytest.fixture(scope="module")
def exit_elf(compile_c: Any) -> bytes:
    return bytes(compile_c(g.EXIT_CODE))


def test_an_earlier_deadline_added_while_a_later_timer_is_armed(sleeper: bytes) -> None:
    """A 1 s sleeper arms the timer; a 10 ms sleeper started later (through the soon handle) must re-arm it."""
    clock = ManualClock()
    t0 = clock.monotonic_ns()
    rt, loop = _rt(clock)
    slow = g.load_started(rt, sleeper, config={"period_ms": 1_000, "rounds": 1})
    loop.run_until(_ms(clock, t0, 1))
    fast = g.load_started(rt, sleeper, config={"period_ms": 10, "rounds": 3})
    loop.run_until(_ms(clock, t0, 40))
    assert rt.get_nowait(fast).state == "exited" and rt.get_nowait(slow).state != "exited"
    loop.run_until(_ms(clock, t0, 1_010))
    assert rt.get_nowait(slow).state == "exited"


def test_detach_and_attach_keep_every_deadline(sleeper: bytes) -> None:
    clock = ManualClock()
    t0 = clock.monotonic_ns()
    rt, loop = _rt(clock)
    ids = [g.load_started(rt, sleeper, config={"period_ms": p, "rounds": 2}) for p in (30, 5, 200)]
    loop.run_until(_ms(clock, t0, 2))
    rt.scheduler.detach()
    assert all(h.cancelled for h in loop.handles)  # nothing fires for a detached scheduler
    loop.run_until(_ms(clock, t0, 50))
    rt.scheduler.attach(loop)  # type: ignore[arg-type]
    loop.run_until(_ms(clock, t0, 500))
    assert [rt.get_nowait(i).state for i in ids] == ["exited"] * 3


def test_many_sleepers_with_a_load_burst_all_wake_on_time(sleeper: bytes, exit_elf: bytes) -> None:
    """Sleepers of mixed periods started at staggered times, plus a 1,000-load burst (the hygiene entry on the
    heap, its 10 ms retries while guests are queued): each sleeper ends by its last deadline."""
    import gc

    clock = ManualClock()
    t0 = clock.monotonic_ns()
    rt, loop = _rt(clock)
    try:
        ends: dict[str, int] = {}
        periods = (3, 500, 7, 1, 250, 13, 90, 2)
        for n, period in enumerate(periods):
            loop.run_until(_ms(clock, t0, 5 * n))
            rounds = 1 + n % 3
            ends[g.load_started(rt, sleeper, config={"period_ms": period, "rounds": rounds})] = (
                clock.monotonic_ns() + period * rounds * 1_000_000)
            if n == 3:
                for _ in range(1_000):
                    rt.start_nowait(rt.load_nowait(exit_elf).object_id)
        for object_id, end_ns in sorted(ends.items(), key=lambda e: e[1]):
            loop.run_until(end_ns + 1_000_000)  # a slice of slack for the last round's batch
            assert rt.get_nowait(object_id).state == "exited", object_id
        loop.run_until(_ms(clock, t0, 3_000))
        assert rt.scheduler.gc_freezes == 1  # the hygiene ran once, not lost, not repeated
        assert rt.scheduler.timers == 0 and not [h for h in loop.handles if not h.cancelled]
    finally:
        gc.unfreeze()


def test_a_batch_whose_callback_raises_still_rearms(sleeper: bytes) -> None:
    """A raising on_running/on_end (an embedder's or a runtime bug) ends that batch, not the scheduler: the
    rest of the queue gets a soon handle and the sleepers' deadlines a timer."""
    clock = ManualClock()
    rt, loop = _rt(clock)
    start_ns = clock.monotonic_ns()
    first = g.load_started(rt, sleeper)
    loop.run_until(start_ns)  # first is asleep on a timer
    original = rt.scheduler.on_running
    calls = 0

    def broken(run: Any) -> None:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise RuntimeError("bug in a callback")
        original(run)

    rt.scheduler.on_running = broken
    second, third = g.load_started(rt, sleeper), g.load_started(rt, sleeper)
    soon = [h for h in loop.handles if h.when_ns is None and not h.cancelled]
    assert len(soon) == 1
    loop.handles.remove(soon[0])
    with pytest.raises(RuntimeError):
        soon[0].callback()
    assert any(h.when_ns is None and not h.cancelled for h in loop.handles)  # the queue was re-kicked
    rt.scheduler.on_running = original
    loop.run_until(_ms(clock, start_ns, 5_000))
    assert rt.get_nowait(third).wait in ("timer", "none") and rt.run_of(third) is not None
    assert rt.run_of(third).slices >= 2  # type: ignore[union-attr]
    assert rt.run_of(first).slices >= 2  # type: ignore[union-attr]  # the timer for the first sleeper survived
    del second
