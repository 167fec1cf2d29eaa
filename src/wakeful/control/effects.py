"""Running one external effect through the ledger (control-plane.md §6): intend before the call, settle with
what happened, and when the outcome is unknown read it back by its request key — never re-send blindly.

``perform_effect`` is safe to re-run after a crash at any point: its operation ids are derived from the request
key and attempt, so steps already committed replay, and an unknown or overdue intent is read back first.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from wakeful.control.actor import Actor
from wakeful.control.core import Control
from wakeful.control.errors import ControlRefused
from wakeful.errors import WakefulError

__all__ = ["EffectFailed", "EffectOutcomeUnknown", "perform_effect"]


class EffectFailed(WakefulError):
    """The external system definitely did not apply the request (refused, or never reached)."""


class EffectOutcomeUnknown(WakefulError):
    """The request may have been applied (e.g. the connection was lost after it was sent)."""


Send = Callable[[str, int], Awaitable[str | None]]  # (request_key, attempt) -> external_ref; raises the two above
ReadBack = Callable[[str], Awaitable[tuple[str, str | None]]]  # request_key -> (present|absent|unreadable, ref)


async def _current(control: Control, goal_id: str, request_key: str) -> dict[str, Any] | None:
    return next((e for e in await control.effects(goal_id) if e["request_key"] == request_key), None)


async def perform_effect(
    control: Control, actor: Actor, goal_id: str, *, request_key: str, kind: str, target: str,
    payload_digest: str, send: Send, read_back: ReadBack, item: str | None = None, max_attempts: int = 3,
) -> dict[str, Any]:
    """Drive the effect to ``succeeded``, ``failed`` or a held ``unknown`` and return its ledger row.

    ``send`` gets the request key and attempt to pass on as the external idempotency key. ``read_back`` asks the
    external system whether the request with this key exists. A send is attempted only from ``intended``.
    """

    async def submit(step: str, attempt: int, command: dict[str, Any]) -> dict[str, Any]:
        envelope = {"operation_id": f"effect:{request_key}:{step}:{attempt}", "goal_id": goal_id,
                    "command": command}
        return await control.submit(actor, envelope)

    ours: set[int] = set()  # attempts this call opened itself (sent at most once each)
    for _ in range(max_attempts * 3 + 2):
        effect = await _current(control, goal_id, request_key)
        state = None if effect is None else str(effect["state"])
        attempt = 1 if effect is None else int(effect["attempt"])
        if effect is not None and (state == "succeeded" or (state == "failed" and attempt >= max_attempts)):
            return effect
        if state in (None, "failed"):
            intend: dict[str, Any] = {"type": "effect.intend", "request_key": request_key, "kind": kind,
                                      "target": target, "payload_digest": payload_digest}
            if item is not None:
                intend["item"] = item
            receipt = await submit("intend", attempt + (state == "failed"), intend)
            ours.add(int(receipt["effect"]["attempt"]))
            continue
        if state == "unknown" or attempt not in ours:
            # unknown, or an intent left by an earlier run that may have crashed mid-call: read back first
            assert effect is not None
            observed, ref = await read_back(request_key)
            try:
                receipt = await submit(f"readback-{observed}", attempt, {
                    "type": "effect.readback", "request_key": request_key, "attempt": attempt,
                    "observed": observed, **({"external_ref": ref} if ref else {})})
            except ControlRefused as exc:
                if exc.code != "illegal_transition":
                    raise
                return effect  # an intent still inside its grace: hold, the caller comes back later
            if observed == "absent":
                ours.add(int(receipt["effect"]["attempt"]))
            if observed == "unreadable":
                held = await _current(control, goal_id, request_key)
                assert held is not None
                return held
            continue
        try:  # our own intent: send once, then settle with what happened
            ref = await send(request_key, attempt)
            settle: dict[str, Any] = {"state": "succeeded", **({"external_ref": ref} if ref else {})}
        except EffectFailed as exc:
            settle = {"state": "failed", "detail": str(exc)[:2000]}
        except EffectOutcomeUnknown as exc:
            settle = {"state": "unknown", "detail": str(exc)[:2000]}
        ours.discard(attempt)
        await submit("settle", attempt, {"type": "effect.settle", "request_key": request_key, "attempt": attempt,
                                          **settle})
    effect = await _current(control, goal_id, request_key)
    assert effect is not None
    return effect
