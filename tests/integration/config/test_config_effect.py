"""Each interfaces.md §7 key acts where it belongs: ``build.*`` on the harness's builder, ``control.*`` on
``h.control``, ``mcp.tool_names`` on the MCP tool list, ``log.*`` on a real ``wakeful serve``'s stderr, and a bad
value stops ``wakeful serve`` with the typed error naming the key."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from importlib import resources
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import Client
from support.mcp_flow import LOOP_AND_SCRIPT_TOOLS, mcp_http, tenant

from wakeful.control import Actor
from wakeful.control.embed import Harness
from wakeful.harness.config import load_config
from wakeful.mcp.http import McpHttpApp

pytestmark = pytest.mark.integration

SERVE = [sys.executable, "-c", "from wakeful.cli.main import main; raise SystemExit(main())", "serve"]


def _config(tmp_path: Path, text: str) -> Any:
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "wakeful.toml"
    path.write_text(text)
    return load_config(path, env={"WAKEFUL_HOME": str(tmp_path / "data")})


async def _build_twice(h: Harness) -> tuple[dict[str, Any], dict[str, Any], int]:
    """Two identical builds; also how many fresh compiles the second one ran."""
    source = resources.files("wakeful.sdk").joinpath("examples/heartbeat.c").read_text()
    group = await h.create_group("g")
    agent = await h.create_agent(group.id, "a")
    request = {"sdk_version": 1, "entry": "heartbeat.c", "files": {"heartbeat.c": source}}
    first = await h.build(agent.id, request)
    compiles = h._builder.compiles
    second = await h.build(agent.id, request, path="/loops/again.elf")
    return first, second, h._builder.compiles - compiles


async def test_build_keys_shape_the_harness_builder(harness_runner: Any, tmp_path: Path) -> None:
    cfg = _config(tmp_path / "off", "[build]\nworkers = 1\ncache = false\n")
    async with Harness(cfg, sweeps=False) as h:
        first, second, again = await _build_twice(h)
        assert first["state"] == second["state"] == "succeeded" and first["sha256"] == second["sha256"]
        builder = h._builder
        assert builder._workers._max_workers == 1 and builder.cache is None
        assert again == 1  # no cache: the second build compiled again
    assert (tmp_path / "off" / "data").stat().st_mode & 0o777 == 0o700  # §7: the data directory is 0700
    cfg = _config(tmp_path / "on", "[build]\nworkers = 3\ncache_max_entries = 10\n")
    async with Harness(cfg, sweeps=False) as h:
        _, _, again = await _build_twice(h)
        builder = h._builder
        assert builder._workers._max_workers == 3 and builder.cache is not None
        assert again == 0  # the second build was a cache hit
        assert builder.build_root == tmp_path / "on" / "data" / "build"


async def test_control_keys_reach_h_control(harness_runner: Any, store_clock: Any, tmp_path: Path) -> None:
    cfg = _config(tmp_path, "[control]\nclaim_ttl_s = 600\nintent_grace_s = 45\n")
    async with Harness(cfg, clock=store_clock, sweeps=False) as h:
        assert (h.control.claim_ttl_s, h.control.intent_grace_s) == (600, 45)
        group = await h.create_group("g")
        agent = await h.create_agent(group.id, "a")
        person, worker = Actor("person", "key_p", group.id), Actor("agent", agent.id, group.id)
        goal = (await h.control.submit(person, {"operation_id": "op-1", "command": {
            "type": "goal.create", "title": "goal", "objective": "ship it", "claim_mode": "soft",
            "subjects": {"code": "git:r1"}}}))["goal_id"]

        async def run(actor: Actor, op: str, command: dict[str, Any]) -> dict[str, Any]:
            return await h.control.submit(actor, {"operation_id": op, "goal_id": goal, "command": command})

        await run(worker, "op-2", {"type": "agent.register", "agent_id": agent.id})
        added = await run(person, "op-3", {"type": "work.add", "class": "advancement", "title": "work"})
        item = next(c["id"] for c in added["changed"] if c["entity"] == "item")
        claim = (await run(worker, "op-4", {"type": "claim.acquire", "item": item, "key": "k-1"}))["claim"]
        assert claim["expires_ms"] == store_clock.unix_ms() + 600_000, claim  # not the 1800 s default
        seen = (await h.control.item(goal, item))["claim"]
        assert seen["expires_ms"] == claim["expires_ms"]


async def test_mcp_tool_names_reach_the_mcp_server(harness_runner: Any, tmp_path: Path) -> None:
    cfg = _config(tmp_path, '[mcp]\ntool_names = "underscore"\n')
    async with Harness(cfg, sweeps=False) as h:
        async with Client(McpHttpApp(h).server) as client:
            names = [tool.name for tool in (await client.list_tools()).tools]
        assert "loop_create" in names and "loop.create" not in names
        async with Client(McpHttpApp(h, tool_names="dotted").server) as client:  # a flag still wins
            assert "loop.create" in [tool.name for tool in (await client.list_tools()).tools]


async def test_serve_logs_json_and_names_tools_from_the_config_file(harness_runner: Any, tmp_path: Path) -> None:
    data = tmp_path / "data"
    async with Harness(load_config(env={"WAKEFUL_HOME": str(data)}), sweeps=False) as h:
        t = await tenant(h)
    config = tmp_path / "serve.toml"
    config.write_text('[log]\nformat = "json"\nlevel = "info"\n[mcp]\ntool_names = "underscore"\n')
    env = {k: v for k, v in os.environ.items() if not k.startswith("WAKEFUL_")}
    proc = await asyncio.create_subprocess_exec(
        *SERVE, "--port", "0", "--config", str(config), env={**env, "WAKEFUL_HOME": str(data)},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    stderr = asyncio.ensure_future(proc.stderr.read())
    try:
        line = (await asyncio.wait_for(proc.stdout.readline(), 60)).decode()
        match = re.search(r"listening on (http://\S+)", line)
        assert match, line
        base = match.group(1)
        async with mcp_http(base + "/mcp", t.agent_key, t.session_id) as client:
            names = [tool.name for tool in (await client.list_tools()).tools]
        assert names[: len(LOOP_AND_SCRIPT_TOOLS)] == [n.replace(".", "_") for n in LOOP_AND_SCRIPT_TOOLS]
        async with httpx.AsyncClient(trust_env=False) as http:
            r = await http.post(f"{base}/v1/loop-webhooks/TopSecretHookValue123", json={})
            assert r.status_code >= 400
    finally:
        proc.terminate()
        assert await asyncio.wait_for(proc.wait(), 30) == 0
    text = (await asyncio.wait_for(stderr, 30)).decode()
    records = [json.loads(line) for line in text.splitlines() if line.strip()]  # every line is one JSON object
    assert records and all({"ts", "level", "logger", "message"} <= set(r) for r in records)
    assert any("/v1/loop-webhooks/<redacted>" in r["message"] for r in records), text
    assert "TopSecretHookValue123" not in text


@pytest.mark.parametrize(("text", "key"), [("[control]\nclaim_ttl_s = 5\n", "control.claim_ttl_s"),
                                           ('[log]\nformat = "xml"\n', "log.format"),
                                           ("[build]\nworker = 1\n", "build.worker")])
def test_serve_refuses_a_bad_value_naming_the_key(tmp_path: Path, text: str, key: str) -> None:
    config = tmp_path / "bad.toml"
    config.write_text(text)
    env = {k: v for k, v in os.environ.items() if not k.startswith("WAKEFUL_")}
    proc = subprocess.run([*SERVE, "--port", "0", "--config", str(config)], capture_output=True, text=True,
                          env={**env, "WAKEFUL_HOME": str(tmp_path / "data")}, timeout=60)
    assert proc.returncode == 1, proc.stderr
    assert key in proc.stderr and str(config) in proc.stderr and "Traceback" not in proc.stderr
    proc = subprocess.run([*SERVE, "--port", "0"], capture_output=True, text=True, timeout=60,
                          env={**env, "WAKEFUL_HOME": str(tmp_path / "data"),
                               "WAKEFUL_CONFIG": str(tmp_path / "missing.toml")})
    assert proc.returncode == 1 and "missing.toml does not exist" in proc.stderr
