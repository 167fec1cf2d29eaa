"""``wakeful.control``: the control plane — goals, acceptance, work items, claims, gates, evidence and effects,
committed by one kernel with receipts (control-plane.md). It runs no model and executes no task.
"""

from __future__ import annotations

from wakeful.control.actor import Actor
from wakeful.control.applicability import CriterionStatus
from wakeful.control.core import Control
from wakeful.control.errors import ControlRefused
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

__all__ = [
    "Actor",
    "ClaimView",
    "ContractView",
    "Control",
    "ControlRefused",
    "CriterionStatus",
    "EffectView",
    "EvidenceView",
    "GoalSnapshot",
    "GoalView",
    "ItemView",
    "Registration",
]
