"""A real compiled Loop calls web.http_request (harness.md §17): the loopback server allowed by
``web.allow_networks`` answers; forbidden targets and names resolving to them come back as data."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

from support.loops_harness import guest_lines, send, started, tenant, until
from web_target_server import serving

from wakeful.harness.web_policy import WebSettings

FETCH_C = (Path(__file__).parent / "web_fetch.c").read_text()


async def _fetch(h: Any, loop_id: str, event_id: str, url: str) -> str:
    before = len(await guest_lines(h, loop_id))
    h.clock.advance(s=1)
    await send(h, loop_id, event_id, "fetch", {"url": url})
    lines: list[str] = []

    async def logged() -> bool:
        nonlocal lines
        await h.node.flush_logs()
        lines = await guest_lines(h, loop_id)
        return len(lines) > before

    await until(logged)
    return lines[-1]


async def test_loop_fetches_from_an_allowed_server_only(
    harness_runner: Any, store_url: str, store_clock: Any, tmp_path: Path, compile_c: Any,
) -> None:
    with serving() as server:
        h = await started(store_url, store_clock, tmp_path / "data",
                          web=WebSettings(allow_networks=("127.0.0.2/32",)))
        try:
            _, agent, session = await tenant(h)
            out = await h.upload(agent, compile_c(FETCH_C, name="web_fetch.c"), path="/loops/fetch.elf")
            loop_id = str((await h.create_loop(agent_id=agent, session_id=session, artifact=out["artifact"]))["id"])

            async def resolve(host: str, port: int) -> list[str]:
                if host == "intranet.example":
                    return ["10.1.2.3"]
                raise socket.gaierror(socket.EAI_NONAME, "unknown")

            h.node.dispatch.web.resolver = resolve
            assert await _fetch(h, loop_id, "f1", server.base + "/ok") == "web 200 hello"
            assert await _fetch(h, loop_id, "f2", server.base + "/big") == "web 200 " + ("0123456789" * 8)[:64]
            assert await _fetch(h, loop_id, "f3", f"http://127.0.0.1:{server.port}/ok") == \
                "web error blocked_destination"
            assert await _fetch(h, loop_id, "f4", f"http://intranet.example:{server.port}/ok") == \
                "web error blocked_destination"
            assert await _fetch(h, loop_id, "f5", "http://169.254.169.254/latest/") == "web error blocked_destination"
            assert await _fetch(h, loop_id, "f6", "http://nowhere.example/") == "web error dns_failure"
            assert server.hits["/ok"] == 1 and server.hits["/big"] == 1
        finally:
            await h.stop()
