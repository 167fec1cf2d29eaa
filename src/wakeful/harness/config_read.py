"""Reading interfaces.md §7 keys: one typed value per key from the TOML file and ``WAKEFUL_<SECTION>__<KEY>``.

Every value carries its source (``default``, ``file <path>``, ``env <VAR>``); a wrong type or range and an unknown
section or key are an ``InvalidRequest`` naming the key and that source (the key table lives in ``config.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from wakeful.harness.errors import InvalidRequest

__all__ = ["BYTES_MAX", "DEFAULT", "INT_MAX", "Key", "Read", "boolean", "check", "choice", "integer", "read",
           "refuse", "strings", "text"]

DEFAULT = "default"
_TRUE, _FALSE = ("true", "1", "yes", "on"), ("false", "0", "no", "off")
# ceilings of integer keys without a bound of their own: 10**30 would overflow a store column, a ms product or
# a timeout later instead of being refused at start (2**31 - 1 s is 68 years, ms 24 days; bytes 8 PiB)
INT_MAX = 2**31 - 1
BYTES_MAX = 2**53


@dataclass(frozen=True, slots=True)
class Key:
    """One key of the §7 table: its kind, default, bounds (integers) or choices, and whether it is a secret."""

    kind: str  # "int" | "bool" | "str" | "choice" | "list"
    default: Any
    low: int | None = None
    high: int | None = None
    choices: tuple[str, ...] = ()
    secret: bool = False
    blank: bool = True  # strings: may be empty


def integer(default: int, low: int = 0, high: int = INT_MAX) -> Key:
    """An integer key within ``low..high``."""
    return Key("int", default, low, high)


def boolean(default: bool) -> Key:
    """``true``/``false`` in the file; ``true|false|1|0|yes|no|on|off`` in the environment."""
    return Key("bool", default)


def text(default: str | None = None, *, secret: bool = False, blank: bool = True) -> Key:
    """A string key; ``None`` default means "not set"; ``blank=False`` refuses an empty or blank value."""
    return Key("str", default, secret=secret, blank=blank)


def choice(default: str, *choices: str) -> Key:
    """One of a few words."""
    return Key("choice", default, choices=choices)


def strings() -> Key:
    """A list of strings in the file; comma-separated in the environment."""
    return Key("list", ())


@dataclass(slots=True)
class Read:
    """The typed values by dotted key (``build.workers``) and where each came from."""

    values: dict[str, Any]
    sources: dict[str, str]


def refuse(key: str, message: str, source: str) -> InvalidRequest:
    """The typed error of a bad value: the key, what is wrong, and the source it came from."""
    return InvalidRequest(f"config key {key} {message} (from {source})", field=key, source=source)


# interfaces.md §7: defaults < file < environment; unknown sections and keys are an error at start
def read(table: Mapping[str, Mapping[str, Key]], doc: Mapping[str, Any], file: str,
         env: Mapping[str, str]) -> Read:
    """Defaults, then the file's document, then the environment's forms of every key of ``table``."""
    out = Read({f"{s}.{k}": key.default for s, keys in table.items() for k, key in keys.items()}, {})
    out.sources = dict.fromkeys(out.values, DEFAULT)
    where = f"file {file}"
    for section, values in doc.items():
        keys = table.get(section)
        if keys is None:
            raise InvalidRequest(f"unknown config section [{section}] (from {where})", field=section, source=where)
        if not isinstance(values, dict):
            raise InvalidRequest(f"config section [{section}] must be a table (from {where})", field=section,
                                 source=where)
        for name, value in values.items():
            _take(out, keys, section, name, value, where)
    for var, value in sorted(env.items()):
        section, sep, name = var.removeprefix("WAKEFUL_").partition("__")
        if not var.startswith("WAKEFUL_") or not sep:
            continue  # WAKEFUL_HOME, WAKEFUL_DB_URL, … are shortcuts, not config keys
        if section.lower() == "capabilities":  # names carry dots: declared in the file only (decisions-config.md)
            raise InvalidRequest(f"capabilities are declared in the config file only, not by {var} (from env {var})",
                                 field="capabilities", source=f"env {var}")
        if section.lower() not in table:  # a typo such as WAKEFUL_BULID__WORKERS would otherwise do nothing
            raise InvalidRequest(f"unknown config section in {var} (from env {var})", field=section.lower(),
                                 source=f"env {var}")
        _take(out, table[section.lower()], section.lower(), name.lower(), value, f"env {var}")
    return out


def _take(out: Read, keys: Mapping[str, Key], section: str, name: str, value: Any, source: str) -> None:
    dotted = f"{section}.{name}"
    key = keys.get(name)
    if key is None:
        raise InvalidRequest(f"unknown config key {dotted} (from {source})", field=dotted, source=source)
    out.values[dotted] = _typed(dotted, key, value, source, from_env=source.startswith("env "))
    out.sources[dotted] = source


def check(dotted: str, key: Key, value: Any, source: str) -> Any:
    """A value given by a face (a command-line flag) checked like the file's: the typed value or the refusal."""
    return _typed(dotted, key, value, source, from_env=False)


def _typed(dotted: str, key: Key, value: Any, source: str, *, from_env: bool) -> Any:
    if key.kind == "int":
        return _integer(dotted, key, value, source, from_env=from_env)
    if key.kind == "bool":
        if from_env and isinstance(value, str) and value.lower() in _TRUE + _FALSE:
            return value.lower() in _TRUE
        if not isinstance(value, bool):
            raise refuse(dotted, f"must be true or false, not {value!r}", source)
        return value
    if key.kind == "list":
        if from_env and isinstance(value, str):
            return tuple(part.strip() for part in value.split(",") if part.strip())
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise refuse(dotted, f"must be a list of strings, not {value!r}", source)
        return tuple(value)
    if not isinstance(value, str):
        shown = type(value).__name__ if key.secret else repr(value)  # a misplaced secret is not echoed
        raise refuse(dotted, f"must be a string, not {shown}", source)
    if not key.blank and not value.strip():
        raise refuse(dotted, "must not be empty", source)
    if key.kind == "choice" and value not in key.choices:
        raise refuse(dotted, f"must be one of {', '.join(key.choices)}, not {value!r}", source)
    return value


def _integer(dotted: str, key: Key, value: Any, source: str, *, from_env: bool) -> int:
    if isinstance(value, bool) or not (isinstance(value, int) or (from_env and isinstance(value, str))):
        raise refuse(dotted, f"must be an integer, not {value!r}", source)
    try:
        number = int(value)
    except ValueError:
        raise refuse(dotted, f"must be an integer, not {value!r}", source) from None
    low, high = key.low if key.low is not None else 0, key.high
    if number < low or (high is not None and number > high):
        bounds = f"{low}..{high}" if high is not None else f"at least {low}"
        raise refuse(dotted, f"must be {bounds}, not {number}", source)
    return number
