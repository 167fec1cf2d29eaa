"""The stdio server's short stdin poll after a chunk (decisions-stdio.md): timers and guests are never held
back by a client that keeps the session busy, and ``--poll-us 0`` turns the poll off."""

from __future__ import annotations

import time
from typing import Any

import pytest
import stdio_guests as g


@pytest.mark.parametrize("poll", [[], ["--poll-us", "0"], ["--poll-us", "10000"]])
def test_timers_fire_while_requests_arrive_back_to_back(compile_c: Any, poll: list[str]) -> None:
    sleeper, caller = compile_c(g.SLEEPER), compile_c(g.HOST_CALLER)

    async def body() -> None:
        async with g.session(*poll) as c:
            c.on_host_call(lambda call: {"v": call.arguments["n"] * 2})
            st = await c.load(sleeper, config={"ms": 30})
            await c.start(st.object_id)
            began = time.monotonic()
            requests = 0
            while (await c.get(st.object_id)).state != "exited":  # back-to-back: the server polls between
                await c.stats()
                requests += 2
                assert time.monotonic() - began < 10, "the sleeper's timer never fired"  # generous smoke bound
            assert (await c.get(st.object_id)).outcome == {"exit_code": 1} and requests > 0
            # a host call answered between back-to-back requests reaches its guest (no loop turn is lost)
            hc = await c.load(caller, config={"params": {"n": 20}}, capabilities=[{"name": "cap"}])
            await c.start(hc.object_id)
            done = await g.wait_state(c, hc.object_id, "exited")
            assert done.outcome == {"exit_code": 41}
            stats = await c.request("wakeful.stats", {})
            assert stats["server"]["max_batches_waited"] <= 1, stats["server"]

    g.run(body)
