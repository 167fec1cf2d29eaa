"""A small checker for command bodies (control-plane.md §4.1 step 0): shapes, text and list limits.

Every violation is ``invalid_command`` naming the dotted ``field``; unknown members are refused too.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from wakeful.control.errors import ControlRefused

__all__ = [
    "KEY_RE", "Check", "bool_", "choice", "int_", "json_obj", "list_", "obj", "parse", "refuse", "text",
]

KEY_RE = re.compile(r"^[A-Za-z0-9_.:@/-]{1,160}$")

Check = Callable[[Any, str], Any]


def refuse(field: str, why: str) -> ControlRefused:
    return ControlRefused("invalid_command", f"{field}: {why}", field=field)


def text(limit: int, *, pattern: re.Pattern[str] | None = None, empty: bool = True) -> Check:
    def check(value: Any, field: str) -> Any:
        if not isinstance(value, str):
            raise refuse(field, "must be a string")
        if len(value) > limit:
            raise refuse(field, f"longer than {limit} characters")
        if not empty and not value.strip():
            raise refuse(field, "must not be empty")
        if pattern is not None and not pattern.fullmatch(value):
            raise refuse(field, f"does not match {pattern.pattern}")
        return value

    return check


def choice(*options: str) -> Check:
    def check(value: Any, field: str) -> Any:
        if not isinstance(value, str) or value not in options:
            raise refuse(field, f"must be one of {', '.join(options)}")
        return value

    return check


def int_(lo: int, hi: int) -> Check:
    def check(value: Any, field: str) -> Any:
        if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
            raise refuse(field, f"must be an integer in {lo}..{hi}")
        return value

    return check


def bool_(value: Any, field: str) -> Any:
    if not isinstance(value, bool):
        raise refuse(field, "must be true or false")
    return value


def list_(item: Check, *, hi: int, lo: int = 0, unique: bool = True) -> Check:
    def check(value: Any, field: str) -> Any:
        if not isinstance(value, list):
            raise refuse(field, "must be a list")
        if not lo <= len(value) <= hi:
            raise refuse(field, f"must have {lo}..{hi} entries")
        out = [item(v, f"{field}.{i}") for i, v in enumerate(value)]
        if unique and len({repr(v) for v in out}) != len(out):
            raise refuse(field, "has duplicate entries")
        return out

    return check


def json_obj(limit: int) -> Check:
    """Any JSON object whose compact text is at most ``limit`` characters."""
    from wakeful.control.canonical import canonical

    def check(value: Any, field: str) -> Any:
        if not isinstance(value, dict):
            raise refuse(field, "must be an object")
        try:
            size = len(canonical(value))
        except (TypeError, ValueError):
            raise refuse(field, "must be plain JSON") from None
        if size > limit:
            raise refuse(field, f"larger than {limit} characters")
        return value

    return check


def obj(spec: Mapping[str, Check], *, required: tuple[str, ...] = ()) -> Check:
    def check(value: Any, field: str) -> Any:
        return parse(value, spec, required=required, prefix=field)

    return check


def parse(value: Any, spec: Mapping[str, Check], *, required: tuple[str, ...] = (), prefix: str = "") -> dict[str, Any]:
    """Check ``value`` against ``spec``: a dict with only known members, each checked; ``None`` = absent."""
    where = prefix or "body"
    if not isinstance(value, Mapping):
        raise refuse(where, "must be an object")
    out: dict[str, Any] = {}
    for name, raw in value.items():
        field = f"{prefix}.{name}" if prefix else str(name)
        if name not in spec:
            raise refuse(field, "unknown member")
        if raw is None:
            continue
        out[name] = spec[name](raw, field)
    for name in required:
        if name not in out:
            raise refuse(f"{prefix}.{name}" if prefix else name, "is required")
    return out
