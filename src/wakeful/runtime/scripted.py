"""A scripted test host: run one ELF in an in-process runtime against scripted events and host answers.

The reusable core of `wakeful run` (interfaces.md §4.2) and the MCP tool ``loop.test``: events are delivered in
order before the start (ids e1, e2, …), each host call is answered from the replies per capability (consumed in
order, the last repeats; an unlisted capability is ``not_scripted``), and the run ends when the guest ends, at the
time bound, or when the caller stops it. What happened is reported to an observer as it happens.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Protocol

from wakeful.build.lines import LineTable
from wakeful.errors import HostCallError, InvalidParams
from wakeful.sdk.rules import BUILTIN_CAPABILITIES

__all__ = [
    "INJECTED_CONFIG", "LOOP_BUILTINS", "TERMINAL", "Ending", "EventRefused", "HostReplies", "Recorder",
    "Reply", "RunObserver", "RuntimeSession", "parse_replies", "run_scripted", "status_dict",
]

# interfaces.md §4.2: keys the harness injects (harness.md §6), so Loop examples run unchanged
INJECTED_CONFIG: dict[str, Any] = {"loop_id": "lp_local", "incarnation": 1, "state": None}
TERMINAL = frozenset({"stopped", "exited", "failed"})
POLL_S = 0.05

# interfaces.md §4.2: the capabilities every run grants besides the scripted names (the Loop builtins)
LOOP_BUILTINS = BUILTIN_CAPABILITIES


class EventRefused(InvalidParams):
    """The runtime refused a scripted event before the start (``index`` counts from 1)."""

    def __init__(self, index: int, topic: str, message: str) -> None:
        super().__init__(f"event {topic} (e{index}) refused: {message}")
        self.index, self.topic, self.reason = index, topic, message


# ---- the scripted replies


@dataclass(frozen=True)
class Reply:
    """One scripted reply: exactly one of ``result`` (any JSON) or ``error`` ({code, message})."""

    result: Any = None
    error: dict[str, str] | None = None

    def to_json(self) -> dict[str, Any]:
        return {"error": self.error} if self.error is not None else {"result": self.result}


@dataclass
class HostReplies:
    """Replies per capability plus the position reached in each list."""

    replies: dict[str, list[Reply]] = field(default_factory=dict)
    _next: dict[str, int] = field(default_factory=dict)

    @classmethod
    def parse(cls, text: str, *, source: str = "host replies") -> HostReplies:
        """Validate the FILE shape of interfaces.md §4.2 (JSON text); problems are ``InvalidParams``."""
        try:
            doc = json.loads(text, parse_constant=_refuse_constant)
        except (ValueError, RecursionError) as exc:
            raise InvalidParams(f"{source}: not valid JSON: {exc}") from exc
        return parse_replies(doc, source=source)

    def capabilities(self) -> list[str]:
        """The scripted names plus the Loop builtins, each once, in a stable order."""
        names = list(LOOP_BUILTINS)
        names += [n for n in self.replies if n not in names]
        return names

    def answer(self, capability: str) -> Reply:
        """The next reply for ``capability`` (the last repeats), or the `not_scripted` error."""
        script = self.replies.get(capability)
        if not script:
            return Reply(error={"code": "not_scripted", "message": f"no reply for {capability}"})
        index = self._next.get(capability, 0)
        self._next[capability] = index + 1
        return script[min(index, len(script) - 1)]


def parse_replies(doc: Any, *, source: str = "host replies") -> HostReplies:
    """The replies of an already decoded JSON value: ``{capability: [{result} | {error: {code, message}}]}``."""
    if not isinstance(doc, dict):
        raise InvalidParams(f"{source}: must be a JSON object mapping capability names to reply lists")
    return HostReplies({name: _reply_list(source, name, value) for name, value in doc.items()})


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _reply_list(source: str, name: str, value: Any) -> list[Reply]:
    if not isinstance(name, str) or not name or len(name.encode()) > 128:
        raise InvalidParams(f"{source}: capability name must be 1..128 bytes: {name!r}")
    if not isinstance(value, list) or not value:
        raise InvalidParams(f"{source}: {name}: expected a non-empty list of replies")
    return [_reply(f"{source}: {name}[{i}]", item) for i, item in enumerate(value)]


def _reply(where: str, item: Any) -> Reply:
    if not isinstance(item, dict) or len(item) != 1 or not ({"result", "error"} & item.keys()):
        raise InvalidParams(f'{where}: a reply is {{"result": <any JSON>}} or {{"error": {{"code", "message"}}}}')
    if "result" in item:
        return Reply(result=item["result"])
    error = item["error"]
    if not isinstance(error, dict) or set(error) != {"code", "message"} or not all(
            isinstance(v, str) for v in error.values()):
        raise InvalidParams(f'{where}: error must be {{"code": <string>, "message": <string>}}')
    return Reply(error={"code": error["code"], "message": error["message"]})


# ---- the runtime seam (runtime-protocol.md §14): statuses as plain dicts


def status_dict(status: Any) -> dict[str, Any]:
    """The status object of runtime-protocol.md §6.2 (+ `guest_ms`, `instructions`, `fault`) as a dict."""
    if isinstance(status, dict):
        return dict(status)
    names = ("object_id", "sha256", "state", "wait", "mailbox_entries", "outcome", "guest_ms", "instructions",
             "fault")
    return {name: getattr(status, name, None) for name in names}


async def _settle(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


class RuntimeSession:
    """An opened in-process ``Runtime`` for one scripted run, closed on exit."""

    def __init__(self, *, engine: str, host_handler: Callable[[Any], Any], on_log: Callable[[str, str], None],
                 on_state: Callable[[Any], None], on_log_refused: Callable[[str, str], None] | None = None) -> None:
        self._engine = engine
        self._handlers = (host_handler, on_log, on_state)
        self._on_log_refused = on_log_refused
        self._rt: Any = None

    async def __aenter__(self) -> RuntimeSession:
        from wakeful.runtime.core import Runtime, RuntimeOptions

        host_handler, on_log, on_state = self._handlers
        self._rt = Runtime(RuntimeOptions(engine=self._engine), host_handler=host_handler, on_state=on_state,
                           on_log=on_log, on_log_refused=self._on_log_refused)
        await _settle(self._rt.open())
        return self

    async def __aexit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        if self._rt is not None:
            await _settle(self._rt.close())

    async def load(self, elf: bytes, *, config: Any, capabilities: list[dict[str, Any]]) -> dict[str, Any]:
        return status_dict(await _settle(self._rt.load(elf, config=config, capabilities=capabilities)))

    async def deliver(self, object_id: str, event_id: str, topic: str, payload: Any) -> None:
        await _settle(self._rt.deliver(object_id, event_id, topic, payload))

    async def start(self, object_id: str) -> dict[str, Any]:
        return status_dict(await _settle(self._rt.start(object_id)))

    async def get(self, object_id: str) -> dict[str, Any]:
        return status_dict(await _settle(self._rt.get(object_id)))

    async def stop(self, object_id: str) -> dict[str, Any]:
        return status_dict(await _settle(self._rt.stop(object_id)))


# ---- running (interfaces.md §4.2: events before start, replies per capability, end)


class RunObserver(Protocol):
    """What a scripted run reports as it happens (the CLI prints it; ``Recorder`` keeps it)."""

    def log(self, message: str) -> None: ...

    def host_call(self, capability: str, arguments: Any, reply: Reply) -> None: ...

    def state(self, status: dict[str, Any]) -> None: ...


@dataclass
class Ending:
    """Why the run ended, set by whichever comes first (the guest, the time bound, the caller)."""

    done: asyncio.Event = field(default_factory=asyncio.Event)
    stopped_by: str | None = None

    def stop(self, reason: str) -> None:
        if self.stopped_by is None and not self.done.is_set():
            self.stopped_by = reason
        self.done.set()


async def run_scripted(elf: bytes, *, config: dict[str, Any], events: list[tuple[str, Any]], replies: HostReplies,
                       engine: str, timeout_s: float, observer: RunObserver,
                       ending: Ending | None = None, lines: LineTable | None = None) -> dict[str, Any]:
    """Load, deliver ``events``, start and watch until terminal or ``timeout_s``; the final status.

    With the build's ``lines`` a fault's text names the source line (issue 18).
    A refused load raises the runtime's ``WakefulError``; a refused event raises ``EventRefused``."""
    ending = ending or Ending()
    refused = getattr(observer, "log_refused", None)  # an observer that counts the lines sdk.md §9.3 refuses
    session = RuntimeSession(engine=engine, host_handler=_scripted_host(replies, observer),
                             on_log=lambda _object_id, message: observer.log(message),
                             on_state=lambda _status: ending.done.set(),
                             on_log_refused=None if refused is None else lambda _object_id, why: refused(why))
    async with session:
        caps = [{"name": name} for name in replies.capabilities()]
        status = await session.load(elf, config=config, capabilities=caps)
        object_id = status["object_id"]
        observer.state(status)
        await _deliver_events(session, object_id, events)
        observer.state(await session.start(object_id))
        final = _named(await _watch(session, object_id, ending, timeout_s, observer), lines)
    observer.state(final)
    return {**final, "stopped_by": ending.stopped_by}


