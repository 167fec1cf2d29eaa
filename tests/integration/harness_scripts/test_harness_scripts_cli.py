"""``wakeful script run`` (interfaces.md §4.2): local mode on the store as ``--agent``, remote mode through
``POST G/scripts/run``; ``--json`` outcome, exit codes 0 / 1 / 2 (a failed outcome is also 1; the outcome
shapes themselves are covered in-process by test_harness_scripts.py)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from support.mcp_flow import fake_provider, live_node, tenant

from wakeful.cli.main import main
from wakeful.harness.config import Config
from wakeful.harness.embed import Harness

pytestmark = pytest.mark.integration

SCRIPT = r"""
#include <wakeful.h>
static const char CALL[] = "{\"tool\":\"loop.list\",\"args\":{}}";
SF_MAIN sf_i64 main(void) {
    sf_handle cfg = sf_config();
    sf_handle env = sf_json_get(cfg, "env");
    sf_handle args = sf_json_object();
    sf_json_set(args, "value", env);
    sf_handle r = sf_host_call("script.result", args, 10000);
    sf_handle call = sf_json_parse(CALL, sf_strlen(CALL));
    sf_handle listed = sf_host_call("tool.call", call, 30000);
    sf_log("done");
    return (r < 0 || listed < 0) ? 1 : 0;
}
"""


@pytest.fixture
def wakeful(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Any:
    """``wakeful ARGS`` through the CLI's entry point, in a thread of its own (the command runs its own event
    loop, as in a process; in-process saves an interpreter start and exit per call)."""
    async def run(*args: str, env: dict[str, str]) -> tuple[int, str]:
        for name in ("WAKEFUL_SERVER", "WAKEFUL_API_KEY", "WAKEFUL_CONFIG", "WAKEFUL_DB_URL"):
            monkeypatch.delenv(name, raising=False)
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        capsys.readouterr()
        code = await asyncio.wait_for(asyncio.to_thread(main, list(args)), 120)
        return code, capsys.readouterr().out

    return run


async def test_script_run_local_and_remote(harness_runner: Any, tmp_path: Path, wakeful: Any) -> None:
    source = tmp_path / "check.c"
    source.write_text(SCRIPT)
    broken = tmp_path / "broken.c"
    broken.write_text("int main(void) { return nope; }\n")
    data = tmp_path / "data"
    async with Harness(Config(data_dir=data), sweeps=False) as h:
        t = await tenant(h)
    home = {"WAKEFUL_HOME": str(data)}
    code, out = await wakeful("script", "run", str(source), "--agent", t.agent_id, "--env", "K=v", "--json",
                               env=home)
    outcome = json.loads(out)
    assert code == 0 and outcome["state"] == "succeeded", out
    assert outcome["result"] == {"K": "v"} and outcome["console"] == ["done"]
    assert outcome["tool_calls"] == [{"tool": "loop.list", "ok": True}]
    code, out = await wakeful("script", "run", str(broken), "--agent", "agt_nope", "--json", env=home)
    assert code == 1 and json.loads(out)["error"] == "agent_not_found"  # refused before any build
    code, _ = await wakeful("script", "run", str(source), env=home)
    assert code == 2  # local mode needs --agent
    with fake_provider() as provider:
        async with live_node(tmp_path / "served", provider.settings) as live:
            remote = await tenant(live.harness)
            code, out = await wakeful("script", "run", str(source), "--env", "K=w", "--json", "--server", live.url,
                                       env={"WAKEFUL_API_KEY": remote.agent_key})
            assert code == 0 and json.loads(out)["result"] == {"K": "w"}, out
