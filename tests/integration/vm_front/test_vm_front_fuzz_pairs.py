"""S8, S11, S12 (vm.md §9, §9.2): a fixed-seed run of the VM front fuzz harness (tests/support/vm_fuzz.py).

Mutated clang-built and assembled objects (hostile symbol and section names, section headers, overlapping
and aliased file spans) are loaded in related sequences with the caches warm — the same size and layout
with bytes changed inside section spans, the verification cache evicted in between — and every load is
compared with a fresh one. Every failing case is saved to tests/corpus/vm_fuzz/ (replayed by
tests/unit/vm_front/test_vm_front_fuzz_corpus.py). ``scripts/fuzz.sh`` runs the same cases for longer
(atheris when installed, else hypothesis).
"""

from __future__ import annotations

import os
import random

import pytest
from support import vm_fuzz

pytestmark = pytest.mark.integration

SEED = int(os.environ.get("WAKEFUL_FUZZ_PAIRS_SEED", "0x5EC12"), 0)  # fixed; override to explore
CASES = int(os.environ.get("WAKEFUL_FUZZ_PAIRS_COUNT", "1000"))  # about 15 s of CPU


@pytest.fixture(scope="module")
def seeds() -> list[bytes]:
    return vm_fuzz.clang_seeds() + vm_fuzz.asm_seeds()


def test_seeds_hold_every_oracle(seeds: list[bytes]) -> None:
    """The unmutated seeds load, run alike warm and fresh, and leave no name in generated source."""
    for seed in seeds:
        vm_fuzz.clear_all()
        assert vm_fuzz.check_load(seed) == []
    vm_fuzz.clear_all()


def test_fixed_seed_sequences_hold_s8_s11_s12(seeds: list[bytes]) -> None:
    rng = random.Random(SEED)
    vm_fuzz.clear_all()
    tally = vm_fuzz.fuzz((rng.randbytes(256) for _ in range(CASES)), seeds, vm_fuzz.Tally())
    vm_fuzz.clear_all()
    found = "\n".join(f"{kind}: saved as {path.name}" for kind, path in tally.found.items())
    assert not tally.found, f"{tally.cases} cases, {tally.loads} loads; found:\n{found}"
    # the cases must reach every stage, or the harness is not testing much
    seen = tally.outcomes
    assert tally.loads > 2 * tally.cases and seen["refused"] > tally.cases // 4, seen
    assert seen["loaded"] > tally.loads // 10 and seen["exited"] + seen["faulted"] > 50 and seen["running"] > 50, seen
