"""Handle memory accounting against a real process's RSS (issue 14, "Real memory accounting").

A fresh subprocess fills handles and reports how far its RSS grew next to what the accounting charged
(rtcore_memory_child.py). Both directions matter: below RSS lets guests exceed the guards unseen, far
above it refuses honest guests early. Samples are tens of MiB so allocator noise (a few hundred KiB) is
swamped; RSS is a count of pages, so the figures do not depend on machine load.
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
FILLER = REPO / "tests" / "support" / "guests" / "handle_filler.c"
CHILD = Path(__file__).with_name("rtcore_memory_child.py")
OBJECTS = 4  # 4 x 16 MiB object guards: ~64 MiB of handles


def _child(*args: str) -> Any:
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    proc = subprocess.run([sys.executable, str(CHILD), *args], capture_output=True, text=True, env=env,
                          timeout=240)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_guests_filling_handles_grow_rss_within_2x_of_the_accounting(compile_c: Any, tmp_path: Path) -> None:
    elf = tmp_path / "handle_filler.o"
    elf.write_bytes(compile_c(FILLER.read_text(), name="handle_filler.c"))
    result = _child("guest", str(elf), str(OBJECTS))
    assert len(result["logs"]) == 1 and result["logs"][0].endswith(" status -2"), result  # every guest stopped
    assert result["charged"] > OBJECTS * 15 * (1 << 20), result
    ratio = result["rss_growth"] / result["charged"]
    print(f"RSS growth {result['rss_growth']:,} B / charged {result['charged']:,} B = {ratio:.3f}")
    assert 0.5 <= ratio <= 2.0, result


def test_every_value_shape_is_charged_near_its_rss() -> None:
    """The estimator's constants per shape: never under half the RSS growth, never over 2.5x of it (the
    over-count comes from parts the interpreter shares: memoized keys, cached one-character strings)."""
    result = _child("shapes", "300")
    ratios = {name: r["rss_growth"] / r["charged"] for name, r in result.items()}
    print("\n".join(f"{name:30s} rss/charged {ratio:.2f}" for name, ratio in ratios.items()))
    assert all(0.4 <= ratio <= 2.0 for ratio in ratios.values()), ratios
