"""harness.md §14 token buckets on an injected monotonic clock: capacity, refill, Retry-After rounding."""

from __future__ import annotations

import asyncio

from wakeful.harness.errors import RateLimited
from wakeful.harness.ratelimit import LocalLimiter, global_bucket, loop_bucket


class Mono:
    def __init__(self) -> None:
        self.ns = 5_000_000_000

    def monotonic_ns(self) -> int:
        return self.ns

    def advance(self, s: float) -> None:
        self.ns += int(s * 1e9)


def test_sixty_per_minute_then_refused_with_the_time_to_one_token() -> None:
    clock = Mono()
    limiter = LocalLimiter(clock)
    for _ in range(60):
        assert limiter.take_nowait("ingress:loop:lp_1", 60, 1.0) is None
    wait = limiter.take_nowait("ingress:loop:lp_1", 60, 1.0)
    assert wait is not None and abs(wait - 1.0) < 1e-9
    clock.advance(0.25)
    wait = limiter.take_nowait("ingress:loop:lp_1", 60, 1.0)
    assert wait is not None and abs(wait - 0.75) < 1e-9
    clock.advance(0.75)
    assert limiter.take_nowait("ingress:loop:lp_1", 60, 1.0) is None
    assert limiter.take_nowait("ingress:loop:lp_1", 60, 1.0) is not None


def test_buckets_are_independent_and_refill_caps_at_capacity() -> None:
    clock = Mono()
    limiter = LocalLimiter(clock)
    for _ in range(3):
        assert limiter.take_nowait("a", 3, 1.0) is None
    assert limiter.take_nowait("a", 3, 1.0) is not None
    assert limiter.take_nowait("b", 3, 1.0) is None
    clock.advance(3600)
    for _ in range(3):
        assert limiter.take_nowait("a", 3, 1.0) is None
    assert limiter.take_nowait("a", 3, 1.0) is not None


def test_the_wall_clock_does_not_matter_only_the_monotonic_one() -> None:
    clock = Mono()
    limiter = LocalLimiter(clock)
    assert limiter.take_nowait("x", 1, 1 / 60) is None
    wait = limiter.take_nowait("x", 1, 1 / 60)
    assert wait is not None and abs(wait - 60.0) < 1e-6
    asyncio.run(asyncio.sleep(0))  # real time passing changes nothing
    assert limiter.take_nowait("x", 1, 1 / 60) is not None


def test_retry_after_is_whole_seconds_rounded_up_at_least_one() -> None:
    assert RateLimited("x", retry_after_s=0.001).details["retry_after_s"] == 1
    assert RateLimited("x", retry_after_s=1.0).details["retry_after_s"] == 1
    assert RateLimited("x", retry_after_s=1.01).details["retry_after_s"] == 2
    assert RateLimited("x", retry_after_s=59.5).retry_after_s == 60


def test_bucket_keys_follow_the_spec() -> None:
    assert global_bucket() == "ingress:global"
    assert loop_bucket("lp_x") == "ingress:loop:lp_x"


def test_full_buckets_are_forgotten_so_memory_stays_bounded() -> None:
    clock = Mono()
    limiter = LocalLimiter(clock)
    limiter.take_nowait("old", 60, 1.0)
    clock.advance(120)
    for i in range(5000):
        limiter.take_nowait(f"k{i}", 60, 1.0)
    assert limiter.tokens("old") is None
    assert limiter.tokens("k4999") == 59.0
