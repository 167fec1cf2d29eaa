"""``wakeful decide --state FILE --questions FILE`` (interfaces.md §4.2): local mode from the ``decide.*`` settings
against a real loopback provider, remote mode through ``POST G/decide`` with a group key; ``--json`` prints one
document; exit 0 answered, 1 refused or failed, 2 an invalid request, 3 unreachable."""

from __future__ import annotations

import asyncio
import json
import socket
from pathlib import Path
from typing import Any

import pytest
from decide_provider_server import serving

from wakeful.cli.main import main

QUESTIONS = {
    "urgent": {"type": "noul", "instructions": "Does this need action today?"},
    "topic": {"type": "choice", "instructions": "What is it about?",
              "criteria": {"billing": "money", "outage": "a service is down"}},
}


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    state = tmp_path / "mail.txt"
    state.write_text("From: ops\nThe production database is down.\n")  # plain text: the state is a string
    questions = tmp_path / "questions.json"
    questions.write_text(json.dumps(QUESTIONS))
    return state, questions


def _provider_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, url: str) -> None:
    monkeypatch.setenv("WAKEFUL_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("WAKEFUL_SERVER", raising=False)
    monkeypatch.delenv("WAKEFUL_CONFIG", raising=False)
    for key, value in (("PROVIDER", "openai"), ("ENDPOINT", url), ("MODEL", "m-1")):
        monkeypatch.setenv(f"WAKEFUL_DECIDE__{key}", value)


def test_local_mode(tmp_path: Path, files: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch,
                    capsys: pytest.CaptureFixture[str]) -> None:
    state, questions = files
    assert main(["decide", "--help"]) == 0 and "--questions" in capsys.readouterr().out
    with serving("openai") as fake:
        _provider_env(monkeypatch, tmp_path, fake.url)
        assert main(["decide", "--state", str(state), "--questions", str(questions), "--json"]) == 0
        answer = json.loads(capsys.readouterr().out)
        assert answer["answers"]["urgent"] == {"type": "noul", "probability_bp": 8300}
        assert answer["answers"]["topic"]["choice"] == "billing"
        sent = json.loads(fake.seen[0][2]["messages"][1]["content"])
        assert sent == {"state": state.read_text(), "questions": QUESTIONS}  # the text became the state string
        assert main(["decide", "--state", str(state), "--questions", str(questions)]) == 0
        people = capsys.readouterr().out
        assert "urgent noul 83.00%" in people and "topic choice billing (confidence 90.00%)" in people
        questions.write_text(json.dumps({"bad key": QUESTIONS["urgent"]}))
        assert main(["decide", "--state", str(state), "--questions", str(questions), "--json"]) == 2
        refused = json.loads(capsys.readouterr().out)
        assert refused["error"]["code"] == "invalid_request" and refused["error"]["field"] == "questions.bad key"
        questions.write_text("{not json")
        assert main(["decide", "--state", str(state), "--questions", str(questions)]) == 2
        assert len(fake.seen) == 2  # neither bad request reached the provider
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}/v1"
    questions.write_text(json.dumps(QUESTIONS))
    monkeypatch.setenv("WAKEFUL_DECIDE__ENDPOINT", dead)
    assert main(["decide", "--state", str(state), "--questions", str(questions), "--json"]) == 3
    assert json.loads(capsys.readouterr().out)["error"]["code"] == "unavailable"
    monkeypatch.delenv("WAKEFUL_DECIDE__PROVIDER")
    assert main(["decide", "--state", str(state), "--questions", str(questions), "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["error"]["code"] == "not_configured"


async def test_remote_mode(harness_runner: Any, tmp_path: Path, files: tuple[Path, Path],
                           monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from support.mcp_flow import fake_provider, live_node, tenant

    state, questions = files
    questions.write_text(json.dumps({"urgent": QUESTIONS["urgent"]}))  # this fake answers noul questions only
    monkeypatch.delenv("WAKEFUL_API_KEY", raising=False)
    with fake_provider() as provider:
        async with live_node(tmp_path / "served", provider.settings) as live:
            t = await tenant(live.harness)
            _, group_key = await live.harness.create_key("group", group_id=t.group_id)
            args = ["decide", "--state", str(state), "--questions", str(questions), "--server", live.url, "--json"]
            assert await asyncio.to_thread(main, [*args, "--key", group_key]) == 0
            answer = json.loads(capsys.readouterr().out)
            assert answer == {"model": "fake-1", "answers": {"urgent": {"type": "noul", "probability_bp": 9200}}}
            assert await asyncio.to_thread(main, [*args, "--key", t.agent_key]) == 1  # the route takes a group key
            assert json.loads(capsys.readouterr().out)["error"] == "forbidden"
            assert await asyncio.to_thread(main, args) == 2  # no key at all
            assert len(provider.requests) == 1
