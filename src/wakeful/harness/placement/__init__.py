"""Multi-node placement on PostgreSQL (harness.md §19): node rows, agent leases, sweeps, signals, drain, and
the shared rate limiter. SQLite runs one node and does not use this package.
"""

from __future__ import annotations

from wakeful.harness.placement.book import LeaseBook
from wakeful.harness.placement.limiter import PgLimiter
from wakeful.harness.placement.placer import Placement

__all__ = ["LeaseBook", "PgLimiter", "Placement"]
