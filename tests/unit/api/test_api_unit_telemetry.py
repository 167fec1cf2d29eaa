"""The node's app does no per-request telemetry work (issue 16): FastAPI's own OpenTelemetry hooks, which looked
up the global providers on every request, are off — the node configures no OpenTelemetry provider."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest
from fastapi import FastAPI

from wakeful.api.app import create_app
from wakeful.harness.config import Config
from wakeful.harness.embed import Harness


def test_fastapi_telemetry_hooks_are_off(tmp_path: Path) -> None:
    if "telemetry" not in inspect.signature(FastAPI.__init__).parameters:
        pytest.skip("this FastAPI has no telemetry hooks")
    harness = Harness(Config(data_dir=tmp_path / "data", store_url=f"sqlite:///{tmp_path / 'w.db'}"))
    app = create_app(harness)
    telemetry = app._telemetry  # FastAPI's resolved TelemetryConfig
    assert (telemetry["tracing"], telemetry["metrics"], telemetry["logs"]) == (False, False, False)
    assert app._native_telemetry.enabled() is False  # FastAPI.__call__ then takes the plain path
