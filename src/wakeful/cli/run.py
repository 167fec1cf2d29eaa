"""`wakeful run` — the local playground: one program in an in-process runtime (interfaces.md §4.2).

Builds a `.c` file or reads a prebuilt ELF, delivers `--event`s, answers host calls from the replies file,
prints logs, host calls and state changes, and ends when the guest ends, at `--timeout`, or on SIGINT.
"""

from __future__ import annotations

import asyncio
import json
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from wakeful.cli.output import EXIT_FAILED, EXIT_OK, CliExit, Out, UsageError, dumps, escape
from wakeful.cli.program import load_program
from wakeful.cli.replies import HostReplies, Reply
from wakeful.errors import WakefulError
from wakeful.runtime import INJECTED_CONFIG, Ending, EventRefused, run_scripted, status_dict

if TYPE_CHECKING:
    from wakeful.build import LineTable


@dataclass(frozen=True)
class RunRequest:
    """The validated arguments of one `wakeful run`."""

    program: Path
    config: dict[str, Any]
    events: list[tuple[str, Any]]
    replies: HostReplies
    engine: str
    timeout_s: float


def parse_request(
    program: Path,
    config: str | None,
    events: list[str],
    host_replies: Path | None,
    engine: str,
    timeout_s: float,
) -> RunRequest:
    """Validate the arguments; every problem is a ``UsageError`` (exit code 2)."""
    if engine not in ("translate", "interp"):
        raise UsageError(f"--engine must be translate or interp, not {engine!r}")
    if not timeout_s > 0:
        raise UsageError("--timeout must be a positive number of seconds")
    if not program.is_file():
        raise UsageError(f"no such file: {program}")
    return RunRequest(
        program=program,
        config={**INJECTED_CONFIG, **_parse_config(config)},
        events=[_parse_event(text) for text in events],
        replies=HostReplies.load(host_replies),
        engine=engine,
        timeout_s=timeout_s,
    )


def _strict_json(text: str, what: str) -> Any:
    def refuse(name: str) -> Any:
        raise ValueError(f"{name} is not JSON")

    try:
        return json.loads(text, parse_constant=refuse)
    except (ValueError, RecursionError) as exc:
        raise UsageError(f"{what}: not valid JSON: {exc}") from exc


def _parse_config(text: str | None) -> dict[str, Any]:
    if text is None:
        return {}
    value = _strict_json(text, "--config")
    if not isinstance(value, dict):
        raise UsageError("--config must be a JSON object")
    return value


def _parse_event(text: str) -> tuple[str, Any]:
    topic, sep, payload = text.partition("=")
    if not sep or not topic:
        raise UsageError(f"--event must be TOPIC=JSON, got {text!r}")
    if len(topic.encode()) > 128:
        raise UsageError(f"--event topic longer than 128 bytes: {topic[:40]!r}…")
    return topic, _strict_json(payload, f"--event {topic}")


def run_command(out: Out, request: RunRequest) -> int:
    """Build or read the program, run it, print its story; returns the process exit code."""
    elf, lines = load_program(out, request.program)
    printer = RunPrinter(out)
    try:
        return asyncio.run(_run(request, elf, printer, lines))
    except WakefulError as exc:  # mid-stream: the record says what it is, like every other line
        out.fail(exc, extra={"type": "error"})


# ---- running: the scripted test host of wakeful.runtime.scripted (shared with MCP loop.test)


async def _run(request: RunRequest, elf: bytes, printer: RunPrinter, lines: LineTable | None) -> int:
    ending = Ending()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGINT, ending.stop, "sigint")
    try:
        final = await run_scripted(elf, config=request.config, events=request.events, replies=request.replies,
                                   engine=request.engine, timeout_s=request.timeout_s, observer=printer,
                                   ending=ending, lines=lines)
    except EventRefused as exc:  # interfaces.md §4.2: a refused --event is a usage error
        raise UsageError(f"--event {exc.topic} (e{exc.index}) refused: {exc.reason}") from exc
    except WakefulError as exc:
        if not printer.loaded:
            printer.refused(exc)
            raise CliExit(EXIT_FAILED) from exc
        raise
    finally:
        loop.remove_signal_handler(signal.SIGINT)
    printer.final(final, final["stopped_by"])
    return _exit_code(final, final["stopped_by"])


