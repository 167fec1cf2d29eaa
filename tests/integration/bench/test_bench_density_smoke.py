"""The CI smoke run of benchmarks.md §1.9, through the real `wakeful` command and a `wakeful runtime` child.

Assertions on correctness only: every ack received, no object failed, the subprocess exited 0, the JSON
validates against the schema. No time or memory figure is asserted.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from wakeful.bench.schema import validate

pytestmark = pytest.mark.integration

SRC = Path(__file__).resolve().parents[3] / "src"
SMOKE = [
    "--count",
    "300",
    "--soak-seconds",
    "0",
    "--builds",
    "3",
    "--skip-cpu",
    "--realistic",
    "20",
    "--json",
    "-",
]


def _wakeful(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(SRC), WAKEFUL_HOME=str(home))
    return subprocess.run(
        [sys.executable, "-m", "wakeful.cli.main", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=240,
    )


@pytest.fixture(scope="module")
def smoke(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    proc = _wakeful("bench", "density", *SMOKE, home=tmp_path_factory.mktemp("home"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc: dict[str, Any] = json.loads(proc.stdout)
    return doc


def test_smoke_document_validates(smoke: dict[str, Any]) -> None:
    validate(smoke)
    assert smoke["options"]["count"] == 300
    assert [r["transport"] for r in smoke["runs"]] == ["inproc", "stdio"]


def test_smoke_every_ack_and_no_failure(smoke: dict[str, Any]) -> None:
    for run in smoke["runs"]:
        assert run["acks"] == run["count"] == 300, run["transport"]
        assert run["failures"] == [], run["transport"]
        assert run["shapes"]["translated"] <= 1  # data mode: one shape for every object


def test_smoke_stdio_child_exited_zero(smoke: dict[str, Any]) -> None:
    stdio = next(r for r in smoke["runs"] if r["transport"] == "stdio")
    assert stdio["init"]["exit_code"] == 0
    assert stdio["control_rtt_ms"] is not None


def test_smoke_compile_and_realistic_sections(smoke: dict[str, Any]) -> None:
    assert smoke["cpu"] is None  # --skip-cpu
    assert smoke["compile"]["builds"] == 3
    assert smoke["realistic"]["count"] == 20
    assert smoke["realistic"]["acks"] == 20 * smoke["realistic"]["events_per_object"]


def test_runtime_alias_refuses_bad_options_with_usage_exit(tmp_path: Path) -> None:
    proc = _wakeful("bench", "runtime", "--distinct", "shape", home=tmp_path)
    assert proc.returncode == 2
    assert "--distinct must be one of" in proc.stderr
    assert "Traceback" not in proc.stderr
