"""``ControlRefused``: every refusal of the commit kernel, with the stable codes of control-plane.md §4.1.

A ``HarnessError`` subclass, so faces map it like any other code; the statuses (interfaces.md §2.2:
``invalid_command`` 400; ``forbidden``, ``not_registered``, ``excluded`` 403; ``not_found`` 404; ``unavailable``
503; the rest 409) are rows of the one table, ``wakeful.errors.ERROR_CODES``.
"""

from __future__ import annotations

from typing import Any

from wakeful.errors import status_for
from wakeful.harness.errors import HarnessError

__all__ = ["CODES", "ControlRefused", "http_status"]

# control-plane.md §4.1 (+ §3.3, §6, §9); the refusal codes a caller can see
CODES = frozenset(
    {
        "invalid_command", "not_found", "unavailable", "operation_id_conflict", "unknown_actor",
        "not_registered", "excluded", "goal_not_active", "forbidden", "gate_required", "write_scope_conflict",
        "claimed_by_other", "revision_conflict", "claim_required", "claim_stale", "claim_expired",
        "idempotency_key_reuse", "budget_exceeded", "illegal_transition", "dependencies_open",
        "continuation_invalid", "effect_unsettled", "acceptance_unmet", "request_key_conflict",
        "readback_required", "loop_not_found", "loop_foreign", "proposal_stale",
    }
)


class ControlRefused(HarnessError):
    """The kernel refused a command: ``code`` (one of ``CODES``), a message and structured ``details``.

    Nothing was written: a refused command leaves no trace in the commit log (§4.1).
    """

    def __init__(self, code: str, message: str, **details: Any) -> None:
        super().__init__(message, **details)
        self.code = code


def http_status(code: str) -> int:
    """interfaces.md §2.2: the HTTP status of a kernel refusal code (a row of ``wakeful.errors.ERROR_CODES``)."""
    return status_for(code)
