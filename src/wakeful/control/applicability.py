"""Evidence applicability and criterion / acceptance status (control-plane.md §5), as pure functions.

Evidence is never edited; whether it still counts is computed from the goal's current subjects, the current
contract (digests, workloads, bindings) and, for independent criteria, who completes the bound item.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["CriterionStatus", "acceptance_status", "assess", "criterion_status", "inapplicable_reason"]


@dataclass(frozen=True)
class CriterionStatus:
    """``status`` ∈ pass, fail, stale, missing; ``evidence_id`` the deciding row (pass/fail only); ``reason`` why
    a ``stale`` criterion is stale: the §5 reason of its newest deciding evidence, or ``binding_stale``."""

    criterion_id: str
    status: str
    evidence_id: str | None = None
    reason: str | None = None

    @property
    def unmet(self) -> str:
        """What a refusal names for this criterion: the precise reason when stale, else the status."""
        return self.reason or self.status

    def to_dict(self) -> dict[str, Any]:
        return {"criterion_id": self.criterion_id, "status": self.status, "evidence_id": self.evidence_id,
                "reason": self.reason}


def inapplicable_reason(
    ev: Mapping[str, Any],
    criterion: Mapping[str, Any] | None,
    *,
    criterion_id: str,
    acceptance_revision: int,
    criterion_digests: Mapping[str, str],
    subjects: Mapping[str, str],
    completers: frozenset[str] = frozenset(),
) -> str | None:
    """None when evidence ``ev`` counts for the criterion now, else the §5 reason code (``completers``: the agents
    completing, or having completed, an item bound to the criterion)."""
    if criterion is None:
        return "criterion_removed"
    subject = ev.get("subject")
    if subject is None or subjects.get(subject) != ev.get("artifact_revision"):
        return "stale_revision"
    if criterion.get("subject") is not None and criterion["subject"] != subject:
        return "stale_revision"
    if ev["acceptance_revision"] != acceptance_revision and (
        ev["criterion_digests"].get(criterion_id) != criterion_digests.get(criterion_id)
    ):
        return "stale_acceptance"
    workload = criterion.get("workload")
    if workload is not None:
        recorded = ev.get("workload") or {}
        if recorded.get("digest") != criterion.get("workload_digest"):
            return "workload_mismatch"
    if criterion.get("independent") and ev["recorded_by"] in completers:
        return "not_independent"
    if criterion.get("evidence_from") == "validator" and ev.get("source") != "validator":
        return "not_validator"  # issue 20: only the plane's own validator run decides this criterion
    return None


def criterion_status(
    criterion_id: str,
    criterion: Mapping[str, Any] | None,
    evidence: Sequence[Mapping[str, Any]],
    *,
    acceptance_revision: int,
    criterion_digests: Mapping[str, str],
    subjects: Mapping[str, str],
    completers: frozenset[str] = frozenset(),
    binding_stale: bool = False,
) -> CriterionStatus:
    """The verdict of the newest applicable pass/fail evidence; ``stale`` when some exists but none applies
    (or a binding naming the criterion is stale); ``missing`` otherwise. ``evidence`` in commit order."""
    deciding = [e for e in evidence if criterion_id in e["criterion_ids"] and e["verdict"] in ("pass", "fail")]
    if binding_stale:
        return CriterionStatus(criterion_id, "stale", reason="binding_stale")
    newest: str | None = None
    for ev in reversed(deciding):
        reason = inapplicable_reason(
            ev, criterion, criterion_id=criterion_id, acceptance_revision=acceptance_revision,
            criterion_digests=criterion_digests, subjects=subjects, completers=completers,
        )
        if reason is None:
            return CriterionStatus(criterion_id, str(ev["verdict"]), str(ev["id"]))
        newest = newest or reason
    return CriterionStatus(criterion_id, "stale", reason=newest) if deciding else CriterionStatus(
        criterion_id, "missing")


def acceptance_status(statuses: Iterable[str], *, has_contract: bool) -> str:
    """§5: none, failed, stale, accepted, partial, unverified."""
    if not has_contract:
        return "none"
    values = list(statuses)
    if "fail" in values:
        return "failed"
    if "stale" in values:
        return "stale"
    if values and all(v == "pass" for v in values):
        return "accepted"
    if "pass" in values:
        return "partial"
    return "unverified"


def assess(
    contract: Mapping[str, Any] | None,
    evidence: Sequence[Mapping[str, Any]],
    items: Mapping[str, Mapping[str, Any]],
    subjects: Mapping[str, str],
    *,
    completer: str | None = None,
) -> dict[str, CriterionStatus]:
    """Every criterion of the current contract → its status at goal level.

    A binding whose item's ``semantic_digest`` changed makes its criteria stale; an independent criterion does
    not count evidence recorded by an agent that completed a bound item. With ``completer`` (a completion check),
    independence is judged against that agent alone.
    """
    if contract is None:
        return {}
    criteria = {c["id"]: c for c in contract["criteria"]}
    stale: set[str] = set()
    completers: dict[str, set[str]] = {}
    for item_id, binding in contract["bindings"].items():
        item = items.get(item_id)
        if item is None or item["semantic_digest"] != binding["semantic_digest"]:
            stale.update(binding["criteria"])
        elif item.get("completed_by") and item.get("done_kind") == "completed":
            for cid in binding["criteria"]:
                completers.setdefault(cid, set()).add(str(item["completed_by"]))
    return {
        cid: criterion_status(
            cid, c, evidence, acceptance_revision=contract["revision"],
            criterion_digests=contract["criterion_digests"], subjects=subjects,
            completers=frozenset([completer] if completer is not None else completers.get(cid, ())),
            binding_stale=cid in stale,
        )
        for cid, c in criteria.items()
    }
