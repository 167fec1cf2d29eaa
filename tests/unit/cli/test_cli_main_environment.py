"""`main()` called in process (a test, an embedding program) leaves the caller's environment as it found it.

The global options reach the commands through the environment (interfaces.md §7); before this, an in-process
``main(["--db", …])`` left ``WAKEFUL_DB_URL`` set for the rest of the process, and a later child started with
``os.environ`` (the MCP stdio flow in the full CI run) opened another test's store: "agent … not found".
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from wakeful.cli.main import main

KEYS = ("WAKEFUL_DB_URL", "WAKEFUL_HOME", "WAKEFUL_CONFIG", "WAKEFUL_SERVER", "WAKEFUL_API_KEY")


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in KEYS:
        monkeypatch.delenv(key, raising=False)


def test_global_options_do_not_outlive_the_call(clean_env: None, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "wakeful.toml"
    config.write_text("")
    code = main(["--db", f"sqlite:///{tmp_path / 'w.db'}", "--data-dir", str(tmp_path / "data"),
                 "--config", str(config), "--server", "", "--key", "k", "version"])
    assert code == 0, capsys.readouterr()
    assert {key: os.environ.get(key) for key in KEYS} == dict.fromkeys(KEYS)


def test_a_value_the_caller_had_comes_back(monkeypatch: pytest.MonkeyPatch, clean_env: None, tmp_path: Path) -> None:
    monkeypatch.setenv("WAKEFUL_DB_URL", "sqlite:///caller.db")
    assert main(["--db", f"sqlite:///{tmp_path / 'w.db'}", "version"]) == 0
    assert os.environ["WAKEFUL_DB_URL"] == "sqlite:///caller.db"


def test_a_failing_command_restores_it_too(clean_env: None, tmp_path: Path) -> None:
    code = main(["--data-dir", str(tmp_path / "d"), "build", "--check", str(tmp_path / "missing.o")])
    assert code != 0
    assert os.environ.get("WAKEFUL_HOME") is None

