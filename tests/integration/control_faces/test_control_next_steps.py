"""``next`` as an interaction contract (issue 20): an agent that only ever runs the CLI lines ``next`` hands it —
filling in the ``<placeholders>`` the step lists — carries a goal from its first item to ``goal.close``: a claim,
evidence, a completion with its fences, a gate asked and (by a person) resolved, an unknown effect read back.
Every step's MCP call names a real tool with arguments its schema accepts, and its HTTP request a real route."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any

import pytest
from support.control_cli import Cli, built_once  # noqa: F401 (an autouse fixture)

from wakeful.control.next_steps import FACES
from wakeful.mcp import control_tools

FILL = {"<kind>": "test", "<verdict>": "pass", "<summary>": "checked by the steps test", "<observed>": "present"}


def _tools() -> dict[str, dict[str, Any]]:
    return {name: schema for name, _, schema, _ in control_tools._TOOLS}


def check_mcp(step: dict[str, Any]) -> None:
    """The tool exists; every argument is a property of its schema; every required property is given."""
    if step["mcp"] is None:
        return
    schema = _tools()[step["mcp"]["tool"]]
    args = step["mcp"]["arguments"]
    assert set(args) <= set(schema["properties"]), (step["mcp"], sorted(schema["properties"]))
    assert set(schema.get("required", [])) - {"summary"} <= set(args) | {"summary"}, step["mcp"]


def check_http(step: dict[str, Any], group: str, goal: str) -> None:
    assert step["http"]["path"] == f"/v1/agent-groups/{group}/goals/{goal}/commands"
    assert step["http"]["body"]["command"] == step["command"]


class Agent:
    """Runs ``next`` and then exactly the CLI lines of its steps, nothing else."""

    def __init__(self, cli: Cli, agent: str, goal: str, group: str) -> None:
        self.cli, self.agent, self.goal, self.group = cli, agent, goal, group
        self.epoch: str | None = None
        self.seen: list[str] = []

    def next(self) -> dict[str, Any]:
        decision = self.cli("next", "--agent", self.agent, "--goal", self.goal)
        call = decision["next_call"]
        assert shlex.split(call["cli"])[1:] == ["next", "--agent", self.agent, "--goal", self.goal]
        assert call["mcp"] == {"tool": "work.next", "arguments": {"goal_id": self.goal}}
        return dict(decision)

    def run_steps(self, decision: dict[str, Any]) -> None:
        for step in decision["steps"]:
            check_mcp(step)
            check_http(step, self.group, self.goal)
            argv = shlex.split(step["cli"])
            assert argv[0] == "wakeful" and tuple(argv[1:3]) == FACES[step["command"]["type"]].cli
            filled = [self._fill(word) for word in argv[1:]]
            receipt = self.cli(*filled)
            self.seen.append(step["command"]["type"])
            if step["command"]["type"] == "claim.acquire":
                self.epoch = str(receipt["claim"]["epoch"])

    def _fill(self, word: str) -> str:
        if word == "<epoch>":
            assert self.epoch is not None, "a step used the claim epoch before any claim"
            return self.epoch
        assert not re.fullmatch(r"<\w+>", word) or word in FILL, word
        return FILL.get(word, word)


def test_an_agent_that_only_follows_the_steps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("WAKEFUL_DB_URL", f"sqlite:///{tmp_path / 'w.db'}")
    monkeypatch.setenv("WAKEFUL_HOME", str(tmp_path))
    cli = Cli(capsys)
    group = cli("group", "create", "g1")["id"]
    agent = cli("agent", "create", "--group", group, "a1")["id"]
    goal = cli("goal", "create", "--group", group, "--title", "ship", "--objective", "o")["goal"]["id"]
    build = cli("work", "add", goal, "--class", "advancement", "--title", "build", "--priority", "0")["item"]["id"]
    ship = cli("work", "add", goal, "--class", "advancement", "--title", "ship", "--priority", "1",
               "--field", 'required_scopes=["production:action:ship"]')["item"]["id"]
    gate = cli("work", "add", goal, "--class", "user_gate", "--title", "ship?", "--field",
               "scope=production:goal:ship", "--field", f'targets=["{ship}"]', "--field", "question=Ship it?")
    gate_id = gate["item"]["id"]
    me = Agent(cli, agent, goal, group)

    # not registered: the step registers
    first = me.next()
    assert (first["decision"], first["reasons"], first["cadence"]) == ("stop", ["not_registered"],
                                                                      {"call_next": "after_steps"})
    me.run_steps(first)
    # start: claim, evidence, complete (with the epoch the claim printed); the unasked gate is asked too
    start = me.next()
    assert (start["decision"], start["action"], start["item"]["id"]) == ("deliver", "start", build)
    me.run_steps(start)
    assert me.seen[1:] == ["claim.acquire", "evidence.add", "work.complete", "gate.ask"]
    assert cli("work", "show", goal, build)["status"] == "done"

    # the gate was asked: wait for the person, with a poll hint (nothing pushes a gate to the agent)
    waiting = me.next()
    assert (waiting["decision"], waiting["steps"]) == ("wait", [])
    assert waiting["cadence"]["call_next"] == "on_wake" and waiting["cadence"]["wake_when"] == [
        f"gate_resolved:{gate_id}"]
    assert 1 <= waiting["cadence"]["after_s"] <= 300
    assert waiting["cadence"]["woken_by"] == [f"a person resolves gate {gate_id}"]
    rev = str(cli("work", "show", goal, gate_id)["revision"])
    cli("gate", "resolve", goal, gate_id, "approve", "--expected-revision", rev)

    # an effect of the release whose outcome was lost: next says read it back, the step records what was seen
    cli("effect", "intend", goal, "--request-key", "deploy-1", "--kind", "deploy", "--target", "prod",
        "--payload-digest", "d1", "--agent", agent)
    cli("effect", "settle", goal, "--request-key", "deploy-1", "--attempt", "1", "unknown", "--agent", agent)
    readback = me.next()
    assert (readback["action"], readback["steps"][0]["fill"]) == ("readback_effect",
                                                                 {"observed": ["present", "absent", "unreadable"]})
    me.run_steps(readback)
    assert cli("effect", "list", goal)[0]["state"] == "succeeded"

    # the release; then the goal is complete, and without a contract closing it is a person's
    release = me.next()
    assert release["item"]["id"] == ship
    me.run_steps(release)
    done = me.next()
    assert (done["decision"], done["reasons"], done["cadence"]) == ("stop", ["goal_complete"],
                                                                   {"call_next": "never"})
    assert (done["closed_by"], done["steps"]) == ("person", [])
    # with an accepted contract the agent closes it itself
    contract = tmp_path / "acceptance.json"
    contract.write_text(json.dumps({"document": {"criteria": [{"id": "shipped", "text": "it ships"}]}}))
    cli("goal", "acceptance", "set", goal, str(contract), "--expected-revision", "0")
    cli("evidence", "add", goal, "--kind", "check", "--verdict", "pass", "--criterion", "shipped", "--subject",
        "repo", "--artifact-revision", "git:1", "--agent", agent)
    cli("goal", "subject", "set", goal, "repo", "git:1")
    closing = me.next()
    assert (closing["closed_by"], [s["command"]["type"] for s in closing["steps"]]) == ("agent", ["goal.close"])
    me.run_steps(closing)
    assert cli("goal", "show", goal)["goal"]["status"] == "closed"


def test_every_face_spelling_matches_its_face() -> None:
    """FACES against the real faces: each CLI command exists, each MCP tool is in the control tool table."""
    from typer.main import get_command

    from wakeful.cli.main import app

    root = get_command(app)
    tools = _tools()
    for kind, face in FACES.items():
        group = root.commands[face.cli[0]]  # type: ignore[attr-defined]
        assert face.cli[1] in group.commands, (kind, face.cli)
        assert face.mcp_tool is None or face.mcp_tool in tools, (kind, face.mcp_tool)
    assert json.dumps(sorted(FACES))  # the table is plain data
