"""``wakeful.control``: the control plane — goals, acceptance, work items, claims, gates, evidence and effects,
committed by one kernel with receipts (control-plane.md). It runs no model and executes no task.

``Harness`` (the harness node with ``h.control``, imported on first use) and ``seed_demo_goal`` are what the
command line and the benchmarks start.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from wakeful.control import ops  # registers the control-plane operations (issue 15)
from wakeful.control.actor import Actor
from wakeful.control.applicability import CriterionStatus
from wakeful.control.core import Control
from wakeful.control.errors import ControlRefused
from wakeful.control.reads import goals_needing_person
from wakeful.control.snapshot import (
    ClaimView,
    ContractView,
    EffectView,
    EvidenceView,
    GoalSnapshot,
    GoalView,
    ItemView,
    Registration,
)
from wakeful.control.validators import script_runner, validate

if TYPE_CHECKING:
    from wakeful.control.demo import seed_demo_goal
    from wakeful.control.embed import Harness

__all__ = [
    "Actor",
    "ClaimView",
    "ContractView",
    "Control",
    "ControlRefused",
    "CriterionStatus",
    "EffectView",
    "EvidenceView",
    "Harness",
    "GoalSnapshot",
    "GoalView",
    "ItemView",
    "Registration",
    "goals_needing_person",
    "ops",
    "seed_demo_goal",
    "script_runner",
    "validate",
]


def __getattr__(name: str) -> Any:
    if name == "Harness":
        from wakeful.control.embed import Harness

        return Harness
    if name == "seed_demo_goal":
        from wakeful.control.demo import seed_demo_goal

        return seed_demo_goal
    raise AttributeError(name)