# issue 18: `main.c:42: <fault> (in wf_json_get_str)` when the build's line table covers the fault
def _named(status: dict[str, Any], lines: LineTable | None) -> dict[str, Any]:
    outcome, fault = status.get("outcome"), status.get("fault")
    if lines is None or not isinstance(outcome, dict) or not isinstance(fault, dict) or "error" not in outcome:
        return status
    pc = fault.get("pc")
    text = lines.fault_text(str(outcome["error"]), fault.get("function"), pc if isinstance(pc, int) else None)
    return {**status, "outcome": {**outcome, "error": text}}


async def _deliver_events(session: RuntimeSession, object_id: str, events: list[tuple[str, Any]]) -> None:
    from wakeful.errors import WakefulError

    for index, (topic, payload) in enumerate(events, start=1):
        try:
            await session.deliver(object_id, f"e{index}", topic, payload)
        except WakefulError as exc:
            raise EventRefused(index, topic, exc.message) from exc


async def _watch(session: RuntimeSession, object_id: str, ending: Ending, timeout_s: float,
                 observer: RunObserver) -> dict[str, Any]:
    timer = asyncio.get_running_loop().call_later(timeout_s, ending.stop, "timeout")
    try:
        status = await _poll_until_terminal(session, object_id, ending, observer)
    finally:
        timer.cancel()
    if status["state"] not in TERMINAL:
        status = await session.stop(object_id)
    if status["state"] in ("exited", "failed"):
        ending.stopped_by = None  # the guest ended on its own before the stop took effect
    return status


