"""Token buckets on the node's monotonic clock (harness.md §14, single node): ``decide:<group>`` holds
60 per minute and 4 per second; ``web:<loop>`` (used by ``web.http_request``) 60 refilled at 1 per second.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["Bucket", "BucketSet", "Rate"]

NS = 1_000_000_000


@dataclass(frozen=True, slots=True)
class Rate:
    """A bucket of ``capacity`` tokens refilled at ``per_second`` tokens a second."""

    capacity: int
    per_second: float


class Bucket:
    """One token bucket; elapsed time that runs backwards counts as zero (§14)."""

    __slots__ = ("rate", "tokens", "at_ns")

    def __init__(self, rate: Rate, now_ns: int) -> None:
        self.rate, self.tokens, self.at_ns = rate, float(rate.capacity), now_ns

    def refill(self, now_ns: int) -> None:
        elapsed = max(0, now_ns - self.at_ns)
        self.tokens = min(float(self.rate.capacity), self.tokens + elapsed * self.rate.per_second / NS)
        self.at_ns = max(self.at_ns, now_ns)

    def wait_s(self) -> float:
        """Seconds until one token is available (0 when one is)."""
        missing = 1.0 - self.tokens
        return 0.0 if missing <= 0 else missing / self.rate.per_second


class BucketSet:
    """Named keys, each holding one bucket per rate; a take succeeds only when every bucket has a token."""

    def __init__(self, rates: tuple[Rate, ...], clock: Callable[[], int], max_keys: int = 100_000) -> None:
        self.rates, self.clock, self.max_keys = rates, clock, max_keys
        self._buckets: dict[str, tuple[Bucket, ...]] = {}

    def _of(self, key: str, now_ns: int) -> tuple[Bucket, ...]:
        buckets = self._buckets.get(key)
        if buckets is None:
            if len(self._buckets) >= self.max_keys:
                self._forget_full(now_ns)
            buckets = self._buckets[key] = tuple(Bucket(rate, now_ns) for rate in self.rates)
        for bucket in buckets:
            bucket.refill(now_ns)
        return buckets

    def take(self, key: str) -> float:
        """Take a token from each bucket of ``key`` and return 0, or take nothing and return the seconds
        until every bucket has one (≥ a tiny positive number)."""
        buckets = self._of(key, self.clock())
        wait = max(bucket.wait_s() for bucket in buckets)
        if wait > 0:
            return max(wait, 1e-6)
        for bucket in buckets:
            bucket.tokens -= 1.0
        return 0.0

    # a key whose buckets are all full again behaves exactly like a new one, so it can go
    def _forget_full(self, now_ns: int) -> None:
        for key, buckets in list(self._buckets.items()):
            for bucket in buckets:
                bucket.refill(now_ns)
            if all(b.tokens >= b.rate.capacity for b in buckets):
                del self._buckets[key]
