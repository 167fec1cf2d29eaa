"""``PgLimiter``: the rate limits of harness.md §14 shared by every node through ``rate_bucket`` rows (§2.9).

One atomic ``UPDATE … RETURNING`` per check: it refills by the elapsed store-clock time (negative elapsed counts as
zero, so a clock stepping back never refills twice) and takes a token when one is there. Any failure of the
store is ``StoreUnavailable``: the limiter fails closed.

The checks of one bucket that arrive while that bucket's previous check is in flight on this node are one check
of the next round: a single ``UPDATE`` takes up to ``n`` tokens (as many as the refilled level holds) and the
callers are answered in arrival order, exactly as ``n`` checks one after the other at the same store-clock
instant would be. So every node holds a bucket's row lock at most once at a time, instead of once per request:
``ingress:global`` is one row every event of the cluster passes, and with a transaction per request the
requests of two loaded nodes queued on that row lock past ``statement_timeout`` (``503 unavailable`` on ingest).

``take_in(tx, checks)`` (issue 16) answers the checks of a whole batch of admissions inside the admission's own
group-commit transaction: one ``UPDATE`` for all their buckets (per bucket, as the rounds above: up to ``n`` tokens
for its ``n`` checks, answered in arrival order), so a batch of admitted events costs no transaction of its own
for its rate limits, and a token is taken exactly when the batch that admits (or refuses) its event commits.
"""

from __future__ import annotations

import asyncio
import json
import math
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql as pg_dialect

from wakeful.harness.errors import HarnessError, StoreUnavailable
from wakeful.harness.store import schema
from wakeful.harness.store.core import Store, Tx

__all__ = ["PgLimiter"]

R = schema.rate_bucket


@dataclass
class _Check:
    capacity: float
    rate: float
    answer: asyncio.Future[float | None] = field(repr=False)


@dataclass
class _Bucket:
    """One bucket's checks on this node: those waiting for the next round, and the task running the rounds."""

    waiting: list[_Check] = field(default_factory=list)
    task: asyncio.Task[None] | None = None


