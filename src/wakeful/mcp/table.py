"""The MCP tool table: one row per tool (name, description, JSON input schema, handler) and the context a
handler receives. docs/decisions-mcp.md explains how other areas add rows (``control_tools.register``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from wakeful.errors import WakefulError
from wakeful.harness.ops import Backend, HttpBackend, LocalBackend, Principal

if TYPE_CHECKING:
    from wakeful.harness import Harness

__all__ = ["ApiCaller", "Failed", "McpContext", "McpTool", "ToolRefusal", "ToolTable", "check_arguments"]

Handler = Callable[[dict[str, Any], "McpContext"], Awaitable[Any]]


class ToolRefusal(WakefulError):
    """A tool's refusal; the client sees a tool error whose content is ``{error, message, …details}``."""

    def __init__(self, code: str, message: str, **details: Any) -> None:
        super().__init__(message)
        self.code = code
        self.details = details


@dataclass(frozen=True, slots=True)
class Failed:
    """A handler's answer that the tool did not do its job although the call was valid (a failed build, a failed
    script): sent as ``structuredContent`` with ``isError: true``, so clients that look only at ``isError`` see it."""

    value: dict[str, Any]


class ApiCaller(Protocol):
    """The thin client's way to the HTTP API of a running server (``wakeful mcp`` without ``--embedded``)."""

    async def request(self, method: str, path: str, *, json: Any = None,
                      params: Mapping[str, Any] | None = None) -> Any: ...


@dataclass(frozen=True, slots=True)
class McpContext:
    """Who calls and through what: in-process (``harness``) or through the HTTP API (``api``)."""

    agent_id: str
    group_id: str
    principal: str  # agent:<id>, or operator (wakeful mcp --embedded)
    session_id: str | None = None  # the default session of this connection
    mcp_session: str = ""  # a stable id of this MCP connection (default claim keys)
    harness: Harness | None = None
    api: ApiCaller | None = None
    who: Principal | None = None  # the principal operations run as in process (None: the API key decides)

    @property
    def backend(self) -> Backend:
        """The one way a tool reaches the harness: in process as ``who``, or over the HTTP API."""
        if self.harness is not None:
            who = self.who or Principal("agent", "mcp", self.group_id, self.agent_id, self.group_id)
            return LocalBackend(self.harness, who)
        if self.api is None:
            raise ToolRefusal("unavailable", "this MCP server has neither a harness nor an API connection")
        return HttpBackend(self.api)

    @property
    def group_path(self) -> str:
        """``/v1/agent-groups/{group_id}`` (the ``G`` of interfaces.md §2.2)."""
        return f"/v1/agent-groups/{self.group_id}"


@dataclass(frozen=True, slots=True)
class McpTool:
    name: str  # dotted (interfaces.md §3.2)
    description: str
    input_schema: dict[str, Any]
    handler: Handler
    meta: dict[str, Any] = field(default_factory=dict)
    output_schema: dict[str, Any] | None = None  # JSON Schema of a successful structuredContent
    annotations: dict[str, bool] = field(default_factory=dict)  # readOnlyHint, destructiveHint, …


class ToolTable:
    """The tools one MCP server publishes, in registration order."""

    def __init__(self) -> None:
        self._tools: dict[str, McpTool] = {}

    def add(self, tool: McpTool) -> None:
        if tool.name in self._tools:
            raise ValueError(f"MCP tool {tool.name!r} is already in the table")
        if tool.input_schema.get("type") != "object":
            raise ValueError(f"MCP tool {tool.name!r}: input_schema must be a JSON Schema of type object")
        if tool.output_schema is not None and tool.output_schema.get("type") != "object":
            raise ValueError(f"MCP tool {tool.name!r}: output_schema must be a JSON Schema of type object")
        self._tools[tool.name] = tool

    def get(self, name: str) -> McpTool | None:
        return self._tools.get(name)

    def __iter__(self) -> Iterator[McpTool]:
        return iter(list(self._tools.values()))

    def __len__(self) -> int:
        return len(self._tools)

    def names(self) -> list[str]:
        return list(self._tools)


_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,), "integer": (int,), "number": (int, float), "boolean": (bool,), "object": (dict,),
    "array": (list,), "null": (type(None),),
}


def check_arguments(schema: Mapping[str, Any], args: Any) -> dict[str, Any]:
    """The top-level checks of an input schema (required keys, property types, ``additionalProperties``);
    a failure is ``invalid_request`` with ``field``. Handlers check values themselves."""
    if args is None:
        args = {}
    if not isinstance(args, dict):
        raise ToolRefusal("invalid_request", "arguments must be an object", field="arguments")
    props: Mapping[str, Any] = schema.get("properties", {})
    for key in schema.get("required", ()):
        if key not in args:
            raise ToolRefusal("invalid_request", f"{key} is required", field=key)
    if schema.get("additionalProperties") is False:
        for key in args:
            if key not in props:
                raise ToolRefusal("invalid_request", f"unknown argument {key!r}", field=str(key)[:64])
    for key, value in args.items():
        spec = props.get(key)
        kinds = _kinds(spec)
        if not kinds or not isinstance(spec, Mapping):
            continue
        if not any(_is(value, kind) for kind in kinds):
            raise ToolRefusal("invalid_request", f"{key} must be of type {' or '.join(kinds)}", field=key)
        _check_value(key, spec, value)
    return args


# the value keywords the published schemas use: enum, string lengths, integer bounds
def _check_value(key: str, spec: Mapping[str, Any], value: Any) -> None:
    if "enum" in spec and value not in spec["enum"]:
        raise ToolRefusal("invalid_request", f"{key} must be one of {', '.join(map(str, spec['enum']))}", field=key)
    if isinstance(value, str):
        if len(value) < spec.get("minLength", 0) or len(value) > spec.get("maxLength", len(value)):
            raise ToolRefusal("invalid_request", f"{key} has the wrong length", field=key)
    elif isinstance(value, int) and not isinstance(value, bool):
        if value < spec.get("minimum", value) or value > spec.get("maximum", value):
            raise ToolRefusal("invalid_request", f"{key} is out of range", field=key)


def _kinds(spec: Any) -> list[str]:
    """The JSON types a property allows: its ``type``, or the types of its ``anyOf``/``oneOf`` branches."""
    if not isinstance(spec, Mapping):
        return []
    if "type" in spec:
        return list(spec["type"]) if isinstance(spec["type"], list) else [spec["type"]]
    branches = spec.get("anyOf") or spec.get("oneOf") or []
    kinds = [b.get("type") for b in branches if isinstance(b, Mapping)]
    return [str(k) for k in kinds] if kinds and all(isinstance(k, str) for k in kinds) else []


def _is(value: Any, kind: str) -> bool:
    if kind in ("integer", "number") and isinstance(value, bool):
        return False
    return isinstance(value, _TYPES.get(kind, (object,)))
