"""The control CLI in process for tests: ``Cli`` runs ``wakeful … --json`` through ``main()`` and parses its one
JSON document; ``built_once`` (autouse where imported) builds the typer command tree once per session."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

from wakeful.cli.main import main

_built: dict[int, Any] = {}


@pytest.fixture(autouse=True)
def built_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """``main()`` as is, but the typer command tree is built once per session, not once per call (0.4 s each):
    the tree is the same for every call (options read the environment when a command runs, not when the tree is
    built). Each test still gets the real ``get_command`` back afterwards."""
    import typer.main

    real = typer.main.get_command

    def get_command(app: Any) -> Any:
        key = id(app)
        if key not in _built or _built[key][0] is not app:
            _built[key] = (app, real(app))
        return _built[key][1]

    monkeypatch.setattr(typer.main, "get_command", get_command)


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


