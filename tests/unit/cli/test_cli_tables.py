"""issue 19: human-mode output — lists are aligned tables with a header, one record is ``key: value`` lines,
times are ISO-8601 UTC, nested values compact JSON (never a Python repr), a cell is one line."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from wakeful.cli.main import main
from wakeful.cli.tables import cell, iso_ms, record_lines, table_lines

ISO = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z"


def test_cells() -> None:
    assert iso_ms(0) == "1970-01-01T00:00:00.000Z" and iso_ms(1796160142796) == "2026-12-01T21:22:22.796Z"
    assert cell("created_ms", 0) == "1970-01-01T00:00:00.000Z" and cell("count", 5) == "5"
    assert cell("runtime", {"state": "resident", "node": None}) == '{"state":"resident","node":null}'
    assert cell("x", None) == "-" and cell("ok", True) == "true"
    assert cell("name", "a\nb\x1b") == "a\\nb\\x1b"
    assert cell("huge_ms", 10**30) == str(10**30)  # out of range: shown as it is


def test_table_and_record() -> None:
    rows = [{"id": "a", "name": "long name", "created_ms": 0}, {"id": "bbbb", "name": "n", "created_ms": 1000}]
    assert table_lines(rows) == ["id    name       created_ms",
                                 "a     long name  1970-01-01T00:00:00.000Z",
                                 "bbbb  n          1970-01-01T00:00:01.000Z"]
    assert table_lines([]) == ["none"]
    assert record_lines({"id": "a", "meta": {"k": 1}}) == ["id: a", 'meta: {"k":1}']


def test_group_and_agent_list_are_tables(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("WAKEFUL_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("WAKEFUL_SERVER", raising=False)
    monkeypatch.delenv("WAKEFUL_DB_URL", raising=False)  # an earlier in-process `--db` exports it (CI run: a foreign group)
    assert main(["group", "create", "g1"]) == 0
    created = capsys.readouterr().out
    assert re.search(rf"^created_ms: {ISO}$", created, re.M), created
    group_id = re.search(r"^id: (\S+)$", created, re.M).group(1)  # type: ignore[union-attr]
    assert main(["agent", "create", "--group", group_id, "a1"]) == 0
    capsys.readouterr()
    assert main(["group", "list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["id", "name", "limits", "created_ms"]
    assert re.fullmatch(rf"{group_id}\s+g1\s+-\s+{ISO}", lines[1]), lines
    assert main(["agent", "list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:3] == ["id", "group_id", "name"] and "{" not in lines[0]
    assert re.search(rf"\sa1\s+active\s+{ISO}\s+-\s+\{{\}}$", lines[1]), lines
