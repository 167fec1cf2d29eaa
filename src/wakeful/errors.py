"""The one exception tree of wakeful. Every exception the project raises derives from :class:`WakefulError`.

Each error carries a stable lowercase ``code`` (never reworded; ``message`` may be). The one table of codes,
``ERROR_CODES`` below, maps each code to its HTTP status, its MCP treatment and, for the stdio runtime, the
spinfoam v1 kind and JSON-RPC code put on the wire (runtime-protocol.md §5; ``wire_code`` gives the kind).
``to_dict()`` is ``{code, message, …details}`` for every class; the faces answer ``face_body()``,
``{error, message, …details}`` (interfaces.md §1). Codes in brackets are set per instance (a refusal's reason).

    WakefulError                          internal
    ├── InvalidParams                     invalid_request        INVALID_PARAMS -32602
    │   ├── BundleError                   invalid_bundle         INVALID_PARAMS -32602  (.rule, .path; build.md §3)
    │   ├── JsonError                     invalid_request        (runtime.jsonval)
    │   │   ├── JsonSyntaxError           invalid_json           PARSE_ERROR -32700
    │   │   ├── JsonLimitError            invalid_request
    │   │   └── JsonTypeError             invalid_request
    │   ├── EventRefused                  invalid_request        (runtime.scripted)
    │   ├── AsmError                      invalid_request        (vm.asm)
    │   └── UsageError                    invalid_request        (cli.output; the CLI exits 2)
    ├── Busy                              busy                   BUSY -32001
    │   └── BuildBusy                     busy                   (build queue full)
    ├── MailboxFull                       mailbox_full           MAILBOX_FULL -32002  (an object's mailbox)
    ├── ObjectNotFound                    object_not_found       OBJECT_NOT_FOUND -32004
    ├── InvalidObject                     invalid_artifact       INVALID_OBJECT -32010  (.rule: ELF_*, STACK, …)
    │   └── MissingEntry                  invalid_artifact       (vm.elf; §6.3 answers it -32602)
    ├── BuildUnavailable                  compiler_unavailable   SANDBOX_UNAVAILABLE -32020
    ├── GuestFault                        program_fault          (an object's outcome, not an RPC error)
    ├── HostCallError                     host_error             (guest: SF_HOST_ERROR; .kind on the wire)
    ├── RuntimeClosed                     runtime_closed         (runtime.client)
    ├── RpcError                          rpc_error              (runtime.client; .rpc_code, .kind)
    ├── FrameTooLong                      internal               (runtime.framing; fatal for a stdio session)
    ├── _Fatal                            internal               (runtime.stdio; the session must close)
    ├── _Refused                          internal               (runtime.jsonval; becomes JsonSyntaxError)
    ├── _Over                             internal               (runtime.jsonval; a walk crossed a cap)
    ├── _Failed                           internal               (build.driver; ends the pipeline)
    ├── _ProbeError                       internal               (build.driver; the toolchain probe failed)
    ├── _Bad                              internal               (build.lines; unreadable debug object)
    ├── HelperDied                        internal               (build.helper)
    ├── LandlockError                     internal               (build.sandbox; also an OSError)
    ├── _Full                             internal               (vm.frames; a frame is the full 4,096 bytes)
    ├── Untranslatable                    internal               (vm.translate; the interpreter runs it)
    ├── UnsafeSource                      internal               (vm.srccheck; a translator bug)
    ├── HarnessError                      internal               (harness.errors: code, message, details)
    │   ├── InvalidRequest                invalid_request
    │   │   ├── InvalidArtifact           invalid_artifact
    │   │   ├── BundleRefused             invalid_bundle         (a build operation's bundle, build.md §3)
    │   │   ├── ConfigTooLarge            config_too_large
    │   │   ├── CapabilityNotAllowed      capability_not_allowed
    │   │   ├── InvalidEvent              invalid_event
    │   │   ├── InvalidJson               invalid_json
    │   │   └── JsonObjectRequired        json_object_required
    │   ├── NotFound                      not_found
    │   │   ├── AgentNotFound             agent_not_found
    │   │   ├── SessionNotFound           session_not_found
    │   │   └── ArtifactNotFound          artifact_not_found
    │   ├── Unauthorized                  unauthorized           (a missing, unknown or revoked key)
    │   ├── Forbidden                     forbidden              (inside its scope, without the role)
    │   ├── Conflict                      conflict
    │   │   ├── LoopNotActive             loop_not_active
    │   │   ├── AlreadyActive             already_active
    │   │   ├── AgentArchived             agent_archived
    │   │   ├── QuotaExceeded             quota_exceeded
    │   │   ├── ArtifactInvalid           artifact_invalid
    │   │   └── SessionInUse              session_in_use
    │   ├── HarnessBusy                   busy
    │   ├── Throttled                     throttled              (details: retry_after_s → Retry-After)
    │   │   ├── RateLimited               rate_limited
    │   │   ├── LoopMailboxFull           mailbox_full           (a Loop's pending events)
    │   │   └── GroupBacklogFull          group_backlog_full
    │   ├── PayloadTooLarge               payload_too_large
    │   ├── JsonRequired                  json_required
    │   ├── StoreUnavailable              unavailable            (alias Unavailable)
    │   ├── SchemaError                   schema_error
    │   │   ├── SchemaTooNew              schema_too_new
    │   │   └── UpgradeRequired           upgrade_required
    │   ├── NodeLocked                    node_locked
    │   ├── HostCallRefused               [a harness.md §9.4 reason]
    │   ├── CompilerUnavailable           compiler_unavailable
    │   ├── TestRefused                   test_refused           (loop.test: the runtime refused the artifact)
    │   ├── SignatureRefused              unauthorized           (harness.webhook_verify)
    │   ├── Refused                       [the remote node's code] (harness.ops.backend)
    │   ├── ApiError                      [any code]             (api.errors)
    │   ├── CsrfRequired                  csrf_required          (api.errors)
    │   └── ControlRefused                [control-plane.md §4.1 code] (control.errors)
    ├── ArtifactProblem                   internal               (harness.integrity; .failure)
    ├── CheckpointTooLarge                checkpoint_too_large   (harness.checkpoint; also a ValueError)
    ├── TargetError                       invalid_request        (harness.web_policy; also a ValueError)
    ├── WebFailure                        [a §17.2 code]         (harness.web; answered as data)
    ├── DecideFailure                     [a §16.5 code]         (harness.decide.errors; answered as data)
    │   └── ProviderError                 [a §16.5 code]
    ├── EffectFailed                      internal               (control.effects; raised by an effect's sender)
    ├── EffectOutcomeUnknown              internal               (control.effects)
    ├── ToolRefusal                       [any code]             (mcp.table)
    ├── RemoteError                       [the server's code]    (cli.remote)
    ├── Unavailable                       unavailable            (cli.output; the CLI exits 3)
    ├── BenchError                        bench_failed           (bench.variants)
    │   └── RpcFailed                     bench_failed           (bench.stdio_client)
    └── BenchSchemaError                  internal               (bench.schema; also a ValueError)

Not errors: ``SIGNALS`` names the control-flow exceptions that must pass through every ``except WakefulError``
(``cli.output.CliExit`` ends a command with an exit status after its output was written).
"""

