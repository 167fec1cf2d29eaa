"""The control plane's tables (control-plane.md §2), on the harness store, in their own ``MetaData``.

Created by the store migration ``0002_control`` (a frozen copy of these definitions, since harness never imports
control); ``tests/unit/control_kernel`` checks that the two stay identical. JSON columns are compact text.
"""

from __future__ import annotations

import sqlalchemy as sa

__all__ = [
    "acceptance",
    "budget_spend",
    "control_commit",
    "effect",
    "evidence",
    "goal",
    "goal_agent",
    "goal_create_op",
    "metadata",
    "projection",
    "work_claim",
    "work_item",
]

metadata = sa.MetaData()

Ms = sa.BigInteger
Id = sa.String(40)
Key = sa.String(160)

# §2.1 goal; revision = the goal's commit sequence
goal = sa.Table(
    "goal",
    metadata,
    sa.Column("id", Id, primary_key=True),
    sa.Column("group_id", Id, nullable=False, index=True),
    sa.Column("title", sa.String(200), nullable=False),
    sa.Column("objective", sa.Text, nullable=False),
    sa.Column("status", sa.String(10), nullable=False),
    sa.Column("claim_mode", sa.String(4), nullable=False),
    sa.Column("revision", sa.BigInteger, nullable=False),
    sa.Column("acceptance_revision", sa.Integer, nullable=False),
    sa.Column("subjects", sa.Text, nullable=False),
    sa.Column("budget", sa.Text, nullable=True),
    sa.Column("created_by", sa.String(200), nullable=False),
    sa.Column("created_ms", Ms, nullable=False),
    sa.Column("updated_ms", Ms, nullable=False),
    sa.Column("closed_ms", Ms, nullable=True),
    sa.CheckConstraint("status IN ('active', 'paused', 'closed')", name="goal_status"),
    sa.CheckConstraint("claim_mode IN ('soft', 'hard')", name="goal_claim_mode"),
)

# goal.create's operation ids are unique per group (§2.9)
goal_create_op = sa.Table(
    "goal_create_op",
    metadata,
    sa.Column("group_id", Id, primary_key=True),
    sa.Column("operation_id", Key, primary_key=True),
    sa.Column("goal_id", Id, nullable=False),
)

# §2.2 registration
goal_agent = sa.Table(
    "goal_agent",
    metadata,
    sa.Column("goal_id", Id, sa.ForeignKey("goal.id", ondelete="CASCADE"), primary_key=True),
    sa.Column("agent_id", Id, primary_key=True),
    sa.Column("status", sa.String(10), nullable=False),
    sa.Column("registered_ms", Ms, nullable=False),
    sa.Column("registered_by", sa.String(200), nullable=False),
    sa.CheckConstraint("status IN ('active', 'excluded')", name="goal_agent_status"),
)

