"""An asyncio client that spawns a `wakeful runtime` child (or any spinfoam v1 runtime) and drives it.

runtime-protocol.md §15: calls mirror the in-process API of §14; error responses raise the §14 exceptions,
a closed pipe or an exited child raises ``RuntimeClosed`` in every pending call.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import inspect
import itertools
import json
import logging
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple, TypeVar

from wakeful.errors import (
    BuildUnavailable,
    Busy,
    HostCallError,
    InvalidObject,
    InvalidParams,
    MailboxFull,
    ObjectNotFound,
    WakefulError,
)
from wakeful.runtime.core import Delivery, ObjectStatus
from wakeful.runtime.hostcall import HostCall

__all__ = ["CompileResult", "RpcError", "RuntimeClient", "RuntimeClosed"]

log = logging.getLogger("wakeful.runtime.client")

READ_LIMIT = 1 << 20  # above the 262,144-byte frame bound
F = TypeVar("F", bound=Callable[..., Any])


class RpcError(WakefulError):
    """An error response without a §14 exception: ``rpc_code`` (JSON-RPC code), ``kind``, message."""

    code = "rpc_error"

    def __init__(self, code: int, kind: str, message: str) -> None:
        super().__init__(message)
        self.rpc_code = code
        self.kind = kind


class RuntimeClosed(WakefulError):
    """The child's pipe closed or the child exited while a call was pending."""

    code = "runtime_closed"


class CompileResult(NamedTuple):
    """The result of ``sf.build.compile`` (§6.10)."""

    state: str
    result: Any


def _error(error: Any) -> WakefulError:
    """The §14 exception for an error object (code and kind kept as ``rpc_code`` and ``kind``)."""
    code = error.get("code") if isinstance(error, dict) else None
    message = str(error.get("message", "")) if isinstance(error, dict) else "malformed error"
    data = error.get("data") if isinstance(error, dict) else None
    kind = str(data.get("kind", "")) if isinstance(data, dict) else ""
    exc: WakefulError
    if kind == "INVALID_OBJECT":
        rule, _, reason = message.partition(": ")
        exc = InvalidObject(rule, reason) if reason else InvalidObject("INVALID_OBJECT", message)
    else:
        simple: dict[str, type[WakefulError]] = {
            "INVALID_PARAMS": InvalidParams, "BUSY": Busy, "MAILBOX_FULL": MailboxFull,
            "OBJECT_NOT_FOUND": ObjectNotFound, "SANDBOX_UNAVAILABLE": BuildUnavailable,
        }
        cls = simple.get(kind)
        exc = cls(message) if cls is not None else RpcError(code if isinstance(code, int) else 0, kind, message)
    exc.rpc_code = code  # type: ignore[attr-defined]
    exc.kind = kind  # type: ignore[attr-defined]
    return exc


def status_from_json(doc: Mapping[str, Any]) -> ObjectStatus:
    """An ``ObjectStatus`` from the status object of §6.2 (with its ``wakeful`` detail when present)."""
    extra = doc.get("wakeful") or {}
    return ObjectStatus(
        object_id=doc["object_id"], sha256=doc["sha256"], state=doc["state"], wait=doc["wait"],
        mailbox_entries=doc["mailbox_entries"], outcome=doc["outcome"],
        guest_ms=extra.get("guest_ms", 0.0), instructions=extra.get("instructions", 0),
        memory_bytes=extra.get("memory_bytes", 0), fault=extra.get("fault"),
    )


def default_argv(enable_builds: bool = False) -> list[str]:
    """This interpreter running `wakeful runtime` (plus ``--enable-builds`` when asked)."""
    argv = [sys.executable, "-m", "wakeful.cli.main", "runtime"]
    return [*argv, "--enable-builds"] if enable_builds else argv