from __future__ import annotations

from typing import Any, NamedTuple

__all__ = [
    "ERROR_CODES",
    "ROWS",
    "RPC_CODES",
    "WIRE_RPC",
    "SIGNALS",
    "Busy",
    "BuildBusy",
    "BuildUnavailable",
    "BundleError",
    "GuestFault",
    "HostCallError",
    "InvalidObject",
    "InvalidParams",
    "MailboxFull",
    "ObjectNotFound",
    "ErrorCode",
    "WakefulError",
    "mcp_treatment",
    "rpc_code",
    "status_for",
    "wire_kind",
]


# ---------------------------------------------------------------- the one table of codes (README "Error codes")
#
# Codes are lowercase on every face (HTTP body ``error``, MCP tool errors, CLI JSON). Upper-case names exist only
# as ``wire`` kinds: what spinfoam protocol v1 sends in ``error.data.kind`` (and as ``kind`` in compile results and
# outcomes), kept byte for byte. A code may share its wire kind with others (``invalid_request`` and
# ``invalid_bundle`` are both ``INVALID_PARAMS``); a wire kind has exactly one JSON-RPC code.
#
# Columns:
#
# - ``http``: the status a face answers; ``None`` for codes that are never an HTTP error (data answers such as a
#   decide or web failure, host-call reasons, stdio-only kinds). ``status_for`` answers 500 for those and for
#   unknown codes: reaching a face that way is a bug.
# - ``mcp``: ``tool_error`` (``isError: true`` with ``{error, message, …details}``), ``report`` (a normal answer
#   flagged ``isError``, e.g. a failed build's report) or ``internal`` (logged; the client sees only ``internal``).
# - ``wire`` / ``rpc``: the §5 kind and JSON-RPC code; ``rpc`` is ``None`` for wire kinds that are not error
#   responses of §5 (``BUILD_FAILED``, ``PROGRAM_FAULT``, the ``host.call`` reply kinds ``HOST_ERROR``,
#   ``NO_HANDLER``).


class ErrorCode(NamedTuple):
    code: str
    http: int | None
    mcp: str = "tool_error"
    wire: str | None = None
    rpc: int | None = None


