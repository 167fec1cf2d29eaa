"""S6 fairness and stop, asserted in scheduler terms with a manual clock (vm.md §7, §9 S6, §9.1 items 8, 9, 25).

"Resumes in the first batch at or after its deadline" is checked after every batch: every sleeper must be
back in ``wait: timer`` with a deadline later than that batch's start, i.e. a sleeper that was due ran in it.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import rtcore_guests as g

from wakeful.runtime import ManualClock, Runtime
from wakeful.runtime.scheduler import THROTTLE_AFTER
from wakeful.vm.guest import HELPER_MAX_CHARGE

PLAIN_CALL_BOUND = 4096  # vm.md §6.1: one plain call never runs more than 4,096 units
SLICE = 16_384


def assert_sleepers_on_time(rt: Runtime, sleepers: list[str]) -> None:
    start = rt.scheduler.batch_start_ns
    for oid in sleepers:
        run = rt.run_of(oid)
        assert run is not None and not run.done, oid
        assert run.wait == "timer", (oid, run.wait)
        assert run.deadline_ns is not None and run.deadline_ns > start, (
            f"{oid} was due at {run.deadline_ns} but not resumed in the batch starting at {start}"
        )


def drive(rt: Runtime, clock: ManualClock, batches: int, sleepers: list[str], step_ms: float = 1.0) -> None:
    for _ in range(batches):
        clock.advance(ms=step_ms)
        rt.run_batch()
        assert_sleepers_on_time(rt, sleepers)


@pytest.fixture(scope="module")
def elfs(compile_c: Any) -> dict[str, bytes]:
    names = ("SPIN", "NESTED_SPIN", "YIELD_SPIN", "COUNT", "SLEEPER", "JSON_LOOP", "CALL_BOMB", "WRITE_FAULT")
    return {name: compile_c(getattr(g, name)) for name in names}


JSON_CHARGE = max(HELPER_MAX_CHARGE[h] for h in ("sf_json_parse", "sf_json_dump", "sf_json_set_raw"))


def test_spinners_next_to_100_sleepers(elfs: dict[str, bytes]) -> None:
    """§9.1 items 8 and 25, runtime-protocol.md §16 item 10: infinite, nested, sf_yield and 10^9 loops and
    a loop of maximal JSON helper calls next to a ticker and 100 sleepers."""
    clock = ManualClock()
    rt = g.make_runtime(clock)
    spinners = {
        name: g.load_started(rt, elfs[name])
        for name in ("SPIN", "NESTED_SPIN", "YIELD_SPIN", "COUNT", "JSON_LOOP")
    }
    sleepers = [g.load_started(rt, elfs["SLEEPER"], config={"period_ms": 7})]  # the ticking neighbour
    sleepers += [g.load_started(rt, elfs["SLEEPER"], config={"period_ms": 2 + i % 23}) for i in range(100)]
    rt.run_batch()  # first slices: every sleeper goes to sleep
    assert_sleepers_on_time(rt, sleepers)
    drive(rt, clock, 60, sleepers)

    for name, oid in spinners.items():
        run = rt.run_of(oid)
        assert run is not None
        assert rt.get_nowait(oid).state == "running" and rt.get_nowait(oid).wait == "none", name
        assert run.throttles >= 1, f"{name} was never throttled"
        assert run.max_step_work <= SLICE + max(PLAIN_CALL_BOUND, JSON_CHARGE), (name, run.max_step_work)
        assert run.work > SLICE, name
    ticker = rt.run_of(sleepers[0])
    assert ticker is not None and ticker.slices >= 60 // 7

    # stop completes at once, without the spinner's cooperation, and it never runs again
    for name, oid in spinners.items():
        before = rt.run_of(oid)
        assert before is not None
        work = before.work
        status = rt.stop_nowait(oid)
        assert status.state == "stopped" and status.wait == "none" and status.outcome is None, name
        drive(rt, clock, 1, sleepers)
        assert before.work == work and before.gen is None


def test_a_throttled_spinner_sleeps_20ms_on_the_scheduler_clock(elfs: dict[str, bytes]) -> None:
    clock = ManualClock()
    rt = g.make_runtime(clock)
    oid = g.load_started(rt, elfs["SPIN"])
    run = rt.run_of(oid)
    assert run is not None
    for _ in range(THROTTLE_AFTER):
        rt.run_batch()  # the clock stands still: one slice per batch
    assert run.throttles == 1 and run.slices == THROTTLE_AFTER
    assert rt.get_nowait(oid).wait == "none"  # throttling is not a wait reason
    for _ in range(5):
        rt.run_batch()
    assert run.slices == THROTTLE_AFTER  # asleep until 20 ms pass
    clock.advance(ms=19.9)
    rt.run_batch()
    assert run.slices == THROTTLE_AFTER
    clock.advance(ms=0.2)
    rt.run_batch()
    assert run.slices == THROTTLE_AFTER + 1


def test_yield_keeps_fuel_and_does_not_avoid_the_throttle(elfs: dict[str, bytes]) -> None:
    clock = ManualClock()
    rt = g.make_runtime(clock)
    oid = g.load_started(rt, elfs["YIELD_SPIN"])
    run = rt.run_of(oid)
    assert run is not None
    rt.run_batch()
    # one batch spends exactly one slice of fuel across many yields, then it is preempted
    assert run.slices > 10 and run.max_step_work < SLICE
    assert SLICE <= run.work <= SLICE + PLAIN_CALL_BOUND
    for _ in range(THROTTLE_AFTER):
        rt.run_batch()
    assert run.throttles >= 1


def test_counting_loop_exact_sum(elfs: dict[str, bytes]) -> None:
    clock = ManualClock()
    rt = g.make_runtime(clock)
    n = 200_000
    oid = g.load_started(rt, elfs["COUNT"], config={"n": n})
    ticker = g.load_started(rt, elfs["SLEEPER"], config={"period_ms": 3})
    g.settle(rt, clock, until=lambda: rt.get_nowait(oid).state != "running")
    status = rt.get_nowait(oid)
    assert status.state == "exited" and status.outcome == {"exit_code": n * (n - 1) // 2}
    run = rt.run_of(oid)
    assert run is not None and run.slices > 1  # it was preempted on the way
    assert rt.get_nowait(ticker).wait == "timer"


def test_call_bomb_is_preempted_and_stoppable(elfs: dict[str, bytes]) -> None:
    """§9.1 item 9."""
    clock = ManualClock()
    rt = g.make_runtime(clock)
    oid = g.load_started(rt, elfs["CALL_BOMB"])
    sleepers = [g.load_started(rt, elfs["SLEEPER"], config={"period_ms": 5})]
    rt.run_batch()
    drive(rt, clock, 20, sleepers)
    run = rt.run_of(oid)
    assert run is not None and run.slices >= 10 and run.throttles >= 1
    assert run.max_step_work <= SLICE + PLAIN_CALL_BOUND
    assert rt.stop_nowait(oid).state == "stopped"


def test_json_helper_loop_is_charged_and_preempted(elfs: dict[str, bytes]) -> None:
    """§9.1 item 25: maximal parse/dump/set calls, preempted within one slice plus one helper's charge."""
    clock = ManualClock()
    rt = g.make_runtime(clock)
    oid = g.load_started(rt, elfs["JSON_LOOP"])
    sleepers = [g.load_started(rt, elfs["SLEEPER"], config={"period_ms": 2})]
    rt.run_batch()
    drive(rt, clock, 12, sleepers)
    run = rt.run_of(oid)
    assert run is not None and rt.get_nowait(oid).state == "running"
    biggest = max(HELPER_MAX_CHARGE[h] for h in ("sf_json_parse", "sf_json_dump", "sf_json_set_raw"))
    assert run.slices >= 10
    assert run.max_step_work <= SLICE + biggest, run.max_step_work
    # the helper charges dominate: far fewer loop iterations than instructions would allow
    assert run.work >= run.slices * (SLICE - biggest) // 2
    assert rt.stop_nowait(oid).state == "stopped"
    assert rt.inspect_nowait(oid)["memory"]["handles"] == 0


