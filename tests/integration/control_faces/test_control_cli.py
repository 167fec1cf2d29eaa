"""`wakeful goal …`, `work …`, `gate`, `evidence`, `effect`, `next` in local mode on a real SQLite store
(interfaces.md §4): every ``--json`` output is one parseable document with the documented fields; exit codes 0,
1 (a kernel refusal, printed as a typed JSON error), 2 (usage) and 3 (store unreachable).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from support.control_cli import Cli, built_once  # noqa: F401 (an autouse fixture)

from wakeful.cli.main import main


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
    cli("goal", "acceptance", "set", goal, str(contract), code=2)  # the fence is the caller's
    assert cli("goal", "acceptance", "set", goal, str(contract), "--expected-revision", "0")["command_type"] == \
        "acceptance.set"
    assert cli("goal", "acceptance", "show", goal)["revision"] == 1
    cli("goal", "subject", "set", goal, "repo", "git:b")
    # work as an unregistered agent is refused (exit 1, typed JSON error); the operator registers it (issue 20 bug 1)
    refused = cli("work", "claim", goal, bench, "--agent", agent, code=1)
    assert refused["error"] == "not_registered"
    assert cli("goal", "register", goal, agent)["command_type"] == "agent.register"
    other = cli("agent", "create", "--group", group, "a2")["id"]
    assert cli("goal", "register", goal, other, "--agent", other)["command_type"] == "agent.register"
    updated = cli("goal", "update", goal, "--objective", "p99 < 5 ms under mixed load", "--budget-units-per-day", "50")
    assert updated["command_type"] == "goal.update"
    assert cli("goal", "show", goal)["goal"]["objective"] == "p99 < 5 ms under mixed load"

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
    fence = ["--claim-epoch", str(held["epoch"]), "--claim-key", held["key"]]
    assert cli("goal", "spend", goal, "--units", "3", "--agent", agent)["command_type"] == "budget.spend"
    done = cli("work", "complete", goal, bench, "--agent", agent, "--expected-revision", "1", *fence)
    assert done["command_type"] == "work.complete"
    assert cli("work", "show", goal, bench)["status"] == "done"
    assert cli("goal", "status", goal)["acceptance"]["status"] == "accepted"

    # the agent asks the person (issue 20 bug 1); the person's decision; the release is the agent's next start
    assert cli("next", "--agent", agent, "--goal", goal)["decision"] == "ask_person"
    assert cli("gate", "ask", goal, gate, "--agent", agent)["command_type"] == "gate.ask"
    assert cli("next", "--agent", agent, "--goal", goal)["wait_kind"] == "needs_person"
    gate_rev = str(cli("work", "show", goal, gate)["revision"])
    assert cli("gate", "resolve", goal, gate, "approve", "--expected-revision", gate_rev)["command_type"] == \
        "gate.resolve"
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
    rev = int(cli("work", "show", goal, ship)["revision"])
    cli("work", "block", goal, ship, "--reason", "freeze", "--resume-when", "time:1", "--expected-revision", str(rev))
    cli("work", "reopen", goal, ship, "--expected-revision", str(rev + 1))
    cli("work", "defer", goal, ship, "--resume-when", f"work_done:{gate}", "--expected-revision", str(rev + 2))
    assert cli("goal", "rebuild", goal) == {"goals": 1, "projections": 2}
    assert cli("goal", "pause", goal, "--reason", "holiday")["command_type"] == "goal.pause"
    assert cli("next", "--agent", agent, "--goal", goal)["reasons"] == ["goal_paused"]


def test_fences_are_the_callers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 20 bug 2: the CLI never copies the item's revision or the current holder's claim into a request, so
    an old run's write after its claim was replaced is refused; a claim moves to another agent with transfer."""
    monkeypatch.setenv("WAKEFUL_DB_URL", f"sqlite:///{tmp_path / 'w.db'}")
    monkeypatch.setenv("WAKEFUL_HOME", str(tmp_path))
    cli = Cli(capsys)
    group = cli("group", "create", "g1")["id"]
    a, b = (cli("agent", "create", "--group", group, name)["id"] for name in ("a", "b"))
    goal = cli("goal", "create", "--group", group, "--title", "t", "--objective", "o")["goal"]["id"]
    for agent in (a, b):
        cli("goal", "register", goal, agent)
    item = cli("work", "add", goal, "--class", "advancement", "--title", "x")["item"]["id"]
    old = cli("work", "claim", goal, item, "--agent", a, "--key", "run-old")["claim"]
    cli("work", "release", goal, item, "--agent", a, "--claim-epoch", str(old["epoch"]), "--claim-key", "run-old")
    new = cli("work", "claim", goal, item, "--agent", a, "--key", "run-new")["claim"]
    assert new["epoch"] > old["epoch"]
    late = cli("work", "update", goal, item, "--detail", "x", "--agent", a, "--expected-revision", "1",
               "--claim-epoch", str(old["epoch"]), "--claim-key", "run-old", code=1)
    assert late["error"] == "claim_stale"
    assert "detail" not in cli("work", "show", goal, item) or cli("work", "show", goal, item)["detail"] != "x"
    cli("work", "update", goal, item, "--detail", "y", "--agent", a, code=2)  # no revision given: a usage error
    half = cli("work", "update", goal, item, "--detail", "y", "--agent", a, "--expected-revision", "1",
               "--claim-epoch", str(new["epoch"]), code=2)
    assert "--claim-key" in half["message"]
    fresh = ["--claim-epoch", str(new["epoch"]), "--claim-key", "run-new"]
    cli("work", "update", goal, item, "--detail", "y", "--agent", a, "--expected-revision", "1", *fresh)
    moved = cli("work", "transfer", goal, item, "--to", b, "--new-key", "run-b", "--agent", a, *fresh)
    assert (moved["command_type"], moved["claim"]["holder"], moved["claim"]["key"]) == ("claim.transfer", b, "run-b")
    stolen = cli("work", "complete", goal, item, "--agent", a, "--expected-revision", "2", *fresh, code=1)
    assert stolen["error"] == "claim_stale"


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
                       "acceptance", "subject", "update", "register", "exclude", "spend", "propose"],
              "work": ["add", "list", "show", "claim", "renew", "release", "transfer", "update", "block", "defer",
                       "reopen", "complete", "supersede", "cancel"],
              "gate": ["ask", "resolve"], "evidence": ["add", "list"], "effect": ["intend", "settle", "watch", "readback", "list"]}
    for group, commands in groups.items():
        for command in commands:
            assert main([group, command, "--help"]) == 0, (group, command)
    proc = subprocess.run([sys.executable, "-m", "wakeful.cli.main", "next", "--help"], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0 and "--agent" in proc.stdout


def test_proposals_through_the_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 20: an agent proposes an acceptance revision and a goal change; the operator approves the digest it
    read, and the approval applies exactly the proposal."""
    monkeypatch.setenv("WAKEFUL_DB_URL", f"sqlite:///{tmp_path / 'w.db'}")
    monkeypatch.setenv("WAKEFUL_HOME", str(tmp_path))
    cli = Cli(capsys)
    group = cli("group", "create", "g1")["id"]
    agent = cli("agent", "create", "--group", group, "a1")["id"]
    goal = cli("goal", "create", "--group", group, "--title", "t", "--objective", "o")["goal"]["id"]
    cli("goal", "register", goal, agent)
    contract = tmp_path / "v1.json"
    contract.write_text(json.dumps({"criteria": [{"id": "mixed", "text": "mixed-load p99 < 5 ms"}]}))
    proposed = cli("goal", "acceptance", "propose", goal, str(contract), "--expected-revision", "0", "--agent", agent,
                   "--note", "isolated numbers mislead")
    gate, digest = proposed["proposal"]["gate_id"], proposed["proposal"]["digest"]
    (card,) = cli("goal", "status", goal)["needs_person"]
    assert (card["id"], card["proposal"]["digest"]) == (gate, digest)
    rev = str(cli("work", "show", goal, gate)["revision"])
    wrong = cli("gate", "resolve", goal, gate, "approve", "--expected-revision", rev, "--digest", "f" * 64, code=1)
    assert wrong["error"] == "proposal_stale"
    cli("gate", "resolve", goal, gate, "approve", "--expected-revision", rev, "--digest", digest)
    assert cli("goal", "acceptance", "show", goal)["criteria"][0]["id"] == "mixed"
    change = cli("goal", "propose", goal, "--objective", "ship under mixed load", "--agent", agent)
    gate2 = change["proposal"]["gate_id"]
    cli("gate", "resolve", goal, gate2, "approve", "--expected-revision", str(cli("work", "show", goal, gate2)["revision"]))
    assert cli("goal", "show", goal)["goal"]["objective"] == "ship under mixed load"