_E = ErrorCode
ROWS: tuple[ErrorCode, ...] = (
    # -- runtime, build, VM: the exceptions of this module, with their stdio kinds (runtime-protocol.md §5)
    _E("invalid_request", 400, wire="INVALID_PARAMS", rpc=-32602),  # InvalidParams; the harness's InvalidRequest
    _E("invalid_bundle", 400, wire="INVALID_PARAMS", rpc=-32602),  # BundleError (build.md §3)
    _E("test_refused", 400),  # loop.test: the runtime refused the artifact or an event
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

ERROR_CODES: dict[str, ErrorCode] = {row.code: row for row in ROWS}
# wire kind -> JSON-RPC code (§5), for the stdio server's error objects
WIRE_RPC: dict[str, int] = {row.wire: row.rpc for row in ROWS if row.wire is not None and row.rpc is not None}


def status_for(code: str) -> int:
    """The HTTP status of ``code``; 500 for a code that is not an HTTP error or not in the table (a bug)."""
    row = ERROR_CODES.get(code)
    return row.http if row is not None and row.http is not None else 500


http_status = status_for


def mcp_treatment(code: str) -> str:
    """How an MCP tool call answers ``code``: ``tool_error``, ``report`` or ``internal`` (unknown codes)."""
    row = ERROR_CODES.get(code)
    return row.mcp if row is not None else "internal"


def wire_kind(code: str) -> str | None:
    """The spinfoam v1 kind of ``code`` on the stdio wire, or ``None`` when the protocol has none."""
    row = ERROR_CODES.get(code)
    return row.wire if row is not None else None


def rpc_code(kind: str) -> int:
    """The JSON-RPC code of a wire kind (§5); -32603 for any other kind."""
    return WIRE_RPC.get(kind, -32603)


# ---------------------------------------------------------------- the tree

# control-flow exceptions that are not errors (module.qualname); tests/unit/project holds this list to its reason
SIGNALS = frozenset({"wakeful.cli.output.CliExit"})


class WakefulError(Exception):
    """Root of every wakeful error; ``code`` is stable, ``message`` may be reworded, ``details`` are extras."""

    code: str = "internal"

    def __init__(self, message: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.details: dict[str, Any] = {}

    @property
    def wire_code(self) -> str | None:
        """The spinfoam v1 kind of this error on the stdio wire (``INVALID_PARAMS``, …), or ``None``."""
        return wire_kind(self.code)

    def to_dict(self) -> dict[str, Any]:
        """``{code, message, …details}``: the one shape of every error."""
        out: dict[str, Any] = {"code": self.code, "message": self.message}
        out.update((str(k), v) for k, v in self.details.items() if k not in ("code", "message"))
        return out

    def face_body(self) -> dict[str, Any]:
        """``{error, message, …details}``: what the HTTP, MCP and CLI faces answer (interfaces.md §1)."""
        body: dict[str, Any] = {"error": self.code, "message": self.message}
        body.update((str(k), v) for k, v in self.details.items() if k not in ("error", "message"))
        return body


class InvalidParams(WakefulError):
    code = "invalid_request"


class BundleError(InvalidParams):
    """A build bundle violates a rule of build.md §3; ``rule`` names it, ``path`` the file."""

    code = "invalid_bundle"

    def __init__(self, rule: str, message: str, path: str | None = None) -> None:
        super().__init__(message)
        self.rule = rule
        self.path = path
        self.details = {"rule": rule, **({"path": path} if path else {})}


class Busy(WakefulError):
    code = "busy"


class BuildBusy(Busy):
    pass


class MailboxFull(WakefulError):
    code = "mailbox_full"


class ObjectNotFound(WakefulError):
    code = "object_not_found"


class InvalidObject(WakefulError):
    """The loader or verifier refused an ELF. ``rule`` is the stable code (``ELF_HEADER``, ``JUMP``, …)."""

    code = "invalid_artifact"

    def __init__(self, rule: str, message: str) -> None:
        super().__init__(f"{rule}: {message}")
        self.rule = rule
        self.reason = message
        self.details = {"rule": rule}


class BuildUnavailable(WakefulError):
    code = "compiler_unavailable"


class GuestFault(WakefulError):
    """A guest fault (vm.md §8). ``fault_code`` is MEMORY_READ, HELPER_POINTER, CPU_LIMIT, …

    ``function``, ``pc`` and ``insn`` are filled in by the VM from the faulting frame when known.
    """

    code = "program_fault"

    def __init__(
        self,
        fault_code: str,
        message: str,
        *,
        address: int | None = None,
        size: int | None = None,
        helper: str | None = None,
        function: str | None = None,
        pc: int | None = None,
        insn: str | None = None,
    ) -> None:
        super().__init__(message)
        self.fault_code = fault_code
        self.address = address
        self.size = size
        self.helper = helper
        self.function = function
        self.pc = pc
        self.insn = insn

    def detail(self) -> dict[str, Any]:
        return {
            "code": self.fault_code,
            "address": self.address,
            "size": self.size,
            "function": self.function,
            "pc": self.pc,
            "insn": self.insn,
            "helper": self.helper,
        }


class HostCallError(WakefulError):
    """Raised by a host handler to answer a host call with an error (the guest sees SF_HOST_ERROR)."""

    code = "host_error"

    def __init__(self, kind: str, message: str = "") -> None:
        super().__init__(message or kind)
        self.kind = kind


RPC_CODES = WIRE_RPC  # the name the stdio server and its tests use
