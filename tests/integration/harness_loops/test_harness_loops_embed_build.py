"""The embedding API's ``h.build`` and ``h.logs`` (interfaces.md §5): ``{"source": …}`` as the HTTP API and MCP
take it, a failed compile answered as a result (``state: failed`` with diagnostics), and a Loop's stored log lines."""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from support.loops_harness import driver_loop, started, tenant

from wakeful.harness.errors import InvalidRequest, NotFound

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)
async def test_build_takes_source_and_answers_a_failed_build(
    harness_runner: Any, store_url: str, store_clock: Any, tmp_path: Path,
) -> None:
    h = await started(store_url, store_clock, tmp_path / "data")
    try:
        _, agent, session = await tenant(h)
        source = resources.files("wakeful.sdk").joinpath("examples/heartbeat.c").read_text()
        built = await h.build(agent, {"source": source}, path="/loops/hb.elf")
        assert built["state"] == "succeeded" and built["artifact"].startswith("sha256:")
        view = await h.create_loop(agent_id=agent, session_id=session, artifact="/loops/hb.elf")
        assert view["state"] == "active"
        failed = await h.build(agent, {"source": "int main(void) { return undeclared; }\n"})
        assert (failed["state"], failed["kind"]) == ("failed", "build_failed")
        assert "undeclared" in failed["diagnostics"]
        for bad in ({"source": 5}, {"source": "x", "files": [1]}, {"source": "x", "colour": 1}):
            with pytest.raises(InvalidRequest):
                await h.build(agent, bad)
    finally:
        await h.stop()


@pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)
async def test_logs_returns_the_loops_stored_lines(
    harness_runner: Any, store_url: str, store_clock: Any, tmp_path: Path, compile_c: Any,
) -> None:
    h = await started(store_url, store_clock, tmp_path / "data")
    try:
        _, _, loop_id = await driver_loop(h, compile_c)
        store_clock.advance(s=1)  # the node persists about one guest line a second (harness.md §2.7)
        lines = await h.logs(loop_id)
        assert lines and lines[0]["source"] == "guest" and lines[0]["text"].startswith("config ")
        assert set(lines[0]) == {"seq", "at_ms", "incarnation", "source", "text"}
        assert await h.logs(loop_id, after_seq=lines[-1]["seq"]) == []
        with pytest.raises(InvalidRequest):
            await h.logs(loop_id, limit=0)
        with pytest.raises(NotFound):
            await h.logs("lp_nope")
    finally:
        await h.stop()
