"""Progress reporting seam for the density benchmark: the CLI shows rich bars, tests pass nothing.

``Progress`` is what the procedure calls; ``NullProgress`` does nothing.
"""

from __future__ import annotations

from typing import Protocol

__all__ = ["NullProgress", "Progress", "percentile"]


class Progress(Protocol):
    """``phase(name, total)`` opens a bar; ``advance(done)`` sets its completed count; ``note(text)`` logs."""

    def phase(self, name: str, total: int) -> None: ...

    def advance(self, done: int) -> None: ...

    def note(self, text: str) -> None: ...


class NullProgress:
    """No output (tests and ``--json -`` without a terminal)."""

    def phase(self, name: str, total: int) -> None:
        del name, total

    def advance(self, done: int) -> None:
        del done

    def note(self, text: str) -> None:
        del text


def percentile(samples: list[float], q: float) -> float:
    """§1.3 step 5: the q-th percentile of the sorted samples (nearest rank; p99 of 1,000 is the 990th)."""
    if not samples:
        return 0.0
    ordered = sorted(samples)
    rank = max(1, -(-int(q * len(ordered) * 1000) // 100_000))  # ceil(q/100 * n) without float drift
    return ordered[min(rank, len(ordered)) - 1]
