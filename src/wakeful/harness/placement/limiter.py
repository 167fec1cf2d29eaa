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
import functools
import math
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql as pg_dialect

from wakeful.harness.errors import HarnessError, StoreUnavailable
from wakeful.harness.store import schema
from wakeful.harness.store.core import Store, Tx

__all__ = ["PgLimiter", "StagedTake"]

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
        shapes, wanted = _shapes(checks)
        levels = await self._levels(tx, shapes, wanted)
        answers: list[float | None] = []
        served: dict[str, int] = {}
        for bucket, _capacity, _rate in checks:
            n = served.get(bucket, 0)
            served[bucket] = n + 1
            level, rate = levels[bucket], shapes[bucket][1]
            granted = _granted(level, wanted[bucket])
            answers.append(None if n < granted else (1.0 - (level - granted)) / rate)
        return answers

    async def take_staged(self, tx: Tx, requests: list[list[tuple[str, float, float]]]) -> list[tuple[int, float] | None]:
        """Each request's ``(bucket, capacity, refill_per_s)`` checks, in its order, answered inside ``tx`` as
        ``take_in`` answers them stage by stage (every request's first check, then the second check of those the
        first admitted, …): per request None (every check took a token) or ``(stage, seconds)`` of its first
        refused check — in one statement while no bucket refuses (issue 16: an admission batch's global and
        per-Loop checks were one ``UPDATE`` each). See ``stage`` to run that statement inside one of the caller's."""
        plan = await self.stage(tx, requests)
        if plan is None:
            return [None] * len(requests)
        return await plan.finish(tx, _returned(await tx.execute(plan.statement, plan.params)))

    async def stage(self, tx: Tx, requests: list[list[tuple[str, float, float]]]) -> StagedTake | None:
        """``take_staged`` in two halves, so that its statement can ride in one of the caller's (a CTE: the
        admission batch's reads, issue 16): ``plan.statement`` (or ``plan.parts``, its two data-modifying CTEs,
        inside a statement of the caller's) with the bind values ``plan.params``, then ``await plan.finish(tx,
        returned)`` with what it returned (key → level, None for a bucket its insert created) → the answers. None:
        no checks."""
        checks = [check for request in requests for check in request]
        if not checks:
            return None
        shapes, wanted = _shapes(checks)
        now = await tx.now_ms()
        return StagedTake(self, requests, shapes, wanted, now, _take_parts(), _take_params(shapes, wanted, now))

    async def _levels(self, tx: Tx, shapes: dict[str, tuple[float, float]], wanted: dict[str, int]) -> dict[str, float]:
        """Up to ``wanted`` tokens taken from each bucket (created full at first use) → its refilled level."""
        now = await tx.now_ms()
        levels = await self._take_many(tx, shapes, wanted, now)
        return await self._complete(tx, shapes, wanted, now, levels)

    async def _complete(self, tx: Tx, shapes: dict[str, tuple[float, float]], wanted: dict[str, int], now: int,
                        levels: dict[str, float]) -> dict[str, float]:
        missing = sorted(set(shapes) - set(levels))
        if missing:  # first use of these buckets: create them full, then take
            dialect_mod: Any = pg_dialect
            await tx.execute(dialect_mod.insert(R).values(
                [{"key": b, "tokens": shapes[b][0], "refreshed_ms": now} for b in missing]).on_conflict_do_nothing())
            levels.update(await self._take_many(tx, {b: shapes[b] for b in missing}, wanted, now))
        if set(shapes) - set(levels):
            raise StoreUnavailable("a rate bucket vanished during the check")
        self.rounds += len(shapes)
        return levels

    @staticmethod
    async def _take_many(tx: Tx, shapes: dict[str, tuple[float, float]], wanted: dict[str, int],
                         now: int) -> dict[str, float]:
        """``_take_parts``'s UPDATE run → bucket → its refilled level (absent: no row yet)."""
        rows: list[Any] = list(await tx.execute(_take_parts()[1], _take_params(shapes, wanted, now)))
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


