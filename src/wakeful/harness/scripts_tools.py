"""What a script's ``tool.call`` may reach, and how each call runs as the calling agent.

harness.md §18: embedder tools (read and write), ``decide``, ``web.http_request`` and the read-only harness and
control tools; refused: ``script.*`` and every write tool of the harness and control plane.
"""

from __future__ import annotations

import asyncio
import inspect
from typing import TYPE_CHECKING, Any

from wakeful.harness.errors import HarnessError, HostCallRefused
from wakeful.harness.registry import Tool, ToolContext

if TYPE_CHECKING:
    from wakeful.harness.embed import Harness

__all__ = ["READ_ONLY_TOOLS", "REFUSED_TOOLS", "ScriptTools"]

# §18: the read-only harness and control tools a script may call
READ_ONLY_TOOLS = ("loop.list", "loop.get", "goal.status", "goal.board", "work.list", "work.next")
# the write tools of the harness and control plane (interfaces.md §3.2), refused by name
REFUSED_TOOLS = frozenset({
    "loop.sdk", "loop.build", "loop.create", "loop.pause", "loop.resume", "loop.delete", "loop.webhook",
    "loop.events", "loop.send", "agent.notify", "loop.state.put", "loop.state.get", "loop.ack", "loop.log",
    "goal.create", "goal.list", "goal.join", "subject.set", "budget.spend", "work.add", "work.claim", "work.renew",
    "work.release", "work.update", "work.complete", "work.supersede", "gate.ask", "evidence.add", "effect.intend",
    "effect.settle", "effect.readback", "acceptance.set", "gate.resolve", "agent.exclude", "work.cancel",
    "goal.close",
})
MIN_TIMEOUT_S = 0.1


class ScriptTools:
    """Routes ``tool.call {tool, args}`` for one harness; every call runs with principal ``agent:<id>``."""

    def __init__(self, harness: Harness) -> None:
        self.harness = harness

    def allowed(self, tool: str) -> bool:
        """True when a script may call ``tool`` on this node."""
        if tool.startswith("script.") or tool in REFUSED_TOOLS:
            return False
        return (tool in ("decide", "web.http_request") or tool in READ_ONLY_TOOLS
                or self.harness.registry.get(tool) is not None)

    async def call(self, agent_id: str, group_id: str, tool: str, args: Any, deadline_unix_ms: int) -> Any:
        """Run one tool; a refusal or failure raises ``HostCallRefused`` (the script sees ``ok: false``)."""
        if tool.startswith("script.") or tool in REFUSED_TOOLS:
            raise HostCallRefused("not_allowed", f"scripts may not call {tool!r} (harness.md §18)")
        registered = self.harness.registry.get(tool)
        if registered is not None:
            return await self._embedder_tool(registered, agent_id, group_id, args, deadline_unix_ms)
        match tool:
            case "decide":
                return await self._decide(group_id, args, deadline_unix_ms)
            case "web.http_request":
                return await self._web(args)
            case "loop.list":
                return await self._loop_list(agent_id, args)
            case "loop.get":
                return await self._loop_get(agent_id, args)
            case "goal.status" | "goal.board" | "work.list" | "work.next":
                return await self._control(tool, agent_id, group_id, args)
        raise HostCallRefused("unknown_tool", f"no tool {tool!r} on this node")

    # interfaces.md §5: fn(args, ctx), sync or async; input_model failures are invalid_arguments
    async def _embedder_tool(self, tool: Tool, agent_id: str, group_id: str, args: Any, deadline_ms: int) -> Any:
        validate = getattr(tool.input_model, "model_validate", None)
        if validate is not None:
            try:
                validate(args)
            except Exception as exc:
                raise HostCallRefused("invalid_arguments", f"{tool.name}: {exc}"[:512]) from None
        ctx = ToolContext(principal=f"agent:{agent_id}", loop_id=None, agent_id=agent_id, session_id=None,
                          group_id=group_id, incarnation=None, deadline_unix_ms=deadline_ms)
        try:
            value = tool.fn(args, ctx)
            if inspect.isawaitable(value):
                value = await asyncio.wait_for(value, max(MIN_TIMEOUT_S, tool.timeout_s))
        except TimeoutError:
            raise HostCallRefused("deadline_exceeded", f"{tool.name} ran past {tool.timeout_s} s") from None
        except (HostCallRefused, asyncio.CancelledError):
            raise
        except HarnessError as exc:
            raise HostCallRefused(exc.code, exc.message) from None
        except Exception as exc:
            raise HostCallRefused("tool_failed", f"{tool.name}: {type(exc).__name__}: {exc}"[:512]) from None
        return value

    # harness.md §16: decide is available to scripts (the node's decider: group buckets, provider, 2 s budget);
    # its domain failures are data ({error: {code}}), so the call itself is ok
    async def _decide(self, group_id: str, args: Any, deadline_unix_ms: int) -> Any:
        decider = getattr(self.harness.node.dispatch, "decider", None)
        if decider is None:
            return {"error": {"code": "not_configured"}}
        remaining_s = max(0.1, (deadline_unix_ms - self.harness.node.clock.unix_ms()) / 1000)
        return await decider.decide(group_id, args, remaining_s=remaining_s)

    # harness.md §17: the node's web client (SSRF rules, in-flight bound); scripts have no per-Loop bucket
    async def _web(self, args: Any) -> Any:
        web = getattr(self.harness.node.dispatch, "web", None)
        if web is None:
            raise HostCallRefused("unavailable", "web.http_request is not available on this node")
        return await web.request(args)

    async def _loop_list(self, agent_id: str, args: Any) -> Any:
        state = args.get("state") if isinstance(args, dict) else None
        return {"loops": await self._harness_op(self.harness.loops.list(agent_id=agent_id, state=state))}

    async def _loop_get(self, agent_id: str, args: Any) -> Any:
        loop_id = args.get("loop_id") if isinstance(args, dict) else None
        return await self._harness_op(self.harness.loops.get(loop_id, agent_id=agent_id))  # type: ignore[arg-type]

    async def _harness_op(self, work: Any) -> Any:
        try:
            return await work
        except HarnessError as exc:
            raise HostCallRefused(exc.code, exc.message) from None

    # the control plane sits above the harness: reached through ``h.control`` (wakeful.control.embed.Harness);
    # a goal of another group is not_found, as on the HTTP API
    async def _control(self, tool: str, agent_id: str, group_id: str, args: Any) -> Any:
        control = getattr(self.harness, "control", None) if hasattr(type(self.harness), "control") else None
        if control is None:
            raise HostCallRefused("unavailable", f"{tool} is not available on this node (no control plane)")
        args = args if isinstance(args, dict) else {}
        goal_id = args.get("goal_id")
        if tool == "work.next" and goal_id is None:
            return await self._harness_op(control.next(agent_id))
        if not isinstance(goal_id, str) or not 1 <= len(goal_id) <= 40:
            raise HostCallRefused("invalid_arguments", f"{tool} takes {{goal_id}}")
        goal = await self._harness_op(control.goal(goal_id))
        if goal.get("group_id") != group_id:
            raise HostCallRefused("not_found", f"goal {goal_id} not found")
        match tool:
            case "goal.status":
                return await self._harness_op(control.status(goal_id))
            case "goal.board":
                return await self._harness_op(control.board(goal_id))
            case "work.list":
                items = control.items(goal_id, status=args.get("status"), cls=args.get("class"))
                return {"items": await self._harness_op(items)}
        return await self._harness_op(control.next(agent_id, goal_id))
