"""``Decider``: one decide call from request to answer (harness.md §16): validate, admit through the group's
buckets (§14), ask the provider within the budget, validate and convert the answer. Always answers data.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from wakeful.harness.decide.answer import convert
from wakeful.harness.decide.errors import DecideFailure
from wakeful.harness.decide.limiter import BucketSet, Rate
from wakeful.harness.decide.request import validate_request
from wakeful.harness.decide.settings import DecideSettings

if TYPE_CHECKING:
    from wakeful.harness.decide.providers import HttpProvider

__all__ = ["LOOP_WAIT_RESERVE_S", "Decider", "Provider"]

# interfaces.md §5: a coroutine taking the validated request and the seconds left, returning the raw answer
Provider = Callable[[dict[str, Any], float], Awaitable[Any]]
# harness.md §14 cluster: ``await take(bucket, capacity, refill_per_s)`` → None (taken) or seconds to wait
SharedTake = Callable[[str, float, float], Awaitable[float | None]]

log = logging.getLogger("wakeful.harness")

LOOP_WAIT_RESERVE_S = 2.2  # §16.5: a Loop caller waits for a token while ≥ 2.2 s of its deadline remain


class Decider:
    """The node's decide service; ``provider`` is the installed object or the configured HTTP provider."""

    def __init__(
        self, settings: DecideSettings, *, monotonic_ns: Callable[[], int],
        sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
    ) -> None:
        self.settings = settings
        self.sleep = sleep
        self.buckets = BucketSet(
            (Rate(settings.per_minute, settings.per_minute / 60), Rate(settings.per_second, settings.per_second)),
            monotonic_ns,
        )
        self._monotonic_ns = monotonic_ns
        self.not_configured = settings.problem()
        self._http: HttpProvider | None = None
        if self.not_configured is None:  # httpx is imported only when a provider is configured
            from wakeful.harness.decide.providers import build_provider

            self._http = build_provider(settings)
        self.provider: Provider | None = self._http
        self.shared: SharedTake | None = None  # set on a cluster: the rate_bucket rows (§2.9, §14)

    def install(self, provider: Provider | None) -> None:
        """interfaces.md §5 ``set_decide_provider``: use this object (None: back to the configured one)."""
        self.provider = provider if provider is not None else self._http

    async def aclose(self) -> None:
        if self._http is not None:
            await self._http.aclose()

    async def decide(self, group_id: str, arguments: Any, *, remaining_s: float | None = None,
                     loop_caller: bool = False) -> dict[str, Any]:
        """``{model, answers}`` or ``{error: {code, …}}``; ``remaining_s`` is the caller's deadline."""
        try:
            return await self._decide(group_id, arguments, remaining_s, loop_caller)
        except DecideFailure as failure:
            return failure.as_result()

    async def _decide(self, group_id: str, arguments: Any, remaining_s: float | None,
                      loop_caller: bool) -> dict[str, Any]:
        request = validate_request(arguments)
        provider = self.provider
        if provider is None:
            raise DecideFailure("not_configured", self.not_configured or "no decide provider")
        start = self._monotonic_ns()
        await self._admit(group_id, remaining_s if loop_caller else None)
        if remaining_s is not None:
            remaining_s -= (self._monotonic_ns() - start) / 1e9
        budget = self.settings.timeout_ms / 1000
        if remaining_s is not None:
            budget = min(budget, remaining_s)
        if budget <= 0:
            raise DecideFailure("timeout", "no time left for the provider")
        return convert(request, await self._ask(provider, request, budget))

    # §16.5 admission: the group's buckets first; a Loop caller may wait, everyone else fails fast
    async def _admit(self, group_id: str, loop_remaining_s: float | None) -> None:
        key = f"decide:{group_id}"
        waited = 0.0
        while True:
            wait = await self._take(group_id) if self.shared is not None else self.buckets.take(key)
            if wait == 0:
                return
            if loop_remaining_s is None or loop_remaining_s - waited - wait < LOOP_WAIT_RESERVE_S:
                raise DecideFailure("rate_limited", f"the group's decide buckets are empty for {wait:.2f} s",
                                    retry_after_s=max(1, int(-(-wait // 1))))
            await self.sleep(wait)
            waited += wait

    # §14 cluster: decide:<group>:s then decide:<group>:m, one atomic row update each; limiter down → unavailable
    async def _take(self, group_id: str) -> float:
        assert self.shared is not None
        s = self.settings
        try:
            wait = await self.shared(f"decide:{group_id}:s", float(s.per_second), float(s.per_second))
            if wait is None:
                wait = await self.shared(f"decide:{group_id}:m", float(s.per_minute), s.per_minute / 60)
        except Exception as exc:  # fail closed
            raise DecideFailure("unavailable", f"the shared rate limiter failed: {type(exc).__name__}") from None
        return 0.0 if wait is None else max(wait, 1e-6)

    async def _ask(self, provider: Provider, request: dict[str, Any], budget: float) -> Any:
        try:
            async with asyncio.timeout(budget):
                return await provider(request, budget)
        except TimeoutError:
            raise DecideFailure("timeout", f"no answer within {budget * 1000:.0f} ms") from None
        except DecideFailure:
            raise
        except Exception as exc:  # an embedder's provider object failed: a transport-like failure
            log.info("decide provider raised %s", type(exc).__name__)
            raise DecideFailure("unavailable", f"the provider raised {type(exc).__name__}") from None
