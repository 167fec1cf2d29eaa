"""issue 16 / benchmarks.md §2.1 step 4: the HTTP server's own tick wakes an idle node once a second (uvicorn's
wakes ten times), still refreshes the Date header on every wake, and ends at once when ``should_exit`` is set."""

from __future__ import annotations

import asyncio
from typing import Any

from wakeful.api.server import make_server
from wakeful.harness.config import Config
from wakeful.harness.embed import Harness


def _timers(loop: Any) -> list[float]:
    """Seconds from now to each timer the event loop has scheduled (its scheduler's own list)."""
    return sorted(handle.when() - loop.time() for handle in loop._scheduled if not handle.cancelled())


def test_the_main_loop_wakes_once_a_second_and_ends_when_told() -> None:
    server = make_server(Harness(Config()), "127.0.0.1", 0, access_log=False)
    headers: list[Any] = []

    async def run() -> list[float]:
        task = asyncio.get_running_loop().create_task(server.main_loop())
        for _ in range(5):
            await asyncio.sleep(0)
        headers.append(server.server_state.default_headers)
        timers = _timers(asyncio.get_running_loop())
        server.should_exit = True
        await asyncio.wait_for(task, 30)  # woken by the flag, not by the tick
        return timers

    timers = asyncio.run(run())
    assert len(timers) == 1 and timers[0] > 0.9, timers  # the one wake-up: a second away, not 0.1 s
    assert any(name == b"date" for name, _ in headers[0])  # the first tick set the Date header
