"""``POST G/scripts/run`` on a live node, and ``wakeful serve`` as a real subprocess answering MCP at /mcp."""

from __future__ import annotations

import asyncio
import os
import re
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.mcp_flow import LOOP_AND_SCRIPT_TOOLS, fake_provider, live_node, mcp_http, structured, tenant

from wakeful.harness.config import Config
from wakeful.harness.embed import Harness

pytestmark = pytest.mark.integration

OK_SCRIPT = r"""
#include <wakeful.h>
SF_MAIN sf_i64 main(void) {
    sf_handle cfg = sf_config();
    sf_handle env = sf_json_get(cfg, "env");
    sf_handle args = sf_json_object();
    sf_json_set(args, "value", env);
    sf_handle r = sf_host_call("script.result", args, 10000);
    sf_log("stored");
    return r < 0 ? 1 : 0;
}
"""


async def test_scripts_run_route(harness_runner: Any, tmp_path: Path) -> None:
    with fake_provider() as provider:
        async with live_node(tmp_path / "data", provider.settings) as live:
            t = await tenant(live.harness)
            _, group_key = await live.harness.create_key("group", group_id=t.group_id)
            url = f"{live.url}/v1/agent-groups/{t.group_id}/scripts/run"
            agent = {"Authorization": f"Bearer {t.agent_key}"}
            async with httpx.AsyncClient(trust_env=False, timeout=60) as http:
                r = await http.post(url, headers=agent, json={"source": OK_SCRIPT, "env": {"K": "v"}})
                assert r.status_code == 200, r.text
                assert r.json()["state"] == "succeeded" and r.json()["result"] == {"K": "v"}
                assert r.json()["console"] == ["stored"]
                r = await http.post(url, headers=agent, json={"source": "SF_MAIN int main(void) { return x; }"})
                assert r.status_code == 200 and r.json()["error"]["kind"] == "build_failed"  # a failed outcome
                r = await http.post(url, headers=agent, json={"source": OK_SCRIPT, "env": {"K": 1}})
                assert r.status_code == 400 and r.json()["error"] == "invalid_request"
                r = await http.post(url, headers=agent, json={"files": {"../x.c": "int x;"}, "entry": "../x.c"})
                assert r.status_code == 200 and r.json()["error"]["kind"] == "invalid_bundle"
                person = {"Authorization": f"Bearer {group_key}"}
                r = await http.post(url, headers=person, json={"source": OK_SCRIPT})
                assert r.status_code == 400 and r.json()["field"] == "agent_id"
                r = await http.post(url, headers=person, json={"source": OK_SCRIPT, "agent_id": t.agent_id})
                assert r.status_code == 200 and r.json()["state"] == "succeeded"
                other = await tenant(live.harness, "b1")
                r = await http.post(f"{live.url}/v1/agent-groups/{other.group_id}/scripts/run", headers=agent,
                                    json={"source": OK_SCRIPT})
                assert r.status_code == 404
                r = await http.post(url, json={"source": OK_SCRIPT})
                assert r.status_code == 401


async def test_wakeful_serve_answers_mcp(harness_runner: Any, tmp_path: Path) -> None:
    data = tmp_path / "data"
    async with Harness(Config(data_dir=data), sweeps=False) as h:
        t = await tenant(h)
    env = {**os.environ, "WAKEFUL_HOME": str(data), "WAKEFUL_MCP__TOOL_NAMES": "underscore"}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", "from wakeful.cli.main import main; raise SystemExit(main())", "serve", "--port", "0",
        env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        assert proc.stdout is not None
        line = (await asyncio.wait_for(proc.stdout.readline(), 60)).decode()
        match = re.search(r"listening on (http://\S+)", line)
        assert match, line
        async with mcp_http(match.group(1) + "/mcp", t.agent_key, t.session_id) as client:
            names = [tool.name for tool in (await client.list_tools()).tools]
            assert names[: len(LOOP_AND_SCRIPT_TOOLS)] == [n.replace(".", "_") for n in LOOP_AND_SCRIPT_TOOLS]
            listed = structured(await client.call_tool("loop_list", {}))
            assert listed["loops"] == []
    finally:
        proc.terminate()
        assert await asyncio.wait_for(proc.wait(), 30) is not None
