"""`wakeful loop webhook|events|retry|discard|send|tail` and `wakeful session watch` (interfaces.md §4.2) as real
subprocesses in local mode on the test store, next to a running node that acts on what they write."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support.ingress_harness import counter_loop, event_rows, seen, statuses
from support.loops_harness import started, until

SRC = Path(__file__).resolve().parents[3] / "src"


def _cli(store_url: str, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(SRC), "WAKEFUL_HOME": str(home)}
    return subprocess.run([sys.executable, "-m", "wakeful.cli.main", "--db", store_url, "--json", *args],
                          capture_output=True, text=True, env=env, timeout=60)


def _ok(proc: subprocess.CompletedProcess[str]) -> Any:
    assert proc.returncode == 0, proc.stderr + proc.stdout
    return json.loads(proc.stdout)


def _lines(proc: subprocess.CompletedProcess[str]) -> list[Any]:
    assert proc.returncode == 0, proc.stderr + proc.stdout
    return [json.loads(line) for line in proc.stdout.splitlines()]


async def test_cli_sends_lists_retries_discards_and_follows(
    harness_runner: Any, store_clock: Any, tmp_path: Path, compile_c: Any,
) -> None:
    # SQLite only: each command is a subprocess (slow), and the operations below run on both backends in the
    # other tests of this directory; the CLI adds no backend-specific code
    store_url = f"sqlite:///{tmp_path / 'wakeful.db'}"
    home = tmp_path / "home"
    payload = tmp_path / "payload.json"
    payload.write_text('{"n": 1, "s": "é"}')
    h = await started(store_url, store_clock, tmp_path / "node")
    try:
        _, _, session, loop_id = await counter_loop(h, compile_c)
        made = _ok(_cli(store_url, home, "loop", "webhook", loop_id, "enable"))
        assert made["enabled"] is True and made["url"].startswith("/v1/loop-webhooks/")
        again = _ok(_cli(store_url, home, "loop", "webhook", loop_id, "enable"))
        assert again["url"] is None and again["hint"] == made["url"][-4:]

        sent = _ok(_cli(store_url, home, "loop", "send", loop_id, "--topic", "hold", "--payload", str(payload),
                        "--event-id", "e1"))
        assert sent == {"status": "accepted", "event_id": "e1", "duplicate": False}
        assert [(r.event_id, r.source) for r in await event_rows(h, loop_id)] == [("e1", "operator")]  # §10.5
        dup = _ok(_cli(store_url, home, "loop", "send", loop_id, "--topic", "hold", "--event-id", "e1"))
        assert dup["duplicate"] is True and dup["payload_mismatch"] is True
        await h.tick()  # the running node delivers what the CLI admitted

        async def delivered() -> bool:
            return await seen(h, loop_id) == ["e1"]

        await until(delivered)
        listed = _ok(_cli(store_url, home, "loop", "events", loop_id, "--payloads"))
        assert [(e["event_id"], e["status"], e["payload"]) for e in listed["events"]] == [
            ("e1", "pending", {"n": 1, "s": "é"})]
        assert listed["pending_count"] == 1

        retried = _ok(_cli(store_url, home, "loop", "retry", loop_id, "e1"))
        assert retried["retried"] == ["e1"]
        await h.tick()  # the node sees its object retired by the retry and reloads the Loop
        assert h.node.resident(loop_id).incarnation == 2

        async def redelivered() -> bool:
            return await seen(h, loop_id) == ["e1", "e1"]

        await until(redelivered)
        assert _ok(_cli(store_url, home, "loop", "discard", loop_id))["discarded"] == ["e1"]
        assert await statuses(h, loop_id) == {"e1": "discarded"}

        await h.send_event(loop_id, "wake", {}, "w1")

        async def woke() -> bool:
            return len(await h.messages(session, kinds=["loop"])) == 1

        await until(woke)
        await h.node.flush_logs()
        tail = _lines(_cli(store_url, home, "loop", "tail", loop_id, "--for", "0"))
        texts = [r["text"] for r in tail if r["type"] == "log"]
        assert "operator: webhook enabled" in texts and any("retry of 1" in t for t in texts)
        assert [r["detail"] for r in tail if r["type"] == "transition"] == ["created"]  # context: last transitions
        watch = _lines(_cli(store_url, home, "session", "watch", session, "--from-start", "--for", "0"))
        assert [(m["kind"], m["content"]) for m in watch] == [("loop", "ev:w1")]
    finally:
        await h.stop()


def test_cli_events_exit_3_when_the_store_is_unreachable(tmp_path: Path) -> None:
    proc = _cli("postgresql://postgres@127.0.0.1:9/none", tmp_path / "home", "loop", "send", "lp_x", "--topic", "t")
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert json.loads(proc.stdout)["error"] == "unavailable"


def test_cli_refusals_in_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Refusals exit 1 with the typed error as the one JSON document (in-process: no subprocess start-up)."""
    from typer.testing import CliRunner

    from wakeful.cli.main import app

    monkeypatch.setenv("WAKEFUL_HOME", str(tmp_path))
    monkeypatch.delenv("WAKEFUL_DB_URL", raising=False)
    bad = tmp_path / "bad.json"
    bad.write_text('{"n": NaN}')
    long_id = "e" * 129
    cases: list[tuple[list[str], str, dict[str, Any]]] = [
        (["loop", "webhook", "lp_00000000000000000000000000", "explode"], "invalid_request", {"field": "action"}),
        (["loop", "send", "lp_00000000000000000000000000", "--topic", "t", "--payload", str(bad)], "invalid_event",
         {"field": "payload"}),
        (["loop", "send", "lp_00000000000000000000000000", "--topic", ""], "invalid_event", {"field": "topic"}),
        (["loop", "send", "lp_00000000000000000000000000", "--topic", "t", "--event-id", long_id], "invalid_event",
         {"field": "event_id"}),
        (["loop", "events", "lp_00000000000000000000000000"], "not_found", {}),
        (["loop", "retry", "lp_00000000000000000000000000"], "not_found", {}),
        (["loop", "discard", "lp_00000000000000000000000000", "e1"], "not_found", {}),
        (["loop", "tail", "lp_00000000000000000000000000", "--for", "0"], "not_found", {}),
        (["session", "watch", "ses_00000000000000000000000000", "--for", "0"], "session_not_found", {}),
    ]
    for args, code, details in cases:
        result = CliRunner().invoke(app, ["--json", *args])
        assert result.exit_code == 1, (args, result.output)
        doc = json.loads(result.stdout)
        assert doc["error"] == code, (args, result.stdout)
        # the harness's details (field, …) reach the JSON document as the HTTP face answers them
        assert {k: doc.get(k) for k in details} == details, (args, result.stdout)
