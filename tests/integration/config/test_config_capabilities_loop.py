"""A capability declared in the configuration file, called by a real Loop (clang-built driver, real node) on a
real loopback HTTP server: exact-argument constraints (SF_DENIED, the harness and the endpoint not reached), the
delegated principal and secret headers, URL-encoded arguments, and every refusal as a typed host error —
loopback without ``allow_private``, the endpoint down, an oversize response, a timeout, the rate limit."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from support.capability_server import CiServer, ci_server, closed_port
from support.loops_harness import call, driver, tenant

from wakeful.harness.config import load_config
from wakeful.harness.embed import Harness
from wakeful.harness.store import loops
from wakeful.runtime import HostCall


def _toml(ci: CiServer, secret: Path) -> str:
    def cap(name: str, path: str, extra: str = "allow_private = true\n") -> str:
        return f'[capabilities."{name}"]\ndescription = "{name} for tests"\nurl = "{ci.base}{path}"\n{extra}'

    return "\n".join([
        cap("ci.run.read", "/runs/{run_id}?attempt={attempt}",
            'allow_private = true\ntimeout_ms = 5000\n'
            f'headers = {{ Authorization = {{ file = "{secret}", prefix = "Bearer " }}, '
            'X-Team = { env = "CI_TEAM" }, Accept = "application/json" }\n'),
        cap("ci.private", "/runs/{run_id}", ""),  # no allow_private: loopback stays refused
        cap("ci.big", "/big", "allow_private = true\nmax_bytes = 1024\n"),
        cap("ci.slow", "/slow", "allow_private = true\ntimeout_ms = 300\n"),
        cap("ci.down", "/runs/x", "allow_private = true\n").replace(f":{ci.port}/", f":{closed_port()}/"),
        cap("ci.limited", "/runs/lim", "allow_private = true\nper_minute = 1\n"),
    ])


async def _harness(tmp_path: Path, store_url: str, store_clock: Any, ci: CiServer) -> Harness:
    secret = tmp_path / "ci-token"
    secret.write_text("s3cret\n")
    (tmp_path / "w.toml").write_text(_toml(ci, secret))
    cfg = load_config(tmp_path / "w.toml", env={"WAKEFUL_HOME": str(tmp_path / "data")})
    h = Harness(cfg, db_url=store_url, clock=store_clock, sweeps=False)
    await h.start()
    return h


async def _harness_lines(h: Harness, loop_id: str) -> list[str]:
    async with h.store.tx(readonly=True) as tx:
        return [ln.text for ln in await loops.list_logs(tx, loop_id) if ln.source == "harness"]


@pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)
async def test_a_loop_calls_a_configured_capability_within_its_constraints(
    harness_runner: Any, store_url: str, store_clock: Any, tmp_path: Path, compile_c: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CI_TEAM", "infra")
    with ci_server() as ci:
        h = await _harness(tmp_path, store_url, store_clock, ci)
        try:
            _, agent, session = await tenant(h)
            art = await driver(h, agent, compile_c)
            granted = [{"name": "ci.run.read", "arguments": {"run_id": "r/1 x", "attempt": 2}},
                       *({"name": n} for n in ("ci.private", "ci.big", "ci.slow", "ci.down", "ci.limited"))]
            view = await h.create_loop(agent_id=agent, session_id=session, artifact=art, capabilities=granted)
            loop_id = view["id"]
            assert await call(h, loop_id, "e1", "ci.run.read", {"run_id": "r/1 x", "attempt": 2}) \
                == "call ci.run.read -> 1"
            (seen,) = ci.seen
            assert (seen.method, seen.path) == ("GET", "/runs/r%2F1%20x?attempt=2")  # URL-encoded, never a new path
            assert seen.headers["authorization"] == "Bearer s3cret"  # from the secrets file
            assert seen.headers["x-team"] == "infra"  # from the environment
            assert seen.headers["x-wakeful-principal"] == f"schedule|loop:{loop_id}|agent:{agent}"
            assert (seen.headers["x-wakeful-loop"], seen.headers["x-wakeful-agent"]) == (loop_id, agent)

            # §9.2: a constraint mismatch is SF_DENIED from the runtime: neither the harness nor the endpoint is called
            before = h.node.dispatch.dispatched
            assert await call(h, loop_id, "e2", "ci.run.read", {"run_id": "r/2", "attempt": 2}) \
                == "call ci.run.read -> -4"
            assert h.node.dispatch.dispatched == before and len(ci.seen) == 1

            # typed host errors (SF_HOST_ERROR) with the reason code in the Loop's log
            assert await call(h, loop_id, "e3", "ci.private", {"run_id": "a"}) == "call ci.private -> -5"
            assert len(ci.seen) == 1  # loopback refused before any packet
            assert await call(h, loop_id, "e4", "ci.down", {}) == "call ci.down -> -5"
            assert await call(h, loop_id, "e5", "ci.big", {}) == "call ci.big -> -5"
            assert await call(h, loop_id, "e6", "ci.slow", {}) == "call ci.slow -> -5"
            assert await call(h, loop_id, "e7", "ci.limited", {}) == "call ci.limited -> 1"
            assert await call(h, loop_id, "e8", "ci.limited", {}) == "call ci.limited -> -5"
            assert await call(h, loop_id, "e9", "ci.big", {"x": 1}) == "call ci.big -> -5"  # GET: no extra args
            lines = await _harness_lines(h, loop_id)
            assert [ln.split(":", 2)[:2] for ln in lines] == [
                ["tool_failed", " blocked_destination"], ["unavailable", " connect_failed"],
                ["tool_failed", " the response is larger than max_bytes (1024)"], ["deadline_exceeded", " timeout"],
                ["rate_limited", " at most 1 calls a minute per Loop; next in 59.0 s"],
                ["invalid_arguments", " unknown argument 'x'"]], lines
        finally:
            await h.stop()


@pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)
async def test_the_result_is_the_status_and_the_parsed_body_and_the_guide_lists_the_capability(
    harness_runner: Any, store_url: str, store_clock: Any, tmp_path: Path, compile_c: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("CI_TEAM", raising=False)
    with ci_server() as ci:
        h = await _harness(tmp_path, store_url, store_clock, ci)
        try:
            _, agent, session = await tenant(h)
            art = await driver(h, agent, compile_c)
            loop_id = (await h.create_loop(agent_id=agent, session_id=session, artifact=art))["id"]
            assert "ci.run.read" in h.node.tools.loop_tool_names()  # offered to Loops with no list given
            from wakeful.harness.node import Node

            local = Node(h.store, h.config)  # the CLI's local mode: no registry given, the configured tools still
            assert {"ci.run.read", "ci.big"} <= local.tools.loop_tool_names()
            obj = h.node.resident(loop_id).object_id

            async def dispatch(cap: str, args: Any) -> Any:
                hc = HostCall(id="sf:t:1", object_id=obj, label=loop_id, capability=cap, arguments=args,
                              timeout_ms=5000, deadline_unix_ms=store_clock.unix_ms() + 5000)
                return await h.node.dispatch.handle(hc)

            monkeypatch.setenv("CI_TEAM", "infra")
            got = await dispatch("ci.run.read", {"run_id": 7, "attempt": 1})
            assert got == {"status": 200, "body": {"path": "/runs/7?attempt=1", "method": "GET"}}
            guide = h.loops.sdk()["guide"]
            assert "- `ci.run.read`: ci.run.read for tests" in guide
            assert guide.index("`ci.run.read`") < guide.index("**Domain failures are data.**")  # in §10's table
        finally:
            await h.stop()
