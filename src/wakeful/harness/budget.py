"""The wake budget of agent.notify as plain arithmetic: the 10-minute window and the hour of limiting.

harness.md §9.5 steps 3–4; the store transaction in ``notify.py`` applies the verdict.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from wakeful.harness.config import Limits

__all__ = ["LimitWatch", "Verdict", "WakeWindow", "judge_wake"]

Verdict = Literal["admit", "limited", "exhausted"]


@dataclass(frozen=True, slots=True)
class WakeWindow:
    """The budget columns of a Loop row (§2.5). ``count`` counts admissions and refusals of the window."""

    start_ms: int | None
    count: int
    limited_since_ms: int | None


# §9.5 step 3: a fixed window; it restarts after window_s, or when the store clock reads before its start.
# Limiting continues across a restart only if the window just ended had a refusal and the new one follows it
# directly (docs/decisions-harness-loops.md: "without a break" = consecutive saturated windows).
def _rolled(window: WakeWindow, now_ms: int, limits: Limits) -> WakeWindow:
    span = limits.notify_window_s * 1000
    start = window.start_ms
    if start is not None and start <= now_ms < start + span:
        return window
    saturated = window.count > limits.notify_per_window
    contiguous = start is not None and start <= now_ms < start + 2 * span
    limited = window.limited_since_ms if saturated and contiguous else None
    if limited is not None and now_ms < limited:
        limited = None
    return WakeWindow(now_ms, 0, limited)


# §9.5 steps 3-5 (the duplicate check of step 2 comes first, in the store)
def judge_wake(window: WakeWindow, now_ms: int, mono_limited_ns: int, limits: Limits) -> tuple[Verdict, WakeWindow]:
    """Decide one admission. ``mono_limited_ns`` is how long this node has seen the Loop limited."""
    current = _rolled(window, now_ms, limits)
    if current.count < limits.notify_per_window:
        # a fresh window after a saturated one admits, but the limiting mark stays until a window is not
        # saturated (this is where the rule deliberately departs from "clear on every admission")
        return "admit", replace(current, count=current.count + 1)
    since = current.limited_since_ms if current.limited_since_ms is not None else now_ms
    refused = WakeWindow(current.start_ms, current.count + 1, since)
    hour_ms = limits.budget_pause_after_s * 1000
    if now_ms - since >= hour_ms and mono_limited_ns >= hour_ms * 1_000_000:
        return "exhausted", refused
    return "limited", refused


class LimitWatch:
    """§9.5 step 4: this node's monotonic view of continuous limiting, per Loop."""

    def __init__(self) -> None:
        self._since: dict[str, int] = {}

    def elapsed_ns(self, loop_id: str, mono_ns: int) -> int:
        """How long the Loop has been limited on this node (0 when it is not)."""
        start = self._since.get(loop_id)
        return 0 if start is None else max(0, mono_ns - start)

    def record(self, loop_id: str, limited_since_ms: int | None, mono_ns: int) -> None:
        """After the transaction: start watching on the first refusal, forget when limiting ended."""
        if limited_since_ms is None:
            self._since.pop(loop_id, None)
        else:
            self._since.setdefault(loop_id, mono_ns)

    def forget(self, loop_id: str) -> None:
        self._since.pop(loop_id, None)
