"""vm.md §6.1, §9.2: the long loop-free corpus (4,000–8,200-instruction functions, issue 14 reproduction 5)
over more seeds than the unit run; every failing program is saved to tests/corpus/diff_long/."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "unit" / "vm_exec"))

from vmexec_longgen import disagreement, seed_program  # noqa: E402

pytestmark = pytest.mark.integration

SEEDS = range(4, 20)


@pytest.mark.timeout(300)
def test_long_loop_free_programs_agree() -> None:
    failures = [reason for seed in SEEDS if (reason := disagreement(f"long-seed-{seed}", *seed_program(seed)))]
    assert not failures, failures
