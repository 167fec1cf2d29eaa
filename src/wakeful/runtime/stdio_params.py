"""Strict decoding of the params of every stdio method: types, required fields, unknown fields refused.

runtime-protocol.md §4 step 12: wrong types, missing required fields, params not an object, or unknown
fields → -32602 INVALID_PARAMS.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from wakeful.errors import InvalidParams

__all__ = ["SCHEMAS", "Field", "decode"]

Check = Callable[[Any], bool]


def _int(value: Any) -> bool:
    return type(value) is int


def _str(value: Any) -> bool:
    return type(value) is str


def _bool(value: Any) -> bool:
    return type(value) is bool


def _obj(value: Any) -> bool:
    return type(value) is dict


def _any(value: Any) -> bool:
    return True


def _opt_str(value: Any) -> bool:
    return value is None or type(value) is str


class Field:
    """One named param: its check and whether it is required."""

    __slots__ = ("check", "required", "what")

    def __init__(self, check: Check, what: str, *, required: bool = False) -> None:
        self.check = check
        self.what = what
        self.required = required


def _req(check: Check, what: str) -> Field:
    return Field(check, what, required=True)


OBJECT_ID = {"object_id": _req(_str, "a string")}

# the params of each method (§6, §13); sf.build.compile's members are checked by the bundle rules
SCHEMAS: dict[str, dict[str, Field]] = {
    "sf.initialize": {"protocol_version": _req(_int, "an integer"), "wakeful": Field(_obj, "an object")},
    "sf.object.load": {
        "elf": _req(_str, "a base64 string"), "config": Field(_any, "any JSON"),
        "capabilities": Field(_any, "an array"), "wakeful": Field(_obj, "an object"),
    },
    "sf.object.start": OBJECT_ID,
    "sf.object.stop": OBJECT_ID,
    "sf.object.unload": OBJECT_ID,
    "sf.object.get": OBJECT_ID,
    "sf.object.list": {"after": Field(_opt_str, "a string"), "limit": Field(_int, "an integer")},
    "sf.event.deliver": {
        "object_id": _req(_str, "a string"), "event_id": _req(_str, "a string"),
        "topic": _req(_str, "a string"), "payload": _req(_any, "any JSON"),
    },
    "sf.build.compile": {
        "sdk_version": Field(_any, "1"), "entry": Field(_any, "a path"), "files": Field(_any, "an object"),
    },
    "sf.stats": {},
    "sf.shutdown": {},
    "wakeful.object.inspect": OBJECT_ID,
    "wakeful.stats": {},
    "wakeful.elf.verify": {"elf": _req(_str, "a base64 string")},
}

# §6.1 and §13: the members of the nested ``wakeful`` params
INITIALIZE_WAKEFUL = {"detail": Field(_bool, "a boolean")}
LOAD_WAKEFUL = {"cpu_limit_ms": Field(_int, "an integer"), "label": Field(_str, "a string")}


# §4 step 12
def decode(params: Any, schema: dict[str, Field], where: str = "params") -> dict[str, Any]:
    """Check ``params`` against ``schema``; raise ``InvalidParams`` naming the first offending field."""
    if type(params) is not dict:
        raise InvalidParams(f"{where} must be an object")
    for name in params:
        if name not in schema:
            raise InvalidParams(f"unknown field {where}.{name}")
    for name, field in schema.items():
        if name not in params:
            if field.required:
                raise InvalidParams(f"missing field {where}.{name}")
        elif not field.check(params[name]):
            raise InvalidParams(f"{where}.{name} must be {field.what}")
    return params
