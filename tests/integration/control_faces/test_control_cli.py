"""`wakeful goal …`, `work …`, `gate`, `evidence`, `effect`, `next` in local mode on a real SQLite store
(interfaces.md §4): every ``--json`` output is one parseable document with the documented fields; exit codes 0,
1 (a kernel refusal, printed as a typed JSON error), 2 (usage) and 3 (store unreachable).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from wakeful.cli.main import main
from wakeful.control import Actor, Control
from wakeful.harness.store import Store


@pytest.fixture(autouse=True)
def built_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """``main()`` as is, but the typer command tree is built once per test, not once per call (0.4 s each)."""
    import functools

    import typer.main

    monkeypatch.setattr(typer.main, "get_command", functools.cache(typer.main.get_command))


class Cli:
    def __init__(self, capsys: pytest.CaptureFixture[str]) -> None:
        self.capsys = capsys

    def __call__(self, *argv: str, code: int = 0) -> Any:
        self.capsys.readouterr()
        got = main([*argv, "--json"])
        out = self.capsys.readouterr().out
        assert got == code, (argv, got, out)
        lines = out.strip().splitlines()
        assert len(lines) == 1, out  # exactly one JSON document on stdout
        return json.loads(lines[0])


def item_of(receipt: dict[str, Any]) -> str:
    return str(next(c["id"] for c in receipt["changed"] if c["entity"] == "item"))


def test_goal_and_work_commands(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("WAKEFUL_DB_URL", f"sqlite:///{tmp_path / 'w.db'}")
    monkeypatch.setenv("WAKEFUL_HOME", str(tmp_path))
    (tmp_path / "wakeful.toml").write_text("[control]\nclaim_ttl_s = 600\n")  # local commands apply it too
    cli = Cli(capsys)
    group = cli("group", "create", "g1")["id"]
    agent = cli("agent", "create", "--group", group, "a1")["id"]

    made = cli("goal", "create", "--group", group, "--title", "fast p99", "--objective", "p99 < 5 ms",
               "--subject", "repo=git:a", "--operation-id", "cli-goal")
    goal = made["goal"]["id"]
    assert made["receipt"]["seq"] == 1 and made["goal"]["subjects"] == {"repo": "git:a"}
    again = cli("goal", "create", "--group", group, "--title", "fast p99", "--objective", "p99 < 5 ms",
                "--subject", "repo=git:a", "--operation-id", "cli-goal")
    assert again["receipt"]["replayed"] is True and again["goal"]["id"] == goal
    assert cli("goal", "list", "--group", group)[0]["id"] == goal

    # a joined agent, work with a gate, a contract bound to the work
    cli("goal", "show", goal)
    assert cli("goal", "commits", goal)[0]["command_type"] == "goal.create"
    bench = cli("work", "add", goal, "--class", "advancement", "--title", "bench", "--priority", "1")["item"]["id"]
    ship = cli("work", "add", goal, "--class", "advancement", "--title", "ship", "--priority", "0",
               "--field", 'required_scopes=["production:action:ship"]')["item"]["id"]
    gate = cli("work", "add", goal, "--class", "user_gate", "--title", "ship?", "--field", "scope=production:goal:ship",
               "--field", f'targets=["{ship}"]', "--field", "question=Ship it?")["item"]["id"]
    contract = tmp_path / "acceptance.json"
    contract.write_text(json.dumps({"document": {"criteria": [{"id": "lat", "text": "p99", "subject": "repo"}]},
                                    "bindings": {bench: ["lat"]}}))
    assert cli("goal", "acceptance", "set", goal, str(contract))["command_type"] == "acceptance.set"
    assert cli("goal", "acceptance", "show", goal)["revision"] == 1
    cli("goal", "subject", "set", goal, "repo", "git:b")
    # work as an unregistered agent is refused (exit 1, typed JSON error); the operator registers it
    refused = cli("work", "claim", goal, bench, "--agent", agent, code=1)
    assert refused["error"] == "not_registered"

    async def register_agent() -> None:
        store = await Store.open(f"sqlite:///{tmp_path / 'w.db'}")
        try:
            await Control(store).submit(Actor("operator", "operator", group), {
                "operation_id": "reg", "goal_id": goal, "command": {"type": "agent.register", "agent_id": agent}})
        finally:
            await store.close()

    asyncio.run(register_agent())

    decision = cli("next", "--agent", agent, "--goal", goal)
    assert (decision["decision"], decision["action"], decision["item"]["id"]) == ("deliver", "start", bench)
    assert decision["ask"]["gate_id"] == gate
    claimed = cli("next", "--agent", agent, "--goal", goal, "--claim")
    assert claimed["claim"]["claim"]["holder"] == agent
    held = claimed["claim"]["claim"]
    left_s = held["expires_ms"] / 1000 - time.time()
    assert 500 < left_s <= 601, left_s  # control.claim_ttl_s = 600, not the 1,800 s default
    cli("evidence", "add", goal, "--kind", "test", "--verdict", "pass", "--item", bench, "--criterion", "lat",
        "--subject", "repo", "--artifact-revision", "git:b", "--summary", "3 ms", "--agent", agent)
    assert cli("evidence", "list", goal, "--item", bench)[0]["verdict"] == "pass"
    stale = cli("work", "complete", goal, bench, "--agent", agent, "--expected-revision", "99", code=1)
    assert (stale["error"], stale["message"]) == ("revision_conflict", stale["message"])
    done = cli("work", "complete", goal, bench, "--agent", agent)  # presents its claim from the item
    assert done["command_type"] == "work.complete"
    assert cli("work", "show", goal, bench)["status"] == "done"
    assert cli("goal", "status", goal)["acceptance"]["status"] == "accepted"

    # the person's gate decision, then the release is the agent's next start
    assert cli("gate", "resolve", goal, gate, "approve")["command_type"] == "gate.resolve"
    assert cli("next", "--agent", agent)["item"]["id"] == ship
    board = cli("goal", "board", goal)
    assert [c["id"] for c in board["columns"]["open"]["runnable"]] == [ship]
    assert [i["id"] for i in cli("work", "list", goal, "--status", "open")] == [ship]

    # effects, block/defer/reopen, cancel, rebuild
    cli("effect", "intend", goal, "--request-key", "pr-1", "--kind", "github.pr.create", "--target", "repo",
        "--payload-digest", "d1", "--item", ship, "--agent", agent)
    cli("effect", "settle", goal, "--request-key", "pr-1", "--attempt", "1", "unknown", "--agent", agent)
    assert cli("effect", "list", goal, "--state", "unknown")[0]["request_key"] == "pr-1"
    readback = cli("next", "--agent", agent, "--goal", goal)
    assert (readback["action"], readback["effect"]["request_key"]) == ("readback_effect", "pr-1")
    cli("effect", "readback", goal, "--request-key", "pr-1", "--attempt", "1", "present", "--agent", agent)
    cli("work", "block", goal, ship, "--reason", "freeze", "--resume-when", "time:1")
    cli("work", "reopen", goal, ship)
    cli("work", "defer", goal, ship, "--resume-when", f"work_done:{gate}")
    assert cli("goal", "rebuild", goal) == {"goals": 1, "projections": 2}
    assert cli("goal", "pause", goal, "--reason", "holiday")["command_type"] == "goal.pause"
    assert cli("next", "--agent", agent, "--goal", goal)["reasons"] == ["goal_paused"]


def test_usage_and_unavailable_exit_codes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("WAKEFUL_DB_URL", f"sqlite:///{tmp_path / 'w.db'}")
    assert main(["goal", "create", "--title", "no group", "--json"]) == 2  # --group is required
    assert main(["work", "supersede", "goal_x", "w_x", "--json"]) == 2  # neither replacement given
    capsys.readouterr()
    monkeypatch.setenv("WAKEFUL_DB_URL", "postgresql://postgres@127.0.0.1:9/nowhere")
    assert main(["goal", "status", "goal_x", "--json"]) == 3
    err = json.loads(capsys.readouterr().out)
    assert err["error"] == "unavailable"


def test_help_for_every_control_command() -> None:
    """Every command has --help (interfaces.md §9), checked through the real console script once."""
    groups = {"goal": ["create", "list", "show", "status", "board", "pause", "resume", "close", "commits", "rebuild",
                       "acceptance", "subject"],
              "work": ["add", "list", "show", "claim", "renew", "release", "update", "block", "defer", "reopen",
                       "complete", "supersede", "cancel"],
              "gate": ["resolve"], "evidence": ["add", "list"], "effect": ["intend", "settle", "readback", "list"]}
    for group, commands in groups.items():
        for command in commands:
            assert main([group, command, "--help"]) == 0, (group, command)
    proc = subprocess.run([sys.executable, "-m", "wakeful.cli.main", "next", "--help"], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0 and "--agent" in proc.stdout
