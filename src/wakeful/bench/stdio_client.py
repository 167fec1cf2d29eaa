"""The benchmark's own blocking client of a ``wakeful runtime`` child (benchmarks.md §1.3 step 1).

A plain blocking writer plus one reader thread (no asyncio), up to 24 requests outstanding, like spinfoam's
client; every ``host.call`` is answered ``{accepted: true}`` from the reader thread and counted (the answers
to the calls of one read go out in one write).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import IO, Any

from wakeful.bench.variants import BenchError

__all__ = ["MAX_OUTSTANDING", "BenchClient", "Reply", "RpcFailed"]

MAX_OUTSTANDING = 24  # §1.3 step 1
READ_BYTES = 65_536  # one read of the child's stdout
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])  # the directory holding the wakeful package


class RpcFailed(BenchError):
    """An error response from the runtime child (code and message of runtime-protocol.md §5)."""

    def __init__(self, method: str, error: dict[str, Any]) -> None:
        self.rpc_code = error.get("code")
        super().__init__(f"{method} failed: {error.get('code')} {error.get('message')}")


class Reply:
    """One pending response: a lock held until the reader thread fills it (the cheapest thread handoff;
    ``concurrent.futures.Future`` adds a condition variable and callbacks the bench never uses)."""

    __slots__ = ("_done", "_error", "_lock", "_value")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._lock.acquire()
        self._done = False
        self._value: Any = None
        self._error: BaseException | None = None

    def done(self) -> bool:
        return self._done

    def set_result(self, value: Any) -> None:
        self._value, self._done = value, True
        self._lock.release()

    def set_exception(self, error: BaseException) -> None:
        self._error, self._done = error, True
        self._lock.release()

    def result(self, timeout: float | None = None) -> Any:
        """The result (or raise the error); ``TimeoutError`` after ``timeout`` seconds."""
        if not self._done:
            if not self._lock.acquire(timeout=-1 if timeout is None else timeout):
                raise TimeoutError("no response from the runtime")
            self._lock.release()
        if self._error is not None:
            raise self._error
        return self._value


_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)  # made once (json.dumps makes one per call)


def _encode(frame: dict[str, Any]) -> bytes:
    return (_ENCODER.encode(frame) + "\n").encode()


# the start of a host.call frame as wakeful writes it (stdio_hostcalls.py): a plain id string, then the method;
# any other layout (spinfoam's, escapes in the id) is parsed in full
_HOST_CALL_HEAD = re.compile(rb'\{"jsonrpc":"2\.0","id":("[^"\\]*"),"method":"host\.call",')


def _accepted(call_id: Any) -> bytes:
    """The reply ``{accepted: true}`` to the ``host.call`` with this id (§1.3 step 1)."""
    return b'{"jsonrpc":"2.0","id":' + _ENCODER.encode(call_id).encode() + b',"result":{"accepted":true}}\n'


class BenchClient:
    """Spawn ``wakeful runtime`` and drive it: ``submit`` → ``Reply``, ``call`` → result (blocking)."""

    def __init__(self, argv: list[str] | None = None, *, max_objects: int = 10_000) -> None:
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 - lives as long as the child
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (_PACKAGE_ROOT, env.get("PYTHONPATH")) if p)
        argv = argv or [
            sys.executable,
            "-m",
            "wakeful.cli.main",
            "runtime",
            "--max-objects",
            str(max_objects),
        ]
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            env=env,
            bufsize=-1,  # buffered: a raw pipe would read lines one byte at a time
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self._out: IO[bytes] = self.proc.stdin
        self._in: IO[bytes] = self.proc.stdout
        self._write_lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(MAX_OUTSTANDING)
        self._pending: dict[str, tuple[str, Reply]] = {}
        self._next = 0
        self._batch: list[bytes] = []
        self._acks = 0
        self._acks_changed = threading.Condition()
        self._closed = False
        self._reader = threading.Thread(target=self._read_loop, name="bench-reader", daemon=True)
        self._reader.start()

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def acks(self) -> int:
        return self._acks

    # ------------------------------------------------------------------ requests

    def submit(self, method: str, params: dict[str, Any] | None = None, *, flush: bool = True) -> Reply:
        """Send one request once a slot of the 24 is free; the future gets the result or ``RpcFailed``.

        ``flush=False`` keeps the frame in a batch written by ``flush()`` or when the slots run out, so a
        pipelined phase sends up to 24 frames per write (like spinfoam's client, §1.3 step 1).
        """
        if not self._slots.acquire(blocking=False):
            self.flush()
            self._slots.acquire()
        future: Reply = Reply()
        self._next += 1
        request_id = f"b{self._next}"
        self._pending[request_id] = (method, future)
        frame = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params or {}}
        self._batch.append(_encode(frame))
        if flush:
            self.flush()
        return future

    def flush(self) -> None:
        """Write the batched frames in one write."""
        if not self._batch:
            return
        data, self._batch = b"".join(self._batch), []
        try:
            self._write(data)
        except OSError as exc:
            for request_id in list(self._pending):
                self._fail_one(request_id, BenchError(f"runtime pipe closed: {exc}"))

    def call(self, method: str, params: dict[str, Any] | None = None, timeout: float = 60.0) -> Any:
        """One blocking request."""
        return self.submit(method, params).result(timeout=timeout)

    def _write(self, data: bytes) -> None:
        with self._write_lock:
            self._out.write(data)
            self._out.flush()

    # ------------------------------------------------------------------ reader thread

    def _read_loop(self) -> None:
        read = self._in.read1  # type: ignore[attr-defined]  # a BufferedReader: one raw read at most
        partial = b""
        try:
            while True:
                chunk = read(READ_BYTES)
                if not chunk:
                    break
                lines = (partial + chunk).split(b"\n")
                partial = lines.pop()
                self._dispatch_chunk(lines)
        except (OSError, ValueError):
            pass
        finally:
            self._closed = True
            for request_id in list(self._pending):
                self._fail_one(request_id, BenchError("the runtime closed its output"))
            with self._acks_changed:
                self._acks_changed.notify_all()

    def _dispatch_chunk(self, lines: list[bytes]) -> None:
        """The frames of one read: the host calls among them answered in one write, then the responses."""
        replies: list[bytes] = []
        responses: list[dict[str, Any]] = []
        for line in lines:
            head = _HOST_CALL_HEAD.match(line)  # wakeful's own layout: the id without parsing the arguments
            if head is not None:
                replies.append(b'{"jsonrpc":"2.0","id":' + head.group(1) + b',"result":{"accepted":true}}\n')
                continue
            frame = json.loads(line)
            method = frame.get("method")
            if method == "host.call":  # §1.3 step 1: every host.call is answered {accepted: true}
                replies.append(_accepted(frame.get("id")))
            elif method is None and "id" in frame:
                responses.append(frame)
        if replies:
            try:
                self._write(b"".join(replies))
            except OSError:
                replies = []
            with self._acks_changed:
                self._acks += len(replies)
                self._acks_changed.notify_all()
        for frame in responses:
            self._resolve(frame)

    def _resolve(self, frame: dict[str, Any]) -> None:
        entry = self._pending.pop(str(frame.get("id")), None)
        if entry is None:
            return
        method, future = entry
        self._slots.release()
        if "error" in frame:
            future.set_exception(RpcFailed(method, frame["error"] or {}))
        else:
            future.set_result(frame.get("result"))

    def _fail_one(self, request_id: str, exc: Exception) -> None:
        entry = self._pending.pop(request_id, None)
        if entry is not None:
            self._slots.release()
            entry[1].set_exception(exc)

    # ------------------------------------------------------------------ acks and shutdown

    def wait_acks(self, target: int, timeout: float) -> bool:
        """Block until ``target`` host calls were answered (or the child closed, or ``timeout``)."""
        with self._acks_changed:
            return self._acks_changed.wait_for(lambda: self._acks >= target or self._closed, timeout)

    def shutdown(self, timeout: float = 10.0) -> int:
        """``sf.shutdown`` then wait for the child; returns its exit code (killed after ``timeout``)."""
        with contextlib.suppress(BenchError, TimeoutError):
            self.call("sf.shutdown", {}, timeout=timeout)
        with contextlib.suppress(OSError):
            self._out.close()
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()

    def stderr_tail(self, limit: int = 4000) -> str:
        """The end of the child's stderr (for failure messages)."""
        self._stderr.seek(0)
        return self._stderr.read().decode(errors="replace")[-limit:]

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
