"""Smoke run of the in-process stdio server CPU measure (docs/performance.md): every delivered event of each
fan-out makes exactly one host call that its reply answers; no assertion on any time figure."""

from __future__ import annotations

import json

import pytest

from wakeful.bench.server_cpu import main, measure_server_cpu


def test_fan_outs_complete_and_report_cpu_per_event() -> None:
    result = measure_server_cpu(60, 2)  # raises if a round's host calls do not match its events
    assert result["count"] == 60 and len(result["seconds"]) == 2
    assert result["best_s"] == min(result["seconds"]) and result["us_per_event"] > 0


def test_command_prints_one_json_document(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["30", "1"]) == 0
    assert json.loads(capsys.readouterr().out)["count"] == 30
