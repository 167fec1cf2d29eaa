"""``PgLimiter``: the rate limits of harness.md §14 shared by every node through ``rate_bucket`` rows (§2.9).

One atomic ``UPDATE … RETURNING`` per check: it refills by the elapsed store-clock time (negative elapsed counts as
zero, so a clock stepping back never refills twice) and takes a token when one is there. Any failure of the
store is ``StoreUnavailable``: the limiter fails closed.
"""

from __future__ import annotations

import math

import sqlalchemy as sa

from wakeful.harness.errors import HarnessError, StoreUnavailable
from wakeful.harness.store import schema
from wakeful.harness.store.core import Store

__all__ = ["PgLimiter"]

R = schema.rate_bucket


class PgLimiter:
    """``await take(bucket, capacity, refill_per_s)`` → None when a token was taken, else seconds until one is
    available (the ``Limiter`` protocol of ``wakeful.harness.ratelimit``)."""

    def __init__(self, store: Store) -> None:
        self.store = store

    async def take(self, bucket: str, capacity: float, refill_per_s: float) -> float | None:
        if capacity < 1 or refill_per_s <= 0:
            raise ValueError("a bucket needs capacity >= 1 and a positive refill rate")
        try:
            async with self.store.tx() as tx:
                now = await tx.now_ms()
                level = await self._take(tx, bucket, float(capacity), float(refill_per_s), now)
                if level is None:  # first use of this bucket: create it full, then take
                    await tx.insert_if_absent(R, {"key": bucket, "tokens": float(capacity), "refreshed_ms": now})
                    level = await self._take(tx, bucket, float(capacity), float(refill_per_s), now)
        except HarnessError:
            raise
        except Exception as exc:  # fail closed: anything but a clear answer is "unavailable"
            raise StoreUnavailable(f"rate limiter unavailable: {type(exc).__name__}") from exc
        if level is None:
            raise StoreUnavailable(f"rate bucket {bucket!r} vanished during the check")
        if level >= 1.0:
            return None
        return (1.0 - level) / refill_per_s

    @staticmethod
    async def _take(tx: object, bucket: str, capacity: float, rate: float, now: int) -> float | None:
        """One statement: lock the row, refill, take if a whole token is there; returns the refilled level."""
        from wakeful.harness.store.core import Tx

        assert isinstance(tx, Tx)
        cur = sa.select(
            R.c.key,
            sa.func.least(
                sa.literal(capacity),
                R.c.tokens + sa.func.greatest(0, sa.literal(now) - R.c.refreshed_ms) * sa.literal(rate / 1000.0),
            ).label("level"),
        ).where(R.c.key == bucket).with_for_update().subquery("cur")
        stmt = R.update().where(R.c.key == cur.c.key).values(
            tokens=sa.case((cur.c.level >= 1.0, cur.c.level - 1.0), else_=cur.c.level),
            refreshed_ms=sa.func.greatest(R.c.refreshed_ms, now),
        ).returning(cur.c.level)
        value = (await tx.execute(stmt)).scalar_one_or_none()
        return None if value is None else float(value)


def retry_after_s(wait_s: float) -> int:
    """§14: seconds until one token is available, rounded up, at least 1."""
    return max(1, math.ceil(wait_s))