@dataclass
class StagedTake:
    """``PgLimiter.stage``'s plan: run ``statement`` (alone or as a CTE of another statement), then ``finish``."""

    limiter: PgLimiter
    requests: list[list[tuple[str, float, float]]]
    shapes: dict[str, tuple[float, float]]
    wanted: dict[str, int]
    now: int
    parts: tuple[Any, Any] = field(repr=False)  # (INSERT … RETURNING key, UPDATE … RETURNING key, level)
    params: dict[str, Any] = field(repr=False)  # the parts' bind values (the parts are built once: _take_parts)

    @property
    def statement(self) -> Any:
        """The parts as one statement → rows ``key, level`` (level NULL for a bucket the insert created); run it
        with ``params``."""
        return _parts_statement()

    async def finish(self, tx: Tx, returned: dict[str, float | None]) -> list[tuple[int, float] | None]:
        """The answers, from what the statement returned (bucket → its refilled level; None: created full by the
        statement's insert). The statement took every
        check's token; when a bucket refused, the stages are answered from the levels it read and the tokens of
        checks no request reached are put back (one more statement, the rows still locked), so the buckets end as
        the stage-by-stage checks leave them. A bucket's first use creates it first (two more statements)."""
        shapes, wanted, requests = self.shapes, self.wanted, self.requests
        levels = await self.limiter._complete(tx, shapes, wanted, self.now, {
            b: shapes[b][0] if level is None else level for b, level in returned.items()})
        taken = {b: _granted(levels[b], wanted[b]) for b in shapes}
        if all(taken[b] == wanted[b] for b in shapes):
            return [None] * len(requests)
        answers: list[tuple[int, float] | None] = [None] * len(requests)
        used = dict.fromkeys(shapes, 0)
        for stage in range(max(len(r) for r in requests)):
            due = [(i, r[stage][0]) for i, r in enumerate(requests) if answers[i] is None and len(r) > stage]
            asked: dict[str, int] = {}
            for _, bucket in due:
                asked[bucket] = asked.get(bucket, 0) + 1
            # (as take_in at this stage: the level left by the stages before, no refill at the same instant)
            granted = {b: min(n, max(0, _whole(levels[b]) - used[b])) for b, n in asked.items()}
            served: dict[str, int] = {}
            for i, bucket in due:
                n = served.get(bucket, 0)
                served[bucket] = n + 1
                if n >= granted[bucket]:
                    left = levels[bucket] - used[bucket] - granted[bucket]
                    answers[i] = (stage, (1.0 - left) / shapes[bucket][1])
            for bucket, n in granted.items():
                used[bucket] += n
        back = {b: taken[b] - used[b] for b in shapes if taken[b] > used[b]}
        if back:
            keys = sorted(back)
            w = sa.func.unnest(sa.bindparam("keys", keys, type_=pg_dialect.ARRAY(sa.String)),
                               sa.bindparam("back", [float(back[k]) for k in keys],
                                            type_=pg_dialect.ARRAY(sa.Float))).table_valued("key", "n").render_derived(
                name="w", with_types=False)
            await tx.execute(R.update().where(R.c.key == w.c.key).values(tokens=R.c.tokens + w.c.n))
        return answers


def _returned(rows: Any) -> dict[str, float | None]:
    return {str(r.key): None if r.level is None else float(r.level) for r in rows}


def _take_params(shapes: dict[str, tuple[float, float]], wanted: dict[str, int], now: int) -> dict[str, Any]:
    """The bind values of ``_take_parts``'s statements for these buckets (arrays in key order) at ``now``."""
    keys = sorted(shapes)
    return {"keys": keys, "caps": [shapes[k][0] for k in keys], "rates": [shapes[k][1] for k in keys],
            "wanted": [float(wanted[k]) for k in keys], "now": now}


