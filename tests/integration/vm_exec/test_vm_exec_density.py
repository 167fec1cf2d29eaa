"""Per-instance cost of the density guest (vm.md §10, benchmarks.md §1.8): ≤ 8 KiB of VM state per
suspended object, and cheap instantiation of data variants (one shape, no translation)."""

from __future__ import annotations

import gc
import sys
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "unit" / "vm_exec"))

from vmexec_kit import Env  # noqa: E402

from wakeful.vm import load, shape_stats  # noqa: E402

pytestmark = pytest.mark.integration

DENSITY = Path(__file__).resolve().parents[3] / "src" / "wakeful" / "bench" / "guests" / "density.c"
SEED_MARKER = (0x1122334455667788).to_bytes(8, "little")


class QuietEnv(Env):
    def helper(self, name: str) -> Any:
        return lambda *args: 0


def test_suspended_density_guest_costs_under_8_kib(compile_c: Any) -> None:
    # vm.md §10 / benchmarks.md §1.8: ≤ 8 KiB per suspended density-guest object (VM share: memory,
    # generator frames, closure cells). Measured over many instances to average out allocator noise.
    program = load(compile_c(DENSITY.read_text(), name="density.c"), engine="translate")
    env = QuietEnv()
    keep = []
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot()
        for _ in range(300):
            inst = program.instantiate(env)
            kind, _, _ = inst.gen.send(None)
            assert kind == "sf_event_next"
            keep.append(inst)
        after = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    per_instance = sum(s.size_diff for s in after.compare_to(before, "filename")) / len(keep)
    assert per_instance < 8192, per_instance
    for inst in keep:
        inst.gen.close()



def test_data_variants_share_one_shape_and_start(compile_c: Any) -> None:
    elf = compile_c(DENSITY.read_text(), name="density.c")
    assert elf.count(SEED_MARKER) == 1
    env = QuietEnv()
    before = shape_stats()
    keys = set()
    for n in range(200):
        program = load(elf.replace(SEED_MARKER, (n + 1).to_bytes(8, "little")))
        keys.add(program.shape_key)
        inst = program.instantiate(env)
        assert inst.gen.send(None)[0] == "sf_event_next"
        assert int.from_bytes(inst.mem[program.layout.writable : program.layout.writable + 8], "little") == n + 1
        inst.gen.close()
    after = shape_stats()
    assert len(keys) == 1 and after["translated"] - before["translated"] <= 1
