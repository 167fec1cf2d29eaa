"""Calling a configured HTTP capability (``[capabilities."<name>"]``, ``capability_config``) as a tool.

Each capability is registered in the node's ``ToolRegistry`` like an embedder tool, so Loops reach it through the
same dispatch (harness.md §9.3: fence, concurrency, delegated principal, deadline; the runtime applies the
exact-argument constraints first, §9.2). The request goes out through ``web.WebClient`` under the node's egress
policy of harness.md §17.3, widened for this capability only by its ``allow_private``.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from wakeful.harness.capability_config import BODY_METHODS, PLACEHOLDER, HeaderSpec, HttpCapabilitySpec
from wakeful.harness.decide.limiter import BucketSet, Rate
from wakeful.harness.errors import HostCallRefused
from wakeful.harness.registry import Tool, ToolContext, ToolRegistry
from wakeful.harness.web_policy import WebSettings

if TYPE_CHECKING:
    from wakeful.harness.config import Config

__all__ = ["HttpCapability", "configured_tools", "http_tool"]

MAX_SECRET_BYTES = 8192
# harness.md §9.4 reason codes for the §17.2 failure codes of the exchange
_REASONS = {"timeout": "deadline_exceeded", "connect_failed": "unavailable", "dns_failure": "unavailable",
            "tls_error": "unavailable", "rate_limited": "rate_limited"}


class HttpCapability:
    """``fn(args, ctx)`` of one configured capability: fill the URL, add headers, call, answer ``{status, body}``."""

    def __init__(self, spec: HttpCapabilitySpec, web: WebSettings, *, monotonic_ns: Callable[[], int],
                 env: Callable[[str], str | None] = os.environ.get) -> None:
        self.spec = spec
        # harness.md §17.3: the node's policy; allow_private opens private and loopback ranges for this one only
        self.settings = WebSettings(allow_private=web.allow_private or spec.allow_private,
                                    allow_networks=web.allow_networks, max_in_flight=web.max_in_flight)
        self.monotonic_ns = monotonic_ns
        self.env = env
        self.buckets = BucketSet((Rate(spec.per_minute, spec.per_minute / 60),), monotonic_ns)
        self._client: Any = None

    @property
    def client(self) -> Any:
        """The ``WebClient`` (made on first use: it loads httpcore)."""
        if self._client is None:
            from wakeful.harness.web import WebClient

            self._client = WebClient(self.settings, monotonic_ns=self.monotonic_ns)
        return self._client

    async def __call__(self, args: Any, ctx: ToolContext) -> dict[str, Any]:
        spec = self.spec
        request = {"method": spec.method, "url": self.url(args), "headers": self.headers(ctx),
                   "timeout_ms": spec.timeout_ms, "max_bytes": spec.max_bytes}
        if spec.method in BODY_METHODS:
            request["body"] = args
        if ctx.loop_id is not None:
            self._charge(ctx.loop_id)
        return self._answer(await self.client.request(request))

    # the call's arguments fill the placeholders, URL-encoded; a GET carries no other argument
    def url(self, args: Any) -> str:
        spec = self.spec
        if not isinstance(args, dict):
            raise _refused("invalid_arguments", "arguments must be an object")
        missing = [name for name in spec.arguments if name not in args]
        if missing:
            raise _refused("invalid_arguments", f"argument {missing[0]!r} is required")
        extra = sorted(set(args) - set(spec.arguments))
        if extra and spec.method not in BODY_METHODS:
            raise _refused("invalid_arguments", f"unknown argument {extra[0][:64]!r}")

        def fill(match: Any) -> str:
            value = args[match.group(1)]
            if isinstance(value, bool) or not isinstance(value, str | int) or value == "":
                raise _refused("invalid_arguments", f"argument {match.group(1)!r} must be a non-empty string "
                               "or an integer")
            return quote(str(value), safe="")

        return PLACEHOLDER.sub(fill, spec.url)

    # harness.md §9.3: the endpoint is told who calls (the delegated principal for Loops)
    def headers(self, ctx: ToolContext) -> dict[str, str]:
        out = {header.name: header.prefix + self._value(header) for header in self.spec.headers}
        out["X-Wakeful-Principal"] = ctx.principal
        for name, value in (("Loop", ctx.loop_id), ("Agent", ctx.agent_id), ("Group", ctx.group_id),
                            ("Session", ctx.session_id)):
            if value is not None:
                out[f"X-Wakeful-{name}"] = value
        if ctx.incarnation is not None:
            out["X-Wakeful-Incarnation"] = str(ctx.incarnation)
        return out

    def _value(self, header: HeaderSpec) -> str:
        if header.value is not None:
            return header.value
        if header.env is not None:
            value = self.env(header.env)
            if not value:
                raise _refused("tool_failed", f"header {header.name}: environment variable {header.env} is not set")
            return value
        assert header.file is not None
        return _secret_file(header)

    def _charge(self, loop_id: str) -> None:
        wait = self.buckets.take(loop_id)
        if wait:
            raise _refused("rate_limited", f"at most {self.spec.per_minute} calls a minute per Loop; next in "
                           f"{wait:.1f} s")

    def _answer(self, result: dict[str, Any]) -> dict[str, Any]:
        error = result.get("error")
        if isinstance(error, dict):
            code = str(error.get("code"))
            raise _refused(_REASONS.get(code, "tool_failed"), f"{code}: {error.get('message', '')}")
        if result["truncated"]:
            raise _refused("tool_failed", f"the response is larger than max_bytes ({self.spec.max_bytes})")
        return {"status": result["status"], "body": self._body(result)}

    def _body(self, result: dict[str, Any]) -> Any:
        kind = str(result["headers"].get("content-type", "")).split(";", 1)[0].strip().lower()
        if result["encoding"] == "utf-8" and (kind == "application/json" or kind.endswith("+json")):
            try:
                return json.loads(result["body"])
            except ValueError:
                raise _refused("tool_failed", "the response says JSON but is not valid JSON") from None
        return result["body"]


def _refused(code: str, message: str) -> HostCallRefused:
    return HostCallRefused(code, message[:512])


def _secret_file(header: HeaderSpec) -> str:
    """A secrets file's text (regular file, ≤ 8 KiB, one trailing newline dropped); never echoed."""
    path = str(header.file)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise OSError("not a regular file")
            data = os.read(fd, MAX_SECRET_BYTES + 1)
        finally:
            os.close(fd)
    except OSError as exc:
        raise _refused("tool_failed", f"header {header.name}: secrets file {path}: {exc.strerror or exc}") from None
    if len(data) > MAX_SECRET_BYTES:
        raise _refused("tool_failed", f"header {header.name}: secrets file {path} is over {MAX_SECRET_BYTES} bytes")
    try:
        text = data.decode("utf-8").removesuffix("\n").removesuffix("\r")
    except UnicodeDecodeError:
        raise _refused("tool_failed", f"header {header.name}: secrets file {path} is not UTF-8") from None
    if not text or any(c in text for c in "\r\n\0"):
        raise _refused("tool_failed", f"header {header.name}: secrets file {path} is empty or has line breaks")
    return text


def http_tool(spec: HttpCapabilitySpec, web: WebSettings, *, monotonic_ns: Callable[[], int]) -> Tool:
    """The registry entry: ``read_only`` capabilities are read tools (offered to Loops), the others write tools."""
    fn = HttpCapability(spec, web, monotonic_ns=monotonic_ns)
    return Tool(spec.name, fn, spec.description, "read" if spec.read_only else "write",
                spec.timeout_ms / 1000 + 1.0)


# docs/decisions-config.md "Configured capabilities": [capabilities."<name>"] are tools like register_tool's
def configured_tools(config: Config, monotonic_ns: Callable[[], int], registry: ToolRegistry | None = None,
                     ) -> ToolRegistry:
    """``registry`` (a new one when None) with every capability the configuration declares registered."""
    registry = ToolRegistry() if registry is None else registry
    for spec in config.capabilities:
        registry.register(http_tool(spec, config.web, monotonic_ns=monotonic_ns))
    return registry
