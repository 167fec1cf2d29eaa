"""The closed capability allowlist of Loops and the per-Loop lists with exact-argument constraints.

harness.md §9.1–9.2: checked at ``loop.create``; the runtime enforces the list at call time (SF_DENIED).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from typing import Any

from wakeful.harness.errors import CapabilityNotAllowed, InvalidRequest
from wakeful.runtime import jsonval
from wakeful.sdk.rules import AGENT_LIMITS, BUILTIN_CAPABILITIES

__all__ = [
    "BUILTINS",
    "MAX_ENTRIES",
    "SELF_SCOPED",
    "TOOL_NAME",
    "delegated_principal",
    "runtime_capabilities",
    "validate_capabilities",
]

# §9.1: the builtin capabilities a Loop may use
BUILTINS = frozenset(BUILTIN_CAPABILITIES)
# §9.2: always added, unconstrained, to a given list
SELF_SCOPED = ("loop.state.put", "loop.state.get", "loop.ack", "loop.log")
MAX_ENTRIES = AGENT_LIMITS["capabilities"]  # §9.2 / §20
# §9.1: embedder tools qualify with safety="read", this name pattern and no collision with a builtin
TOOL_NAME = re.compile(r"[a-z][a-z0-9_.-]{0,127}")


def is_loop_tool_name(name: str) -> bool:
    """§9.1: a name an embedder read tool may carry to be offered to Loops."""
    return TOOL_NAME.fullmatch(name) is not None and name not in BUILTINS


# §9.2: up to 32 entries {name, arguments?}; names in the allowlist; arguments an object within JSON limits
def validate_capabilities(raw: object, read_tools: Collection[str]) -> list[dict[str, Any]] | None:
    """Check ``loop.create``'s ``capabilities``; return the normalised list (None when omitted)."""
    if raw is None:
        return None
    if not isinstance(raw, list | tuple):
        raise InvalidRequest("capabilities must be a list of {name, arguments?}", field="capabilities")
    if len(raw) > MAX_ENTRIES:
        raise InvalidRequest(f"capabilities has {len(raw)} entries; at most {MAX_ENTRIES}", field="capabilities")
    allowed = BUILTINS | frozenset(read_tools)
    return [_entry(i, item, allowed) for i, item in enumerate(raw)]


def _entry(index: int, item: object, allowed: frozenset[str]) -> dict[str, Any]:
    where = f"capabilities[{index}]"
    if not isinstance(item, Mapping) or not set(item) <= {"name", "arguments"} or "name" not in item:
        raise InvalidRequest(f"{where} must be an object with 'name' and optional 'arguments'", field=where)
    name = item["name"]
    if not isinstance(name, str) or not name:
        raise InvalidRequest(f"{where}.name must be a non-empty string", field=where)
    if name not in allowed:
        raise CapabilityNotAllowed(f"{where}: capability {name!r} is not allowed for Loops (harness.md §9.1)")
    arguments = item.get("arguments")
    if arguments is None:
        return {"name": name}
    return {"name": name, "arguments": _arguments(where, arguments)}


def _arguments(where: str, arguments: object) -> dict[str, Any]:
    try:
        box = jsonval.from_python(arguments)
    except jsonval.JsonError as exc:
        raise InvalidRequest(f"{where}.arguments: {exc.message}", field=where) from None
    if type(box.value) is not dict:
        raise InvalidRequest(f"{where}.arguments must be an object", field=where)
    return box.value


# §9.2: omitted → every allowlisted capability unconstrained; given → complete, plus the self-scoped four
def runtime_capabilities(stored: list[dict[str, Any]] | None, read_tools: Collection[str]) -> list[dict[str, Any]]:
    """The list the object is loaded with (runtime-protocol.md §6.3 form)."""
    if stored is None:
        return [{"name": name} for name in sorted(BUILTINS | frozenset(read_tools))]
    return [dict(entry) for entry in stored] + [{"name": name} for name in SELF_SCOPED]


# §9.3: non-builtin calls run as schedule|loop:<loop_id>|<creator>
def delegated_principal(loop_id: str, creator: str) -> str:
    """The principal an embedder tool sees for a call from a Loop."""
    return f"schedule|loop:{loop_id}|{creator}"
