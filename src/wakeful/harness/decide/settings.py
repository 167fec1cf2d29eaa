"""The operator's ``decide.*`` settings (interfaces.md §7, harness.md §16.4) and why they may not work.

Unknown keys and non-integer limits are errors at start; a bad provider, endpoint, key or model only makes
every call answer ``not_configured`` (``problem()`` says why, for ``wakeful doctor``). Keys never print.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any
from urllib.parse import urlsplit

from wakeful.harness.errors import InvalidRequest

__all__ = ["JEV_ENDPOINT", "JEV_MODEL", "DecideSettings"]

JEV_ENDPOINT = "https://api.typesafe.ai/v1/systemone"
JEV_MODEL = "jev-1.13.0"
MAX_MODEL_BYTES = 128


@dataclass(frozen=True, kw_only=True, slots=True)
class DecideSettings:
    """``decide.provider``, ``endpoint``, ``api_key``, ``api_key_env``, ``model``, ``timeout_ms``,
    ``per_minute``, ``per_second``."""

    provider: str | None = None
    endpoint: str | None = None
    api_key: str | None = None
    api_key_env: str | None = None
    model: str | None = None
    timeout_ms: int = 2000
    per_minute: int = 60
    per_second: int = 4

    def __repr__(self) -> str:
        shown = {f.name: getattr(self, f.name) for f in fields(self)}
        if shown["api_key"]:
            shown["api_key"] = "<redacted>"
        return "DecideSettings(" + ", ".join(f"{k}={v!r}" for k, v in shown.items()) + ")"

    __str__ = __repr__

    # §16.4: the env form is preferred; empty → not_configured for jev
    def key(self, env: Mapping[str, str] | None = None) -> str:
        """The bearer token in force (``api_key_env`` names a variable read now), or ``""``."""
        env = os.environ if env is None else env
        if self.api_key_env:
            from_env = env.get(self.api_key_env, "")
            if from_env:
                return from_env
        return self.api_key or ""

    def effective_endpoint(self) -> str | None:
        return self.endpoint or (JEV_ENDPOINT if self.provider == "jev" else None)

    def effective_model(self) -> str | None:
        return self.model or (JEV_MODEL if self.provider == "jev" else None)

    def problem(self, env: Mapping[str, str] | None = None) -> str | None:
        """Why calls answer ``not_configured``, or None when the settings can be used."""
        if self.provider is None:
            return "decide.provider is not set"
        if self.provider not in ("jev", "openai"):
            return f"decide.provider must be jev or openai, not {self.provider!r}"
        endpoint_problem = _endpoint_problem(self.effective_endpoint())
        if endpoint_problem:
            return endpoint_problem
        model = self.effective_model()
        if not model or not model.strip():
            return "decide.model is required for the openai provider"
        if len(model.encode()) > MAX_MODEL_BYTES:
            return f"decide.model is longer than {MAX_MODEL_BYTES} bytes"
        if self.provider == "jev" and not self.key(env):
            return "decide.api_key (or the variable named by decide.api_key_env) is empty"
        return None

    @classmethod
    def parse(cls, table: Mapping[str, Any], env: Mapping[str, str], where: str = "config") -> DecideSettings:
        """From the ``[decide]`` table, overridden by ``WAKEFUL_DECIDE__<KEY>`` variables."""
        values: dict[str, Any] = {}
        names = {f.name for f in fields(cls)}
        for key, value in table.items():
            if key not in names:
                raise InvalidRequest(f"unknown config key decide.{key} in {where}", field=f"decide.{key}")
            values[key] = value
        for name in names:
            raw = env.get(f"WAKEFUL_DECIDE__{name.upper()}")
            if raw is not None:
                values[name] = raw
        for name in ("timeout_ms", "per_minute", "per_second"):
            if name in values:
                values[name] = _positive(f"decide.{name}", values[name])
        for name in ("provider", "endpoint", "api_key", "api_key_env", "model"):
            if name in values and not isinstance(values[name], str):
                raise InvalidRequest(f"decide.{name} must be a string", field=f"decide.{name}")
            if name in values and values[name] == "":
                values[name] = None
        return cls(**values)


# §16.4: http(s) URL with a host, no userinfo, query or fragment
def _endpoint_problem(endpoint: str | None) -> str | None:
    if not endpoint:
        return "decide.endpoint is required for the openai provider"
    try:
        parts = urlsplit(endpoint)
        host = parts.hostname
        parts.port  # noqa: B018 — raises on a bad port
    except ValueError:
        return "decide.endpoint is not a valid URL"
    if parts.scheme not in ("http", "https") or not host:
        return "decide.endpoint must be an http(s) URL with a host"
    if "@" in parts.netloc or parts.query or parts.fragment or "?" in endpoint or "#" in endpoint:
        return "decide.endpoint must have no userinfo, query or fragment"
    return None


def _positive(name: str, value: Any) -> int:
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise InvalidRequest(f"{name} must be an integer, not {value!r}", field=name) from None
    if isinstance(value, bool) or number < 1:
        raise InvalidRequest(f"{name} must be a positive integer", field=name)
    return number