# §2.3 acceptance contract, every revision kept
acceptance = sa.Table(
    "acceptance",
    metadata,
    sa.Column("goal_id", Id, sa.ForeignKey("goal.id", ondelete="CASCADE"), primary_key=True),
    sa.Column("revision", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("document", sa.Text, nullable=False),
    sa.Column("digest", sa.String(64), nullable=False),
    sa.Column("criterion_digests", sa.Text, nullable=False),
    sa.Column("bindings", sa.Text, nullable=False),
    sa.Column("set_by", sa.String(200), nullable=False),
    sa.Column("set_ms", Ms, nullable=False),
)

# §2.4 work item: list and class fields live in ``fields`` (JSON); loop_id is a column for the Loop lookups of §9
work_item = sa.Table(
    "work_item",
    metadata,
    sa.Column("id", Id, primary_key=True),
    sa.Column("goal_id", Id, sa.ForeignKey("goal.id", ondelete="CASCADE"), nullable=False),
    sa.Column("class", sa.String(12), nullable=False),
    sa.Column("status", sa.String(10), nullable=False),
    sa.Column("done_kind", sa.String(10), nullable=True),
    sa.Column("revision", sa.BigInteger, nullable=False),
    sa.Column("title", sa.String(200), nullable=False),
    sa.Column("priority", sa.Integer, nullable=False),
    sa.Column("semantic_digest", sa.String(64), nullable=False),
    sa.Column("bound_agent", Id, nullable=True),
    sa.Column("loop_id", Id, nullable=True, index=True),
    sa.Column("status_seq", sa.BigInteger, nullable=False),
    sa.Column("fields", sa.Text, nullable=False),
    sa.Column("created_by", sa.String(200), nullable=False),
    sa.Column("created_ms", Ms, nullable=False),
    sa.Column("updated_ms", Ms, nullable=False),
    sa.Column("done_ms", Ms, nullable=True),
    sa.CheckConstraint(
        "class IN ('advancement', 'user_gate', 'user_action', 'monitor', 'blocker')", name="work_item_class"
    ),
    sa.CheckConstraint("status IN ('open', 'blocked', 'deferred', 'done')", name="work_item_status"),
    sa.Index("work_item_goal_status", "goal_id", "status"),
)

# §2.5 claim: one row per item; released rows stay so epochs never repeat
work_claim = sa.Table(
    "work_claim",
    metadata,
    sa.Column("item_id", Id, sa.ForeignKey("work_item.id", ondelete="CASCADE"), primary_key=True),
    sa.Column("goal_id", Id, nullable=False, index=True),
    sa.Column("holder", Id, nullable=False),
    sa.Column("epoch", sa.BigInteger, nullable=False),
    sa.Column("version", sa.BigInteger, nullable=False),
    sa.Column("key", Key, nullable=False),
    sa.Column("ttl_s", sa.Integer, nullable=False),
    sa.Column("acquired_ms", Ms, nullable=False),
    sa.Column("renewed_ms", Ms, nullable=False),
    sa.Column("expires_ms", Ms, nullable=False),
    sa.Column("status", sa.String(10), nullable=False),
    sa.CheckConstraint("status IN ('active', 'released')", name="work_claim_status"),
)

# §2.7 evidence: immutable; seq = the commit that recorded it
evidence = sa.Table(
    "evidence",
    metadata,
    sa.Column("id", Id, primary_key=True),
    sa.Column("goal_id", Id, sa.ForeignKey("goal.id", ondelete="CASCADE"), nullable=False),
    sa.Column("seq", sa.BigInteger, nullable=False),
    sa.Column("work_item_id", Id, nullable=True),
    sa.Column("criterion_ids", sa.Text, nullable=False),
    sa.Column("kind", sa.String(12), nullable=False),
    sa.Column("subject", sa.String(64), nullable=True),
    sa.Column("artifact_revision", sa.String(200), nullable=True),
    sa.Column("workload", sa.Text, nullable=True),
    sa.Column("acceptance_revision", sa.Integer, nullable=False),
    sa.Column("criterion_digests", sa.Text, nullable=False),
    sa.Column("verdict", sa.String(12), nullable=False),
    sa.Column("summary", sa.Text, nullable=False),
    sa.Column("details_url", sa.String(500), nullable=True),
    sa.Column("source", sa.String(10), nullable=False),
    sa.Column("recorded_by", sa.String(200), nullable=False),
    sa.Column("observed_ms", Ms, nullable=False),
    sa.Column("recorded_ms", Ms, nullable=False),
    sa.Index("evidence_goal_seq", "goal_id", "seq"),
    sa.Index("evidence_item", "work_item_id"),
)

# §2.8 effect ledger
effect = sa.Table(
    "effect",
    metadata,
    sa.Column("id", Id, primary_key=True),
    sa.Column("goal_id", Id, sa.ForeignKey("goal.id", ondelete="CASCADE"), nullable=False),
    sa.Column("work_item_id", Id, nullable=True),
    sa.Column("request_key", Key, nullable=False),
    sa.Column("kind", sa.String(64), nullable=False),
    sa.Column("target", sa.String(500), nullable=False),
    sa.Column("payload_digest", sa.String(200), nullable=False),
    sa.Column("state", sa.String(10), nullable=False),
    sa.Column("attempt", sa.Integer, nullable=False),
    sa.Column("outcome", sa.Text, nullable=True),
    sa.Column("readback", sa.Text, nullable=True),
    sa.Column("actor", sa.String(200), nullable=False),
    sa.Column("created_ms", Ms, nullable=False),
    sa.Column("updated_ms", Ms, nullable=False),
    sa.UniqueConstraint("goal_id", "request_key", name="effect_goal_request_key"),
    sa.CheckConstraint("state IN ('intended', 'succeeded', 'failed', 'unknown')", name="effect_state"),
)

# §2.9 commit log with receipts ("commit" is reserved in SQL)
control_commit = sa.Table(
    "control_commit",
    metadata,
    sa.Column("goal_id", Id, sa.ForeignKey("goal.id", ondelete="CASCADE"), primary_key=True),
    sa.Column("seq", sa.BigInteger, primary_key=True, autoincrement=False),
    sa.Column("operation_id", Key, nullable=False),
    sa.Column("actor", sa.Text, nullable=False),
    sa.Column("command_type", sa.String(32), nullable=False),
    sa.Column("request_digest", sa.String(64), nullable=False),
    sa.Column("expected", sa.Text, nullable=True),
    sa.Column("events", sa.Text, nullable=False),
    sa.Column("receipt", sa.Text, nullable=False),
    sa.Column("committed_ms", Ms, nullable=False),
    sa.UniqueConstraint("goal_id", "operation_id", name="control_commit_operation"),
)

# budget.spend: units per goal and UTC day
budget_spend = sa.Table(
    "budget_spend",
    metadata,
    sa.Column("goal_id", Id, sa.ForeignKey("goal.id", ondelete="CASCADE"), primary_key=True),
    sa.Column("day", sa.String(10), primary_key=True),
    sa.Column("units", sa.BigInteger, nullable=False),
)

# §8 projection cache (a pure function of the goal at source_revision; deleting rows loses nothing)
projection = sa.Table(
    "projection",
    metadata,
    sa.Column("goal_id", Id, sa.ForeignKey("goal.id", ondelete="CASCADE"), primary_key=True),
    sa.Column("kind", sa.String(16), primary_key=True),
    sa.Column("source_revision", sa.BigInteger, nullable=False),
    sa.Column("body", sa.Text, nullable=False),
    sa.Column("generated_ms", Ms, nullable=False),
)
