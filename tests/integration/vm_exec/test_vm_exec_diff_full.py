"""S9 (vm.md §9.2): 20,000 generated programs from a fixed seed agree in the interpreter and the translator.

Registers (every register is spilled to the stack before exit, so memory covers them), r0, full memory,
fault code and address, and the sequence of helper calls and suspensions must match. A disagreement or a
crash saves the program to tests/corpus/diff/ (replayed by tests/unit/vm_exec on every run).
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "unit" / "vm_exec"))

from vmexec_kit import corpus_settings, diff_seed  # noqa: E402

pytestmark = pytest.mark.integration


@pytest.mark.timeout(600)
def test_twenty_thousand_programs_agree() -> None:
    settings = corpus_settings()
    base, count = settings["full_base"], settings["full_count"]
    assert count >= 20_000
    failures: list[str] = []
    kinds: Counter[str] = Counter()
    for seed in range(base, base + count):
        a, _, reason = diff_seed(seed, settings)
        if reason:
            failures.append(reason)
            if len(failures) >= 20:
                break
            continue
        kinds["fault" if a.fault else "exit"] += 1
        kinds["preempted"] += a.preempts > 0
        kinds["helpers"] += bool(a.events)
    assert not failures, failures
    # the run exercised what it claims: exits, a minority of faults, preemptions and helper calls
    assert kinds["exit"] > 0.8 * count
    assert 0.01 * count < kinds["fault"] < 0.15 * count
    assert kinds["preempted"] > 0.05 * count and kinds["helpers"] > 0.2 * count
