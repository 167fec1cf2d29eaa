"""The one failure type of ``decide``: a harness.md §16.5 code, always answered as data ``{error: {code}}``.

Providers (HTTP or embedder objects) raise ``ProviderError`` to report a transport or status outcome.
"""

from __future__ import annotations

from typing import Any

from wakeful.errors import WakefulError

__all__ = ["CODES", "DecideFailure", "ProviderError"]

# harness.md §16.5: every outcome a valid request can have besides an answer
CODES = frozenset({
    "invalid_request", "not_configured", "rate_limited", "timeout", "unavailable", "provider_error",
    "invalid_response", "result_too_large",
})


class DecideFailure(WakefulError):
    """A decide call that ends without an answer; ``as_result()`` is what the caller receives."""

    def __init__(self, code: str, message: str = "", **details: Any) -> None:
        super().__init__(message or code)
        self.code = code if code in CODES else "provider_error"
        self.details = details

    def as_result(self) -> dict[str, Any]:
        return {"error": {"code": self.code, **self.details, "message": self.message[:256]}}


class ProviderError(DecideFailure):
    """Raised by a provider: ``rate_limited``, ``timeout``, ``unavailable``, ``provider_error`` or
    ``invalid_response`` (any other code is reported as ``provider_error``)."""
