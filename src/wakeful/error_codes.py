"""The one table of error codes: each stable code with its HTTP status, its MCP treatment and, where the stdio
runtime puts it on the wire, its spinfoam v1 kind and JSON-RPC code (runtime-protocol.md §5; README "Error codes").

Codes are lowercase on every face (HTTP body ``error``, MCP tool errors, CLI JSON). Upper-case names exist only
as ``wire`` kinds: what spinfoam protocol v1 sends in ``error.data.kind`` (and as ``kind`` in compile results and
outcomes), kept byte for byte. A code may share its wire kind with others (``invalid_request`` and
``invalid_bundle`` are both ``INVALID_PARAMS``); a wire kind has exactly one JSON-RPC code.

Columns:

- ``http``: the status a face answers; ``None`` for codes that are never an HTTP error (data answers such as a
  decide or web failure, host-call reasons, stdio-only kinds). ``status_for`` answers 500 for those and for
  unknown codes: reaching a face that way is a bug.
- ``mcp``: ``tool_error`` (``isError: true`` with ``{error, message, …details}``), ``report`` (a normal answer
  flagged ``isError``, e.g. a failed build's report) or ``internal`` (logged; the client sees only ``internal``).
- ``wire`` / ``rpc``: the §5 kind and JSON-RPC code; ``rpc`` is ``None`` for wire kinds that are not error
  responses of §5 (``BUILD_FAILED``, ``PROGRAM_FAULT``, the ``host.call`` reply kinds ``HOST_ERROR``,
  ``NO_HANDLER``).

Layer 0: stdlib only, imported by every layer.
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["CODES", "ROWS", "WIRE_RPC", "ErrorCode", "http_status", "mcp_treatment", "rpc_code", "status_for",
           "wire_kind"]


class ErrorCode(NamedTuple):
    code: str
    http: int | None
    mcp: str = "tool_error"
    wire: str | None = None
    rpc: int | None = None


_E = ErrorCode
ROWS: tuple[ErrorCode, ...] = (
    # -- runtime, build, VM: the exceptions of wakeful.errors, with their stdio kinds (runtime-protocol.md §5)
    _E("invalid_request", 400, wire="INVALID_PARAMS", rpc=-32602),  # InvalidParams; the harness's InvalidRequest
    _E("invalid_bundle", 400, wire="INVALID_PARAMS", rpc=-32602),  # BundleError (build.md §3)
    _E("invalid_json", 400, wire="PARSE_ERROR", rpc=-32700),  # JsonSyntaxError; the harness's InvalidJson
    _E("busy", 429, wire="BUSY", rpc=-32001),  # Busy, BuildBusy; HarnessBusy; a host-call reason
    _E("mailbox_full", 429, wire="MAILBOX_FULL", rpc=-32002),  # MailboxFull; LoopMailboxFull (harness)
    _E("object_not_found", 500, wire="OBJECT_NOT_FOUND", rpc=-32004),  # never at a face: the harness translates
    _E("invalid_artifact", 400, wire="INVALID_OBJECT", rpc=-32010),  # InvalidObject (.rule); InvalidArtifact
    _E("compiler_unavailable", 503, wire="SANDBOX_UNAVAILABLE", rpc=-32020),  # BuildUnavailable
    _E("build_failed", None, "report", wire="BUILD_FAILED"),  # not an error: a build report, state "failed"
    _E("program_fault", None, "internal", wire="PROGRAM_FAULT"),  # GuestFault: an object's outcome, not an error
    _E("host_error", None, "internal", wire="HOST_ERROR"),  # HostCallError: guest sees SF_HOST_ERROR
    _E("no_handler", None, "internal", wire="NO_HANDLER"),  # a host.call reply kind (client §15), not an RPC error
    _E("runtime_closed", 500, "internal"),  # RuntimeClosed: the runtime child went away
    _E("rpc_error", 500, "internal"),  # RpcError: an error response with a kind outside §5
    # -- stdio server only: kinds of §4 dispatch, never raised as exceptions, never at a face
    _E("invalid_envelope", None, "internal", wire="INVALID_REQUEST", rpc=-32600),
    _E("duplicate_id", None, "internal", wire="DUPLICATE_ID", rpc=-32600),
    _E("method_not_found", None, "internal", wire="METHOD_NOT_FOUND", rpc=-32601),
    _E("not_initialized", None, "internal", wire="NOT_INITIALIZED", rpc=-32000),
    _E("response_too_large", None, "internal", wire="RESPONSE_TOO_LARGE", rpc=-32003),
    _E("internal", 500, "internal", wire="INTERNAL", rpc=-32603),  # a bug: request id, never a stack trace
    # -- harness and faces (harness.md, interfaces.md §2.1)
    _E("config_too_large", 400),
    _E("capability_not_allowed", 400),
    _E("invalid_event", 400),
    _E("json_object_required", 400),
    _E("unauthorized", 401),
    _E("not_found", 404),
    _E("agent_not_found", 404),
    _E("session_not_found", 404),
    _E("artifact_not_found", 404),
    _E("conflict", 409),
    _E("loop_not_active", 409),
    _E("already_active", 409),
    _E("agent_archived", 409),
    _E("quota_exceeded", 409),
    _E("artifact_invalid", 409),
    _E("session_in_use", 409),
    _E("payload_too_large", 413),
    _E("json_required", 415),
    _E("throttled", 429),
    _E("rate_limited", 429),
    _E("group_backlog_full", 429),
    _E("unavailable", 503),  # StoreUnavailable; the CLI exits 3
    _E("schema_too_new", 503),
    _E("upgrade_required", 503),
    _E("schema_error", 500),
    _E("node_locked", 500),
    _E("forbidden", 403),
    _E("csrf_required", 403),  # the dashboard's cookie without its CSRF token (docs/decisions-ui.md)
    _E("method_not_allowed", 405),
    _E("draining", 503),
    # -- control plane (control-plane.md §4.1; interfaces.md §2.2: the refusals not listed above are 409)
    _E("invalid_command", 400),
    _E("not_registered", 403),
    _E("excluded", 403),
    _E("unknown_actor", 403),
    *(_E(code, 409) for code in (
        "operation_id_conflict", "goal_not_active", "gate_required", "write_scope_conflict", "claimed_by_other",
        "revision_conflict", "claim_required", "claim_stale", "claim_expired", "idempotency_key_reuse",
        "budget_exceeded", "illegal_transition", "dependencies_open", "continuation_invalid", "effect_unsettled",
        "acceptance_unmet", "request_key_conflict", "readback_required", "loop_not_found", "loop_foreign",
        "proposal_stale",
    )),
    # -- MCP tools (interfaces.md §3): refusals of the tool layer itself
    _E("unknown_tool", None),  # also a host-call reason (a script's tool call)
    _E("invalid_arguments", None),  # also a host-call reason
    _E("invalid_result", None),
    _E("tool_failed", None),  # also a host-call reason
    _E("test_refused", None),
    # -- answered as data, never as an HTTP error: host-call reasons (harness.md §9.4), decide (§16.5), web (§17.2)
    *(_E(code, None) for code in (
        "stale_incarnation", "not_active", "budget_exhausted", "console_budget_exhausted", "checkpoint_too_large",
        "unknown_event", "deadline_exceeded", "not_allowed", "result_too_large",
        "not_configured", "timeout", "provider_error", "invalid_response",
        "blocked_destination", "connect_failed", "dns_failure", "tls_error", "too_many_redirects",
    )),
    # -- the CLI and the benchmarks
    _E("bench_failed", None),
)

CODES: dict[str, ErrorCode] = {row.code: row for row in ROWS}
# wire kind -> JSON-RPC code (§5), for the stdio server's error objects
WIRE_RPC: dict[str, int] = {row.wire: row.rpc for row in ROWS if row.wire is not None and row.rpc is not None}


def status_for(code: str) -> int:
    """The HTTP status of ``code``; 500 for a code that is not an HTTP error or not in the table (a bug)."""
    row = CODES.get(code)
    return row.http if row is not None and row.http is not None else 500


http_status = status_for


def mcp_treatment(code: str) -> str:
    """How an MCP tool call answers ``code``: ``tool_error``, ``report`` or ``internal`` (unknown codes)."""
    row = CODES.get(code)
    return row.mcp if row is not None else "internal"


def wire_kind(code: str) -> str | None:
    """The spinfoam v1 kind of ``code`` on the stdio wire, or ``None`` when the protocol has none."""
    row = CODES.get(code)
    return row.wire if row is not None else None


def rpc_code(kind: str) -> int:
    """The JSON-RPC code of a wire kind (§5); -32603 for any other kind."""
    return WIRE_RPC.get(kind, -32603)