class PgLimiter:
    """``await take(bucket, capacity, refill_per_s)`` → None when a token was taken, else seconds until one is
    available (the ``Limiter`` protocol of ``wakeful.harness.ratelimit``)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.rounds = 0  # checks made in the store (each answering the takes of one bucket waiting together)
        self._buckets: dict[str, _Bucket] = {}
        self._loop: asyncio.AbstractEventLoop | None = None

    async def take(self, bucket: str, capacity: float, refill_per_s: float) -> float | None:
        if capacity < 1 or refill_per_s <= 0:
            raise ValueError("a bucket needs capacity >= 1 and a positive refill rate")
        loop = asyncio.get_running_loop()
        if self._loop is not loop:  # (a limiter used from another event loop starts afresh)
            self._buckets, self._loop = {}, loop
        state = self._buckets.setdefault(bucket, _Bucket())
        check = _Check(float(capacity), float(refill_per_s), loop.create_future())
        state.waiting.append(check)
        if state.task is None or state.task.done():
            state.task = loop.create_task(self._rounds(bucket, state))
        return await check.answer

    async def take_in(self, tx: Tx, checks: list[tuple[str, float, float]]) -> list[float | None]:
        """``(bucket, capacity, refill_per_s)`` checks answered inside ``tx`` (the caller's transaction), in order,
        as ``take`` answers each: None when a token was taken, else the seconds until one is available. The
        checks of one bucket share one shape (the first check's; a limit changed between two requests of one
        batch applies from the next batch). Store failures propagate (the caller's transaction fails)."""
        if not checks:
            return []
        shapes: dict[str, tuple[float, float]] = {}
        wanted: dict[str, int] = {}
        for bucket, capacity, rate in checks:
            if capacity < 1 or rate <= 0:
                raise ValueError("a bucket needs capacity >= 1 and a positive refill rate")
            shapes.setdefault(bucket, (float(capacity), float(rate)))
            wanted[bucket] = wanted.get(bucket, 0) + 1
        now = await tx.now_ms()
        levels = await self._take_many(tx, shapes, wanted, now)
        missing = sorted(set(shapes) - set(levels))
        if missing:  # first use of these buckets: create them full, then take
            dialect_mod: Any = pg_dialect
            await tx.execute(dialect_mod.insert(R).values(
                [{"key": b, "tokens": shapes[b][0], "refreshed_ms": now} for b in missing]).on_conflict_do_nothing())
            levels.update(await self._take_many(tx, {b: shapes[b] for b in missing}, wanted, now))
        if set(shapes) - set(levels):
            raise StoreUnavailable("a rate bucket vanished during the check")
        self.rounds += len(shapes)
        answers: list[float | None] = []
        served: dict[str, int] = {}
        for bucket, _capacity, _rate in checks:
            n = served.get(bucket, 0)
            served[bucket] = n + 1
            level, rate = levels[bucket], shapes[bucket][1]
            granted = _granted(level, wanted[bucket])
            answers.append(None if n < granted else (1.0 - (level - granted)) / rate)
        return answers

    @staticmethod
    async def _take_many(tx: Tx, shapes: dict[str, tuple[float, float]], wanted: dict[str, int],
                         now: int) -> dict[str, float]:
        """One statement: the buckets' rows locked in key order, each refilled and up to its ``wanted`` whole
        tokens taken (``_take`` for many buckets) → bucket → its refilled level (absent: no row yet)."""
        keys = sorted(shapes)
        buckets = [{"key": k, "cap": shapes[k][0], "rate": shapes[k][1], "wanted": float(wanted[k])} for k in keys]
        rows: list[Any] = list(await tx.execute(_TAKE_MANY, {"buckets": json.dumps(buckets), "now": now}))
        return {str(row.key): float(row.level) for row in rows}

    async def _rounds(self, bucket: str, state: _Bucket) -> None:
        """Until no check of ``bucket`` waits: the waiting ones (of one shape) answered by one store check."""
        try:
            while state.waiting:
                first = state.waiting[0]
                shape = (first.capacity, first.rate)
                batch = [c for c in state.waiting if (c.capacity, c.rate) == shape]
                state.waiting = [c for c in state.waiting if (c.capacity, c.rate) != shape]
                batch = [c for c in batch if not c.answer.done()]  # a caller that gave up before its round
                if not batch:
                    continue
                try:
                    level, granted = await self._check(bucket, first.capacity, first.rate, len(batch))
                except BaseException as exc:  # never leave a caller waiting (cancellation at shutdown included)
                    for check in batch:
                        if check.answer.done():
                            continue
                        if isinstance(exc, asyncio.CancelledError):
                            check.answer.cancel()
                        else:
                            check.answer.set_exception(exc)
                    if not isinstance(exc, Exception):
                        raise
                    continue
                self.rounds += 1
                left = level - granted
                for n, check in enumerate(batch):  # in arrival order, as n checks one after the other
                    if not check.answer.done():
                        check.answer.set_result(None if n < granted else (1.0 - left) / check.rate)
        finally:  # (cancelled at shutdown: the checks that arrived meanwhile are not left waiting either)
            for check in state.waiting:
                check.answer.cancel()
            if self._buckets.get(bucket) is state:
                del self._buckets[bucket]

    async def _check(self, bucket: str, capacity: float, rate: float, wanted: int) -> tuple[float, int]:
        """One transaction: up to ``wanted`` tokens taken → (the refilled level, the tokens taken). Run again on a
        fresh session if its session was lost with nothing taken (``Store.run_rerunnable``)."""

        async def check(tx: Tx) -> float | None:
            now = await tx.now_ms()
            level = await self._take(tx, bucket, capacity, rate, now, wanted)
            if level is None:  # first use of this bucket: create it full, then take
                await tx.insert_if_absent(R, {"key": bucket, "tokens": capacity, "refreshed_ms": now})
                level = await self._take(tx, bucket, capacity, rate, now, wanted)
            return level

        try:
            level = await self.store.run_rerunnable(check)
        except HarnessError:
            raise
        except Exception as exc:  # fail closed: anything but a clear answer is "unavailable"
            raise StoreUnavailable(f"rate limiter unavailable: {type(exc).__name__}") from exc
        if level is None:
            raise StoreUnavailable(f"rate bucket {bucket!r} vanished during the check")
        return level, _granted(level, wanted)

    @staticmethod
    async def _take(tx: object, bucket: str, capacity: float, rate: float, now: int,
                    wanted: int = 1) -> float | None:
        """One statement: lock the row, refill, take as many whole tokens as are there (at most ``wanted``);
        returns the refilled level."""
        from wakeful.harness.store.core import Tx

        assert isinstance(tx, Tx)
        cur = sa.select(
            R.c.key,
            sa.func.least(
                sa.literal(capacity),
                R.c.tokens + sa.func.greatest(0, sa.literal(now) - R.c.refreshed_ms) * sa.literal(rate / 1000.0),
            ).label("level"),
        ).where(R.c.key == bucket).with_for_update().subquery("cur")
        taken = sa.func.least(sa.literal(float(wanted)), sa.func.floor(cur.c.level))  # (_granted, in the store)
        stmt = R.update().where(R.c.key == cur.c.key).values(
            tokens=sa.case((cur.c.level >= 1.0, cur.c.level - taken), else_=cur.c.level),
            refreshed_ms=sa.func.greatest(R.c.refreshed_ms, now),
        ).returning(cur.c.level)
        value = (await tx.execute(stmt)).scalar_one_or_none()
        return None if value is None else float(value)


# issue 16 (PostgreSQL admissions): ``take_in``'s statement, built once, the buckets one JSON text parameter.
# Built per call with the buckets as a VALUES list it was compiled for every admission batch (SQLAlchemy caches no
# VALUES data): in a profile of the bench's wake step, an eighth of the node's samples. (Not array parameters:
# asyncpg introspects the types of varchar[] and float8[] with a catalog query on each new session.)
def _take_many_stmt() -> sa.Update:
    w = sa.func.json_to_recordset(sa.cast(sa.bindparam("buckets", type_=sa.Text), pg_dialect.JSON)).table_valued(
        sa.column("key", sa.Text), sa.column("cap", pg_dialect.DOUBLE_PRECISION),
        sa.column("rate", pg_dialect.DOUBLE_PRECISION), sa.column("wanted", pg_dialect.DOUBLE_PRECISION),
    ).render_derived(name="w", with_types=True)
    now = sa.bindparam("now", type_=sa.BigInteger)
    cur = sa.select(
        R.c.key,
        sa.func.least(
            w.c.cap, R.c.tokens + sa.func.greatest(0, now - R.c.refreshed_ms) * (w.c.rate / 1000.0),
        ).label("level"),
        w.c.wanted,
    ).select_from(R.join(w, R.c.key == w.c.key)).order_by(R.c.key).with_for_update(of=R).subquery("cur")
    taken = sa.func.least(cur.c.wanted, sa.func.floor(cur.c.level))  # (_granted, in the store)
    return R.update().where(R.c.key == cur.c.key).values(
        tokens=sa.case((cur.c.level >= 1.0, cur.c.level - taken), else_=cur.c.level),
        refreshed_ms=sa.func.greatest(R.c.refreshed_ms, now),
    ).returning(R.c.key, cur.c.level)


_TAKE_MANY = _take_many_stmt()


def _granted(level: float, wanted: int) -> int:
    """The tokens ``_take`` took from a bucket refilled to ``level``: its whole tokens, at most ``wanted``."""
    return 0 if level < 1.0 else min(wanted, math.floor(level))


def retry_after_s(wait_s: float) -> int:
    """§14: seconds until one token is available, rounded up, at least 1."""
    return max(1, math.ceil(wait_s))
