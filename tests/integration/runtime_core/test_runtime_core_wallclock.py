"""Wall-clock smoke check of S6 with asyncio driving the scheduler (vm.md §9 S6): generous bounds only.

A sleeper next to three spinners measures its own lateness with sf_now_mono_ms; control requests are
answered while they spin; stop and close finish promptly.
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "unit" / "runtime_core"))
import rtcore_guests as g  # noqa: E402

from wakeful.runtime import Runtime, RuntimeOptions  # noqa: E402

pytestmark = pytest.mark.integration

BOUND_S = 0.25  # never tighter than 250 ms

LATENESS = g.PRELUDE + r"""
SF_MAIN sf_i64 main(void) {
    sf_u64 period = (sf_u64)cfg("period_ms", 20);
    sf_i64 worst = 0;
    for (int r = 0; r < cfg("rounds", 10); r++) {
        sf_u64 t0 = sf_now_mono_ms();
        sf_sleep_ms(period);
        sf_i64 late = (sf_i64)(sf_now_mono_ms() - t0 - period);
        if (late > worst)
            worst = late;
    }
    return worst;
}
"""


def test_sleeper_wakes_on_time_next_to_spinners(compile_c: Any) -> None:
    spin, json_loop, yielder = compile_c(g.SPIN), compile_c(g.JSON_LOOP), compile_c(g.YIELD_SPIN)
    sleeper = compile_c(LATENESS)

    async def main() -> None:
        rt = Runtime(RuntimeOptions(), host_handler=g.refuse)
        await rt.open()
        spinners = [g.load_started(rt, elf) for elf in (spin, json_loop, yielder)]
        oid = g.load_started(rt, sleeper, config={"period_ms": 20, "rounds": 10})
        worst_control = 0.0
        deadline = time.monotonic() + 30
        while (await rt.get(oid)).state == "running" or (await rt.get(oid)).state == "starting":
            assert time.monotonic() < deadline
            t0 = time.perf_counter()
            await asyncio.sleep(0.005)
            await rt.stats()
            worst_control = max(worst_control, time.perf_counter() - t0 - 0.005)
        status = await rt.get(oid)
        assert status.state == "exited" and status.outcome is not None
        assert 0 <= status.outcome["exit_code"] < BOUND_S * 1000, status.outcome
        assert worst_control < BOUND_S
        t0 = time.perf_counter()
        stopped = await asyncio.gather(*(rt.stop(s) for s in spinners))
        assert all(s.state == "stopped" for s in stopped) and time.perf_counter() - t0 < BOUND_S
        await rt.close()

    asyncio.run(main())
