"""Capability policy of an object (runtime-protocol.md §9.1): which host calls may leave the runtime.
Also decodes the ``capabilities`` load parameter (runtime-protocol.md §6.3) into a policy.
"""

from __future__ import annotations

import json
import weakref
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from wakeful.errors import InvalidParams
from wakeful.runtime import jsonval
from wakeful.runtime.jsonval import JsonValue

__all__ = ["MAX_CAPABILITIES", "MAX_NAME_BYTES", "Capability", "CapabilityPolicy", "parse_capabilities"]

# runtime-protocol.md §6.3 / README limits
MAX_CAPABILITIES = 1024
MAX_NAME_BYTES = 128


@dataclass(frozen=True, slots=True)
class Capability:
    """One entry: a capability name and optional exact-argument constraints (top-level keys)."""

    name: str
    arguments: dict[str, JsonValue] | None = None


class CapabilityPolicy:
    """The capability entries of one object, indexed by name; entries with one name are alternatives.

    Immutable once made: ``parse_capabilities`` hands every load of the same entries one shared policy."""

    __slots__ = ("__weakref__", "_by_name")

    def __init__(self, entries: Iterable[Capability] = ()) -> None:
        self._by_name: dict[str, list[dict[str, JsonValue] | None]] = {}
        for entry in entries:
            self._by_name.setdefault(entry.name, []).append(entry.arguments or None)

    def __len__(self) -> int:
        return sum(len(v) for v in self._by_name.values())

    # runtime-protocol.md §9.1: exact name; no/empty arguments, or every constrained key strictly equal
    def allows(self, name: str, params: JsonValue) -> bool:
        """True when some entry named exactly ``name`` accepts ``params``."""
        alternatives = self._by_name.get(name)
        if alternatives is None:
            return False
        for arguments in alternatives:  # noqa: SIM110 - a loop, not any(<generator>): one per host call
            if arguments is None or _matches(arguments, params):
                return True
        return False


def _matches(arguments: dict[str, JsonValue] | None, params: JsonValue) -> bool:
    if arguments is None:
        return True
    if type(params) is not dict:
        return False
    for key, wanted in arguments.items():
        if key not in params or not jsonval.equal(params[key], wanted):
            return False
    return True


# issue 16: a node runs thousands of objects whose loads name the same entries (one Loop configuration, many
# Loops); each built its own index (a dict and a list per name, ~0.9 KB for the seven builtins). A policy is never
# changed once made, so equal entries share one — kept while some object holds it.
_SHARED: weakref.WeakValueDictionary[tuple[tuple[str, str | None], ...], CapabilityPolicy] = (
    weakref.WeakValueDictionary())


# runtime-protocol.md §6.3: at most 1,024 entries {name, arguments?}, unknown fields refused,
# name 1..128 bytes, arguments an object within JSON limits; else -32602 "invalid capabilities"
def parse_capabilities(raw: object) -> CapabilityPolicy:
    """Decode the load parameter (a list of ``{name, arguments?}``) or raise ``InvalidParams``; equal entries
    (in the same order) give the same policy object, and a policy given is that policy."""
    if type(raw) is CapabilityPolicy:  # issue 16: parsed once by a caller loading many objects of one entry list
        return raw
    if raw is None:
        raw = ()
    if type(raw) is not list and type(raw) is not tuple:
        raise InvalidParams("invalid capabilities")
    if len(raw) > MAX_CAPABILITIES:
        raise InvalidParams("invalid capabilities")
    entries = [_parse_entry(item) for item in raw]
    key = tuple((e.name, None if e.arguments is None else _key_text(e.arguments)) for e in entries)
    policy = _SHARED.get(key)
    if policy is None:
        policy = _SHARED[key] = CapabilityPolicy(entries)
    return policy


def _key_text(arguments: dict[str, JsonValue]) -> str:
    # exact JSON text: 1 and 1.0 and True stay apart (jsonval.equal is strict about them, so must the key be)
    return json.dumps(arguments, sort_keys=True, separators=(",", ":"), default=repr)


def _parse_entry(item: object) -> Capability:
    if isinstance(item, Capability):
        item = {"name": item.name, **({"arguments": item.arguments} if item.arguments is not None else {})}
    if not isinstance(item, Mapping) or not set(item) <= {"name", "arguments"}:
        raise InvalidParams("invalid capabilities")
    name = item.get("name")
    if type(name) is not str or not 1 <= _utf8_len(name) <= MAX_NAME_BYTES:
        raise InvalidParams("invalid capabilities")
    arguments = item.get("arguments")
    if arguments is None:
        return Capability(name)
    try:
        box = jsonval.from_python(arguments)
    except jsonval.JsonError:
        raise InvalidParams("invalid capabilities") from None
    if type(box.value) is not dict:
        raise InvalidParams("invalid capabilities")
    return Capability(name, box.value)


def _utf8_len(text: str) -> int:
    try:
        return len(text.encode("utf-8"))
    except UnicodeEncodeError:
        return -1
