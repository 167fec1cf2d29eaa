"""The one exception tree of wakeful. Every exception the project raises derives from :class:`WakefulError`.

Each error carries a stable lowercase ``code`` (never reworded; ``message`` may be). The one table of codes,
``wakeful.error_codes``, maps each code to its HTTP status, its MCP treatment and, for the stdio runtime, the
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
    │   │   ├── ConfigTooLarge            config_too_large
    │   │   ├── CapabilityNotAllowed      capability_not_allowed
    │   │   ├── InvalidEvent              invalid_event
    │   │   ├── InvalidJson               invalid_json
    │   │   └── JsonObjectRequired        json_object_required
    │   ├── NotFound                      not_found
    │   │   ├── AgentNotFound             agent_not_found
    │   │   ├── SessionNotFound           session_not_found
    │   │   └── ArtifactNotFound          artifact_not_found
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
    │   ├── CompilerUnavailable           compiler_unavailable   (harness.scripts)
    │   ├── SignatureRefused              unauthorized           (harness.webhook_verify)
    │   ├── ApiError                      [any code]             (api.errors)
    │   ├── Unauthorized                  unauthorized           (api.errors)
    │   ├── Forbidden                     forbidden              (api.errors)
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

from typing import Any

from wakeful.error_codes import WIRE_RPC, wire_kind

__all__ = [
    "RPC_CODES",
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
    "WakefulError",
]


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


# spinfoam v1 kind -> JSON-RPC error code (runtime-protocol.md §5), read from the one table of wakeful.error_codes
RPC_CODES: dict[str, int] = WIRE_RPC
