"""The record of one ``wakeful doctor`` check (interfaces.md §4.2), shared by the harness's store checks and the
command line's other checks."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["FAIL", "NOT_CHECKED", "OK", "SKIPPED", "WARN", "Check"]

OK, WARN, FAIL = "ok", "warn", "fail"
SKIPPED = "skipped: "  # a check that does not apply here is ``ok`` with a detail starting so
NOT_CHECKED = "not checked: "  # a check a failed one made impossible is ``warn`` with a detail starting so


@dataclass
class Check:
    """One line of the report; ``hint`` says how to fix a ``warn`` or ``fail`` (empty for ``ok``)."""

    name: str
    status: str
    detail: str
    hint: str = ""

    def to_json(self) -> dict[str, str]:
        return {"name": self.name, "status": self.status, "detail": self.detail, "hint": self.hint}
