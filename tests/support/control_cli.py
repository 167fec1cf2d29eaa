"""The control CLI in process for tests: ``Cli`` runs ``wakeful … --json`` through ``main()`` and parses its one
JSON document; ``built_once`` (autouse where imported) builds the typer command tree once per test."""

from __future__ import annotations

import json
from typing import Any

import pytest

from wakeful.cli.main import main


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
        if code == 2 and not out.strip():
            return None  # a usage error from the command line parser (on stderr)
        lines = out.strip().splitlines()
        assert len(lines) == 1, out  # exactly one JSON document on stdout
        return json.loads(lines[0])


