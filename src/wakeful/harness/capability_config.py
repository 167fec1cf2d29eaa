"""Capabilities declared in the configuration file: ``[capabilities."<name>"]`` tables describing one HTTP
endpoint each (docs/decisions-config.md "Configured capabilities"; harness.md §9.1 "embedder tools").

This module only reads and checks the tables; ``capability_http`` calls the endpoints. Secrets never sit in the
file: a header value is a plain string only for headers that do not look like credentials, otherwise
``{env = "VAR"}`` or ``{file = "/path"}`` (with an optional ``prefix``), read when the call is made.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from wakeful.harness.capabilities import is_loop_tool_name
from wakeful.harness.config_read import refuse
from wakeful.harness.errors import InvalidRequest
from wakeful.harness.web_policy import TargetError, parse_target

__all__ = ["HeaderSpec", "HttpCapabilitySpec", "parse_capabilities", "placeholders"]

SECTION = "capabilities"
METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE")
BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})  # the call's arguments are sent as the JSON body
KEYS = frozenset({"description", "method", "url", "headers", "timeout_ms", "max_bytes", "read_only",
                  "allow_private", "per_minute"})
# harness.md §17.1 bounds, the same for a configured endpoint
TIMEOUT_MS, MAX_BYTES = (1, 20_000, 10_000), (1, 12_288, 8_192)
PER_MINUTE = (1, 6_000, 60)
MAX_CAPABILITIES = 64
MAX_DESCRIPTION = 1024
PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]{0,63})\}")
HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}")
# §17.1 headers the endpoint call may not set, plus the principal headers wakeful writes itself
REFUSED_HEADERS = frozenset({"host", "content-length", "transfer-encoding", "connection", "upgrade", "te",
                             "trailer", "keep-alive", "expect"})
# a header named like a credential must take its value from a secret source, never from the file's text
SECRET_WORDS = ("auth", "token", "key", "secret", "password", "cookie", "signature", "credential", "session")


@dataclass(frozen=True, slots=True)
class HeaderSpec:
    """One request header: a plain ``value``, or the name of an environment variable or a secrets file."""

    name: str
    value: str | None = None
    env: str | None = None
    file: str | None = None
    prefix: str = ""

    @property
    def source(self) -> str:
        """Where the value comes from, for listings (never the value of a secret)."""
        if self.env is not None:
            return f"env {self.env}"
        if self.file is not None:
            return f"file {self.file}"
        return "literal"


@dataclass(frozen=True, slots=True)
class HttpCapabilitySpec:
    """``[capabilities."<name>"]``: one HTTP endpoint a Loop granted ``name`` may call."""

    name: str
    description: str
    url: str  # a template: {arg} placeholders in the path and query, filled URL-encoded from the call
    method: str = "GET"
    headers: tuple[HeaderSpec, ...] = ()
    timeout_ms: int = TIMEOUT_MS[2]
    max_bytes: int = MAX_BYTES[2]
    read_only: bool = True
    allow_private: bool = False
    per_minute: int = PER_MINUTE[2]

    @property
    def arguments(self) -> tuple[str, ...]:
        """The placeholder names, each a required string or integer argument."""
        return placeholders(self.url)

    def describe(self) -> dict[str, Any]:
        """A JSON view for listings: no secret values, only their sources."""
        return {"name": self.name, "description": self.description, "method": self.method, "url": self.url,
                "arguments": list(self.arguments), "read_only": self.read_only,
                "allow_private": self.allow_private, "timeout_ms": self.timeout_ms, "max_bytes": self.max_bytes,
                "per_minute": self.per_minute, "headers": {h.name: h.source for h in self.headers}}


def placeholders(template: str) -> tuple[str, ...]:
    """The ``{name}`` placeholders of a URL template, in order, each once."""
    return tuple(dict.fromkeys(PLACEHOLDER.findall(template)))


# docs/decisions-config.md "Configured capabilities": one table per name; unknown keys refused like the rest
def parse_capabilities(raw: object, source: str) -> tuple[HttpCapabilitySpec, ...]:
    """The ``[capabilities]`` section of the file (``source`` = ``file <path>``)."""
    if not isinstance(raw, dict):
        raise InvalidRequest(f"config section [{SECTION}] must be a table (from {source})", field=SECTION,
                             source=source)
    if len(raw) > MAX_CAPABILITIES:
        raise refuse(SECTION, f"declares {len(raw)} capabilities; at most {MAX_CAPABILITIES}", source)
    return tuple(_one(name, table, source) for name, table in raw.items())


def _one(name: str, table: object, source: str) -> HttpCapabilitySpec:
    where = f'{SECTION}."{name}"'
    if not is_loop_tool_name(name):
        raise refuse(where, "is not a capability name (^[a-z][a-z0-9_.-]{0,127}$, not a builtin)", source)
    if not isinstance(table, dict):
        raise refuse(where, "must be a table", source)
    unknown = sorted(set(table) - KEYS)
    if unknown:
        raise InvalidRequest(f"unknown config key {where}.{unknown[0]} (from {source})", field=f"{where}.{unknown[0]}",
                             source=source)
    for required in ("description", "url"):
        if required not in table:
            raise refuse(f"{where}.{required}", "is required", source)
    method = _text(table.get("method", "GET"), f"{where}.method", source).upper()
    if method not in METHODS:
        raise refuse(f"{where}.method", f"must be one of {', '.join(METHODS)}, not {method!r}", source)
    description = _text(table["description"], f"{where}.description", source)
    if not description.strip() or len(description) > MAX_DESCRIPTION or _has_control(description):
        raise refuse(f"{where}.description", f"must be 1..{MAX_DESCRIPTION} characters without control "
                     "characters", source)
    return HttpCapabilitySpec(
        name=name, description=description, method=method, url=_url(table["url"], f"{where}.url", source),
        headers=_headers(table.get("headers", {}), f"{where}.headers", source),
        timeout_ms=_int(table, "timeout_ms", TIMEOUT_MS, where, source),
        max_bytes=_int(table, "max_bytes", MAX_BYTES, where, source),
        read_only=_bool(table, "read_only", True, where, source),
        allow_private=_bool(table, "allow_private", False, where, source),
        per_minute=_int(table, "per_minute", PER_MINUTE, where, source),
    )


def _text(value: object, key: str, source: str) -> str:
    if not isinstance(value, str):
        raise refuse(key, f"must be a string, not {type(value).__name__}", source)
    return value


def _has_control(text: str) -> bool:
    return any(ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0 for c in text)


def _int(table: Mapping[str, Any], name: str, bounds: tuple[int, int, int], where: str, source: str) -> int:
    low, high, default = bounds
    value = table.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise refuse(f"{where}.{name}", f"must be an integer in {low}..{high}, not {value!r}", source)
    return value


def _bool(table: Mapping[str, Any], name: str, default: bool, where: str, source: str) -> bool:
    value = table.get(name, default)
    if not isinstance(value, bool):
        raise refuse(f"{where}.{name}", f"must be true or false, not {value!r}", source)
    return value


# the host, port and scheme are the operator's: placeholders only in the path and query, never in the authority
def _url(value: object, key: str, source: str) -> str:
    template = _text(value, key, source)
    stray = PLACEHOLDER.sub("", template)
    if "{" in stray or "}" in stray:
        raise refuse(key, "has a brace that is not a {name} placeholder", source)
    scheme, sep, rest = template.partition("://")
    authority = rest.split("/", 1)[0].split("?", 1)[0]
    if not sep or "{" in scheme or "{" in authority:
        raise refuse(key, "must be an absolute http(s) URL with placeholders only in the path and query", source)
    try:
        parse_target(PLACEHOLDER.sub("x", template))
    except TargetError as exc:
        raise refuse(key, f"is not a usable URL: {exc}", source) from None
    if "#" in template:
        raise refuse(key, "must not carry a fragment", source)
    return template


def _headers(raw: object, where: str, source: str) -> tuple[HeaderSpec, ...]:
    if not isinstance(raw, dict):
        raise refuse(where, "must be a table of header name = value", source)
    out = []
    seen: set[str] = set()
    for name, value in raw.items():
        key = f"{where}.{name}"
        lower = name.lower()
        if not HEADER_NAME.fullmatch(name):
            raise refuse(key, "is not an HTTP header name", source)
        if lower in REFUSED_HEADERS or lower.startswith(("proxy-", "x-wakeful-")) or lower in seen:
            raise refuse(key, "may not be set (framing, proxy or wakeful's own principal header, or a repeat)",
                         source)
        seen.add(lower)
        out.append(_header(name, value, key, source))
    return tuple(out)


def _header(name: str, value: object, key: str, source: str) -> HeaderSpec:
    if isinstance(value, str):
        if any(word in name.lower() for word in SECRET_WORDS):
            raise refuse(key, "looks like a credential: give {env = \"VAR\"} or {file = \"/path\"}, not the "
                         "secret itself", source)
        if _has_control(value):
            raise refuse(key, "has a control character", source)
        return HeaderSpec(name, value=value)
    if not isinstance(value, dict) or not set(value) <= {"env", "file", "prefix"} or len(
            set(value) & {"env", "file"}) != 1:
        raise refuse(key, "must be a string or a table with exactly one of env, file (and an optional prefix)",
                     source)
    for part, given in value.items():
        if not isinstance(given, str) or (part != "prefix" and not given) or _has_control(given):
            raise refuse(f"{key}.{part}", "must be a non-empty string without control characters", source)
    return HeaderSpec(name, env=value.get("env"), file=value.get("file"), prefix=value.get("prefix", ""))