async def _poll_until_terminal(session: RuntimeSession, object_id: str, ending: Ending,
                               observer: RunObserver) -> dict[str, Any]:
    while True:
        status = await session.get(object_id)
        if status["state"] in TERMINAL:
            return status
        observer.state(status)
        if ending.done.is_set() and ending.stopped_by is not None:
            return status
        ending.done.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(ending.done.wait(), POLL_S)


def _scripted_host(replies: HostReplies, observer: RunObserver) -> Callable[[Any], Any]:
    def handle(call: Any) -> Any:
        capability = _field(call, "capability")
        reply = replies.answer(capability)
        observer.host_call(capability, _field(call, "arguments"), reply)
        if reply.error is not None:
            raise HostCallError(reply.error["code"], reply.error["message"])
        return reply.result

    return handle


def _field(call: Any, name: str) -> Any:
    return call[name] if isinstance(call, dict) else getattr(call, name)


# ---- a record of the whole run (``loop.test``)


@dataclass
class Recorder:
    """Keeps what a run reported, in order: logs, host calls (with the reply given), state changes."""

    logs: list[str] = field(default_factory=list)
    host_calls: list[dict[str, Any]] = field(default_factory=list)
    states: list[dict[str, str]] = field(default_factory=list)
    logs_refused: dict[str, int] = field(default_factory=dict)  # reason (rate, length) → lines the runtime refused

    def log(self, message: str) -> None:
        self.logs.append(message)

    def log_refused(self, reason: str) -> None:
        self.logs_refused[reason] = self.logs_refused.get(reason, 0) + 1

    def host_call(self, capability: str, arguments: Any, reply: Reply) -> None:
        self.host_calls.append({"capability": capability, "arguments": arguments, "reply": reply.to_json()})

    def state(self, status: dict[str, Any]) -> None:
        entry = {"state": str(status["state"]), "wait": str(status.get("wait") or "none")}
        if not self.states or self.states[-1] != entry:
            self.states.append(entry)

    def report(self, final: dict[str, Any]) -> dict[str, Any]:
        """The run as one JSON object: final state, exit code or fault, and everything observed."""
        outcome = final.get("outcome") or {}
        notes = [c["arguments"] for c in self.host_calls if c["capability"] == "agent.notify"]
        return {"state": final["state"], "wait": final.get("wait") or "none", "exit_code": outcome.get("exit_code"),
                "fault": outcome.get("error"), "stopped_by": final.get("stopped_by"), "outcome": final.get("outcome"),
                "host_calls": self.host_calls, "notifications": notes, "logs": self.logs,
                "logs_refused": self.logs_refused, "states": self.states,
                "guest_ms": final.get("guest_ms"), "instructions": final.get("instructions")}
