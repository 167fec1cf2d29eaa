"""The code stays ruff- and mypy-clean (strict on src/): the suite fails when either finds something."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def _run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *argv], cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_ruff_is_clean() -> None:
    proc = _run("ruff", "check", "src", "tests")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_mypy_strict_is_clean() -> None:
    proc = _run("mypy")
    assert proc.returncode == 0, proc.stdout[-5000:] + proc.stderr[-2000:]
