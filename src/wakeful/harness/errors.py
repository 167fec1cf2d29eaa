"""The harness's typed refusals, each carrying a stable lowercase code from README.md's error table.

Faces map ``code`` to an HTTP status with ``HTTP_STATUS``; the CLI exits 3 for ``unavailable``, else 1.

    WakefulError
    └── HarnessError                      (code, message, details)
        ├── InvalidRequest                invalid_request            400
        │   ├── InvalidArtifact           invalid_artifact           400
        │   ├── ConfigTooLarge            config_too_large           400
        │   ├── CapabilityNotAllowed      capability_not_allowed     400 (loop.create only)
        │   ├── InvalidEvent              invalid_event              400 (details: field)
        │   ├── InvalidJson               invalid_json               400
        │   └── JsonObjectRequired        json_object_required       400
        ├── NotFound                      not_found                  404
        │   ├── AgentNotFound             agent_not_found            404
        │   ├── SessionNotFound           session_not_found          404
        │   └── ArtifactNotFound          artifact_not_found         404
        ├── Conflict                      (409 refusals)
        │   ├── LoopNotActive             loop_not_active            409 (details: state, pause_reason)
        │   ├── AlreadyActive             already_active             409
        │   ├── AgentArchived             agent_archived             409
        │   ├── QuotaExceeded             quota_exceeded             409 (details: scope, limit)
        │   ├── ArtifactInvalid           artifact_invalid           409
        │   └── SessionInUse              session_in_use             409
        ├── HarnessBusy                   busy                       429
        ├── Throttled                     (429 refusals, details: retry_after_s ≥ 1 → Retry-After)
        │   ├── RateLimited               rate_limited               429
        │   ├── MailboxFull               mailbox_full               429
        │   └── GroupBacklogFull          group_backlog_full         429
        ├── PayloadTooLarge               payload_too_large          413
        ├── JsonRequired                  json_required              415
        ├── StoreUnavailable              unavailable                503 (connection loss, lock timeout, disk full)
        │   (alias: Unavailable)
        ├── SchemaError                   (the store cannot be opened at this version)
        │   ├── SchemaTooNew              schema_too_new             503
        │   └── UpgradeRequired           upgrade_required           503
        ├── NodeLocked                    node_locked                (another node holds the SQLite file)
        └── HostCallRefused               one of harness.md §9.4's reason codes (guest: SF_HOST_ERROR)
"""

from __future__ import annotations

from typing import Any

from wakeful.errors import WakefulError

__all__ = [
    "HTTP_STATUS",
    "AgentArchived",
    "AgentNotFound",
    "AlreadyActive",
    "ArtifactInvalid",
    "ArtifactNotFound",
    "CapabilityNotAllowed",
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
    "LoopNotActive",
    "MailboxFull",
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
        self.details: dict[str, Any] = details

    def to_dict(self) -> dict[str, Any]:
        return {"error": self.code, "message": self.message, **self.details}


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


class MailboxFull(Throttled):
    code = "mailbox_full"


class GroupBacklogFull(Throttled):
    code = "group_backlog_full"


class PayloadTooLarge(HarnessError):
    code = "payload_too_large"


class JsonRequired(HarnessError):
    code = "json_required"


class StoreUnavailable(HarnessError):
    """harness.md §3: connection loss, lock timeout or disk full. Never reported as success."""

    code = "unavailable"


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


# code -> HTTP status (README.md "Error codes"); codes not listed are 500 at a face
HTTP_STATUS: dict[str, int] = {
    "invalid_request": 400,
    "invalid_bundle": 400,
    "invalid_artifact": 400,
    "config_too_large": 400,
    "capability_not_allowed": 400,
    "invalid_event": 400,
    "invalid_json": 400,
    "json_object_required": 400,
    "unauthorized": 401,
    "not_found": 404,
    "agent_not_found": 404,
    "session_not_found": 404,
    "artifact_not_found": 404,
    "conflict": 409,
    "loop_not_active": 409,
    "already_active": 409,
    "agent_archived": 409,
    "quota_exceeded": 409,
    "artifact_invalid": 409,
    "session_in_use": 409,
    "payload_too_large": 413,
    "json_required": 415,
    "rate_limited": 429,
    "mailbox_full": 429,
    "group_backlog_full": 429,
    "busy": 429,
    "unavailable": 503,
    "compiler_unavailable": 503,
    "schema_too_new": 503,
    "upgrade_required": 503,
    "internal": 500,
}
