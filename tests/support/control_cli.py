"""The control CLI in process for tests: ``Cli`` runs ``wakeful … --json`` through ``main()`` and parses its one
JSON document; ``built_once`` (autouse where imported) builds the typer command tree once per test."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

from wakeful.cli.main import main


@pytest.fixture(autouse=True)
def built_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """``main()`` as is, but the typer command tree is built once per test, not once per call (0.4 s each)."""
    import functools

    import typer.main

    monkeypatch.setattr(typer.main, "get_command", functools.cache(typer.main.get_command))


GLOBAL_ENV = ("WAKEFUL_SERVER", "WAKEFUL_API_KEY", "WAKEFUL_DB_URL", "WAKEFUL_HOME", "WAKEFUL_CONFIG")


class Cli:
    def __init__(self, capsys: pytest.CaptureFixture[str]) -> None:
        self.capsys = capsys

    def __call__(self, *argv: str, code: int = 0) -> Any:
        self.capsys.readouterr()
        saved = {name: os.environ.get(name) for name in GLOBAL_ENV}
        try:
            got = main([*argv, "--json"])
        finally:  # the global options (--server, --key, --db, …) set these for the process: not for later tests
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
        out = self.capsys.readouterr().out
        assert got == code, (argv, got, out)
        if code == 2 and not out.strip():
            return None  # a usage error from the command line parser (on stderr)
        lines = out.strip().splitlines()
        assert len(lines) == 1, out  # exactly one JSON document on stdout
        return json.loads(lines[0])