class RuntimeClient:
    """Drives one runtime child over its stdin/stdout (§15)."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self._ids = itertools.count(1)
        self._waiting: dict[str, asyncio.Future[Any]] = {}
        self._host_handler: Callable[[HostCall], Any] | None = None
        self._host_tasks: dict[str, asyncio.Task[None]] = {}
        self._on_state: Callable[[ObjectStatus], Any] | None = None
        self._on_log: Callable[[str, str], Any] | None = None
        self._closed = False
        self.unmatched: asyncio.Queue[dict[str, Any]] = asyncio.Queue()  # responses to no call of ours
        self.cancels: list[str] = []  # ids of host.cancel notifications received
        self._reader = asyncio.get_running_loop().create_task(self._read_loop())

    @classmethod
    async def spawn(
        cls,
        argv: Sequence[str] | None = None,
        *,
        enable_builds: bool = False,
        env: Mapping[str, str] | None = None,
        stderr: Any = None,
    ) -> RuntimeClient:
        """Start the child with pipes; nothing is sent yet."""
        args = list(argv) if argv is not None else default_argv(enable_builds)
        proc = await asyncio.create_subprocess_exec(
            *args, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=stderr,
            env=dict(env) if env is not None else None, limit=READ_LIMIT,
        )
        return cls(proc)

    async def __aenter__(self) -> RuntimeClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.shutdown()

    # ------------------------------------------------------------------ handlers

    def on_host_call(self, handler: F) -> F:
        """Register the one ``host.call`` handler (also usable as a decorator)."""
        self._host_handler = handler
        return handler

    def on_state(self, callback: F) -> F:
        self._on_state = callback
        return callback

    def on_log(self, callback: F) -> F:
        self._on_log = callback
        return callback

    # ------------------------------------------------------------------ the wire

    async def write_raw(self, data: bytes) -> None:
        """Write bytes to the child's stdin as they are (tests: malformed and oversized frames)."""
        stdin = self.proc.stdin
        if stdin is None or self._closed:
            raise RuntimeClosed("runtime stdin is closed")
        try:
            stdin.write(data)
            await stdin.drain()
        except (ConnectionError, RuntimeError) as exc:
            raise RuntimeClosed(f"runtime stdin is closed: {exc}") from None

    async def _send(self, message: dict[str, Any]) -> None:
        text = json.dumps(message, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        await self.write_raw(text.encode("utf-8") + b"\n")

    async def request(self, method: str, params: Any = None) -> Any:
        """Send one request and return its result; an error response raises (see ``_error``)."""
        if self._closed:
            raise RuntimeClosed("runtime is closed")
        request_id = f"c{next(self._ids)}"
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiting[request_id] = future
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        try:
            await self._send(message)
            return await future
        finally:
            self._waiting.pop(request_id, None)

    async def _read_loop(self) -> None:
        stdout = self.proc.stdout
        assert stdout is not None
        try:
            while True:
                line = await stdout.readline()
                if not line:
                    break
                self._frame(line)
        except (ValueError, asyncio.LimitOverrunError, ConnectionError) as exc:
            log.error("runtime output unreadable: %s", exc)
        finally:
            self._close_all()

    def _close_all(self) -> None:
        self._closed = True
        for future in self._waiting.values():
            if not future.done():
                future.set_exception(RuntimeClosed("runtime closed its output"))
        for task in self._host_tasks.values():
            task.cancel()

    def _frame(self, line: bytes) -> None:
        try:
            msg = json.loads(line)
        except ValueError:
            log.error("runtime sent a line that is not JSON: %r", line[:200])
            return
        if not isinstance(msg, dict):
            return
        method = msg.get("method")
        if method is None:
            msg_id = msg.get("id")
            future = self._waiting.get(msg_id) if isinstance(msg_id, str) else None
            if future is None or future.done():
                self.unmatched.put_nowait(msg)
            elif "error" in msg:
                future.set_exception(_error(msg["error"]))
            else:
                future.set_result(msg.get("result"))
        elif method == "host.call":
            self._host_call(msg)
        else:
            self._notification(method, msg.get("params"))

    def _notification(self, method: str, params: Any) -> None:
        if not isinstance(params, dict):
            return
        try:
            if method == "host.cancel":
                self.cancels.append(str(params.get("id")))
                task = self._host_tasks.pop(str(params.get("id")), None)
                if task is not None:
                    task.cancel()
            elif method == "sf.object.state" and self._on_state is not None:
                self._on_state(status_from_json(params))
            elif method == "sf.log" and self._on_log is not None:
                self._on_log(str(params.get("object_id")), str(params.get("message")))
        except Exception:  # a broken callback must not kill the reader
            log.exception("notification callback failed")

    # ------------------------------------------------------------------ host calls (§9)

    def _host_call(self, msg: dict[str, Any]) -> None:
        call_id, params = msg.get("id"), msg.get("params") or {}
        if not isinstance(call_id, str) or not isinstance(params, dict):
            return
        extra = params.get("wakeful") or {}
        call = HostCall(
            id=call_id, object_id=params.get("object_id", ""), label=extra.get("label"),
            capability=params.get("capability", ""), arguments=params.get("arguments"),
            timeout_ms=params.get("timeout_ms", 0), deadline_unix_ms=params.get("deadline_unix_ms", 0),
            max_result_bytes=params.get("max_result_bytes", 16_384),
        )
        task = asyncio.get_running_loop().create_task(self._answer_host_call(call))
        self._host_tasks[call_id] = task
        task.add_done_callback(lambda _t: self._host_tasks.pop(call_id, None))

    async def _answer_host_call(self, call: HostCall) -> None:
        reply: dict[str, Any] = {"jsonrpc": "2.0", "id": call.id}
        try:
            if self._host_handler is None:
                raise HostCallError("NO_HANDLER", "no host.call handler registered")
            value = self._host_handler(call)
            if inspect.isawaitable(value):
                value = await value
            json.dumps(value, allow_nan=False)  # a value that is not JSON becomes an error reply
            reply["result"] = value
        except HostCallError as exc:
            reply["error"] = {"code": -32000, "message": exc.message, "data": {"kind": exc.kind}}
        except asyncio.CancelledError:
            return
        except Exception as exc:
            log.exception("host.call handler failed for %s", call.id)
            reply["error"] = {"code": -32603, "message": f"handler failed: {type(exc).__name__}",
                              "data": {"kind": "HOST_ERROR"}}
        with contextlib.suppress(RuntimeClosed):
            await self._send(reply)

    # ------------------------------------------------------------------ the §14 mirror

    async def initialize(self, *, detail: bool = False) -> dict[str, Any]:
        params: dict[str, Any] = {"protocol_version": 1}
        if detail:
            params["wakeful"] = {"detail": True}
        result: dict[str, Any] = await self.request("sf.initialize", params)
        return result

    async def load(
        self,
        elf: bytes,
        *,
        config: Any = None,
        capabilities: Sequence[Any] = (),
        cpu_limit_ms: int | None = None,
        label: str | None = None,
    ) -> ObjectStatus:
        params: dict[str, Any] = {"elf": base64.b64encode(elf).decode("ascii"), "config": config,
                                  "capabilities": list(capabilities)}
        ext = {k: v for k, v in (("cpu_limit_ms", cpu_limit_ms), ("label", label)) if v is not None}
        if ext:
            params["wakeful"] = ext
        return status_from_json(await self.request("sf.object.load", params))

    async def start(self, object_id: str) -> ObjectStatus:
        return status_from_json(await self.request("sf.object.start", {"object_id": object_id}))

    async def stop(self, object_id: str) -> ObjectStatus:
        return status_from_json(await self.request("sf.object.stop", {"object_id": object_id}))

    async def get(self, object_id: str) -> ObjectStatus:
        return status_from_json(await self.request("sf.object.get", {"object_id": object_id}))

    async def unload(self, object_id: str) -> None:
        await self.request("sf.object.unload", {"object_id": object_id})

    async def list(self, after: str | None = None, limit: int = 100) -> tuple[list[ObjectStatus], str | None]:
        params: dict[str, Any] = {"limit": limit}
        if after is not None:
            params["after"] = after
        page = await self.request("sf.object.list", params)
        return [status_from_json(s) for s in page["objects"]], page["next"]

    async def deliver(self, object_id: str, event_id: str, topic: str, payload: Any) -> Delivery:
        got = await self.request("sf.event.deliver", {"object_id": object_id, "event_id": event_id,
                                                      "topic": topic, "payload": payload})
        return Delivery(bool(got["accepted"]), bool(got["duplicate"]))

    async def stats(self) -> dict[str, Any]:
        result: dict[str, Any] = await self.request("sf.stats", {})
        return result

    async def compile(self, request: Mapping[str, Any]) -> CompileResult:
        got = await self.request("sf.build.compile", dict(request))
        return CompileResult(got["state"], got["result"])

    async def shutdown(self, timeout: float = 5.0) -> int:
        """``sf.shutdown``, then wait for the child (killed after ``timeout``); returns its exit code."""
        if self.proc.returncode is None and not self._closed:
            with contextlib.suppress(RuntimeClosed, WakefulError):
                await asyncio.wait_for(self.request("sf.shutdown", {}), timeout)
        return await self.wait(timeout)

    async def wait(self, timeout: float = 5.0) -> int:
        """Wait for the child to exit (killed after ``timeout``); returns its exit code."""
        try:
            code = await asyncio.wait_for(self.proc.wait(), timeout)
        except TimeoutError:
            self.proc.kill()
            code = await self.proc.wait()
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await asyncio.wait_for(self._reader, 1.0)
        return code


