"""The harness's durable store: one SQLAlchemy Core schema on SQLite (default) or PostgreSQL.

``store = await Store.open(url, clock=None)``; ``async with store.tx() as tx:`` runs one transaction; the
repository modules (``groups``, ``agents``, ``sessions``, ``artifacts``, ``loops``, ``events``, ``quota``)
take that ``tx`` as their first argument (harness.md §2, §3, §15).
"""

from __future__ import annotations

from wakeful.harness.store.clock import WallClock
from wakeful.harness.store.core import Store, Tx

__all__ = ["Store", "Tx", "WallClock"]
