"""issue 19: CLI conventions — `wakeful next --help` shows its options (one command, not a group), shell
completion is offered, a malformed argument is `invalid_request` as on HTTP, and `loop create` shows examples."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from wakeful.cli.main import main


def test_next_is_one_command_with_its_options(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["next", "--help"]) == 0
    text = capsys.readouterr().out
    assert "Usage: wakeful next [OPTIONS]\n" in text and "COMMAND [ARGS]" not in text
    assert "--agent" in text and "--claim" in text and "wakeful next --agent AGT" in text


def test_shell_completion_is_offered(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    assert "--install-completion" in capsys.readouterr().out
    env = {**os.environ, "_WAKEFUL_COMPLETE": "complete_bash", "COMP_WORDS": "wakeful lo", "COMP_CWORD": "1"}
    done = subprocess.run([sys.executable, "-c", "import sys; from wakeful.cli.main import main; sys.argv[0] = "
                           "'wakeful'; sys.exit(main())"], env=env, capture_output=True, text=True, timeout=60)
    assert done.stdout.split() == ["loop"], done.stderr


def test_usage_error_code_is_lower_case(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--json", "run", "/nonexistent/nope.c"]) == 2
    assert json.loads(capsys.readouterr().out)["error"] == "invalid_request"
    assert main(["run", "/nonexistent/nope.c"]) == 2
    assert "error invalid_request:" in capsys.readouterr().err


def test_loop_create_help_has_examples(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["loop", "create", "--help"]) == 0
    text = capsys.readouterr().out
    assert "Examples:\n    wakeful loop create --agent AGT --session SES --source" in text


@pytest.mark.parametrize(("argv", "shown"), [
    (["loop", "list", "--help"], "--state <active|paused|failed>"),
    (["key", "create", "--help"], "--role <admin|group|agent>"),
    (["loop", "events", "--help"], "--status <pending|acked|discarded>"),
    (["work", "add", "--help"], "--class <advancement|user_gate|user_action|monitor|blocker>"),
])
def test_enum_choices_are_listed(argv: list[str], shown: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 0
    assert shown in capsys.readouterr().out


def test_a_value_outside_the_choices_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["loop", "list", "--state", "sleeping"]) == 2
    assert "'sleeping' is not one of 'active', 'paused', 'failed'" in capsys.readouterr().err


def test_every_listed_command_shows_its_examples(capsys: pytest.CaptureFixture[str]) -> None:
    from wakeful.cli.examples import EXAMPLES

    for name, lines in EXAMPLES.items():
        assert main([*name.split(), "--help"]) == 0, name
        text = capsys.readouterr().out
        assert "Examples:\n" in text and f"    {lines[0]}\n" in text, name
