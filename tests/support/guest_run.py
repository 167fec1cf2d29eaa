"""Run one clang-built guest to its end in an in-process runtime, batch by batch (no event loop, no sleeps):
the SDK tests' way of running a guest in each engine and reading its exit code."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from wakeful.runtime import HostHandler, Runtime, RuntimeOptions

TERMINAL = frozenset({"exited", "failed", "stopped"})


def refuse_host_calls(call: Any) -> None:
    raise AssertionError(f"unexpected host call {call}")


def run_guest(
    elf: bytes,
    engine: str,
    *,
    host: HostHandler = refuse_host_calls,
    config: Any = None,
    capabilities: Iterable[Any] = (),
    events: Iterable[str] = (),
    batches: int = 20_000,
) -> tuple[str, dict[str, Any] | None]:
    """(final state, outcome); ``events`` are event ids delivered (topic ``metric``) before the start."""
    rt = Runtime(RuntimeOptions(engine=engine), host_handler=host)
    status = rt.load_nowait(elf, config=config, capabilities=list(capabilities))
    for event_id in events:
        rt.deliver_nowait(status.object_id, event_id, "metric", {"value": 95})
    rt.start_nowait(status.object_id)
    for _ in range(batches):
        rt.run_batch()
        status = rt.get_nowait(status.object_id)
        if status.state in TERMINAL:
            break
    return status.state, status.outcome


def failed_checks(state: str, outcome: dict[str, Any] | None) -> list[int]:
    """The bits set in a CHECK-bitmask exit code; the guest must have exited."""
    assert state == "exited", outcome
    assert outcome is not None
    return [bit for bit in range(64) if int(str(outcome["exit_code"])) >> bit & 1]