def test_due_sleepers_run_first_when_the_batch_budget_is_exhausted(elfs: dict[str, bytes]) -> None:
    """More spinners than one batch's 64-slice budget: due sleepers still resume in the first batch."""
    clock = ManualClock()
    rt = g.make_runtime(clock, slice_insns=1024)
    spinners = [g.load_started(rt, elfs["SPIN"]) for _ in range(100)]
    sleepers = [g.load_started(rt, elfs["SLEEPER"], config={"period_ms": 1 + i % 5}) for i in range(20)]
    rt.run_batch()
    rt.run_batch()  # the 100 first slices need two batches
    assert all(rt.run_of(s).slices >= 1 for s in spinners)  # type: ignore[union-attr]
    assert_sleepers_on_time(rt, sleepers)
    steps = []
    for _ in range(30):
        clock.advance(ms=1)
        steps.append(rt.run_batch())
        assert_sleepers_on_time(rt, sleepers)
    # the budget really was the limit: no batch ran all 100 spinners
    assert max(steps) < 100 + len(sleepers)
    slices = [rt.run_of(s).slices for s in spinners]  # type: ignore[union-attr]
    assert max(slices) - min(slices) <= 2, slices  # round robin: nobody is starved


def run_count(elf: bytes, sleeper: bytes, engine: str) -> tuple[int, int, int]:
    clock = ManualClock()
    rt = g.make_runtime(clock, engine=engine, slice_insns=4096)
    n = 20_000
    oid = g.load_started(rt, elf, config={"n": n})
    ticker = g.load_started(rt, sleeper, config={"period_ms": 2})
    rt.run_batch()
    batches = g.settle(rt, clock, until=lambda: rt.get_nowait(oid).state != "running")
    assert rt.get_nowait(oid).outcome == {"exit_code": n * (n - 1) // 2}
    assert rt.get_nowait(ticker).wait == "timer"
    run = rt.run_of(oid)
    assert run is not None
    return run.slices, run.throttles, batches


def test_scheduling_is_the_same_in_both_engines(elfs: dict[str, bytes]) -> None:
    """Preemption points, throttling and the exact sum do not depend on the engine (fuel is deterministic)."""
    translated = run_count(elfs["COUNT"], elfs["SLEEPER"], "translate")
    interpreted = run_count(elfs["COUNT"], elfs["SLEEPER"], "interp")
    assert translated == interpreted
    slices, throttles, _ = translated
    assert slices > THROTTLE_AFTER and throttles >= 1


def test_control_requests_wait_at_most_one_slice_of_hostile_guests(elfs: dict[str, bytes]) -> None:
    """runtime-protocol.md §16 item 10, vm.md §7: with a spinner, a JSON-helper loop and a freshly loaded
    faulting guest runnable, a control request (get, deliver, stop) issued from asyncio is handled between
    slices: at most one slice of each of them runs between the request and its answer."""
    clock = ManualClock()
    rt = g.make_runtime(clock)

    def slices(oids: list[str]) -> dict[str, int]:
        return {oid: run.slices if (run := rt.run_of(oid)) is not None else 0 for oid in oids}

    async def handled(op: Any, watched: list[str]) -> tuple[Any, dict[str, int]]:
        answer = await op
        return answer, slices(watched)

    async def body() -> None:
        async with rt:
            spin = g.load_started(rt, elfs["SPIN"])
            loop = g.load_started(rt, elfs["JSON_LOOP"])
            victim = g.load_started(rt, elfs["SPIN"])  # stopped at the end
            hostile = [spin, loop, victim]
            faulters: list[str] = []
            ran = dict.fromkeys(hostile, 0)
            for i in range(30):
                clock.advance(ms=3)  # throttled spinners wake up again now and then
                faulter = (await rt.load(elfs["WRITE_FAULT"])).object_id
                await rt.start(faulter)
                faulters.append(faulter)
                watched = [*hostile, faulter]
                before = slices(watched)
                kind = ("get", "deliver", "stats")[i % 3]
                if kind == "get":
                    op: Any = rt.get(spin)
                elif kind == "deliver":
                    op = rt.deliver(loop, f"e{i}", "t", {"i": i})
                else:
                    op = rt.stats()
                # the request arrives while a batch is already scheduled; ``handled`` snapshots the
                # counters at the moment the runtime answers it
                answer, after = await asyncio.ensure_future(handled(op, watched))
                assert answer is not None
                for oid in watched:
                    assert after[oid] - before[oid] <= 1, (kind, oid, before[oid], after[oid])
                for oid in hostile:
                    ran[oid] += after[oid] - before[oid]
            # the hostile guests really ran during the requests, and every faulter faulted
            assert ran[spin] >= 5 and ran[loop] >= 5, ran
            assert all(rt.get_nowait(f).state == "failed" for f in faulters[:-1])
            # stop: issued while the others run, it takes effect after at most one slice of anybody
            before = slices(hostile)
            stopped, after = await asyncio.ensure_future(handled(rt.stop(victim), hostile))
            assert stopped.state == "stopped"
            assert all(after[oid] - before[oid] <= 1 for oid in hostile), (before, after)
            frozen = after[victim]
            for _ in range(5):
                clock.advance(ms=3)
                await asyncio.sleep(0)
            assert slices([victim])[victim] == frozen

    asyncio.run(body())
