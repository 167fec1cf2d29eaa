"""Every runtime-core guest runs in both engines with identical outcomes (vm.md §9.2 "clang-built
fixtures also run in both engines"), driven through the in-process Runtime on a manual clock.

Each scenario records a per-batch trace of (state, wait, outcome, fault detail) of every object plus the
host calls made; the translator and the reference interpreter must produce the same trace. Guests that
never end (spinners, helper loops) are compared on their states, then stopped.
"""

from __future__ import annotations

from typing import Any

import pytest
import rtcore_guests as g

from wakeful.runtime import HostCall, ManualClock

ENGINES = ("translate", "interp")

# (scenario id, guest, load config, capabilities, events to deliver, batches, never ends)
SCENARIOS: list[tuple[str, str, dict[str, Any], list[dict[str, Any]], list[tuple[str, Any]], int, bool]] = [
    ("spin", "SPIN", {}, [], [], 40, True),
    ("nested_spin", "NESTED_SPIN", {}, [], [], 40, True),
    ("yield_spin", "YIELD_SPIN", {}, [], [], 40, True),
    ("call_bomb", "CALL_BOMB", {}, [], [], 40, True),
    ("json_loop", "JSON_LOOP", {}, [], [], 20, True),
    ("count", "COUNT", {"n": 30_000}, [], [], 400, False),
    ("sleeper", "SLEEPER", {"period_ms": 3, "rounds": 6}, [], [], 40, False),
    ("write_fault", "WRITE_FAULT", {"delay_ms": 2, "address": 8}, [], [], 10, False),
    ("far_write_fault", "WRITE_FAULT", {"address": 1 << 40}, [], [], 10, False),
    ("exit_code", "EXIT_CODE", {"code": -42}, [], [], 3, False),
    ("event_sink", "EVENT_SINK", {"count": 3, "timeout_ms": 5}, [{"name": "sink"}],
     [("e1", {"n": 1}), ("e2", [1, 2, {"x": None}])], 40, False),
    ("host_caller", "HOST_CALLER", {"x": 20}, [{"name": "cap"}], [], 5, False),
    ("host_denied", "HOST_CALLER", {"x": 20}, [], [], 5, False),
]


def scenario_trace(elf: bytes, engine: str, config: dict[str, Any], caps: list[dict[str, Any]],
                   events: list[tuple[str, Any]], batches: int, endless: bool) -> list[Any]:
    calls: list[Any] = []

    def handler(call: HostCall) -> Any:
        calls.append((call.capability, call.arguments, call.timeout_ms))
        return {"v": 41} if call.capability == "cap" else {}

    clock = ManualClock()
    rt = g.make_runtime(clock, handler, engine=engine)
    oid = g.load_started(rt, elf, config=config, capabilities=caps)
    trace: list[Any] = []
    for i in range(batches):
        if i < len(events):
            event_id, payload = events[i]
            rt.deliver_nowait(oid, event_id, "topic", payload)
        clock.advance(ms=1)
        rt.run_batch()
        st = rt.get_nowait(oid)
        trace.append((st.state, st.wait, st.outcome, st.fault, st.mailbox_entries))
    run = rt.run_of(oid)
    assert run is not None
    if endless:
        assert rt.get_nowait(oid).state == "running" and run.slices >= 5
        trace.append(rt.stop_nowait(oid).state)
    else:
        assert rt.get_nowait(oid).state in ("exited", "failed"), trace[-1]
    trace.append(calls)
    return trace


@pytest.mark.parametrize(("name", "guest", "config", "caps", "events", "batches", "endless"), SCENARIOS,
                         ids=[s[0] for s in SCENARIOS])
def test_runtime_core_guest_agrees_in_both_engines(compile_c: Any, name: str, guest: str, config: dict[str, Any],
                                                   caps: list[dict[str, Any]], events: list[tuple[str, Any]],
                                                   batches: int, endless: bool) -> None:
    elf = compile_c(getattr(g, guest))
    translated, interpreted = (scenario_trace(elf, e, config, caps, events, batches, endless) for e in ENGINES)
    assert translated == interpreted
    final = translated[-2]
    if name == "exit_code":
        assert final[2] == {"exit_code": -42}
    if name == "host_caller":
        assert final[2] == {"exit_code": 42} and translated[-1] == [("cap", {"x": 20}, 1000)]
    if name.endswith("_fault"):
        assert final[0] == "failed" and final[3] is not None and final[3]["function"] == "main"
