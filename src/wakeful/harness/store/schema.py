"""Every table of the store, in one SQLAlchemy Core ``MetaData`` (harness.md §2, §3).

JSON values are stored as their compact text (``Text``) so both dialects hold the same bytes; times are
``*_ms`` integers (Unix milliseconds, store clock).
"""

from __future__ import annotations

import sqlalchemy as sa

__all__ = [
    "agent",
    "agent_group",
    "agent_lease",
    "api_key",
    "artifact",
    "artifact_lines",
    "artifact_path",
    "loop",
    "loop_event",
    "loop_log",
    "loop_active_count",
    "loop_transition",
    "loop_webhook_verifier",
    "message",
    "metadata",
    "node",
    "rate_bucket",
    "schema_meta",
    "session",
]

metadata = sa.MetaData()

Ms = sa.BigInteger
# an auto-incrementing 64-bit key (SQLite needs INTEGER for its rowid alias)
SeqKey = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
Id = sa.String(40)


def _fk(target: str, *, cascade: bool = False) -> sa.ForeignKey:
    return sa.ForeignKey(target, ondelete="CASCADE" if cascade else "RESTRICT")


# harness.md §3: schema_meta(version, wakeful_version, upgraded_ms); one row per applied migration
schema_meta = sa.Table(
    "schema_meta",
    metadata,
    sa.Column("version", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("wakeful_version", sa.String(40), nullable=False),
    sa.Column("upgraded_ms", Ms, nullable=False),
)

# §2.1 group ("group" is a reserved word, hence agent_group)
agent_group = sa.Table(
    "agent_group",
    metadata,
    sa.Column("id", Id, primary_key=True),
    sa.Column("name", sa.String(80), nullable=False),
    sa.Column("limits", sa.Text, nullable=True),
    sa.Column("created_ms", Ms, nullable=False),
)

# §2.1 api_key: only the SHA-256 of the secret is stored
api_key = sa.Table(
    "api_key",
    metadata,
    sa.Column("id", sa.String(16), primary_key=True),
    sa.Column("secret_sha256", sa.String(64), nullable=False),
    sa.Column("role", sa.String(8), nullable=False),
    sa.Column("group_id", Id, _fk("agent_group.id", cascade=True), nullable=True),
    sa.Column("agent_id", Id, _fk("agent.id", cascade=True), nullable=True),
    sa.Column("label", sa.String(200), nullable=True),
    sa.Column("created_ms", Ms, nullable=False),
    sa.Column("last_used_ms", Ms, nullable=True),
    sa.Column("revoked_ms", Ms, nullable=True),
    sa.CheckConstraint("role IN ('admin', 'group', 'agent')", name="api_key_role"),
)

# §2.2 agent
agent = sa.Table(
    "agent",
    metadata,
    sa.Column("id", Id, primary_key=True),
    sa.Column("group_id", Id, _fk("agent_group.id"), nullable=False, index=True),
    sa.Column("name", sa.String(80), nullable=False),
    sa.Column("status", sa.String(10), nullable=False),
    sa.Column("created_ms", Ms, nullable=False),
    sa.Column("archived_ms", Ms, nullable=True),
    sa.Column("metadata", sa.Text, nullable=False),
    sa.CheckConstraint("status IN ('active', 'archived')", name="agent_status"),
)

# §2.3 session: an agent's inbox
session = sa.Table(
    "session",
    metadata,
    sa.Column("id", Id, primary_key=True),
    sa.Column("agent_id", Id, _fk("agent.id"), nullable=False, index=True),
    sa.Column("group_id", Id, _fk("agent_group.id"), nullable=False),
    sa.Column("title", sa.String(200), nullable=False),
    sa.Column("created_ms", Ms, nullable=False),
)

# §2.3 message: the primary key makes a wake idempotent (insert-if-absent)
message = sa.Table(
    "message",
    metadata,
    sa.Column("id", sa.String(400), primary_key=True),
    sa.Column("session_id", Id, _fk("session.id", cascade=True), nullable=False),
    sa.Column("agent_id", Id, nullable=False),
    sa.Column("group_id", Id, nullable=False),
    sa.Column("kind", sa.String(10), nullable=False),
    sa.Column("role", sa.String(10), nullable=False),
    sa.Column("loop_id", Id, nullable=True),
    sa.Column("loop_name", sa.String(80), nullable=True),
    sa.Column("incarnation", sa.BigInteger, nullable=True),
    sa.Column("dedup_key", sa.String(200), nullable=True),
    sa.Column("content", sa.Text, nullable=False),
    sa.Column("created_ms", Ms, nullable=False),
    sa.Column("handled_ms", Ms, nullable=True),
    sa.Column("handled_by", sa.String(200), nullable=True),
    sa.CheckConstraint("kind IN ('loop', 'lifecycle', 'user', 'system')", name="message_kind"),
    sa.Index("message_session_created", "session_id", "created_ms"),
    sa.Index("message_agent_handled", "agent_id", "handled_ms"),
    sa.Index("message_loop", "loop_id"),
)

# §2.4 artifact: content-addressed ELF bytes per group
artifact = sa.Table(
    "artifact",
    metadata,
    sa.Column("group_id", Id, _fk("agent_group.id"), primary_key=True),
    sa.Column("sha256", sa.String(64), primary_key=True),
    sa.Column("elf", sa.LargeBinary, nullable=False),
    sa.Column("size", sa.Integer, nullable=False),
    sa.Column("origin", sa.String(10), nullable=False),
    sa.Column("toolchain", sa.Text, nullable=True),
    sa.Column("created_by", sa.String(200), nullable=False),
    sa.Column("created_ms", Ms, nullable=False),
    sa.CheckConstraint("origin IN ('build', 'upload')", name="artifact_origin"),
)

# issue 18: the line table of a built artifact (JSON of ``LineTable``), bound to the artifact's digest
artifact_lines = sa.Table(
    "artifact_lines",
    metadata,
    sa.Column("group_id", Id, primary_key=True),
    sa.Column("sha256", sa.String(64), primary_key=True),
    sa.Column("lines", sa.Text, nullable=False),
    sa.ForeignKeyConstraint(["group_id", "sha256"], ["artifact.group_id", "artifact.sha256"], ondelete="CASCADE"),
)

# §2.4 artifact_path: an agent's name for an artifact
artifact_path = sa.Table(
    "artifact_path",
    metadata,
    sa.Column("agent_id", Id, _fk("agent.id", cascade=True), primary_key=True),
    sa.Column("path", sa.String(512), primary_key=True),
    sa.Column("group_id", Id, nullable=False),
    sa.Column("sha256", sa.String(64), nullable=False),
    sa.Column("updated_ms", Ms, nullable=False),
)

# §2.5 loop
loop = sa.Table(
    "loop",
    metadata,
    sa.Column("id", Id, primary_key=True),
    sa.Column("group_id", Id, _fk("agent_group.id"), nullable=False),  # indexed with id (below)
    sa.Column("agent_id", Id, _fk("agent.id"), nullable=False, index=True),
    sa.Column("session_id", Id, _fk("session.id"), nullable=False, index=True),
    sa.Column("name", sa.String(80), nullable=False),
    sa.Column("state", sa.String(10), nullable=False),
    sa.Column("pause_reason", sa.String(10), nullable=True),
    sa.Column("failure", sa.Text, nullable=True),
    sa.Column("exit_code", sa.BigInteger, nullable=True),
    sa.Column("incarnation", sa.BigInteger, nullable=False),
    sa.Column("node_id", Id, nullable=True),
    sa.Column("object_id", sa.String(64), nullable=True),
    sa.Column("artifact_sha256", sa.String(64), nullable=False),
    sa.Column("artifact_path", sa.String(512), nullable=True),
    sa.Column("config", sa.Text, nullable=False),
    sa.Column("capabilities", sa.Text, nullable=False),
    sa.Column("creator", sa.String(200), nullable=False),
    sa.Column("checkpoint", sa.Text, nullable=True),
    sa.Column("checkpoint_bytes", sa.Integer, nullable=False),
    sa.Column("checkpoint_ms", Ms, nullable=True),
    sa.Column("webhook_secret_sha256", sa.String(64), nullable=True, unique=True),
    sa.Column("webhook_hint", sa.String(8), nullable=True),
    sa.Column("webhook_rotated_ms", Ms, nullable=True),
    sa.Column("reload_window_start_ms", Ms, nullable=True),
    sa.Column("reload_count", sa.Integer, nullable=False),
    sa.Column("notify_window_start_ms", Ms, nullable=True),
    sa.Column("notify_window_count", sa.Integer, nullable=False),
    sa.Column("notify_limited_since_ms", Ms, nullable=True),
    sa.Column("last_notified_ms", Ms, nullable=True),
    sa.Column("notified_since_activation", sa.Boolean, nullable=False),
    sa.Column("dropped_logs", sa.BigInteger, nullable=False),
    sa.Column("activated_ms", Ms, nullable=True),
    sa.Column("created_ms", Ms, nullable=False),
    sa.Column("updated_ms", Ms, nullable=False),
    sa.CheckConstraint("state IN ('active', 'paused', 'failed')", name="loop_state"),
    sa.CheckConstraint(
        "(state = 'paused') = (pause_reason IS NOT NULL)", name="loop_pause_reason_only_when_paused"
    ),
    sa.Index("loop_state_updated", "state", "updated_ms", "id"),
    sa.Index("loop_group_id_id", "group_id", "id"),  # migration 5: a group's Loops in id order (loops.list pages)
)

# §2.6 loop_event (intake is issue 6; delivery and ack use it)
loop_event = sa.Table(
    "loop_event",
    metadata,
    sa.Column("loop_id", Id, _fk("loop.id", cascade=True), primary_key=True),
    sa.Column("event_id", sa.String(128), primary_key=True),
    sa.Column("group_id", Id, nullable=False),
    sa.Column("topic", sa.String(128), nullable=False),
    sa.Column("payload", sa.Text, nullable=False),
    sa.Column("payload_sha256", sa.String(64), nullable=False),
    sa.Column("envelope_bytes", sa.Integer, nullable=False),
    sa.Column("status", sa.String(10), nullable=False),
    sa.Column("source", sa.String(10), nullable=False),
    sa.Column("received_ms", Ms, nullable=False),
    sa.Column("first_delivered_ms", Ms, nullable=True),
    sa.Column("deadline_ms", Ms, nullable=True),
    sa.Column("acked_ms", Ms, nullable=True),
    sa.Column("acked_incarnation", sa.BigInteger, nullable=True),
    sa.Column("discarded_ms", Ms, nullable=True),
    sa.CheckConstraint("status IN ('pending', 'acked', 'discarded')", name="loop_event_status"),
    sa.Index("loop_event_pending", "loop_id", "status", "received_ms", "event_id"),
    sa.Index("loop_event_group_status", "group_id", "status"),
)

# §2.7 loop_log: newest 200 per Loop are kept
loop_log = sa.Table(
    "loop_log",
    metadata,
    sa.Column("seq", SeqKey, primary_key=True, autoincrement=True),
    sa.Column("loop_id", Id, _fk("loop.id", cascade=True), nullable=False),
    sa.Column("at_ms", Ms, nullable=False),
    sa.Column("incarnation", sa.BigInteger, nullable=False),
    sa.Column("source", sa.String(10), nullable=False),
    sa.Column("text", sa.Text, nullable=False),
    sa.Index("loop_log_loop_seq", "loop_id", "seq"),
)

# §2.7 loop_transition: newest 100 per Loop are kept
loop_transition = sa.Table(
    "loop_transition",
    metadata,
    sa.Column("seq", SeqKey, primary_key=True, autoincrement=True),
    sa.Column("loop_id", Id, _fk("loop.id", cascade=True), nullable=False),
    sa.Column("at_ms", Ms, nullable=False),
    sa.Column("from_state", sa.String(10), nullable=True),
    sa.Column("from_reason", sa.String(10), nullable=True),
    sa.Column("to_state", sa.String(10), nullable=False),
    sa.Column("to_reason", sa.String(10), nullable=True),
    sa.Column("incarnation", sa.BigInteger, nullable=False),
    sa.Column("actor", sa.String(200), nullable=False),
    sa.Column("detail", sa.Text, nullable=True),
    sa.Index("loop_transition_loop_seq", "loop_id", "seq"),
)

# issue 19 (docs/decisions-harness-ingress.md "Webhook verifiers"): a Loop webhook's signature check; the signing
# secret is kept as given (an HMAC needs it), never shown by any face; settings are JSON text (migration 3)
loop_webhook_verifier = sa.Table(
    "loop_webhook_verifier",
    metadata,
    sa.Column("loop_id", Id, _fk("loop.id", cascade=True), primary_key=True),
    sa.Column("scheme", sa.String(20), nullable=False),
    sa.Column("secret", sa.Text, nullable=False),
    sa.Column("settings", sa.Text, nullable=False),
    sa.Column("updated_ms", Ms, nullable=False),
)

# issue 16 (docs/decisions-harness-store.md "The group's active count"): the number of a group's active Loops is
# SUM(n) of its rows here. Triggers on ``loop`` (migration 6) append a row for every entry into and exit from
# ``active`` (insert, delete, state or group change), in the writing transaction; the quota admission folds a group's
# rows into one under the group's quota lock (``quota.group_active``). Never written by the code otherwise
loop_active_count = sa.Table(
    "loop_active_count",
    metadata,
    sa.Column("group_id", Id, nullable=False),
    sa.Column("n", sa.BigInteger, nullable=False),
    sa.Index("loop_active_count_group", "group_id"),
)

# §2.8 node
node = sa.Table(
    "node",
    metadata,
    sa.Column("id", Id, primary_key=True),
    sa.Column("name", sa.String(200), nullable=False),
    sa.Column("host", sa.String(200), nullable=False),
    sa.Column("pid", sa.Integer, nullable=False),
    sa.Column("version", sa.String(40), nullable=False),
    sa.Column("started_ms", Ms, nullable=False),
    sa.Column("heartbeat_ms", Ms, nullable=False),
    sa.Column("state", sa.String(10), nullable=False),
    sa.Column("objects", sa.Integer, nullable=False),
    sa.Column("capacity", sa.Integer, nullable=False),
)

# §2.8 agent_lease: one per agent; epoch fences holders
agent_lease = sa.Table(
    "agent_lease",
    metadata,
    sa.Column("agent_id", Id, _fk("agent.id", cascade=True), primary_key=True),
    sa.Column("node_id", Id, nullable=False),
    sa.Column("epoch", sa.BigInteger, nullable=False),
    sa.Column("acquired_ms", Ms, nullable=False),
    sa.Column("renewed_ms", Ms, nullable=False),
    sa.Column("expires_ms", Ms, nullable=False),
)

# §2.9 rate_bucket (cluster only)
rate_bucket = sa.Table(
    "rate_bucket",
    metadata,
    sa.Column("key", sa.String(200), primary_key=True),
    sa.Column("tokens", sa.Float, nullable=False),
    sa.Column("refreshed_ms", Ms, nullable=False),
)
