"""decide and web.http_request from a retired incarnation (harness.md §5, §9.3, §21): refused
``stale_incarnation`` before any provider or outside server is contacted, and no row changes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from decide_provider_server import serving
from support.loops_harness import driver_loop, loop_row, send, snapshot, started

from wakeful.errors import HostCallError
from wakeful.harness.decide import DecideSettings
from wakeful.runtime import HostCall

DECIDE_ARGS = {"state": "s", "questions": {"q": {"type": "noul", "instructions": "?"}}}


async def test_retired_incarnations_reach_no_provider_and_no_server(
    harness_runner: Any, store_url: str, store_clock: Any, tmp_path: Path, compile_c: Any,
) -> None:
    with serving("jev") as fake:
        settings = DecideSettings(provider="jev", endpoint=fake.url, api_key="k", timeout_ms=8000)
        h = await started(store_url, store_clock, tmp_path / "data", decide=settings)
        try:
            _, _, loop_id = await driver_loop(h, compile_c)
            await send(h, loop_id, "e1", "noop", {})
            await h.node.load(loop_id)  # a reload: incarnation 2 is current, 1 is retired
            assert (await loop_row(h, loop_id)).incarnation == 2
            before = await snapshot(h)
            for cap, args in (("decide", DECIDE_ARGS), ("web.http_request", {"url": fake.url})):
                hc = HostCall(id="sf:t:1", object_id="o-retired", label=loop_id, capability=cap, arguments=args,
                              timeout_ms=5000, deadline_unix_ms=store_clock.unix_ms() + 5000)
                with pytest.raises(HostCallError) as info:
                    await h.node.dispatch.run(loop_id, 1, hc)
                assert info.value.kind == "stale_incarnation"
            assert fake.seen == [] and h.node.dispatch.web.connects == 0
            assert await snapshot(h) == before
            current = HostCall(id="sf:t:2", object_id="o-current", label=loop_id, capability="decide",
                               arguments=DECIDE_ARGS, timeout_ms=5000,
                               deadline_unix_ms=store_clock.unix_ms() + 5000)
            answer = await h.node.dispatch.run(loop_id, 2, current)
            assert answer["answers"]["q"]["probability_bp"] == 8300 and len(fake.seen) == 1
        finally:
            await h.stop()
