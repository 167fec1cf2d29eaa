"""`--distinct structure` in-process at small N (benchmarks.md §1.2, §1.4): one shape per object, every ack."""

from __future__ import annotations

import asyncio

import pytest

from wakeful.bench.inproc import InprocPlan, run_inproc
from wakeful.bench.variants import structure_variant

pytestmark = pytest.mark.integration


def test_structure_mode_translates_one_shape_per_object() -> None:
    plan = InprocPlan(variant=structure_variant, count=30, distinct="structure", samples=10, soak_seconds=0)
    run = asyncio.run(run_inproc(plan))
    assert run["acks"] == 30 and run["failures"] == []
    assert run["shapes"]["misses"] >= 30  # warm-up objects are distinct shapes too
    assert run["shapes"]["translate_ms_per_object"] > 0
