"""`wakeful loop | group | agent | session` in local mode (interfaces.md §4): real subprocesses on the test
store; the Loop a command creates is adopted by a running node on its next tick."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from support.loops_harness import DRIVER_C, loop_row, started

SRC = Path(__file__).resolve().parents[3] / "src"


def _cli(store_url: str, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(SRC), "WAKEFUL_HOME": str(home)}
    return subprocess.run([sys.executable, "-m", "wakeful.cli.main", "--db", store_url, "--json", *args],
                          capture_output=True, text=True, env=env, timeout=60)


def _ok(proc: subprocess.CompletedProcess[str]) -> Any:
    assert proc.returncode == 0, proc.stderr + proc.stdout
    return json.loads(proc.stdout)


async def test_cli_creates_and_steers_loops_that_a_node_adopts(
    harness_runner: Any, store_url: str, store_clock: Any, tmp_path: Path, compile_c: Any,
) -> None:
    home = tmp_path / "home"
    elf = tmp_path / "driver.o"
    elf.write_bytes(compile_c(DRIVER_C, name="loop_driver.c"))
    group = _ok(_cli(store_url, home, "group", "create", "g1"))["id"]
    agent = _ok(_cli(store_url, home, "agent", "create", "a1", "--group", group))["id"]
    session = _ok(_cli(store_url, home, "session", "create", "--agent", agent))["id"]
    caps = tmp_path / "caps.json"
    caps.write_text(json.dumps([{"name": "loop.create"}]))
    refused = _cli(store_url, home, "loop", "create", "--agent", agent, "--session", session, "--elf", str(elf),
                   "--capabilities", str(caps))
    assert refused.returncode == 1 and json.loads(refused.stdout)["error"] == "capability_not_allowed"
    view = _ok(_cli(store_url, home, "loop", "create", "--agent", agent, "--session", session, "--elf", str(elf),
                    "--name", "from-cli"))
    assert (view["state"], view["incarnation"], view["name"]) == ("active", 0, "from-cli")
    loop_id = view["id"]
    assert [v["id"] for v in _ok(_cli(store_url, home, "loop", "list", "--agent", agent))] == [loop_id]
    again = _cli(store_url, home, "loop", "resume", loop_id)
    assert again.returncode == 1 and json.loads(again.stdout)["error"] == "already_active"
    missing = _cli(store_url, home, "loop", "get", "lp_00000000000000000000000000")
    assert missing.returncode == 1 and json.loads(missing.stdout)["error"] == "not_found"

    h = await started(store_url, store_clock, tmp_path / "node")
    try:
        row = await loop_row(h, loop_id)
        assert row.incarnation == 1 and h.node.resident(loop_id) is not None  # adopted at start
        assert _ok(_cli(store_url, home, "loop", "pause", loop_id))["state"] == "paused"
        await h.tick()  # reconcile unloads an object whose Loop is no longer active
        assert h.node.resident(loop_id) is None
        assert _ok(_cli(store_url, home, "loop", "resume", loop_id))["state"] == "active"
        await h.tick()
        assert (await loop_row(h, loop_id)).incarnation == 2 and h.node.resident(loop_id) is not None
        assert _ok(_cli(store_url, home, "loop", "delete", loop_id))["deleted"] is True
        await h.tick()
        assert not h.node.residents()
    finally:
        await h.stop()