def _exit_code(final: dict[str, Any], stopped_by: str | None) -> int:
    # interfaces.md §4.2: 0 for exit 0 or a stop by timeout/SIGINT; 1 for a fault or a non-zero exit
    if final["state"] == "exited":
        outcome = final.get("outcome") or {}
        return EXIT_OK if outcome.get("exit_code") == 0 else EXIT_FAILED
    if final["state"] == "stopped" and stopped_by is not None:
        return EXIT_OK
    return EXIT_FAILED


# ---- output (interfaces.md §4.2: logs, host calls, state changes, final status) ----


class RunPrinter:
    """Prints the run's story in time order, as rich text or JSON Lines."""

    def __init__(self, out: Out) -> None:
        self.out = out
        self.start = time.monotonic()
        self.last_state: tuple[str, str] | None = None
        self.loaded = False  # the first state is the load's: a refusal before it is a refused load

    def _t(self) -> int:
        return int((time.monotonic() - self.start) * 1000)

    def _emit(self, kind: str, record: dict[str, Any], human: str) -> None:
        if self.out.json:
            self.out.line({"type": kind, "t_ms": self._t(), **record})
        elif kind == "final" or not self.out.quiet:  # --quiet keeps only the result
            self.out.console.print(f"[dim]{self._t() / 1000:8.3f}s[/] {human}")

    def log(self, message: str) -> None:
        self._emit("log", {"message": message}, f"[cyan]log[/]       {escape(message)}")

    def log_refused(self, reason: str) -> None:
        """A line the runtime refused (sdk.md §9.3): the guest got SF_LIMIT and nothing was logged."""
        why = "longer than 1024 bytes" if reason == "length" else "over the rate of 10 a second"
        self._emit("log_refused", {"reason": reason}, f"[yellow]log refused[/] ({why}; the guest got SF_LIMIT)")

    def host_call(self, capability: str, arguments: Any, reply: Reply) -> None:
        answer = reply.to_json()
        verdict = "[red]error[/]" if reply.error is not None else "[green]result[/]"
        text = (
            f"[magenta]host_call[/] {escape(capability)} {escape(dumps(arguments))} "
            f"→ {verdict} {escape(dumps(next(iter(answer.values()))))}"
        )
        self._emit("host_call", {"capability": capability, "arguments": arguments, "reply": answer}, text)

    def state(self, status: dict[str, Any]) -> None:
        self.loaded = True
        key = (status["state"], status.get("wait") or "none")
        if key == self.last_state:
            return
        self.last_state = key
        wait = "" if key[1] == "none" else f" (wait: {key[1]})"
        self._emit("state", {"state": key[0], "wait": key[1]}, f"[yellow]state[/]     {key[0]}{wait}")

    def refused(self, error: WakefulError) -> None:
        record = {"state": "refused", "error": error.code, "message": error.message}
        if self.out.json:
            self.out.line({"type": "final", **record, "rule": getattr(error, "rule", None)})
        else:
            self.out.err.print(f"[bold red]load refused[/] {escape(error.code)}: {escape(error.message)}")

    def final(self, status: dict[str, Any], stopped_by: str | None) -> None:
        self.state(status)
        outcome = status.get("outcome") or {}
        record = {
            "state": status["state"],
            "wait": status.get("wait") or "none",
            "outcome": status.get("outcome"),
            "exit_code": outcome.get("exit_code"),
            "fault": outcome.get("error"),
            "stopped_by": stopped_by,
            "guest_ms": status.get("guest_ms"),
            "instructions": status.get("instructions"),
        }
        self._emit("final", record, _final_text(record))


def _final_text(record: dict[str, Any]) -> str:
    state = record["state"]
    if state == "exited":
        colour = "green" if record["exit_code"] == 0 else "red"
        return f"[bold {colour}]final[/]     exited with exit code {record['exit_code']}"
    if state == "failed":
        return f"[bold red]final[/]     failed: {escape(str(record['fault']))}"
    why = f" by {record['stopped_by']}" if record["stopped_by"] else ""
    return f"[bold]final[/]     {state}{why} (wait: {record['wait']})"


__all__ = ["INJECTED_CONFIG", "RunRequest", "parse_request", "run_command", "status_dict"]
