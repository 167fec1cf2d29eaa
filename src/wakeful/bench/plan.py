"""What both transports of the density benchmark share (benchmarks.md §1.3): the procedure's counts and time
limits, the capability the guests use, and the plan of one run."""

from __future__ import annotations

from dataclasses import dataclass

from wakeful.bench.variants import Variant

__all__ = ["CAPS", "FANOUT_S", "QUIET_S", "SETTLE_S", "WARMUP", "Plan"]

WARMUP = 100  # §1.3 step 2
CAPS = [{"name": "benchmark.ack"}]
SETTLE_S = 30.0  # §1.3 step 4
FANOUT_S = 60.0  # §1.3 step 6
QUIET_S = 0.3  # > the 100 ms quiet time after a load burst that triggers the runtime's gc (vm.md §7)


@dataclass(frozen=True, kw_only=True)
class Plan:
    """What one run needs: the variants, the count and the §1.1 options that apply."""

    variant: Variant
    count: int
    distinct: str
    samples: int
    soak_seconds: float
