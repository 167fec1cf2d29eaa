"""``Actor``: who issues a command, taken from authentication (never from the body, control-plane.md §3.1)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["Actor", "ActorKind"]

ActorKind = Literal["agent", "person", "operator", "loop", "system"]


@dataclass(frozen=True)
class Actor:
    """``kind`` agent (``id`` = ``agt_…``), person (a key or user id), operator (the local CLI), loop
    (``id`` = ``lp_…``, for wakes, §9) or system (kernel-issued commands such as ``work.resume``)."""

    kind: ActorKind
    id: str
    group_id: str

    @property
    def ref(self) -> str:
        """The principal as recorded in rows (``created_by``, ``recorded_by``, …): agents by their id."""
        if self.kind == "agent":
            return self.id
        if self.kind == "loop":
            return f"system:loop:{self.id}"
        if self.kind in ("operator", "system"):
            return self.kind
        return f"person:{self.id}"

    @property
    def is_person(self) -> bool:
        """Person authority: a person principal or the operator."""
        return self.kind in ("person", "operator")

    def to_dict(self) -> dict[str, str]:
        return {"kind": self.kind, "id": self.id, "group_id": self.group_id}
