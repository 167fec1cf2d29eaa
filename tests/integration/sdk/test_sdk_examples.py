"""Every guide example builds and runs through the real `wakeful run` against its replies file, in both
engines with identical outcomes, and shows the behaviour it is there to teach (sdk.md §15)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from wakeful import sdk

pytestmark = pytest.mark.integration

SRC = Path(__file__).resolve().parents[3] / "src"
ENGINES = ("translate", "interp")
# seconds before `wakeful run` stops a Loop that is still waiting; generous for a loaded 2-core CI
TIMEOUT = {"heartbeat": 15.0, "script_aggregate": 15.0}
DEFAULT_TIMEOUT = 5.0

Record = dict[str, Any]


def _run(home: Path, folder: Path, name: str, engine: str, extra: list[str]) -> tuple[int, list[Record]]:
    env = {**os.environ, "PYTHONPATH": str(SRC), "WAKEFUL_HOME": str(home)}
    timeout = TIMEOUT.get(name, DEFAULT_TIMEOUT)
    argv = [
        sys.executable, "-m", "wakeful.cli.main", "run", str(folder / f"{name}.c"),
        "--host-replies", str(folder / f"{name}.replies.json"), "--engine", engine,
        "--timeout", str(timeout), "--json", *extra,
    ]  # fmt: skip
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=timeout + 60)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.returncode, [json.loads(line) for line in proc.stdout.splitlines()]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], tuple[int, list[Record]]]:
    """Every example in both engines, run concurrently, from a directory written like `wakeful sdk examples`."""
    home = tmp_path_factory.mktemp("home")
    folder = tmp_path_factory.mktemp("examples")
    sdk.write_examples(folder)
    jobs = [(ex.name, engine, ex.run_args()) for ex in sdk.examples() for engine in ENGINES]
    with ThreadPoolExecutor(max_workers=4) as pool:
        futures = {(n, e): pool.submit(_run, home, folder, n, e, args) for n, e, args in jobs}
        return {key: future.result() for key, future in futures.items()}


def _story(records: list[Record]) -> list[Record]:
    """What must agree between engines: logs, host calls and the final outcome, in order; timing-dependent
    repetitions (the same poll answered the same way) collapse into one."""
    story: list[Record] = []
    for record in records:
        if record["type"] == "state":
            continue
        item = {k: v for k, v in record.items() if k not in ("t_ms", "guest_ms", "instructions")}
        if not story or story[-1] != item:
            story.append(item)
    return story


def _calls(records: list[Record], capability: str) -> list[Any]:
    return [r["arguments"] for r in records if r["type"] == "host_call" and r["capability"] == capability]


def _logs(records: list[Record]) -> list[str]:
    return [r["message"] for r in records if r["type"] == "log"]


def _final(records: list[Record]) -> Record:
    assert records and records[-1]["type"] == "final", records
    return records[-1]


# ---- what each example must show ----


def _heartbeat(records: list[Record]) -> None:
    assert _logs(records) == ["heartbeat 1", "heartbeat 2", "heartbeat 3"]
    assert _calls(records, "loop.state.put") == [{"state": {"beats": n}} for n in (1, 2, 3)]
    assert _final(records)["state"] == "exited" and _final(records)["exit_code"] == 0  # max_beats ended it


def _threshold_alert(records: list[Record]) -> None:
    notes = _calls(records, "agent.notify")
    assert [n["dedup_key"] for n in notes] == ["above:e2", "above:e5"]  # one per crossing, keyed by event
    assert notes[0]["text"] == "cpu is 95, above 90"
    assert _calls(records, "loop.ack") == [{"event_id": f"e{i}"} for i in range(1, 6)]
    order = [(r["capability"], r["arguments"]) for r in records if r["type"] == "host_call"]
    assert order.index(("loop.ack", {"event_id": "e2"})) > order.index(("agent.notify", notes[0]))  # ack last
    assert _calls(records, "loop.state.put") == [{"state": {"above": v}} for v in (True, False, True)]


def _poll_changes(records: list[Record]) -> None:
    assert len(_calls(records, "service.status")) >= 4
    assert _calls(records, "agent.notify") == [{"text": "changed:v2", "dedup_key": "changed:v2"}]
    states = [c["state"]["last_seen"] for c in _calls(records, "loop.state.put")]
    assert states == ["v1", "v2"]  # baseline, then the change
    assert "service.status failed; backing off" in _logs(records)


def _batch_summary(records: list[Record]) -> None:
    assert _calls(records, "loop.ack") == [{"event_id": f"e{i}"} for i in range(1, 5)]
    assert _calls(records, "agent.notify") == [
        {"text": "4 jobs finished in the last window, 1 failed", "dedup_key": "summary:e1"}
    ]
    puts = [c["state"] for c in _calls(records, "loop.state.put")]
    assert puts[3] == {"ok": 3, "failed": 1, "first_id": "e1"} and puts[-1] == {
        "ok": 0,
        "failed": 0,
        "first_id": "",
    }
    order = [(r["capability"], r["arguments"]) for r in records if r["type"] == "host_call"]
    for i in range(1, 5):  # each event: checkpoint first, then ack
        assert order[order.index(("loop.ack", {"event_id": f"e{i}"})) - 1][0] == "loop.state.put"


def _classify_decide(records: list[Record]) -> None:
    assert len(_calls(records, "decide")) == 4  # three messages, one rate_limited retry
    assert _calls(records, "decide")[0]["state"] == "Production database is down"
    assert [n["dedup_key"] for n in _calls(records, "agent.notify")] == ["important:e1", "important:e3"]
    assert _calls(records, "loop.ack") == [{"event_id": f"e{i}"} for i in range(1, 4)]
    assert "not important" in _logs(records) and "rate_limited" in _logs(records)


def _paged_feed(records: list[Record]) -> None:
    urls = [c["url"] for c in _calls(records, "web.http_request")]
    assert urls[:3] == [f"https://feed.example.com/items?cursor={c}" for c in ("", "c2", "c2")]
    assert all(u.endswith("cursor=c3") for u in urls[3:]) and len(urls) >= 4
    assert [n["dedup_key"] for n in _calls(records, "agent.notify")] == ["item:a2", "item:b1"]
    assert [c["state"]["cursor"] for c in _calls(records, "loop.state.put")] == ["c2", "c3"]


def _fnv1a_hex(data: bytes) -> str:
    h = 14695981039346656037
    for byte in data:
        h = (h ^ byte) * 1099511628211 % 2**64
    return f"{h:x}"


def _log_watch(records: list[Record]) -> None:
    key = "line:" + _fnv1a_hex(b"api\nupstream timeout after 30s")
    notes = _calls(records, "agent.notify")
    # e2 (ERROR) and e5 (error) wake with the same key; e1 info, e3 "(retrying)", e4 no pattern do not
    assert notes == [{"text": "api: upstream timeout after 30s", "dedup_key": key}] * 2
    assert _calls(records, "loop.ack") == [{"event_id": f"e{i}"} for i in range(1, 6)]
    order = [(r["capability"], r["arguments"]) for r in records if r["type"] == "host_call"]
    assert order.index(("loop.ack", {"event_id": "e5"})) > order.index(("agent.notify", notes[0]), 3)


def _script_aggregate(records: list[Record]) -> None:
    assert [c["args"]["service"] for c in _calls(records, "tool.call")] == ["api", "db", "queue"]
    assert _calls(records, "script.result") == [
        {"value": {"healthy": 1, "degraded": 1, "failed": 1, "worst_latency_ms": 900}}
    ]
    assert _final(records)["state"] == "exited" and _final(records)["exit_code"] == 0


EXPECT: dict[str, Callable[[list[Record]], None]] = {
    "heartbeat": _heartbeat,
    "threshold_alert": _threshold_alert,
    "poll_changes": _poll_changes,
    "batch_summary": _batch_summary,
    "classify_decide": _classify_decide,
    "log_watch": _log_watch,
    "paged_feed": _paged_feed,
    "script_aggregate": _script_aggregate,
}


def test_every_example_has_expectations() -> None:
    assert {ex.name for ex in sdk.examples()} == set(EXPECT)


@pytest.mark.parametrize("name", sorted(EXPECT))
@pytest.mark.parametrize("engine", ENGINES)
def test_example_runs_and_shows_its_behaviour(
    runs: dict[tuple[str, str], Any], name: str, engine: str
) -> None:
    code, records = runs[(name, engine)]
    assert code == 0, records
    end = _final(records)
    assert end["state"] in ("exited", "stopped"), end  # never a fault
    if end["state"] == "stopped":
        assert end["stopped_by"] == "timeout"
    EXPECT[name](records)


@pytest.mark.parametrize("name", sorted(EXPECT))
def test_both_engines_agree(runs: dict[tuple[str, str], Any], name: str) -> None:
    translate, interp = (runs[(name, engine)] for engine in ENGINES)
    assert translate[0] == interp[0]
    assert _story(translate[1]) == _story(interp[1])


def test_readme_command_prints_logs_and_checkpoints(tmp_path: Path) -> None:
    # README.md's first command, with a short --timeout instead of the 30 s default
    folder = SRC / "wakeful" / "sdk" / "examples"
    env = {**os.environ, "PYTHONPATH": str(SRC), "WAKEFUL_HOME": str(tmp_path)}
    proc = subprocess.run(
        [sys.executable, "-m", "wakeful.cli.main", "run", str(folder / "heartbeat.c"),
         "--host-replies", str(folder / "heartbeat.replies.json"), "--timeout", "2.6"],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "heartbeat 1" in proc.stdout and "heartbeat 2" in proc.stdout
    assert 'loop.state.put {"state":{"beats":1}}' in proc.stdout
    assert "stopped by timeout" in proc.stdout
