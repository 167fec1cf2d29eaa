"""Object states, wait reasons, stop at every suspension point, terminal cleanup and faults
(runtime-protocol.md §6.4-6.7, §7, §7.1; vm.md §8)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import rtcore_guests as g

from wakeful.errors import Busy, GuestFault, ObjectNotFound
from wakeful.runtime import ManualClock, ObjectStatus, Runtime, RuntimeOptions


@pytest.fixture(scope="module")
def elfs(compile_c: Any) -> dict[str, bytes]:
    names = ("SPIN", "SLEEPER", "EXIT_CODE", "EVENT_SINK", "HOST_CALLER", "WRITE_FAULT")
    return {name: compile_c(getattr(g, name)) for name in names}


CAPS = [{"name": "cap"}, {"name": "sink"}]


class Recorder:
    def __init__(self) -> None:
        self.states: list[ObjectStatus] = []

    def __call__(self, status: ObjectStatus) -> None:
        self.states.append(status)


def runtime(clock: ManualClock, handler: Any = g.refuse) -> tuple[Runtime, Recorder]:
    rec = Recorder()
    return Runtime(RuntimeOptions(), host_handler=handler, on_state=rec, clock=clock), rec


def test_lifecycle_loaded_starting_running_exited(elfs: dict[str, bytes]) -> None:
    clock = ManualClock()
    rt, rec = runtime(clock)
    status = rt.load_nowait(elfs["EXIT_CODE"], config={"code": -42})
    assert (status.state, status.wait, status.outcome) == ("loaded", "none", None)
    assert status.object_id == "o1" and len(status.sha256) == 64
    assert rt.start_nowait("o1").state == "starting"
    with pytest.raises(Busy):
        rt.start_nowait("o1")  # start is accepted once only
    rt.run_batch()
    final = rt.get_nowait("o1")
    assert final.state == "exited" and final.outcome == {"exit_code": -42}
    assert [s.state for s in rec.states] == ["exited"]
    with pytest.raises(Busy):
        rt.start_nowait("o1")


def test_wait_reasons(elfs: dict[str, bytes]) -> None:
    clock = ManualClock()

    async def never(call: Any) -> Any:
        await asyncio.Event().wait()

    async def main() -> None:
        rt, _ = runtime(clock, never)
        timer = g.load_started(rt, elfs["SLEEPER"], config={"period_ms": 1000})
        event = g.load_started(rt, elfs["EVENT_SINK"])
        host = g.load_started(rt, elfs["HOST_CALLER"], config={"timeout_ms": 60000}, capabilities=CAPS)
        spin = g.load_started(rt, elfs["SPIN"])
        assert rt.get_nowait(spin).state == "starting"
        rt.run_batch()
        waits = {oid: (rt.get_nowait(oid).state, rt.get_nowait(oid).wait) for oid in (timer, event, host, spin)}
        assert waits == {
            timer: ("running", "timer"),
            event: ("running", "event"),
            host: ("running", "host_rpc"),
            spin: ("running", "none"),
        }
        await rt.close()

    asyncio.run(main())


@pytest.mark.parametrize("where", ["timer", "event", "host_rpc", "preempted", "starting", "loaded"])
def test_stop_at_every_suspension_point(elfs: dict[str, bytes], where: str) -> None:
    clock = ManualClock()
    calls: list[Any] = []

    async def never(call: Any) -> Any:
        calls.append(call)
        await asyncio.Event().wait()

    async def main() -> None:
        rt, rec = runtime(clock, never)
        guest = {"timer": "SLEEPER", "event": "EVENT_SINK", "host_rpc": "HOST_CALLER",
                 "preempted": "SPIN", "starting": "SPIN", "loaded": "SPIN"}[where]
        oid = rt.load_nowait(elfs[guest], config={"period_ms": 1000, "timeout_ms": 60000},
                             capabilities=CAPS).object_id
        if where == "loaded":
            rt.deliver_nowait(oid, "queued-1", "t", {"n": 1})
            assert rt.get_nowait(oid).mailbox_entries == 1
        else:
            rt.start_nowait(oid)
        if where not in ("loaded", "starting"):
            rt.run_batch()
            expected_wait = "none" if where == "preempted" else where
            assert rt.get_nowait(oid).wait == expected_wait
        if where == "host_rpc":
            assert rt.stats_nowait()["host"]["pending_host_calls"] == 1
        # concurrent stops of one object all return stopped
        results = await asyncio.gather(rt.stop(oid), rt.stop(oid), rt.stop(oid))
        assert {(s.state, s.wait, s.outcome, s.mailbox_entries) for s in results} == {("stopped", "none", None, 0)}
        assert [s.state for s in rec.states] == ["stopped"]  # one notification per terminal transition
        assert rt.stats_nowait()["host"]["pending_host_calls"] == 0
        assert rt.inspect_nowait(oid)["memory"] == {
            "image_bytes": 0, "stack_bytes": 0, "handles": 0, "handle_bytes": 0, "mailbox_bytes": 0,
        }
        run = rt.run_of(oid)
        if run is not None:
            work = run.work
            for _ in range(3):
                clock.advance(ms=2000)
                rt.run_batch()
            assert run.work == work and run.gen is None
        await asyncio.sleep(0)
        if where == "host_rpc":  # the handler's task was cancelled with the object
            assert len(calls) == 1
        assert (await rt.stop(oid)).state == "stopped"  # terminal: unchanged
        await rt.unload(oid)
        await rt.unload(oid)  # an unknown id is fine
        with pytest.raises(ObjectNotFound):
            rt.get_nowait(oid)

    asyncio.run(main())


def test_fault_is_reported_and_a_neighbour_is_unaffected(elfs: dict[str, bytes]) -> None:
    clock = ManualClock()
    rt, rec = runtime(clock)
    neighbour = g.load_started(rt, elfs["SLEEPER"], config={"period_ms": 3})
    bad = g.load_started(rt, elfs["WRITE_FAULT"], config={"delay_ms": 5, "address": 8})
    g.settle(rt, clock, until=lambda: rt.get_nowait(bad).state != "running")
    status = rt.get_nowait(bad)
    assert status.state == "failed"
    assert status.outcome is not None and status.outcome["kind"] == "PROGRAM_FAULT"
    assert "0x8" in status.outcome["error"]
    assert status.fault is not None
    assert status.fault["code"] == "MEMORY_WRITE" and status.fault["address"] == 8
    assert status.fault["function"] == "main" and status.fault["pc"] is not None and status.fault["insn"]
    assert status.to_json(detail=True)["wakeful"]["fault"]["code"] == "MEMORY_WRITE"
    assert [s.state for s in rec.states] == ["failed"]
    ticks_before = rt.run_of(neighbour).slices  # type: ignore[union-attr]
    for _ in range(10):
        clock.advance(ms=3)
        rt.run_batch()
    assert rt.get_nowait(neighbour).state == "running"
    assert rt.run_of(neighbour).slices >= ticks_before + 10  # type: ignore[union-attr]


def test_fault_below_base_names_the_address(elfs: dict[str, bytes]) -> None:
    clock = ManualClock()
    rt, _ = runtime(clock)
    oid = g.load_started(rt, elfs["WRITE_FAULT"], config={"address": 0x10000 - 1})
    g.settle(rt, clock, until=lambda: rt.get_nowait(oid).state != "running")
    status = rt.get_nowait(oid)
    assert status.state == "failed" and status.fault is not None
    assert status.fault["address"] == 0xFFFF and status.fault["code"] in ("MEMORY_WRITE", "RODATA_WRITE")


def test_cpu_limit_fails_the_object(elfs: dict[str, bytes]) -> None:
    clock = ManualClock()
    rt, _ = runtime(clock)
    oid = g.load_started(rt, elfs["SPIN"], cpu_limit_ms=1)
    g.settle(rt, clock, until=lambda: rt.get_nowait(oid).state != "running", step_ms=25)
    status = rt.get_nowait(oid)
    assert status.state == "failed" and status.fault is not None and status.fault["code"] == "CPU_LIMIT"
    assert status.outcome == {"error": "cpu limit exceeded: 1 ms", "kind": "PROGRAM_FAULT"}
    assert status.guest_ms > 1


def test_objects_from_one_elf_are_independent(elfs: dict[str, bytes]) -> None:
    clock = ManualClock()
    rt, _ = runtime(clock)
    a = g.load_started(rt, elfs["EXIT_CODE"], config={"code": 1})
    b = g.load_started(rt, elfs["EXIT_CODE"], config={"code": 2})
    rt.run_batch()
    assert rt.get_nowait(a).outcome == {"exit_code": 1}
    assert rt.get_nowait(b).outcome == {"exit_code": 2}
    assert rt.get_nowait(a).sha256 == rt.get_nowait(b).sha256


def test_logs_reach_on_log_with_the_rate_limit(compile_c: Any) -> None:
    src = g.PRELUDE + r"""
    SF_MAIN sf_i64 main(void) {
        sf_i64 refused = 0;
        for (int i = 0; i < 15; i++)
            if (sf_log("hello") < 0)
                refused++;
        return refused;
    }
    """
    logs: list[tuple[str, str]] = []
    clock = ManualClock()
    rt = Runtime(RuntimeOptions(), host_handler=g.refuse, clock=clock,
                 on_log=lambda oid, message: logs.append((oid, message)))
    oid = g.load_started(rt, compile_c(src))
    rt.run_batch()
    assert rt.get_nowait(oid).outcome == {"exit_code": 5}  # 10 per window (sdk.md §9.3)
    assert logs == [(oid, "hello")] * 10


def test_detail_status_and_stats(elfs: dict[str, bytes]) -> None:
    clock = ManualClock()
    rt, _ = runtime(clock)
    oid = g.load_started(rt, elfs["SPIN"])
    rt.run_batch()
    plain = rt.get_nowait(oid).to_json()
    assert set(plain) == {"object_id", "sha256", "state", "wait", "mailbox_entries", "outcome"}
    detail = rt.get_nowait(oid).to_json(detail=True)["wakeful"]
    assert detail["instructions"] >= 16_384 and detail["guest_ms"] > 0 and detail["memory_bytes"] > 0
    extra = rt.stats_nowait()["wakeful"]
    sched = extra["scheduler"]
    assert sched["slices"] == 1 and sched["preemptions"] == 1 and sched["runnable"] == 1
    assert extra["memory"]["guest_bytes"] == detail["memory_bytes"] and extra["shapes"]["translated"] >= 1


COUNT_LOOP = """#include <wakeful.h>
static volatile int g;
SF_MAIN sf_i64 main(void) {
    for (int i = 0; i < 1000; i++) g += i;
    FAULT
    return g & 0x7f;
}"""


def _retired_by_the_interpreter(elf: bytes) -> int:
    """The reference interpreter's exact retired count for a guest that calls no helper."""
    from wakeful.vm import load

    class Env:
        debt = retired = fuel_left = 0

        def helper(self, name: str) -> Any:
            raise AssertionError(f"no helpers expected, got {name}")

    env = Env()
    gen = load(elf, engine="interp", slice_insns=1 << 30).instantiate(env).gen
    try:
        while True:
            gen.send(None)
    except StopIteration:
        pass
    except GuestFault:
        pass
    return env.retired


