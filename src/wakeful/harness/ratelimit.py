"""Token-bucket rate limits for event intake (harness.md §14) behind one small async interface.

``LocalLimiter`` keeps the buckets in process on the node's monotonic clock (immune to wall-clock jumps); a
cluster plugs a shared limiter (``rate_bucket`` rows) into ``Intake`` through the same ``Limiter`` protocol.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

__all__ = ["Bucket", "Deferred", "Limiter", "LocalLimiter", "MonotonicClock", "Staged", "TxLimiter", "global_bucket",
           "loop_bucket"]

SWEEP_EVERY = 4096  # look for full buckets (forgetting one changes nothing) after this many new ones


class Limiter(Protocol):
    """``take`` one token from ``bucket``: None when admitted, else the seconds until a token is available.

    Raises ``StoreUnavailable`` when the limiter's store is down (the faces answer 503: fail closed).
    """

    async def take(self, bucket: str, capacity: float, refill_per_s: float) -> float | None: ...


@runtime_checkable
class TxLimiter(Protocol):
    """A shared limiter that can also answer checks inside the caller's store transaction (``PgLimiter``)."""

    async def take(self, bucket: str, capacity: float, refill_per_s: float) -> float | None: ...

    async def take_in(self, tx: Any, checks: list[tuple[str, float, float]]) -> list[float | None]: ...

    async def take_staged(self, tx: Any,
                          requests: list[list[tuple[str, float, float]]]) -> list[tuple[int, float] | None]: ...

    async def stage(self, tx: Any, requests: list[list[tuple[str, float, float]]]) -> Staged | None: ...


class Staged(Protocol):
    """``TxLimiter.stage``'s plan: ``statement`` (rows ``key, level``) to run alone, or ``parts`` — an ``INSERT …
    RETURNING key`` (buckets created, level None) and an ``UPDATE … RETURNING key, level`` — as data-modifying CTEs
    of the caller's statement, either with the bind values ``params``; then ``finish`` with what they returned
    (bucket → level) → each request's answer."""

    @property
    def statement(self) -> Any: ...

    parts: tuple[Any, Any]
    params: dict[str, Any]

    async def finish(self, tx: Any, returned: dict[str, float | None]) -> list[tuple[int, float] | None]: ...


@dataclass(slots=True)
class Deferred:
    """One intake request's bucket checks, in the order the route reached them, not taken yet (issue 16): the
    admission's group-commit transaction takes them before its §10.2 checks (``Intake.admit``), or — when the
    request ends with another answer first — ``Intake.settle`` takes them alone, so the answer is the one the
    checks in their §10.3 order give (a 429 where a bucket is empty)."""

    checks: list[tuple[str, float, float, int]] = field(default_factory=list)  # bucket, capacity, rate, per_min
    done: bool = False  # taken (or handed to an admission that takes them)


class MonotonicClock(Protocol):
    def monotonic_ns(self) -> int: ...


@dataclass(slots=True)
class Bucket:
    tokens: float
    at_ns: int
    capacity: float
    refill_per_s: float


class _SystemMonotonic:
    def monotonic_ns(self) -> int:
        return time.monotonic_ns()


def global_bucket() -> str:
    """§2.9 key of the bucket shared by both intake routes."""
    return "ingress:global"


def loop_bucket(loop_id: str) -> str:
    """§2.9 key of a Loop's intake bucket (keyed by Loop id, never by secret, §14)."""
    return f"ingress:loop:{loop_id}"


class LocalLimiter:
    """In-process token buckets: full at first use, refilled by elapsed monotonic time, capped at capacity."""

    def __init__(self, clock: MonotonicClock | None = None) -> None:
        self.clock: MonotonicClock = clock or _SystemMonotonic()
        self._buckets: dict[str, Bucket] = {}
        self._created = 0

    async def take(self, bucket: str, capacity: float, refill_per_s: float) -> float | None:
        return self.take_nowait(bucket, capacity, refill_per_s)

    def take_nowait(self, bucket: str, capacity: float, refill_per_s: float) -> float | None:
        now = self.clock.monotonic_ns()
        state = self._buckets.get(bucket)
        if state is None:
            state = self._new(bucket, capacity, now)
        elapsed = max(0, now - state.at_ns)  # a monotonic clock never goes back; be safe anyway
        state.tokens = min(float(capacity), state.tokens + elapsed / 1e9 * refill_per_s)
        state.at_ns, state.capacity, state.refill_per_s = now, float(capacity), refill_per_s
        if state.tokens >= 1.0:
            state.tokens -= 1.0
            return None
        if refill_per_s <= 0:
            return float("inf")
        return (1.0 - state.tokens) / refill_per_s

    def tokens(self, bucket: str) -> float | None:
        """The bucket's tokens as of its last use (tests and the dashboard); None for an unknown bucket."""
        state = self._buckets.get(bucket)
        return None if state is None else state.tokens

    def _new(self, bucket: str, capacity: float, now: int) -> Bucket:
        self._created += 1
        if self._created % SWEEP_EVERY == 0:
            self._forget_full(now)
        state = self._buckets[bucket] = Bucket(float(capacity), now, float(capacity), 0.0)
        return state

    # a bucket that has refilled to capacity is the same as a new one: forgetting it bounds memory
    def _forget_full(self, now: int) -> None:
        full = [k for k, b in self._buckets.items()
                if b.tokens + max(0, now - b.at_ns) / 1e9 * b.refill_per_s >= b.capacity]
        for key in full:
            del self._buckets[key]
