"""`--repeat` rounds after the first run in a fresh process (bench/child.py): same run shape, every ack."""

from __future__ import annotations

import pytest

from wakeful.bench.child import run_in_child
from wakeful.bench.schema import validate
from wakeful.bench.variants import BenchError, density_source

pytestmark = pytest.mark.integration


def test_an_inproc_round_in_a_fresh_process(compile_c) -> None:  # type: ignore[no-untyped-def]
    elf = compile_c(density_source())
    request = {"kind": "inproc", "count": 40, "distinct": "data", "samples": 5, "soak_seconds": 0}
    run = run_in_child(request, elf)
    assert run["init"]["process"] == "fresh child"
    assert run["acks"] == 40 and run["failures"] == []
    validate(run, {"type": "object", "required": ["snapshots", "idle_rtt_ms", "shapes"]})


def test_a_broken_guest_is_a_typed_failure() -> None:
    request = {"kind": "inproc", "count": 1, "distinct": "data", "samples": 1, "soak_seconds": 0}
    with pytest.raises(BenchError, match="child failed"):
        run_in_child(request, b"not an elf")
