"""``wakeful status`` in local mode (interfaces.md §4.2) on SQLite: one JSON document with nodes, leases, Loops by
state, pending events, wakes and the goals that need a person."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from wakeful.cli.main import main


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> Any:
    capsys.readouterr()
    assert main([*argv, "--json"]) == 0
    (line,) = capsys.readouterr().out.strip().splitlines()
    return json.loads(line)


def test_status_lists_goals_needing_a_person(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("WAKEFUL_DB_URL", f"sqlite:///{tmp_path / 'w.db'}")
    monkeypatch.setenv("WAKEFUL_HOME", str(tmp_path))
    empty = _cli(capsys, "status")
    assert empty["nodes"] == [] and empty["loops"] == {} and empty["goals_needing_person"] == []
    assert empty["pending"] == {"total": 0, "oldest_deadline_ms": None, "oldest_received_ms": None}
    group = _cli(capsys, "group", "create", "g1")["id"]
    goal = _cli(capsys, "goal", "create", "--group", group, "--title", "ship it", "--objective", "ship",
                "--subject", "repo=git:a", "--operation-id", "op-1")["goal"]["id"]
    ship = _cli(capsys, "work", "add", goal, "--class", "advancement", "--title", "ship")["item"]["id"]
    _cli(capsys, "work", "add", goal, "--class", "user_gate", "--title", "ship?", "--field",
         "scope=production:goal:ship", "--field", f'targets=["{ship}"]', "--field", "question=Ship it?")
    status = _cli(capsys, "status")
    assert status["goals_needing_person"] == [{"goal_id": goal, "title": "ship it", "items": 1}]
    capsys.readouterr()
    assert main(["status"]) == 0
    text = capsys.readouterr().out
    assert "goals needing a person: ship it" in text and "loops: none" in text