@pytest.mark.parametrize("fault", [False, True], ids=["exit", "fault"])
@pytest.mark.parametrize("engine", ["interp", "translate"])
def test_instructions_count_the_slice_the_guest_ends_in(engine: str, fault: bool, compile_c: Any) -> None:
    # vm.md §7 / runtime-protocol.md §14: a guest that ends inside its first slice still reports its work
    elf = compile_c(COUNT_LOOP.replace("FAULT", "*(volatile int *)8 = 1;" if fault else ""))
    rt = Runtime(RuntimeOptions(engine=engine), host_handler=g.refuse, clock=ManualClock())
    rt.load_nowait(elf)
    rt.start_nowait("o1")
    rt.run_batch()
    status = rt.get_nowait("o1")
    assert status.state == ("failed" if fault else "exited")
    assert status.instructions >= 1000
    assert status.instructions < 16_384  # one slice, nothing counted twice
    if engine == "interp":
        # no helpers: fuel is exactly one unit per retired instruction (vm.md §6.3)
        assert status.instructions == _retired_by_the_interpreter(elf)


@pytest.mark.parametrize("engine", ["interp", "translate"])
def test_instructions_count_a_plain_entry(engine: str, compile_c: Any) -> None:
    # a loop-free entry runs as a plain function (vm.md §6.1): its static cost is its work
    elf = compile_c("#include <wakeful.h>\nstatic volatile int g = 3;\nSF_MAIN sf_i64 main(void) { return g + 1; }")
    rt = Runtime(RuntimeOptions(engine=engine), host_handler=g.refuse, clock=ManualClock())
    rt.load_nowait(elf)
    rt.start_nowait("o1")
    rt.run_batch()
    status = rt.get_nowait("o1")
    assert status.outcome == {"exit_code": 4}
    assert status.instructions == _retired_by_the_interpreter(elf)
