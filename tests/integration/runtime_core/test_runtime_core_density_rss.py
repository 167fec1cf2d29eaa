"""vm.md §10 sanity test: 10,000 suspended copies of the density guest stay under 150 MB RSS.

A memory ceiling measured in a fresh subprocess, not a timing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[3]
DENSITY = REPO / "src" / "wakeful" / "bench" / "guests" / "density.c"
CHILD = Path(__file__).with_name("rtcore_density_child.py")
CEILING = 150_000_000
COUNT = 10_000


def test_10000_suspended_density_guests_stay_under_150_mb(compile_c: Any, tmp_path: Path) -> None:
    elf = tmp_path / "density.o"
    elf.write_bytes(compile_c(DENSITY.read_text()))
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    proc = subprocess.run([sys.executable, str(CHILD), str(elf), str(COUNT)], capture_output=True, text=True,
                          env=env, timeout=240)
    assert proc.returncode == 0, proc.stderr[-4000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["waits"] == {"running/event": COUNT}, result
    assert result["acks"] == 50
    assert result["gc_freezes"] == 1
    assert result["rss"] < CEILING, f"RSS {result['rss']:,} bytes for {COUNT} objects (baseline {result['baseline']:,})"
