"""Scripts: compile a C bundle and run it once while the caller waits (``script.sdk``, ``script.run``).

harness.md §18: capabilities ``tool.call``, ``script.result`` and ``script.log`` only; 5 s of guest time, 60 s
of wall time, 64 resident scripts per node and 4 per agent, 256 tool calls; the outcome shapes of §18.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from wakeful.errors import (
    BuildBusy,
    BuildUnavailable,
    BundleError,
    HostCallError,
    InvalidObject,
    InvalidParams,
)
from wakeful.harness.config import ScriptLimits
from wakeful.harness.errors import CompilerUnavailable, HarnessError, HostCallRefused, InvalidRequest
from wakeful.runtime import Clock, HostCall, ObjectStatus, Runtime, RuntimeOptions, SystemClock, jsonval

__all__ = ["CompilerUnavailable", "ScriptRunner", "ToolCaller", "bundle_request"]

log = logging.getLogger("wakeful.harness.scripts")

CAPABILITIES = ({"name": "tool.call"}, {"name": "script.result"}, {"name": "script.log"})  # §18
MAX_TOOL_CALLS = 256  # §18
MAX_VALUE_BYTES = 16_384 - 256  # §18 tool.call: a larger value is replaced by {ok, truncated, bytes}
MAX_RESULT_BYTES = 16_384  # §18 script.result
MAX_ENV_BYTES = 15 * 1024  # §18 env ≤ 15 KiB encoded
LOG_LINE_CHARS, LOG_LINES, LOG_BYTES = 1024, 256, 64 * 1024  # §18 script.log
POLL_S = 0.05  # how often a waiting run re-reads the (injectable) clock for its wall-time bound
# a script runtime of its own: bigger slices than a Loop node, so the scheduler's throttle of a busy guest
# (vm.md §7: 16 slices, then 20 ms asleep) costs a computing script little wall time
SCRIPT_SLICE_INSNS = 131_072

# tool.call(agent_id, group_id, tool, args, deadline_unix_ms) → value; raises HostCallRefused for a refusal
ToolCaller = Callable[[str, str, str, Any, int], Awaitable[Any]]


@dataclass(slots=True)
class _Run:
    """One script from admission to outcome."""

    agent_id: str
    group_id: str
    started_ns: int
    console: list[str] = field(default_factory=list)
    console_bytes: int = 0
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    calls_made: int = 0
    result: Any = None
    failure: tuple[str, str] | None = None  # (kind, message) decided by the harness (console, wall time)
    done: asyncio.Future[ObjectStatus] | None = None


class ScriptRunner:
    """Runs scripts on a runtime of their own (never mixed with a node's Loop objects)."""

    def __init__(self, *, builder: Any, call_tool: ToolCaller, limits: ScriptLimits | None = None,
                 clock: Clock | None = None) -> None:
        self.builder = builder
        self.call_tool = call_tool
        self.limits = limits or ScriptLimits()
        self.clock: Clock = clock or SystemClock()
        self.runtime = Runtime(
            RuntimeOptions(max_objects=self.limits.max_resident, slice_insns=SCRIPT_SLICE_INSNS),
            host_handler=self._host_call, on_state=self._on_state, on_log=self._on_log, clock=self.clock,
        )
        self._runs: dict[str, _Run] = {}  # object id → run
        self._admitted = 0
        self._per_agent: dict[str, int] = {}
        self._closed = False

    async def open(self) -> None:
        await self.runtime.open()

    async def close(self) -> None:
        """Stop every running script (their callers get ``runtime_lost``)."""
        self._closed = True
        await self.runtime.close()
        for run in self._runs.values():
            if run.done is not None and not run.done.done():
                run.done.cancel()

    @property
    def resident(self) -> int:
        return self._admitted

    def sdk(self) -> dict[str, Any]:
        """``script.sdk``: the script guide, ``wakeful.h`` and the limits (§18)."""
        from wakeful.sdk import header_text, script_guide_text

        lim = self.limits
        return {"guide": script_guide_text(), "header": header_text(), "limits": {
            "guest_time_ms": lim.guest_time_ms, "wall_time_ms": lim.wall_time_ms,
            "scripts_per_node": lim.max_resident, "scripts_per_agent": lim.per_agent,
            "tool_calls": MAX_TOOL_CALLS, "result_bytes": MAX_RESULT_BYTES, "env_bytes": MAX_ENV_BYTES,
            "console_lines": LOG_LINES, "console_bytes": LOG_BYTES, "console_line_chars": LOG_LINE_CHARS,
        }}

    # ------------------------------------------------------------------ script.run

    async def run(self, *, agent_id: str, group_id: str, request: Mapping[str, Any] | str,
                  env: Any = None) -> dict[str, Any]:
        """Build and run once; every failure of the script itself is an outcome, not an exception."""
        bundle = bundle_request(request)
        env_value = _check_env(env if env is not None else _env_of(request))
        run = _Run(agent_id, group_id, self.clock.monotonic_ns())
        if not self._admit(agent_id):
            return self._failed(run, "busy", self._busy_text(agent_id))
        try:
            return await self._build_and_run(run, bundle, env_value)
        finally:
            self._release(agent_id)

    def _admit(self, agent_id: str) -> bool:
        if self._closed or self._admitted >= self.limits.max_resident:
            return False
        if self._per_agent.get(agent_id, 0) >= self.limits.per_agent:
            return False
        self._admitted += 1
        self._per_agent[agent_id] = self._per_agent.get(agent_id, 0) + 1
        return True

    def _release(self, agent_id: str) -> None:
        self._admitted -= 1
        left = self._per_agent.get(agent_id, 1) - 1
        if left > 0:
            self._per_agent[agent_id] = left
        else:
            self._per_agent.pop(agent_id, None)

    def _busy_text(self, agent_id: str) -> str:
        if self._per_agent.get(agent_id, 0) >= self.limits.per_agent:
            return f"the agent already runs {self.limits.per_agent} scripts"
        return f"this node already runs {self.limits.max_resident} scripts"

    async def _build_and_run(self, run: _Run, bundle: dict[str, Any], env: dict[str, str]) -> dict[str, Any]:
        try:
            built = await self.builder.compile(bundle)
        except BundleError as exc:
            return self._failed(run, "invalid_bundle", exc.message, rule=exc.rule, path=exc.path)
        except BuildBusy as exc:
            return self._failed(run, "busy", f"the build queue is full: {exc.message}")
        except BuildUnavailable as exc:
            raise CompilerUnavailable(f"the compiler is unavailable: {exc.message}") from None
        if built.state != "succeeded" or built.elf is None:
            return self._failed(run, "build_failed", built.error or "the build failed", failure=built.failure,
                                diagnostics=built.diagnostics, diagnostics_truncated=built.diagnostics_truncated)
        return await self._execute(run, built.elf, env)

    async def _execute(self, run: _Run, elf: bytes, env: dict[str, str]) -> dict[str, Any]:
        try:
            status = await self.runtime.load(elf, config={"kind": "script", "env": env}, capabilities=CAPABILITIES,
                                             cpu_limit_ms=self.limits.guest_time_ms, label="script")
        except (InvalidObject, InvalidParams) as exc:
            return self._failed(run, "build_failed", f"the loader refused the program: {exc.message}")
        except Exception as exc:  # Busy (object limit) or a runtime closing under us
            return self._failed(run, "busy" if not self._closed else "runtime_lost", str(exc))
        object_id = status.object_id
        run.done = asyncio.get_running_loop().create_future()
        self._runs[object_id] = run
        try:
            await self.runtime.start(object_id)
            final = await self._wait(run, object_id)
        except asyncio.CancelledError:
            if self._closed:
                return self._failed(run, "runtime_lost", "the node stopped while the script ran")
            raise
        finally:
            self._runs.pop(object_id, None)
            await self.runtime.unload(object_id)
        return self._outcome(run, final)

    # wall time on the injectable clock: re-read at least every POLL_S while the script runs
    async def _wait(self, run: _Run, object_id: str) -> ObjectStatus:
        assert run.done is not None
        end_ns = run.started_ns + self.limits.wall_time_ms * 1_000_000
        while not run.done.done():
            left_s = (end_ns - self.clock.monotonic_ns()) / 1e9
            if left_s <= 0:
                self._fail_now(run, object_id, "wall_time_exceeded",
                               f"the script ran past its {self.limits.wall_time_ms} ms of wall time")
                break
            await asyncio.wait({run.done}, timeout=min(left_s, POLL_S))
        return await run.done

    def _fail_now(self, run: _Run, object_id: str, kind: str, message: str) -> None:
        if run.failure is None:
            run.failure = (kind, message)
        self.runtime.stop_nowait(object_id)

    # ------------------------------------------------------------------ runtime callbacks

    def _on_state(self, status: ObjectStatus) -> None:
        run = self._runs.get(status.object_id)
        if run is not None and run.done is not None and not run.done.done() and status.state in (
                "exited", "failed", "stopped"):
            run.done.set_result(status)

    # sf_log lines join the console (script guide: "script.log lines (and sf_log)")
    def _on_log(self, object_id: str, message: str) -> bool | None:
        run = self._runs.get(object_id)
        if run is not None:
            self._console(run, object_id, message)
        return None

    def _console(self, run: _Run, object_id: str, text: str) -> None:
        line = text[:LOG_LINE_CHARS]
        size = len(line.encode("utf-8", "replace"))
        if len(run.console) >= LOG_LINES or run.console_bytes + size > LOG_BYTES:
            self._fail_now(run, object_id, "console_budget_exhausted",
                           f"the console holds at most {LOG_LINES} lines and {LOG_BYTES} bytes")
            return
        run.console.append(line)
        run.console_bytes += size

    # §18: only the three capabilities reach here (the runtime answers SF_DENIED for anything else)
    def _host_call(self, call: HostCall) -> Any:
        run = self._runs.get(call.object_id)
        if run is None:
            raise HostCallError("not_active", "the script has ended")
        match call.capability:
            case "script.result":
                return self._store_result(run, call.arguments)
            case "script.log":
                self._log(run, call.object_id, call.arguments)
                return {"status": "logged"}
            case "tool.call":
                return self._tool_call(run, call)
        raise HostCallError("invalid_arguments", f"{call.capability} is not a script capability")

    def _store_result(self, run: _Run, args: Any) -> dict[str, Any]:
        if not isinstance(args, dict) or "value" not in args:
            raise HostCallError("invalid_arguments", "script.result takes {value}")
        size = _size(args["value"])
        if size < 0 or size > MAX_RESULT_BYTES:
            raise HostCallError("result_too_large", f"the result is {size} bytes; at most {MAX_RESULT_BYTES}")
        run.result = args["value"]  # last call wins
        return {"status": "stored"}

    def _log(self, run: _Run, object_id: str, args: Any) -> None:
        text = args.get("message", args.get("text")) if isinstance(args, dict) else None
        if not isinstance(text, str):
            raise HostCallError("invalid_arguments", "script.log takes {message} or {text}, a string")
        self._console(run, object_id, text)
        if run.failure is not None:
            raise HostCallError("console_budget_exhausted", run.failure[1])

    def _tool_call(self, run: _Run, call: HostCall) -> Any:
        args = call.arguments
        if not isinstance(args, dict) or not isinstance(args.get("tool"), str) or not set(args) <= {"tool", "args"}:
            raise HostCallError("invalid_arguments", "tool.call takes {tool, args}")
        if run.calls_made >= MAX_TOOL_CALLS:
            return {"ok": False, "error": {"code": "busy", "message": f"at most {MAX_TOOL_CALLS} tool calls"}}
        run.calls_made += 1
        return self._observed(run, args["tool"], args.get("args", {}), call.deadline_unix_ms)

    async def _observed(self, run: _Run, tool: str, tool_args: Any, deadline_ms: int) -> dict[str, Any]:
        try:
            value = await self.call_tool(run.agent_id, run.group_id, tool, tool_args, deadline_ms)
        except HostCallRefused as refusal:
            run.tool_calls.append({"tool": tool, "ok": False, "code": refusal.code})
            return {"ok": False, "error": {"code": refusal.code, "message": refusal.message[:512]}}
        except HarnessError as exc:
            run.tool_calls.append({"tool": tool, "ok": False, "code": exc.code})
            return {"ok": False, "error": {"code": exc.code, "message": exc.message[:512]}}
        size = _size(value)
        if size < 0:  # the tool answered something that is not JSON
            run.tool_calls.append({"tool": tool, "ok": False, "code": "invalid_result"})
            return {"ok": False, "error": {"code": "invalid_result", "message": f"{tool} did not answer JSON"}}
        run.tool_calls.append({"tool": tool, "ok": True})
        if size > MAX_VALUE_BYTES:
            return {"ok": True, "truncated": True, "bytes": size}
        return {"ok": True, "value": value}

    # ------------------------------------------------------------------ outcomes (§18)

    def _outcome(self, run: _Run, status: ObjectStatus) -> dict[str, Any]:
        common: dict[str, Any] = {"guest_ms": round(status.guest_ms, 3)}
        if run.failure is not None:
            kind, message = run.failure
            return self._failed(run, kind, message, **common)
        outcome = status.outcome or {}
        if status.state == "exited":
            code = int(outcome.get("exit_code", 0))
            if code == 0:
                return {"state": "succeeded", "exit_code": 0, "result": run.result, "console": run.console,
                        "tool_calls": run.tool_calls, **common, "wall_ms": self._wall_ms(run)}
            return self._failed(run, "exit_nonzero", f"the script returned {code}", exit_code=code, **common)
        if status.state == "failed":
            fault = status.fault or {}
            if fault.get("code") == "CPU_LIMIT" or "cpu limit" in str(outcome.get("error", "")):
                return self._failed(run, "guest_time_exceeded",
                                    f"the script ran past its {self.limits.guest_time_ms} ms of guest time", **common)
            return self._failed(run, "fault", str(outcome.get("error", "fault")), fault=fault or None, **common)
        return self._failed(run, "runtime_lost", "the script was stopped by the runtime", **common)

    def _failed(self, run: _Run, kind: str, message: str, **details: Any) -> dict[str, Any]:
        error: dict[str, Any] = {"kind": kind, "message": message}
        top: dict[str, Any] = {}
        for key, value in details.items():
            if key == "guest_ms":
                top[key] = value
            elif key == "exit_code":
                error[key] = top[key] = value
            elif value is not None:
                error[key] = value
        return {"state": "failed", "error": error, "result": run.result, "console": run.console,
                "tool_calls": run.tool_calls, "guest_ms": top.pop("guest_ms", 0.0), **top,
                "wall_ms": self._wall_ms(run)}

    def _wall_ms(self, run: _Run) -> int:
        return max(0, (self.clock.monotonic_ns() - run.started_ns) // 1_000_000)


# ---------------------------------------------------------------------- requests


def bundle_request(request: Mapping[str, Any] | str) -> dict[str, Any]:
    """§18 request → build.md bundle: ``{source}`` becomes ``main.c``; or ``{files, entry}``."""
    if isinstance(request, str):
        return {"sdk_version": 1, "entry": "main.c", "files": {"main.c": request}}
    if not isinstance(request, Mapping):
        raise InvalidRequest("a script is {source} or {files, entry}", field="source")
    source, files = request.get("source"), request.get("files")
    if source is not None:
        if not isinstance(source, str):
            raise InvalidRequest("source must be a string", field="source")
        extra = dict(files) if isinstance(files, Mapping) else {}
        if files is not None and not isinstance(files, Mapping):
            raise InvalidRequest("files must be an object of path → text", field="files")
        return {"sdk_version": 1, "entry": "main.c", "files": {**extra, "main.c": source}}
    if files is None:
        raise InvalidRequest("a script needs source, or files and entry", field="source")
    return {"sdk_version": 1, "entry": request.get("entry"), "files": files}


def _env_of(request: Mapping[str, Any] | str) -> Any:
    return request.get("env") if isinstance(request, Mapping) else None


# §18: env is an object of string → string, ≤ 15 KiB encoded
def _check_env(env: Any) -> dict[str, str]:
    if env is None:
        return {}
    if not isinstance(env, Mapping) or not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
        raise InvalidRequest("env must be an object of string → string", field="env")
    value = dict(env)
    if not 0 <= _size(value) <= MAX_ENV_BYTES:
        raise InvalidRequest(f"env is over {MAX_ENV_BYTES} bytes encoded", field="env")
    return value


def _size(value: Any) -> int:
    """The compact JSON size of ``value``, or -1 when it is not a JSON value."""
    try:
        return jsonval.from_python(value, limits=False).size
    except jsonval.JsonError:
        return -1
