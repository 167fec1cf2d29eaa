"""interfaces.md §9 (CLI): every event command has --help and refuses bad usage with exit code 2."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from wakeful.cli.main import app

COMMANDS = [["loop", "webhook"], ["loop", "events"], ["loop", "retry"], ["loop", "discard"], ["loop", "send"],
            ["loop", "tail"], ["session", "watch"]]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c))
def test_help(command: list[str]) -> None:
    result = CliRunner().invoke(app, [*command, "--help"])
    assert result.exit_code == 0 and "Usage" in result.output and "--json" in result.output


@pytest.mark.parametrize("args", [["loop", "webhook"], ["loop", "send", "lp_x"], ["loop", "events", "--limit"],
                                  ["session", "watch"]])
def test_usage_errors_exit_2(args: list[str]) -> None:
    assert CliRunner().invoke(app, args).exit_code == 2
