"""Pure rules of the control plane: scopes and coverage (§2.6), write-scope overlap (§2.4), resume conditions
(§3.4), semantic digests and item field defaults.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from wakeful.control.canonical import digest
from wakeful.control.fields import refuse

__all__ = [
    "GRANULARITY", "SCOPE_KINDS", "Scope", "check_condition", "check_scope", "covers", "globs_overlap",
    "item_defaults", "scopes_overlap", "semantic_digest",
]

SCOPE_KINDS = ("private_read", "write_scope", "resource", "production", "public_claim", "direction", "other")
GRANULARITY = ("action", "lane", "goal", "project", "global")
CONDITION_KINDS = ("work_done", "gate_resolved", "loop_wake", "loop_active", "effect_settled", "time")
_KEY_RE = re.compile(r"^[A-Za-z0-9_.:@/-]{1,160}$")
_WILD = re.compile(r"[*?\[]")


@dataclass(frozen=True)
class Scope:
    """``kind:granularity:key`` (§2.6)."""

    kind: str
    granularity: str
    key: str

    @classmethod
    def parse(cls, token: str) -> Scope:
        kind, _, rest = token.partition(":")
        granularity, _, key = rest.partition(":")
        return cls(kind, granularity, key)

    def __str__(self) -> str:
        return f"{self.kind}:{self.granularity}:{self.key}"


def check_scope(value: Any, field: str) -> str:
    """A scope token ``kind:granularity:key`` with a known kind and granularity and a key of ≤ 200 chars."""
    if not isinstance(value, str) or len(value) > 300:
        raise refuse(field, "must be a scope kind:granularity:key")
    scope = Scope.parse(value)
    if scope.kind not in SCOPE_KINDS:
        raise refuse(field, f"scope kind must be one of {', '.join(SCOPE_KINDS)}")
    if scope.granularity not in GRANULARITY:
        raise refuse(field, f"scope granularity must be one of {', '.join(GRANULARITY)}")
    if not scope.key or len(scope.key) > 200:
        raise refuse(field, "scope key must be 1..200 characters")
    return value


# §2.6: same kind, gate granularity the same or broader, gate key '*', equal, or a '/'-prefix of the required key
def covers(gate: str, required: str) -> bool:
    g, r = Scope.parse(gate), Scope.parse(required)
    if g.kind != r.kind or g.granularity not in GRANULARITY or r.granularity not in GRANULARITY:
        return False
    if GRANULARITY.index(g.granularity) < GRANULARITY.index(r.granularity):
        return False
    return g.key in ("*", r.key) or r.key.startswith(g.key.rstrip("/") + "/")


def _static(glob: str) -> tuple[str, bool]:
    match = _WILD.search(glob)
    return (glob, False) if match is None else (glob[: match.start()], True)


def globs_overlap(a: str, b: str) -> bool:
    """Conservative overlap of two path globs: never misses a real overlap, may report one for disjoint
    wildcards. Literal paths overlap when equal or one is a directory of the other; with a wildcard, when the
    literal prefixes before the first wildcard are prefixes of each other."""
    pa, wa = _static(a)
    pb, wb = _static(b)
    if not wa and not wb:
        return a == b or b.startswith(a.rstrip("/") + "/") or a.startswith(b.rstrip("/") + "/")
    return pa.startswith(pb) or pb.startswith(pa)


def scopes_overlap(a: list[str], b: list[str]) -> bool:
    """§2.4: two claims with overlapping write scopes conflict; an empty list never conflicts."""
    return any(globs_overlap(x, y) for x in a for y in b)


def check_condition(value: Any, field: str) -> str:
    """A resume condition of §3.4: ``work_done:<item>``, ``gate_resolved:<item>``, ``loop_wake:<loop>``,
    ``loop_active:<loop>``, ``effect_settled:<request_key>``, ``time:<unix_ms>``."""
    if not isinstance(value, str) or len(value) > 200:
        raise refuse(field, "must be a resume condition kind:argument")
    kind, _, arg = value.partition(":")
    if kind not in CONDITION_KINDS:
        raise refuse(field, f"condition kind must be one of {', '.join(CONDITION_KINDS)}")
    if kind == "time":
        if not arg.isdigit() or len(arg) > 16:
            raise refuse(field, "time: needs unix milliseconds")
    elif not _KEY_RE.fullmatch(arg):
        raise refuse(field, f"{kind}: needs an id or key")
    return value


# §2.4: SHA-256 over title, detail, write scopes, required scopes
def semantic_digest(item: dict[str, Any]) -> str:
    return digest(
        {
            "title": item.get("title", ""),
            "detail": item.get("detail", ""),
            "write_scopes": item.get("write_scopes", []),
            "required_scopes": item.get("required_scopes", []),
        }
    )


def item_defaults() -> dict[str, Any]:
    """Every field of a work item that lives in its ``fields`` JSON, at its empty value."""
    return {
        "detail": "", "excluded_agents": [], "depends_on": [], "write_scopes": [], "required_scopes": [],
        "satisfied_scopes": [], "blocked_reason": None, "resume_when": [], "successors": [], "supersedes": None,
        "superseded_by": None, "continuation": None, "completed_by": None, "scope": None, "targets": [],
        "question": None, "options": [], "outcome": None, "asked_ms": None, "resolved_by": None,
        "recovery": None, "blocks": [], "watch_state": None, "target": None, "observations": 0,
        "last_observed_ms": None,
    }
