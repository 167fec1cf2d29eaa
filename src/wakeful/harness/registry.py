"""Embedder tools registered on a harness, and the context a tool call receives.

interfaces.md §5 ``register_tool``; harness.md §9.1 (only ``safety="read"`` tools are offered to Loops).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from wakeful.harness.capabilities import is_loop_tool_name
from wakeful.harness.errors import InvalidRequest

__all__ = ["Tool", "ToolContext", "ToolRegistry"]


@dataclass(frozen=True, slots=True)
class ToolContext:
    """interfaces.md §5: who calls and for which Loop (principal is delegated for Loops, §9.3)."""

    principal: str
    loop_id: str | None
    agent_id: str | None
    session_id: str | None
    group_id: str | None
    incarnation: int | None
    deadline_unix_ms: int | None


@dataclass(frozen=True, slots=True)
class Tool:
    name: str
    fn: Callable[[Any, ToolContext], Any]
    description: str
    safety: str
    timeout_s: float
    input_model: Any = None


class ToolRegistry:
    """The tools of one harness; register before start, the same set on every node."""

    def __init__(self) -> None:
        self._tools: dict[str, Tool] = {}

    # §9.1: name ^[a-z][a-z0-9_.-]{0,127}$, not a builtin; safety read or write
    def register(self, tool: Tool) -> None:
        if not is_loop_tool_name(tool.name):
            raise InvalidRequest(f"tool name {tool.name!r} is invalid or collides with a builtin", field="name")
        if tool.safety not in ("read", "write"):
            raise InvalidRequest("safety must be 'read' or 'write'", field="safety")
        if tool.name in self._tools:
            raise InvalidRequest(f"tool {tool.name!r} is already registered", field="name")
        self._tools[tool.name] = tool

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def tools(self) -> list[Tool]:
        """Every registered tool, in registration order (the MCP server publishes them)."""
        return list(self._tools.values())

    def guide_entries(self) -> list[tuple[str, str]]:
        """(name, description) of the read tools, for the ``loop.sdk`` guide (``wakeful.sdk.guide_text``)."""
        return [(tool.name, tool.description) for tool in self._tools.values() if tool.safety == "read"]

    def loop_tool_names(self) -> frozenset[str]:
        """The read tools, the only ones a Loop may name."""
        return frozenset(name for name, tool in self._tools.items() if tool.safety == "read")