# issue 16 (ingest on PostgreSQL): built once — built per admission batch these statements (and the cache key
# SQLAlchemy derives from a new statement object) were ~4 % of the node's CPU in the bench's ingest step
@functools.cache
def _take_parts() -> tuple[Any, Any]:
    """One ``UPDATE``: the buckets' rows locked in key order, each refilled and up to its ``wanted`` whole tokens
    taken (``_take`` for many buckets), returning ``key`` and the refilled ``level`` of each bucket that has a row;
    and its companion for buckets without a row yet: ``INSERT … SELECT … ON CONFLICT DO NOTHING RETURNING key``
    creating each missing bucket full with its tokens already taken (what the insert and second take of
    ``_complete`` leave, in the same statement: issue 16, a Loop's first event made its batch two statements
    longer). Both are data-modifying CTEs of one statement; a bucket the update sees is one the insert leaves
    alone, and a bucket committed by someone else after the statement's snapshot is neither's: ``_complete`` takes
    it. The buckets are arrays (``unnest``) and every value a bind parameter (``_take_params``), so the statements
    are built once, have one text whatever the buckets' number, and PostgreSQL reuses their prepared statements."""
    floats = pg_dialect.ARRAY(sa.Float)
    now = sa.bindparam("now", type_=sa.BigInteger)
    w = sa.func.unnest(
        sa.bindparam("keys", type_=pg_dialect.ARRAY(sa.String)),
        sa.bindparam("caps", type_=floats),
        sa.bindparam("rates", type_=floats),
        sa.bindparam("wanted", type_=floats),
    ).table_valued("key", "cap", "rate", "wanted").render_derived(name="w", with_types=False)
    cur = sa.select(
        R.c.key,
        sa.func.least(
            w.c.cap, R.c.tokens + sa.func.greatest(0, now - R.c.refreshed_ms) * (w.c.rate / 1000.0),
        ).label("level"),
        w.c.wanted,
    ).select_from(R.join(w, R.c.key == w.c.key)).order_by(R.c.key).with_for_update(of=R).subquery("cur")
    taken = sa.func.least(cur.c.wanted, sa.func.floor(cur.c.level))  # (_granted, in the store)
    update = R.update().where(R.c.key == cur.c.key).values(
        tokens=sa.case((cur.c.level >= 1.0, cur.c.level - taken), else_=cur.c.level),
        refreshed_ms=sa.func.greatest(R.c.refreshed_ms, now),
    ).returning(R.c.key, cur.c.level.label("level"))
    dialect_mod: Any = pg_dialect
    fresh = sa.select(w.c.key, w.c.cap - sa.func.least(w.c.wanted, sa.func.floor(w.c.cap)), now).order_by(w.c.key)
    insert = dialect_mod.insert(R).from_select(["key", "tokens", "refreshed_ms"], fresh).on_conflict_do_nothing(
    ).returning(R.c.key)
    return insert, update


@functools.cache
def _parts_statement() -> Any:
    """The two parts as one statement → rows ``key, level`` (level NULL: created full by the insert)."""
    insert, update = _take_parts()
    created, updated = insert.cte("bucket_new"), update.cte("buckets")
    return sa.union_all(sa.select(updated.c.key, updated.c.level),
                        sa.select(created.c.key, sa.cast(sa.null(), sa.Float).label("level")))


def _shapes(checks: list[tuple[str, float, float]]) -> tuple[dict[str, tuple[float, float]], dict[str, int]]:
    """The checks' buckets → (their first check's capacity and rate, how many checks each)."""
    shapes: dict[str, tuple[float, float]] = {}
    wanted: dict[str, int] = {}
    for bucket, capacity, rate in checks:
        if capacity < 1 or rate <= 0:
            raise ValueError("a bucket needs capacity >= 1 and a positive refill rate")
        shapes.setdefault(bucket, (float(capacity), float(rate)))
        wanted[bucket] = wanted.get(bucket, 0) + 1
    return shapes, wanted


def _granted(level: float, wanted: int) -> int:
    """The tokens ``_take`` took from a bucket refilled to ``level``: its whole tokens, at most ``wanted``."""
    return min(wanted, _whole(level))


def _whole(level: float) -> int:
    return 0 if level < 1.0 else math.floor(level)


def retry_after_s(wait_s: float) -> int:
    """§14: seconds until one token is available, rounded up, at least 1."""
    return max(1, math.ceil(wait_s))
