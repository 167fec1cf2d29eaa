"""``wakeful capability list|test`` (docs/decisions-config.md "Configured capabilities") against a real loopback
endpoint: the table and the JSON listing (no secret values), one call as the operator with its result, and the
typed error of a refused call (loopback without ``allow_private``), an unknown name and bad ``--args``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.capability_server import ci_server

from wakeful.cli.main import main


def _home(tmp_path: Path, base: str, monkeypatch: pytest.MonkeyPatch) -> None:
    secret = tmp_path / "token"
    secret.write_text("tok-123\n")
    (tmp_path / "wakeful.toml").write_text(
        f'[capabilities."ci.run.read"]\ndescription = "Read one CI run"\nurl = "{base}/runs/{{run_id}}"\n'
        f'allow_private = true\nheaders = {{ Authorization = {{ file = "{secret}", prefix = "Bearer " }} }}\n'
        f'[capabilities."ci.private"]\ndescription = "No private opt-in"\nurl = "{base}/runs/{{run_id}}"\n')
    monkeypatch.setenv("WAKEFUL_HOME", str(tmp_path))
    monkeypatch.delenv("WAKEFUL_CONFIG", raising=False)


def test_list_shows_the_declared_capabilities(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    _home(tmp_path, "http://127.0.0.1:1", monkeypatch)
    assert main(["capability", "list", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [c["name"] for c in doc["capabilities"]] == ["ci.run.read", "ci.private"]
    first = doc["capabilities"][0]
    assert (first["arguments"], first["read_only"], first["allow_private"]) == (["run_id"], True, True)
    assert first["headers"] == {"Authorization": f"file {tmp_path / 'token'}"}  # where from, never the value
    monkeypatch.setenv("COLUMNS", "200")  # one row per capability
    assert main(["capability", "list"]) == 0
    table = capsys.readouterr().out
    assert "ci.run.read" in table and "Read one CI run" in table and "tok-123" not in table


def test_test_makes_one_call_as_the_operator(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    with ci_server() as ci:
        _home(tmp_path, ci.base, monkeypatch)
        assert main(["capability", "test", "ci.run.read", "--args", '{"run_id": "a b"}', "--json"]) == 0
        assert json.loads(capsys.readouterr().out) == {
            "result": {"status": 200, "body": {"path": "/runs/a%20b", "method": "GET"}}}
        (seen,) = ci.seen
        assert seen.headers["authorization"] == "Bearer tok-123"
        assert seen.headers["x-wakeful-principal"] == "operator" and "x-wakeful-loop" not in seen.headers
        assert main(["capability", "test", "ci.run.read", "--args", '{"run_id": 5}']) == 0
        assert "status 200" in capsys.readouterr().out
        # without allow_private the node's egress policy refuses loopback: a typed error, nothing sent
        assert main(["capability", "test", "ci.private", "--args", '{"run_id": 1}', "--json"]) == 1
        error = json.loads(capsys.readouterr().out)["error"]
        assert error["code"] == "tool_failed" and error["message"].startswith("blocked_destination")
        assert main(["capability", "test", "ci.run.read", "--args", "{}", "--json"]) == 1
        assert json.loads(capsys.readouterr().out)["error"]["code"] == "invalid_arguments"
        assert len(ci.seen) == 2


def test_test_refuses_an_unknown_name_and_bad_args(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    _home(tmp_path, "http://127.0.0.1:1", monkeypatch)
    assert main(["capability", "test", "ci.nope"]) == 2
    assert "no capability 'ci.nope'" in capsys.readouterr().err
    assert main(["capability", "test", "ci.run.read", "--args", "[1]"]) == 2
    assert main(["capability", "test", "ci.run.read", "--args", "{bad"]) == 2


def test_list_in_a_subprocess_and_a_bad_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "wakeful.toml").write_text('[capabilities."ci.x"]\ndescription = "d"\nurl = "https://e.com/"\n'
                                           "colour = 1\n")
    env = {**os.environ, "WAKEFUL_HOME": str(tmp_path)}
    env.pop("WAKEFUL_CONFIG", None)
    proc = subprocess.run([sys.executable, "-m", "wakeful.cli.main", "capability", "list", "--json"], env=env,
                          capture_output=True, timeout=60, text=True)
    assert proc.returncode == 1
    doc = json.loads(proc.stdout)
    assert doc["error"] == "invalid_request" and doc["field"] == 'capabilities."ci.x".colour'
