"""The harness's typed refusals, each carrying a stable lowercase code from README.md's error table.

Their place in the one tree is drawn in ``wakeful.errors``, and their HTTP statuses are rows of its one table,
``ERROR_CODES`` (the CLI exits 3 for ``unavailable``, else 1).
"""

from __future__ import annotations

from typing import Any

from wakeful.errors import WakefulError

__all__ = [
    "AgentArchived",
    "AgentNotFound",
    "AlreadyActive",
    "ArtifactInvalid",
    "ArtifactNotFound",
    "CapabilityNotAllowed",
    "BundleRefused",
    "CompilerUnavailable",
    "ConfigTooLarge",
    "Forbidden",
    "Conflict",
    "GroupBacklogFull",
    "HarnessBusy",
    "HarnessError",
    "HostCallRefused",
    "InvalidArtifact",
    "InvalidEvent",
    "InvalidJson",
    "InvalidRequest",
    "JsonObjectRequired",
    "JsonRequired",
    "LoopMailboxFull",
    "LoopNotActive",
    "NodeLocked",
    "NotFound",
    "PayloadTooLarge",
    "QuotaExceeded",
    "RateLimited",
    "SchemaError",
    "SchemaTooNew",
    "SessionInUse",
    "SessionNotFound",
    "StoreUnavailable",
    "TestRefused",
    "Throttled",
    "Unauthorized",
    "Unavailable",
    "UpgradeRequired",
]


class HarnessError(WakefulError):
    """A harness refusal: ``code`` is stable, ``details`` holds the structured extras (field, scope, …)."""

    code = "internal"

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.details = details


class InvalidRequest(HarnessError):
    code = "invalid_request"


class InvalidArtifact(InvalidRequest):
    code = "invalid_artifact"


class ConfigTooLarge(InvalidRequest):
    code = "config_too_large"


class CapabilityNotAllowed(InvalidRequest):
    code = "capability_not_allowed"


class InvalidEvent(InvalidRequest):
    """harness.md §10.1: ``details`` carries ``field`` (topic, event_id, payload, idempotency_key)."""

    code = "invalid_event"

    def __init__(self, message: str, *, field: str, **details: Any) -> None:
        super().__init__(message, field=field, **details)
        self.field = field


class InvalidJson(InvalidRequest):
    code = "invalid_json"


class JsonObjectRequired(InvalidRequest):
    code = "json_object_required"


class NotFound(HarnessError):
    code = "not_found"


class AgentNotFound(NotFound):
    code = "agent_not_found"


class SessionNotFound(NotFound):
    code = "session_not_found"


class ArtifactNotFound(NotFound):
    code = "artifact_not_found"


class Unauthorized(HarnessError):
    """A missing, malformed, unknown or revoked key."""

    code = "unauthorized"


class Forbidden(HarnessError):
    """A principal inside its scope lacking the role for an operation."""

    code = "forbidden"


class BundleRefused(InvalidRequest):
    """``400 invalid_bundle``: a build bundle breaks a rule of build.md §3 (``rule``, ``path``)."""

    code = "invalid_bundle"


class CompilerUnavailable(HarnessError):
    """The build toolchain cannot be used on this node, or builds are off (``503 compiler_unavailable``)."""

    code = "compiler_unavailable"


class TestRefused(HarnessError):
    """``loop.test``: the runtime refused to load the artifact or an event (``reason``, ``rule``)."""

    __test__ = False  # not a pytest class
    code = "test_refused"


class Conflict(HarnessError):
    code = "conflict"


class LoopNotActive(Conflict):
    code = "loop_not_active"


class AlreadyActive(Conflict):
    code = "already_active"


class AgentArchived(Conflict):
    code = "agent_archived"


class QuotaExceeded(Conflict):
    """harness.md §15: ``details`` carries ``scope`` (``agent`` | ``group``) and ``limit``."""

    code = "quota_exceeded"

    def __init__(self, scope: str, limit: int) -> None:
        super().__init__(f"the {scope} is at its limit of {limit} active Loops", scope=scope, limit=limit)
        self.scope = scope
        self.limit = limit


class ArtifactInvalid(Conflict):
    code = "artifact_invalid"


class SessionInUse(Conflict):
    code = "session_in_use"


class HarnessBusy(HarnessError):
    code = "busy"


class Throttled(HarnessError):
    """A 429 refusal; ``details["retry_after_s"]`` (an int ≥ 1) is what a face copies into ``Retry-After``."""

    code = "throttled"

    def __init__(self, message: str, *, retry_after_s: float, **details: Any) -> None:
        seconds = max(1, -int(-retry_after_s // 1))  # whole seconds, rounded up, at least 1 (harness.md §14)
        super().__init__(message, retry_after_s=seconds, **details)
        self.retry_after_s = seconds


class RateLimited(Throttled):
    code = "rate_limited"


class LoopMailboxFull(Throttled):
    """A Loop's pending events are at their limit (harness.md §10); the runtime's object mailbox is ``MailboxFull``."""

    code = "mailbox_full"


class GroupBacklogFull(Throttled):
    code = "group_backlog_full"


class PayloadTooLarge(HarnessError):
    code = "payload_too_large"


class JsonRequired(HarnessError):
    code = "json_required"


class StoreUnavailable(HarnessError):
    """harness.md §3: connection loss, lock timeout or disk full. Never reported as success.

    ``lost_uncommitted``: the transaction's PostgreSQL session was lost and the transaction did not commit (set by
    ``Store.tx``), so work that may run twice can run again at once on a fresh session (``Store.run_rerunnable``,
    group commit)."""

    code = "unavailable"
    lost_uncommitted = False


Unavailable = StoreUnavailable


class SchemaError(HarnessError):
    code = "schema_error"


class SchemaTooNew(SchemaError):
    code = "schema_too_new"


class UpgradeRequired(SchemaError):
    code = "upgrade_required"


class NodeLocked(HarnessError):
    code = "node_locked"


class HostCallRefused(HarnessError):
    """A host call refused with a harness.md §9.4 reason code (``stale_incarnation``, ``rate_limited``, …)."""

    def __init__(self, reason: str, message: str = "", **details: Any) -> None:
        super().__init__(message or reason, **details)
        self.code = reason
