"""``POST G/decide`` (interfaces.md §2.2): one decision through the operator's provider for the group.

The answer is ``200`` with exactly what a guest receives — ``{model, answers}`` or ``{error: {code, …}}``
(harness.md §16), an invalid request included; only auth and a body that is not JSON are HTTP errors.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Request

from wakeful.api.auth import GroupPrincipal
from wakeful.api.context import harness_of

__all__ = ["router"]

router = APIRouter(tags=["decide"])
G = "/v1/agent-groups/{group_id}"

EXAMPLE = {
    "state": {"subject": "Invoice overdue", "from": "billing@example.com"},
    "questions": {
        "urgent": {"type": "noul", "instructions": "Does this need action today?"},
        "topic": {"type": "choice", "instructions": "What is it about?",
                  "criteria": {"billing": "money matters", "outage": "a service is down", "other": "anything else"}},
        "severity": {"type": "score", "instructions": "How bad is it?", "criteria": ["none", "minor", "major"]},
    },
}

DESCRIPTION = (
    "`{state, questions}`: `state` a string, object or array; 1–8 `questions` keyed `^[A-Za-z0-9_-]{1,64}$`, each "
    "`{type: noul|choice|score, instructions, criteria?}` (choice: 2–32 named options; score: 2–10 ordered "
    "levels); at most 12,288 bytes encoded. Answers use integers: `probability_bp`, `probabilities_bp`, "
    "`confidence_bp` (basis points, floor of p × 10000) and `score_milli`. Failures are data with a `code`: "
    "invalid_request (with `field`), not_configured, rate_limited (the group's 60/min and 4/s buckets, or the "
    "provider's 429), timeout (2 s), unavailable, provider_error, invalid_response, result_too_large."
)


@router.post(G + "/decide", summary="Ask the configured decision model typed questions (answers in integers)",
             description=DESCRIPTION)
async def decide(
    group_id: str, request: Request, principal: GroupPrincipal,
    body: Annotated[Any, Body(description="{state, questions}", examples=[EXAMPLE])],
) -> dict[str, Any]:
    return await harness_of(request).decide(group_id, body)
