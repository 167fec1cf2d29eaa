"""A small driver for helper tests: load a clang-built guest with a real GuestContext and run it.

It answers suspensions the way the scheduler does (vm/guest.py): refuel after PREEMPT and waits, events
from a list, host calls through ``begin_host_call``/``finish_host_call`` and a Python host function.
"""

from __future__ import annotations

import linecache
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from wakeful.errors import GuestFault
from wakeful.runtime.handles import HandleSpace
from wakeful.runtime.helpers import SF_TIMEOUT, GuestContext, HostCallRequest
from wakeful.vm import load
from wakeful.vm.guest import PREEMPT
from wakeful.vm.isa import BASE  # noqa: F401  (re-exported for the tests)

GUESTS = Path(__file__).resolve().parent / "guests"
SLICE = 16384


class ManualClock:
    def __init__(self) -> None:
        self.ns = 1_000_000_000
        self.unix = 1_767_225_600_000

    def monotonic_ns(self) -> int:
        return self.ns

    def unix_ms(self) -> int:
        return self.unix


@dataclass
class Outcome:
    exit_code: int | None = None
    fault: GuestFault | None = None
    ctx: GuestContext | None = None
    logs: list[str] = field(default_factory=list)
    host_calls: list[HostCallRequest] = field(default_factory=list)
    statuses: list[int] = field(default_factory=list)  # r0 given back for each host call
    suspensions: list[str] = field(default_factory=list)
    work: int = 0  # fuel spent (instructions + helper charges)


def source(name: str) -> str:
    return (GUESTS / name).read_text()


def run(
    compile_c: Callable[..., bytes],
    name: str,
    *,
    config: Any = None,
    space: HandleSpace | None = None,
    capabilities: Any = (),
    host: Callable[[HostCallRequest], Any] | None = None,
    events: list[Any] | None = None,
    clock: ManualClock | None = None,
    log_accepts: bool = True,
    engine: str = "translate",
    pending: int = 0,
    max_steps: int = 1_000_000,
) -> Outcome:
    """Compile ``guests/<name>``, run it to its end and return what happened; faults are captured."""
    elf = compile_c(source(name), name=name)
    prog = load(elf, engine=engine)
    out = Outcome()
    clock = clock or ManualClock()
    if isinstance(config, dict):
        config = {"end": prog.layout.end, **config}

    def sink(message: str) -> bool:
        out.logs.append(message)
        return log_accepts

    ctx = GuestContext(space or HandleSpace(), "o1", layout=prog.layout, config=config, clock=clock,
                       log=sink, capabilities=capabilities)
    inst = prog.instantiate(ctx)
    ctx.mem = inst.mem
    out.ctx = ctx
    queue = list(events or ())
    gen = inst.gen
    value: Any = None
    fuel_left = SLICE
    try:
        for _ in range(max_steps):
            try:
                kind, fuel, args = gen.send(value)
            except StopIteration as stop:
                r0 = stop.value & ((1 << 64) - 1)
                out.exit_code = r0 - (1 << 64) if r0 >> 63 else r0
                out.work += fuel_left
                return out
            out.work += fuel_left - fuel
            out.suspensions.append(kind)
            try:
                value = _answer(kind, fuel, args, ctx, out, queue, host, pending, clock)
            except GuestFault as fault:  # a suspending helper's fault: raised at the guest's call site
                gen.throw(fault)
            fuel_left = value[1]
            clock.ns += 1_000_000
        raise AssertionError("guest did not finish")
    except GuestFault as fault:
        out.fault = fault
        return out


def _answer(kind: str, fuel: int, args: tuple[int, ...], ctx: GuestContext, out: Outcome,
            queue: list[Any], host: Callable[[HostCallRequest], Any] | None, pending: int,
            clock: ManualClock) -> tuple[int, int]:
    if kind == PREEMPT:
        return (0, SLICE + fuel)
    if kind == "sf_yield":
        return (0, fuel)
    if kind == "sf_sleep_ms":
        clock.ns += ctx.sleep_ms(args[0]) * 1_000_000
        return (0, SLICE)
    if kind == "sf_event_next":
        if queue:
            return (ctx.event_to_handle(queue.pop(0)), SLICE)
        return (SF_TIMEOUT, SLICE)
    assert kind == "sf_host_call_raw", kind
    request = ctx.begin_host_call(*args, pending=pending)  # a GuestFault here ends the guest
    if isinstance(request, int):
        out.statuses.append(request)
        return (request, fuel)
    out.host_calls.append(request)
    try:
        result: Any = host(request) if host is not None else None
    except Exception as exc:  # HostCallError and friends: an error reply
        result = exc
    r0 = ctx.finish_host_call(result)
    out.statuses.append(r0)
    return (r0, SLICE)


def failed_line(name: str, line: int) -> str:
    """The source line a CHECK returned, for assertion messages."""
    return f"{name}:{line}: {linecache.getline(str(GUESTS / name), line).strip()}"


def assert_passes(out: Outcome, name: str) -> None:
    assert out.fault is None, f"fault: {out.fault.detail() if out.fault else ''} {out.fault}"
    assert out.exit_code == 0, failed_line(name, out.exit_code or 0)
