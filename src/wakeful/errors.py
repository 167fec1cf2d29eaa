"""The one exception tree of wakeful, with each error's stable code.

Every exception derives from :class:`WakefulError` and carries ``code`` (never reworded). The table
``RPC_CODES`` maps codes to JSON-RPC codes (spec/runtime-protocol.md §5); faces map them to HTTP.

    WakefulError
    ├── InvalidParams            INVALID_PARAMS       -32602  (a request or argument is malformed)
    │   └── BundleError          INVALID_PARAMS       -32602  (a build bundle breaks a rule, build.md §3)
    ├── Busy                     BUSY                 -32001  (no slot, object limit, start of a non-loaded object)
    │   └── BuildBusy            BUSY                 -32001  (build queue full)
    ├── MailboxFull              MAILBOX_FULL         -32002
    ├── ObjectNotFound           OBJECT_NOT_FOUND     -32004
    ├── InvalidObject            INVALID_OBJECT       -32010  (.rule: ELF_*, RELOC_*, OPCODE, STACK, …; vm.md §2-4)
    ├── BuildUnavailable         SANDBOX_UNAVAILABLE  -32020  (builds disabled or toolchain unusable)
    ├── GuestFault               PROGRAM_FAULT        (not an RPC error: the object's outcome; .fault_code)
    └── HostCallError            (raised by host handlers: the guest sees SF_HOST_ERROR; .kind)
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "RPC_CODES",
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


class WakefulError(Exception):
    """Root of every wakeful error; ``code`` is stable, ``message`` may be reworded."""

    code: str = "internal"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message}


class InvalidParams(WakefulError):
    code = "INVALID_PARAMS"


class BundleError(InvalidParams):
    """A build bundle violates a rule of build.md §3; ``rule`` names it, ``path`` the file."""

    def __init__(self, rule: str, message: str, path: str | None = None) -> None:
        super().__init__(message)
        self.rule = rule
        self.path = path


class Busy(WakefulError):
    code = "BUSY"


class BuildBusy(Busy):
    pass


class MailboxFull(WakefulError):
    code = "MAILBOX_FULL"


class ObjectNotFound(WakefulError):
    code = "OBJECT_NOT_FOUND"


class InvalidObject(WakefulError):
    """The loader or verifier refused an ELF. ``rule`` is the stable code (``ELF_HEADER``, ``JUMP``, …)."""

    code = "INVALID_OBJECT"

    def __init__(self, rule: str, message: str) -> None:
        super().__init__(f"{rule}: {message}")
        self.rule = rule
        self.reason = message


class BuildUnavailable(WakefulError):
    code = "SANDBOX_UNAVAILABLE"


class GuestFault(WakefulError):
    """A guest fault (vm.md §8). ``fault_code`` is MEMORY_READ, HELPER_POINTER, CPU_LIMIT, …

    ``function``, ``pc`` and ``insn`` are filled in by the VM from the faulting frame when known.
    """

    code = "PROGRAM_FAULT"

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

    code = "HOST_ERROR"

    def __init__(self, kind: str, message: str = "") -> None:
        super().__init__(message or kind)
        self.kind = kind


# code -> JSON-RPC error code (runtime-protocol.md §5)
RPC_CODES: dict[str, int] = {
    "PARSE_ERROR": -32700,
    "INVALID_REQUEST": -32600,
    "DUPLICATE_ID": -32600,
    "METHOD_NOT_FOUND": -32601,
    "INVALID_PARAMS": -32602,
    "NOT_INITIALIZED": -32000,
    "BUSY": -32001,
    "MAILBOX_FULL": -32002,
    "RESPONSE_TOO_LARGE": -32003,
    "OBJECT_NOT_FOUND": -32004,
    "INVALID_OBJECT": -32010,
    "SANDBOX_UNAVAILABLE": -32020,
}
